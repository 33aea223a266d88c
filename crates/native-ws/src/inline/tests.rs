//! The inline driver on real sockets (unix stream pairs), turned by hand as a consumer's event
//! loop turns it: what one turn serves, what waits for the next, deadlines, and the handler's
//! events in order.

use super::*;
use crate::codec::{self, OP_BINARY, OP_TEXT};
use crate::config::{Behavior, READ_CHUNK};
use crate::stats::Stats;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

#[derive(Default)]
struct Recorder {
    /// events committed by a flush (what a consumer such as the JS bridge would deliver)
    events: Mutex<Vec<String>>,
    staged: Mutex<Vec<String>>,
    /// answer each message with this many bytes (0: no answer)
    reply: usize,
}

impl Handler for Recorder {
    fn open(&self, conn: &Arc<Conn>, _info: OpenInfo) {
        self.staged.lock().unwrap().push(format!("open {}", conn.id));
    }
    fn message(&self, conn: &Arc<Conn>, data: &[u8], _binary: bool) {
        self.staged.lock().unwrap().push(format!("message {} {}", conn.id, data.len()));
        if self.reply > 0 {
            conn.send(OP_BINARY, self.reply, false, |out| out.resize(out.len() + self.reply, 7));
            conn.flush();
        }
    }
    fn close(&self, conn: &Arc<Conn>, code: u16, _reason: &str) {
        self.staged.lock().unwrap().push(format!("close {} {code}", conn.id));
    }
    fn examined(&self, token: u64, mine: bool) {
        self.staged.lock().unwrap().push(format!("examined {token} {}", if mine { "mine" } else { "theirs" }));
    }
    fn flush(&self) {
        let staged = std::mem::take(&mut *self.staged.lock().unwrap());
        self.events.lock().unwrap().extend(staged);
    }
}

impl Recorder {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// A client frame (masked with a zero key, so the payload goes as is).
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let (head, n) = codec::encode_header(true, false, opcode, payload.len(), Some([0; 4]));
    let mut out = head[..n].to_vec();
    out.extend_from_slice(payload);
    out
}

/// A connection `id` handed to `driver`, and its peer's end.
fn connect(driver: &Inline, id: u32, behavior: Behavior) -> (Arc<Conn>, UnixStream) {
    let (ours, peer) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let fd = OwnedFd::from(ours);
    let conn = Arc::new(Conn::new(id, fd.as_raw_fd(), Arc::new(behavior), None, Arc::new(Stats::default())));
    let _ = conn.driver.set(driver.signal());
    let info = OpenInfo { route: 0, token: 0, url: "/".into(), headers: vec![], remote: None, proxied: None, protocol: String::new(), extensions: String::new() };
    driver.signal.adopted.lock().unwrap().push(Adopted { conn: conn.clone(), fd, hello: Vec::new(), initial: Vec::new(), info });
    driver.signal.wake();
    (conn, peer)
}

fn driver(reply: usize) -> (Inline, Arc<Recorder>) {
    let (d, rec, _) = driver_taking(reply);
    (d, rec)
}

/// A driver whose taker records the fds it was given (it takes every one).
fn driver_taking(reply: usize) -> (Inline, Arc<Recorder>, Arc<Mutex<Vec<RawFd>>>) {
    let rec = Arc::new(Recorder { reply, ..Recorder::default() });
    let taken = Arc::new(Mutex::new(Vec::new()));
    let t = taken.clone();
    let taker: Taker = Box::new(move |fd, _claim| {
        t.lock().unwrap().push(fd);
        Ok(())
    });
    (Inline::new(rec.clone(), taker).unwrap(), rec, taken)
}

/// Whether the driver's fd is readable now (the consumer's event loop would call a turn).
fn fd_readable(driver: &Inline) -> bool {
    driver.signal.input_waiting()
}

#[test]
fn a_message_is_handled_in_the_turn_that_read_it() {
    let (mut d, rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    assert!(fd_readable(&d), "a hand-over wakes the driver's fd");
    d.turn();
    assert_eq!(rec.take(), ["open 1"]);
    peer.write_all(&frame(OP_TEXT, b"hello")).unwrap();
    assert!(fd_readable(&d));
    d.turn();
    assert_eq!(rec.take(), ["message 1 5"]);
    d.turn();
    assert!(rec.take().is_empty());
}

#[test]
fn a_socket_with_more_than_one_buffer_waits_for_the_next_turn_and_others_are_served_first() {
    let (mut d, rec) = driver(0);
    let (_a, mut big) = connect(&d, 1, Behavior::default());
    let (_b, mut small) = connect(&d, 2, Behavior::default());
    d.turn();
    rec.take();
    let payload = vec![b'x'; 3 * READ_CHUNK];
    let writer = std::thread::spawn(move || {
        big.write_all(&frame(OP_BINARY, &payload)).unwrap();
        big
    });
    std::thread::sleep(Duration::from_millis(50));
    small.write_all(&frame(OP_TEXT, b"hi")).unwrap();
    d.turn();
    assert_eq!(rec.take(), ["message 2 2"], "one buffer of the big message per turn");
    assert!(fd_readable(&d), "the driver asks for the next turn itself");
    let mut turns = 1;
    while rec.events.lock().unwrap().is_empty() && turns < 100 {
        std::thread::sleep(Duration::from_millis(1));
        d.turn();
        turns += 1;
    }
    assert_eq!(rec.take(), [format!("message 1 {}", 3 * READ_CHUNK)]);
    assert!(turns >= 3, "{turns} turns");
    drop(writer.join().unwrap());
}

#[test]
fn a_reply_the_kernel_cannot_take_is_finished_by_later_turns() {
    let (mut d, rec) = driver(4 << 20);
    let (conn, mut peer) = connect(&d, 1, Behavior::default());
    d.turn();
    peer.write_all(&frame(OP_TEXT, b"go")).unwrap();
    d.turn();
    assert!(conn.buffered_amount() > 0, "a unix socket buffer is smaller than 4 MiB");
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        let mut buf = vec![0; 1 << 16];
        while got < 4 << 20 {
            got += peer.read(&mut buf).unwrap();
        }
        got
    });
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while conn.buffered_amount() > 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
        if fd_readable(&d) {
            d.turn();
        }
    }
    assert_eq!(conn.buffered_amount(), 0);
    assert!(reader.join().unwrap() >= 4 << 20);
    assert_eq!(rec.take(), ["open 1", "message 1 2"]);
}

#[test]
fn turns_return_the_next_deadline_and_the_idle_timeout_closes() {
    let (mut d, rec) = driver(0);
    let behavior = Behavior { idle_timeout_ms: 200, send_pings: false, ..Behavior::default() };
    let (_conn, mut peer) = connect(&d, 1, behavior);
    let next = d.turn().expect("a deadline");
    let left = next.saturating_duration_since(std::time::Instant::now());
    assert!(left > Duration::from_millis(100) && left <= Duration::from_millis(200), "{left:?}");
    std::thread::sleep(left + Duration::from_millis(5));
    d.turn();
    // our close frame, 1001 "idle timeout", then the wait for the peer's
    let mut head = [0u8; 4];
    peer.read_exact(&mut head).unwrap();
    assert_eq!((head[0], u16::from_be_bytes([head[2], head[3]])), (0x88, codec::CLOSE_GOING_AWAY));
    drop(peer);
    std::thread::sleep(Duration::from_millis(20));
    d.turn();
    assert_eq!(rec.take(), ["open 1".to_string(), format!("close 1 {}", codec::CLOSE_GOING_AWAY)]);
    assert_eq!(d.connections(), 0);
}

#[test]
fn messages_then_the_close_that_followed_them_in_one_read() {
    let (mut d, rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    d.turn();
    let mut bytes = frame(OP_TEXT, b"a");
    bytes.extend(frame(OP_TEXT, b"bc"));
    let mut close = Vec::new();
    codec::write_close(&mut close, 4000, "");
    bytes.extend(frame(codec::OP_CLOSE, &close[2..]));
    peer.write_all(&bytes).unwrap();
    d.turn();
    assert_eq!(rec.take(), ["open 1", "message 1 1", "message 1 2", "close 1 4000"]);
    let mut reply = [0u8; 4];
    peer.read_exact(&mut reply).unwrap();
    assert_eq!(u16::from_be_bytes([reply[2], reply[3]]), 4000, "the close is answered");
}

#[test]
fn shutdown_drops_every_connection_and_later_hand_overs() {
    let (mut d, rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    d.turn();
    d.signal().close();
    assert!(!d.is_open());
    assert_eq!(d.turn(), None);
    assert_eq!(d.connections(), 0);
    let mut buf = [0u8; 1];
    assert_eq!(peer.read(&mut buf).unwrap(), 0, "the socket is closed");
    assert_eq!(rec.take(), ["open 1"], "no close event at shutdown, as with the threaded driver");
}

#[test]
fn a_hang_up_in_the_event_of_the_bytes_before_it_closes_with_1006() {
    let (mut d, rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    d.turn();
    let f = frame(OP_BINARY, &[7; 100]);
    peer.write_all(&f[..56]).unwrap();
    // a unix socket has no RST: closing it is the abrupt end here, in the same event as the
    // bytes before it (one short read takes them: the hang-up must not be lost with it)
    drop(peer);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while d.connections() > 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
        if fd_readable(&d) {
            d.turn();
        }
    }
    assert_eq!(rec.take(), ["open 1".to_string(), format!("close 1 {}", codec::CLOSE_ABNORMAL)]);
}

#[test]
fn input_the_consumer_has_not_read_counts_as_its_lag() {
    let (mut d, _rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    let signal = d.signal();
    assert_eq!(signal.oldest_wait(), Duration::ZERO, "no turn yet");
    d.turn(); // the hand-over (its registration reports the socket writable: one more turn)
    d.turn();
    assert_eq!(signal.oldest_wait(), Duration::ZERO, "everything read");
    peer.write_all(&frame(OP_TEXT, b"waiting")).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let lag = signal.oldest_wait();
    assert!(lag >= Duration::from_millis(25) && lag < Duration::from_secs(5), "{lag:?}");
    d.turn();
    assert_eq!(signal.oldest_wait(), Duration::ZERO, "read by the turn");
}

#[test]
fn a_saturated_consumer_thread_counts_as_lag_while_input_waits() {
    let (mut d, _rec) = driver(0);
    let (_conn, mut peer) = connect(&d, 1, Behavior::default());
    let signal = d.signal();
    d.turn(); // the hand-over (its registration reports the socket writable: one more turn)
    d.turn();
    let w = LOAD_WINDOW;
    let short = Duration::from_millis(2);
    d.report_load(w, w);
    std::thread::sleep(w);
    d.report_load(w, w);
    assert_eq!(signal.oldest_wait(), Duration::ZERO, "saturated, but no turn for half a window and nothing to read: idle");
    d.turn();
    let lag = signal.oldest_wait();
    assert!(lag >= w && lag < w * 2, "a turn just ended: still turning, saturated since the end of its first window: {lag:?}");
    peer.write_all(&frame(OP_TEXT, b"one")).unwrap();
    std::thread::sleep(short);
    let lag = signal.oldest_wait();
    assert!(lag >= w && lag < w * 2, "input waiting: {lag:?}");
    d.report_load(w / 2, w);
    let lag = signal.oldest_wait();
    assert!(lag < w / 2, "a window with idle time ends the streak (the input's own short wait remains): {lag:?}");
    d.report_load(w, w);
    std::thread::sleep(w * 3);
    d.turn();
    peer.write_all(&frame(OP_TEXT, b"two")).unwrap();
    std::thread::sleep(short);
    let lag = signal.oldest_wait();
    assert!(lag < w / 2, "a report older than two windows is stale: {lag:?}");
    d.turn();
    assert_eq!(signal.oldest_wait(), Duration::ZERO, "read by the turn");
}

const UPGRADE: &[u8] = b"GET /websocket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

fn claim() -> Arc<Claim> {
    Arc::new(Claim { paths: vec!["/websocket".into()], proxy_protocol: false })
}

/// An accepted connection as an HTTP server holds it (non-blocking, unread), and its client.
fn accepted() -> (UnixStream, UnixStream) {
    let (server, client) = UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    (server, client)
}

#[test]
fn a_watched_connection_is_decided_in_the_turn_its_bytes_arrive() {
    let (mut d, rec, taken) = driver_taking(0);
    let (ours, mut ours_client) = accepted();
    let (plain, mut plain_client) = accepted();
    d.watch(ours.as_raw_fd(), claim(), 7).unwrap();
    d.watch(plain.as_raw_fd(), claim(), 8).unwrap();
    assert_eq!(d.watched(), 2);
    d.turn();
    assert!(rec.take().is_empty(), "nothing has come yet");
    // A head in two parts: undecided after the first, the core's after the second.
    ours_client.write_all(&UPGRADE[..20]).unwrap();
    plain_client.write_all(b"GET /websocket HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert!(fd_readable(&d), "a watched connection's bytes wake the driver");
    d.turn();
    assert!(rec.take().is_empty(), "neither head is whole");
    ours_client.write_all(&UPGRADE[20..]).unwrap();
    plain_client.write_all(b"\r\n").unwrap();
    d.turn();
    let mut got = rec.take();
    got.sort();
    assert_eq!(got, ["examined 7 mine", "examined 8 theirs"]);
    assert_eq!(*taken.lock().unwrap(), [ours.as_raw_fd()], "the taker has the core's connection");
    assert_eq!(d.watched(), 0);
    // Nothing was read: the HTTP server still has every byte of its connection.
    let mut buf = [0u8; 64];
    let n = (&plain).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"GET /websocket HTTP/1.1\r\nHost: x\r\n\r\n");
    // Decided connections are out of the driver's epoll: more bytes wake nothing.
    plain_client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    d.turn();
    assert!(rec.take().is_empty());
}

#[test]
fn a_watched_connection_that_ends_or_never_decides_is_the_servers() {
    let (mut d, rec, taken) = driver_taking(0);
    let (ended, mut ended_client) = accepted();
    let (silent, _silent_client) = accepted();
    d.watch(ended.as_raw_fd(), claim(), 1).unwrap();
    d.watch(silent.as_raw_fd(), claim(), 2).unwrap();
    // A partial upgrade, then the peer's end: it can never be whole.
    ended_client.write_all(&UPGRADE[..30]).unwrap();
    ended_client.shutdown(std::net::Shutdown::Write).unwrap();
    let next = d.turn();
    assert_eq!(rec.take(), ["examined 1 theirs"]);
    // The silent one: the turn asks to be run when its wait is over, and then gives it back.
    let next = next.expect("a deadline for the watched connection");
    let wait = next.saturating_duration_since(std::time::Instant::now());
    assert!(wait > crate::peek::WAIT - Duration::from_millis(500) && wait <= crate::peek::WAIT, "{wait:?}");
    std::thread::sleep(wait + Duration::from_millis(5));
    assert_eq!(d.turn(), None, "no deadline left");
    assert_eq!(rec.take(), ["examined 2 theirs"]);
    assert!(taken.lock().unwrap().is_empty());
    assert_eq!(d.watched(), 0);
}

#[test]
fn a_stopped_driver_watches_nothing_and_forgets_what_it_watched() {
    let (mut d, rec) = driver(0);
    let (a, mut a_client) = accepted();
    d.watch(a.as_raw_fd(), claim(), 1).unwrap();
    d.shutdown();
    assert_eq!(d.watched(), 0);
    assert!(d.watch(a.as_raw_fd(), claim(), 2).is_err());
    a_client.write_all(UPGRADE).unwrap();
    d.turn();
    assert!(rec.take().is_empty(), "no verdict after the shutdown: the consumer closes its connections");
}
