use super::*;
use crate::codec::{OP_BINARY, OP_TEXT};
use crate::outbox::{Take, Taken};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// A connection on one end of a socket pair (sends past the cork size are written at once).
fn conn() -> (Conn, UnixStream, UnixStream) {
    let (ours, peer) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    peer.set_nonblocking(true).unwrap();
    let c = Conn::new(
        1,
        ours.as_raw_fd(),
        Arc::new(Behavior::default()),
        None,
        Arc::new(Stats::default()),
    );
    (c, ours, peer)
}

/// Bytes already written to the peer, then the ones still queued.
fn sent_frames(c: &Conn, peer: &mut UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    while let Ok(n) = peer.read(&mut chunk) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    let mut t = Taken::default();
    if c.take(&mut t) == Take::Taken {
        out.extend_from_slice(&t.wire.unwritten_bytes());
    }
    out
}

#[test]
fn send_rewrites_the_header_for_the_real_length() {
    // (lower bound given, bytes actually appended): same header size, and every step crossed.
    for (min_len, real) in [
        (0, 0),
        (10, 10),
        (10, 125),
        (42, 126),
        (100, 300),
        (125, 65_535),
        (200, 65_536),
        (65_536, 70_000),
    ] {
        let (c, _ours, mut peer) = conn();
        let payload: Vec<u8> = (0..real).map(|i| b'a' + (i % 26) as u8).collect();
        let (status, dirty) = c.send(OP_TEXT, min_len, true, |out| {
            out.extend_from_slice(&payload)
        });
        assert_ne!(status, SendStatus::Dropped);
        assert!(dirty);
        let mut want = Vec::new();
        codec::write_frame(&mut want, true, false, OP_TEXT, &payload);
        assert_eq!(
            c.buffered_amount() as u64 + c.stats.wire_out.load(Relaxed),
            want.len() as u64
        );
        assert_eq!(
            sent_frames(&c, &mut peer),
            want,
            "min_len {min_len}, real {real}"
        );
    }
}

#[test]
fn frames_of_one_tick_follow_each_other() {
    let (c, _ours, mut peer) = conn();
    c.send(OP_TEXT, 3, false, |out| out.extend_from_slice(b"abcdef"));
    c.send(OP_BINARY, 200, false, |out| {
        out.extend_from_slice(&[7u8; 200])
    });
    c.send(OP_TEXT, 0, false, |out| out.extend_from_slice(b"x"));
    c.flush();
    let mut want = Vec::new();
    codec::write_frame(&mut want, true, false, OP_TEXT, b"abcdef");
    codec::write_frame(&mut want, true, false, OP_BINARY, &[7u8; 200]);
    codec::write_frame(&mut want, true, false, OP_TEXT, b"x");
    assert_eq!(sent_frames(&c, &mut peer), want);
    assert_eq!(c.buffered_amount(), 0);
}

#[test]
fn pongs_are_coalesced_and_counted() {
    let (c, _ours, _peer) = conn();
    for i in 0..10_000u32 {
        assert!(c.queue_pong(&i.to_be_bytes()));
    }
    // At most MAX_PENDING_PONG_BYTES of pongs (6 bytes each) wait, counted in the buffered
    // amount, the newest last.
    let per_run = MAX_PENDING_PONG_BYTES / 6;
    let kept = (10_000 - 1) % per_run + 1;
    assert_eq!(c.buffered_amount(), kept * 6);
    let mut t = Taken::default();
    assert_eq!(c.take(&mut t), Take::Taken);
    let mut want = Vec::new();
    for i in 10_000 - kept as u32..10_000 {
        codec::write_frame(&mut want, true, false, codec::OP_PONG, &i.to_be_bytes());
    }
    assert_eq!(t.wire.unwritten_bytes(), want);
}

#[test]
fn a_pending_pong_goes_out_before_our_close_frame() {
    let (c, _ours, _peer) = conn();
    assert!(c.queue_pong(b"p"));
    c.queue_close(1000, "");
    assert!(!c.queue_pong(b"q"));
    let mut t = Taken::default();
    assert_eq!(c.take(&mut t), Take::Taken);
    let mut want = Vec::new();
    codec::write_frame(&mut want, true, false, codec::OP_PONG, b"p");
    codec::write_close(&mut want, 1000, "");
    assert_eq!(t.wire.unwritten_bytes(), want);
    assert_eq!(c.buffered_amount(), want.len());
}

#[test]
fn over_limit_follows_the_buffered_amount() {
    let (ours, _peer) = UnixStream::pair().unwrap();
    let behavior = Behavior { max_backpressure: 6, ..Behavior::default() };
    let c = Conn::new(1, ours.as_raw_fd(), Arc::new(behavior), None, Arc::new(Stats::default()));
    assert!(c.queue_pong(b"ab"));
    assert!(!c.over_limit());
    assert!(c.queue_pong(b"abc"));
    assert!(c.over_limit());
    c.wrote(5);
    assert!(!c.over_limit());
}

#[test]
fn a_written_queue_goes_back_to_the_thread_and_the_next_socket_fills_it() {
    // Run in a fresh thread: its spare list starts empty.
    std::thread::spawn(|| {
        let (a, _a_ours, mut a_peer) = conn();
        let (b, _b_ours, mut b_peer) = conn();
        let doc = vec![b'x'; 4096];
        a.send(OP_TEXT, doc.len(), false, |out| out.extend_from_slice(&doc));
        let a_queue = a.lock().wire.buf().as_ptr();
        a.flush();
        assert_eq!(a.lock().wire.buf_capacity(), 0, "an idle socket keeps no queue");
        b.send(OP_TEXT, doc.len(), false, |out| out.extend_from_slice(&doc));
        assert_eq!(b.lock().wire.buf().as_ptr(), a_queue, "the next socket fills the same (cache-warm) buffer");
        b.flush();
        let mut want = Vec::new();
        codec::write_frame(&mut want, true, false, OP_TEXT, &doc);
        assert_eq!(sent_frames(&a, &mut a_peer), want);
        assert_eq!(sent_frames(&b, &mut b_peer), want);
    })
    .join()
    .unwrap();
}

#[test]
fn a_message_compressed_already_is_queued_as_a_ready_frame() {
    use crate::extensions::{negotiate, DeflateConfig};
    let (ours, peer) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    peer.set_nonblocking(true).unwrap();
    let cfg = DeflateConfig::default();
    let behavior = Behavior { compression: Some(cfg.clone()), ..Behavior::default() };
    let n = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
    let bits = n.server_window_bits;
    let stats = Arc::new(Stats::default());
    let c = Conn::new(1, ours.as_raw_fd(), Arc::new(behavior), Some(n), stats.clone());
    // A message nobody compressed yet: a job for the I/O thread.
    let fresh = format!("{{\"msg\":\"added\",\"id\":\"fresh\",\"text\":\"{}\"}}", "f".repeat(3000));
    c.send(OP_TEXT, fresh.len(), true, |out| out.extend_from_slice(fresh.as_bytes()));
    assert_eq!(c.lock().wire.job_count(), 1);
    assert_eq!(c.buffered_amount(), fresh.len() + 4, "counted uncompressed until compressed");
    // A message another socket's I/O thread compressed: a ready frame, no job.
    let doc = format!("{{\"msg\":\"added\",\"id\":\"doc\",\"text\":\"{}\"}}", "d".repeat(3000));
    let mut compressed = Vec::new();
    crate::deflate_cache::compress_shared(cfg.level, bits, doc.as_bytes(), &stats, &mut compressed);
    let reused_before = stats.compressions_reused.load(std::sync::atomic::Ordering::Relaxed);
    let queued_before = c.buffered_amount();
    c.send(OP_TEXT, doc.len(), true, |out| out.extend_from_slice(doc.as_bytes()));
    let ob = c.lock();
    assert_eq!(ob.wire.job_count(), 1, "still only the first message's job");
    assert_eq!(ob.job_data.len(), fresh.len(), "the reused message's payload left job_data");
    let mut want = Vec::new();
    codec::write_header(&mut want, true, true, OP_TEXT, compressed.len(), None);
    want.extend_from_slice(&compressed);
    // (small: copied into the buffer, which was empty when the job was queued, so after it)
    assert_eq!(ob.wire.buf(), &want[..], "RSV1 frame with the cached bytes, after the job's place");
    drop(ob);
    assert_eq!(c.buffered_amount() - queued_before, want.len(), "counted as the frame it is");
    assert_eq!(stats.compressions_reused.load(std::sync::atomic::Ordering::Relaxed), reused_before + 1);
}

/// Read what the peer got so far (non-blocking).
fn read_peer(peer: &mut UnixStream, out: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    while let Ok(n) = peer.read(&mut chunk) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Write what the task took (as the I/O task does), reading the peer whenever the kernel is full.
fn write_taken(ours: &UnixStream, t: &mut Taken, peer: &mut UnixStream, got: &mut Vec<u8>, c: &Conn) {
    while !t.wire.is_empty() {
        match t.wire.write_with(|iov, _| crate::outbox::send_vectored(ours.as_raw_fd(), iov)) {
            Ok(n) => c.wrote(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => read_peer(peer, got),
            Err(e) => panic!("{e}"),
        }
    }
}

fn published(len: usize) -> (Published, Vec<u8>) {
    let payload: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    let mut frame = Vec::new();
    codec::write_frame(&mut frame, true, false, OP_BINARY, &payload);
    (Published::build(OP_BINARY, |out| out.extend_from_slice(&payload)), frame)
}

#[test]
fn a_published_frame_written_in_part_resumes_and_keeps_its_place() {
    let (c, ours, mut peer) = conn();
    let (mut msg, frame) = published(1 << 20);
    let mut want = Vec::new();
    c.send(OP_TEXT, 6, false, |out| out.extend_from_slice(b"before"));
    codec::write_frame(&mut want, true, false, OP_TEXT, b"before");
    let (status, dirty) = c.publish(&mut msg, false);
    assert!(!dirty, "dirty since the send");
    want.extend_from_slice(&frame);
    // 1 MiB is past the cork size: written at once, in part (nobody reads the peer yet).
    assert_eq!(status, SendStatus::Backpressure);
    assert!(c.lock().io_busy);
    let written = c.stats.wire_out.load(Relaxed) as usize;
    assert!(written > 0 && written < want.len());
    assert_eq!(c.buffered_amount(), want.len() - written, "the shared frame is counted");
    c.send(OP_TEXT, 5, false, |out| out.extend_from_slice(b"after"));
    codec::write_frame(&mut want, true, false, OP_TEXT, b"after");
    assert_eq!(c.buffered_amount(), want.len() - written);
    // The task takes the queue at its cursor and writes the rest.
    let mut got = Vec::new();
    let mut t = Taken::default();
    assert_eq!(c.take(&mut t), Take::Taken);
    write_taken(&ours, &mut t, &mut peer, &mut got, &c);
    read_peer(&mut peer, &mut got);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "every byte, in order");
    assert_eq!(c.buffered_amount(), 0);
    assert_eq!(c.take(&mut t), Take::Drained, "a send said BACKPRESSURE: drain is due");
}

#[test]
fn our_close_frame_goes_after_the_shared_frames_queued() {
    let (c, _ours, mut peer) = conn();
    let (mut msg, frame) = published(4000);
    c.publish(&mut msg, false);
    c.publish(&mut msg, false);
    c.end(1000, "bye");
    let mut want = [frame.clone(), frame].concat();
    codec::write_close(&mut want, 1000, "bye");
    assert_eq!(sent_frames(&c, &mut peer), want);
    assert_eq!(c.publish(&mut msg, false).0, SendStatus::Dropped, "nothing after our close frame");
}

#[test]
fn a_backpressure_close_finishes_the_shared_frame_on_the_wire() {
    let (ours, mut peer) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    peer.set_nonblocking(true).unwrap();
    let behavior = Behavior { max_backpressure: 64 * 1024, close_on_backpressure: true, ..Behavior::default() };
    let c = Conn::new(1, ours.as_raw_fd(), Arc::new(behavior), None, Arc::new(Stats::default()));
    let (mut msg, frame) = published(1 << 20);
    c.publish(&mut msg, false);
    let written = c.stats.wire_out.load(Relaxed) as usize;
    assert!(written > 0 && written < frame.len(), "written in part");
    c.publish(&mut msg, false); // over the limit: closes; this one was never queued
    assert_eq!(c.publish(&mut msg, false).0, SendStatus::Dropped);
    assert_eq!(c.ctl.load(Relaxed) & CTL_OVERFLOW, CTL_OVERFLOW);
    // What the task gets: the rest of the frame begun, nothing else.
    let mut rest = c.overflow_rest();
    let mut got = Vec::new();
    read_peer(&mut peer, &mut got);
    assert_eq!(rest.unwritten(), frame.len() - written);
    let mut t = Taken { wire: std::mem::take(&mut rest), job_data: Vec::new() };
    write_taken(&ours, &mut t, &mut peer, &mut got, &c);
    read_peer(&mut peer, &mut got);
    assert!(got == frame, "the whole frame, once");
}

#[test]
fn a_socket_closed_with_shared_frames_queued_lets_them_go() {
    let (c, _ours, _peer) = conn();
    let (mut msg, _) = published(1 << 20);
    for _ in 0..3 {
        c.publish(&mut msg, false);
    }
    assert!(c.buffered_amount() > 2 << 20);
    drop(c.overflow_rest()); // (as if the task had taken it)
    let (c, _ours, _peer) = conn();
    c.publish(&mut msg, false);
    c.publish(&mut msg, false);
    c.mark_closed();
    assert_eq!(c.buffered_amount(), 0);
    assert_eq!(c.publish(&mut msg, false).0, SendStatus::Dropped);
    let Published { frame, payload, .. } = msg;
    drop(payload);
    assert!(frame.is_unique(), "no queue holds the published buffer any more");
}

#[test]
fn a_compressed_publish_is_compressed_once_and_shared() {
    use crate::extensions::{negotiate, DeflateConfig};
    let cfg = DeflateConfig::default();
    let behavior = Arc::new(Behavior { compression: Some(cfg.clone()), ..Behavior::default() });
    let stats = Arc::new(Stats::default());
    let pair = || {
        let (ours, peer) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let n = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
        (Conn::new(1, ours.as_raw_fd(), behavior.clone(), Some(n), stats.clone()), ours, peer)
    };
    let (a, _a, _ap) = pair();
    let (b, _b, _bp) = pair();
    let doc = format!("{{\"msg\":\"added\",\"id\":\"a_compressed_publish\",\"text\":\"{}\"}}", "z".repeat(9000));
    let mut msg = Published::build(OP_TEXT, |out| out.extend_from_slice(doc.as_bytes()));
    a.publish(&mut msg, true);
    assert_eq!(a.lock().wire.job_count(), 1, "compressed by an I/O thread");
    assert_eq!(a.buffered_amount(), doc.len() + 4, "counted uncompressed until then");
    assert!(a.lock().job_data.is_empty(), "the payload is not copied into the queue");
    // The I/O thread compresses it (for everyone).
    let (level, bits) = (a.deflate_level(), a.deflate.as_ref().unwrap().server_window_bits);
    let compressed = msg.cached(level, bits).compress(&stats);
    assert_eq!(stats.compressions.load(Relaxed), 1);
    // Queued after that: a ready frame, whose payload is that same buffer when it is large.
    b.publish(&mut msg, true);
    assert_eq!(b.lock().wire.job_count(), 0);
    assert_eq!(stats.compressions_reused.load(Relaxed), 1);
    let mut want = Vec::new();
    codec::write_frame(&mut want, true, true, OP_TEXT, &compressed);
    assert_eq!(b.lock().wire.unwritten_bytes(), want);
    assert_eq!(b.buffered_amount(), want.len());
    // Without compression the same message is the plain frame, shared.
    b.lock().wire.clear();
    let (c, _c, _cp) = pair();
    c.publish(&mut msg, false);
    let mut plain = Vec::new();
    codec::write_frame(&mut plain, true, false, OP_TEXT, doc.as_bytes());
    assert_eq!(c.lock().wire.unwritten_bytes(), plain);
}
