use super::*;
use crate::codec::{OP_BINARY, OP_TEXT};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

fn frame(rsv1: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    codec::write_frame(&mut out, true, rsv1, opcode, payload);
    out
}

fn payload(len: usize, seed: u8) -> Bytes {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<u8>>().into()
}

/// A shared payload that counts how many of its buffers are alive (to see when a queue lets go).
fn counted(len: usize, alive: &Arc<AtomicUsize>) -> Bytes {
    struct Owner(Vec<u8>, Arc<AtomicUsize>);
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            self.1.fetch_sub(1, SeqCst);
        }
    }
    alive.fetch_add(1, SeqCst);
    Bytes::from_owner(Owner(payload(len, 7).to_vec(), alive.clone()))
}

/// Owned frames, a shared one, owned again, another shared one: what the wire holds and in what
/// order, and the stream they make.
fn mixed() -> (Wire, Vec<u8>, Bytes, Bytes) {
    let mut w = Wire::new();
    let mut want = Vec::new();
    let (big, big2) = (payload(5000, 1), payload(70_000, 2));
    let small = frame(false, OP_TEXT, b"hello");
    w.buf_mut().extend_from_slice(&small);
    want.extend_from_slice(&small);
    assert_eq!(w.push_frame(false, OP_BINARY, &big), 5004);
    want.extend_from_slice(&frame(false, OP_BINARY, &big));
    let tiny = payload(100, 3);
    assert_eq!(w.push_frame(false, OP_TEXT, &tiny), 102, "small frames are copied");
    want.extend_from_slice(&frame(false, OP_TEXT, &tiny));
    assert_eq!(w.push_frame(true, OP_TEXT, &big2), 70_010);
    want.extend_from_slice(&frame(true, OP_TEXT, &big2));
    // A published frame: one buffer, header included (all body, no header of its own).
    let published: Bytes = frame(false, OP_TEXT, &payload(3000, 4)).into();
    assert_eq!(w.push_shared(&published), 3004);
    want.extend_from_slice(&published);
    codec::write_close(w.buf_mut(), 1000, "bye");
    codec::write_close(&mut want, 1000, "bye");
    (w, want, big, big2)
}

#[test]
fn frames_keep_their_order_and_shared_ones_are_not_copied() {
    let (mut w, want, big, big2) = mixed();
    assert_eq!(w.inserts.len(), 3);
    assert_eq!(w.buf().len(), 7 + 102 + 7, "the buffer holds the owned frames only");
    assert_eq!(w.unwritten(), want.len());
    assert_eq!(w.unwritten_bytes(), want);
    let shared: Vec<*const u8> = w
        .inserts
        .iter()
        .take(2)
        .map(|i| match &i.body {
            Body::Shared(b) => b.as_ptr(),
            Body::Job(_) => unreachable!(),
        })
        .collect();
    assert_eq!(shared, [big.as_ptr(), big2.as_ptr()], "the queue refers to the published buffers");
    assert_eq!(w.push_shared(&Bytes::from(frame(false, OP_TEXT, &[1; 100]))), 102);
    assert_eq!(w.inserts.len(), 3, "a small published frame is copied");
}

#[test]
fn partial_writes_resume_at_the_right_byte_of_every_piece() {
    // Every write takes `step` bytes (or fewer): cuts land inside runs, headers and payloads.
    for step in [1, 2, 3, 7, 10, 11, 4095, 4096, 5003, 5004, 5005, 65_536, 1 << 20] {
        let (mut w, want, big, big2) = mixed();
        let mut got = Vec::new();
        let mut calls = 0;
        while !w.is_empty() {
            let before = w.unwritten();
            let n = w
                .write_with(|iov, len| {
                    assert_eq!(len, iov.iter().map(|s| s.len()).sum::<usize>());
                    let mut left = step.min(len);
                    for s in iov {
                        let k = left.min(s.len());
                        got.extend_from_slice(&s[..k]);
                        left -= k;
                    }
                    Ok(step.min(len))
                })
                .unwrap();
            assert_eq!(w.unwritten(), before - n, "accounting follows the cursor");
            calls += 1;
            assert!(calls <= want.len(), "progress every write");
            // A payload written in part is resumed from the same buffer, at the right offset.
            if let Some(ins) = w.inserts.get(w.next as usize) {
                if let (Body::Shared(rest), 4 | 10) = (&ins.body, ins.head_len) {
                    let whole = if ins.head_len == 4 { &big } else { &big2 };
                    let off = rest.as_ptr() as usize - whole.as_ptr() as usize;
                    assert_eq!(off + rest.len(), whole.len(), "step {step}: a slice of the shared buffer");
                }
            }
        }
        assert_eq!(got, want, "step {step}");
        assert_eq!(w.unwritten(), 0);
    }
}

#[test]
fn one_write_hands_at_most_max_iov_pieces() {
    let mut w = Wire::new();
    let mut want = Vec::new();
    let p = payload(3000, 9);
    for i in 0..100u8 {
        w.buf_mut().extend_from_slice(&frame(false, OP_TEXT, &[i]));
        want.extend_from_slice(&frame(false, OP_TEXT, &[i]));
        w.push_frame(false, OP_BINARY, &p);
        want.extend_from_slice(&frame(false, OP_BINARY, &p));
    }
    let mut got = Vec::new();
    let mut writes = 0;
    while !w.is_empty() {
        w.write_with(|iov, len| {
            assert!(iov.len() <= MAX_IOV);
            iov.iter().for_each(|s| got.extend_from_slice(s));
            Ok(len)
        })
        .unwrap();
        writes += 1;
    }
    assert_eq!(got, want);
    assert_eq!(writes, 300usize.div_ceil(MAX_IOV / 3 * 3), "full writes of 21 frames each");
}

#[test]
fn a_failed_write_moves_nothing() {
    let (mut w, want, ..) = mixed();
    let err = w.write_with(|_, _| Err(io::ErrorKind::WouldBlock.into())).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    assert_eq!(w.unwritten_bytes(), want);
}

/// Write `n` bytes of `w` into `out`.
fn write_some(w: &mut Wire, n: usize, out: &mut Vec<u8>) {
    let mut left = n;
    while left > 0 {
        let k = w
            .write_with(|iov, len| {
                let mut k = left.min(len);
                let took = k;
                for s in iov {
                    let m = k.min(s.len());
                    out.extend_from_slice(&s[..m]);
                    k -= m;
                }
                Ok(took)
            })
            .unwrap();
        left -= k;
    }
}

#[test]
fn a_cut_keeps_the_frame_on_the_wire_and_drops_the_rest() {
    let (_, want, ..) = mixed();
    let first = 7; // the 7-byte "hello" frame, then the shared 5004-byte one, ...
    for (written, keep) in [
        (0, 0),                                    // nothing started
        (3, first),                                // inside an owned frame: its rest stays
        (first, first),                            // at a boundary before a shared frame: dropped
        (first + 1, first + 5004),                 // inside a shared header
        (first + 3000, first + 5004),              // inside a shared payload
        (first + 5004, first + 5004),              // right after it: the copied frame goes
        (first + 5004 + 50, first + 5004 + 102),   // inside the copied frame
        (first + 5004 + 102 + 20, first + 5004 + 102 + 70_010),
        (first + 5004 + 102 + 70_010, first + 5004 + 102 + 70_010), // before the published frame
        (first + 5004 + 102 + 70_010 + 1, first + 5004 + 102 + 70_010 + 3004), // inside it
    ] {
        let (mut w, ..) = mixed();
        let mut out = Vec::new();
        write_some(&mut w, written, &mut out);
        w.cut_after_current_frame();
        out.extend_from_slice(&w.unwritten_bytes());
        assert_eq!(out, want[..keep], "written {written}");
        // What follows a cut (the backpressure close frame) goes after what was kept.
        codec::write_close(w.buf_mut(), 1013, "");
        out.truncate(written);
        out.extend_from_slice(&w.unwritten_bytes());
        let mut with_close = want[..keep].to_vec();
        codec::write_close(&mut with_close, 1013, "");
        assert_eq!(out, with_close, "written {written}, then a close frame");
    }
}

#[test]
fn a_cut_drops_jobs() {
    let mut w = Wire::new();
    w.buf_mut().extend_from_slice(&frame(false, OP_TEXT, b"a"));
    w.push_job(Job { opcode: OP_TEXT, len: 3, payload: Payload::Shared(Bytes::from_static(b"abc")) });
    assert!(w.has_jobs());
    w.cut_after_current_frame();
    assert!(!w.has_jobs() && w.is_empty());
}

#[test]
fn jobs_become_their_compressed_frames_in_place() {
    let mut w = Wire::new();
    let mut want = Vec::new();
    w.buf_mut().extend_from_slice(&frame(false, OP_TEXT, b"before"));
    want.extend_from_slice(&frame(false, OP_TEXT, b"before"));
    w.push_job(Job { opcode: OP_TEXT, len: 2000, payload: Payload::Local { start: 0, key: None } });
    w.buf_mut().extend_from_slice(&frame(false, OP_TEXT, b"between"));
    w.push_job(Job { opcode: OP_BINARY, len: 70_000, payload: Payload::Shared(payload(70_000, 4)) });
    w.buf_mut().extend_from_slice(&frame(false, OP_TEXT, b"after"));
    assert_eq!(w.job_count(), 2);
    let zipped = [payload(300, 5), payload(200, 6)];
    let mut i = 0;
    let (before, after) = w.compress_jobs(|job| {
        assert_eq!(job.len, [2000, 70_000][i]);
        i += 1;
        zipped[i - 1].clone()
    });
    assert_eq!(before, 2000 + 4 + 70_000 + 10, "counted uncompressed");
    assert_eq!(after, 304 + 204);
    assert!(!w.has_jobs());
    want.extend_from_slice(&frame(true, OP_TEXT, &zipped[0]));
    want.extend_from_slice(&frame(false, OP_TEXT, b"between"));
    want.extend_from_slice(&frame(true, OP_BINARY, &zipped[1]));
    want.extend_from_slice(&frame(false, OP_TEXT, b"after"));
    assert_eq!(w.unwritten_bytes(), want);
}

#[test]
fn shared_buffers_are_let_go_once_written_or_dropped() {
    let alive = Arc::new(AtomicUsize::new(0));
    let mut w = Wire::new();
    let a = counted(3000, &alive);
    let b = counted(3000, &alive);
    w.push_frame(false, OP_BINARY, &a);
    w.push_frame(false, OP_BINARY, &b);
    drop((a, b));
    assert_eq!(alive.load(SeqCst), 2, "the queue holds them");
    let mut out = Vec::new();
    write_some(&mut w, 3004 + 100, &mut out);
    assert_eq!(alive.load(SeqCst), 1, "the first one, written, is let go at once");
    drop(w);
    assert_eq!(alive.load(SeqCst), 0, "a queue dropped with shared frames queued lets them go");

    // One buffer for many queues: alive while any of them still has it queued.
    let p = counted(5000, &alive);
    let mut queues: Vec<Wire> = (0..10).map(|_| Wire::new()).collect();
    for q in &mut queues {
        q.push_frame(false, OP_TEXT, &p);
    }
    drop(p);
    for (i, q) in queues.iter_mut().enumerate() {
        write_some(q, 5004, &mut Vec::new());
        assert_eq!(alive.load(SeqCst), usize::from(i < 9));
    }
}

#[test]
fn a_cleared_wire_starts_over_and_recycles_its_buffers() {
    std::thread::spawn(|| {
        let (mut w, ..) = mixed();
        let buf = w.buf().as_ptr();
        write_some(&mut w, 1000, &mut Vec::new());
        w.clear();
        assert!(w.is_empty() && w.unwritten() == 0);
        let small = frame(false, OP_TEXT, b"x");
        w.buf_mut().extend_from_slice(&small);
        assert_eq!(w.unwritten_bytes(), small);
        assert_eq!(w.buf().as_ptr(), buf, "cleared, the buffer keeps its capacity");
        w.recycle();
        assert_eq!(w.buf_capacity(), 0);
        let mut next = Wire::new();
        next.buf_mut().push(0);
        assert_eq!(next.buf().as_ptr(), buf, "the next queue of this thread gets it back");
    })
    .join()
    .unwrap();
}

/// Copy or share, per frame size: the writing thread's CPU time per frame queued and written
/// (`sendmsg` on one of 16 loopback TCP sockets, each drained by a reader thread on another CPU),
/// and the same without the syscall (what the queue itself costs). Modes alternate in short
/// blocks; medians of the blocks. SHARE_MIN is where sharing stops costing more than copying.
/// `cargo test --release -p native-ws timing_share_threshold -- --ignored --nocapture`
#[test]
#[ignore]
fn timing_share_threshold() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    fn thread_cpu_ns() -> u64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime only writes `t`.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
    fn pin(cpu: usize) {
        // SAFETY: plain libc calls on this thread's own affinity mask.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut socks = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..16 {
        let s = std::net::TcpStream::connect(addr).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        readers.push(std::thread::spawn(move || {
            if cpus > 1 {
                pin(0);
            }
            let mut buf = vec![0u8; 1 << 20];
            while peer.read(&mut buf).is_ok_and(|n| n > 0) {}
        }));
        socks.push(s);
    }
    if cpus > 1 {
        pin(cpus - 1);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("frame payload: copy / share, ns per frame (with sendmsg) | copy / share (queue only)");
    for size in [128usize, 256, 512, 1024, 1536, 2048, 2560, 3072, 4096, 16_384] {
        let p = payload(size, 1);
        let mut results = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        for block in 0..40 {
            let share = block % 2 == 1;
            for syscall in [true, false] {
                let rounds = if syscall { 512 } else { 8192 };
                let mut w = Wire::new();
                let t0 = thread_cpu_ns();
                for r in 0..rounds {
                    w.push_frame_as(false, OP_BINARY, &p, |_| share);
                    let fd = socks[r % 16].as_raw_fd();
                    while !w.is_empty() {
                        let sent = if syscall {
                            w.write_with(|iov, _| send_vectored(fd, iov))
                        } else {
                            w.write_with(|iov, len| {
                                std::hint::black_box(iov);
                                Ok(len)
                            })
                        };
                        match sent {
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    w.recycle();
                }
                let ns = (thread_cpu_ns() - t0) as f64 / rounds as f64;
                results[usize::from(!syscall)][usize::from(share)].push(ns);
            }
        }
        let [[a, b], [c, d]] = results.map(|r| r.map(median));
        println!("{size:>6} B: {a:>7.0} / {b:>7.0} | {c:>6.1} / {d:>6.1}");
    }
    drop(socks);
    readers.into_iter().for_each(|r| r.join().unwrap());
}
