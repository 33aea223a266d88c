//! Connections of an attached HTTP server, watched by the inline driver until their first bytes
//! decide (`Inline::watch`), over real sockets: an upgrade on the claimed paths is taken (the
//! consumer lets go of its fd in the turn that decided) and answered by the I/O threads, then
//! served by the driver (a plain one) or on the I/O threads (permessage-deflate); a claimed path
//! without a route is answered 404; anything else stays the consumer's, unread.
#![cfg(target_os = "linux")]

use native_ws::codec::OP_TEXT;
use native_ws::inline::Inline;
use native_ws::peek::Claim;
use native_ws::{Behavior, Conn, DeflateConfig, Handler, OpenInfo, Server};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records what the driver tells, in order, and echoes messages.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl Handler for Log {
    fn examined(&self, token: u64, mine: bool) {
        self.0.lock().unwrap().push(format!("examined {token} {mine}"));
    }
    fn open(&self, _conn: &Arc<Conn>, info: OpenInfo) {
        self.0.lock().unwrap().push(format!("open {} {:?}", info.url, info.remote.map(|a| a.ip())));
    }
    fn message(&self, conn: &Arc<Conn>, data: &[u8], _binary: bool) {
        self.0.lock().unwrap().push(format!("message {}", String::from_utf8_lossy(data)));
        conn.send(OP_TEXT, data.len(), false, |out| out.extend_from_slice(data));
        conn.flush();
    }
    fn close(&self, _conn: &Arc<Conn>, code: u16, _reason: &str) {
        self.0.lock().unwrap().push(format!("close {code}"));
    }
}

const KEY_ACCEPT: &str = "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

fn request(path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// A server with one route, its inline driver, and a listener standing for the consumer's HTTP
/// server (whose accepted connections the driver watches).
fn setup(behavior: Behavior) -> (Server, Inline, Arc<Log>, TcpListener) {
    let log = Arc::new(Log::default());
    let server = Server::new(1, log.clone()).unwrap();
    server.add_route("/websocket", behavior);
    let inline = server.serve_inline().unwrap();
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    (server, inline, log, http)
}

/// A client that sent `req`, and the consumer's end of its connection (accepted, not read).
fn connect(http: &TcpListener, req: &str) -> (TcpStream, TcpStream) {
    let mut client = TcpStream::connect(http.local_addr().unwrap()).unwrap();
    let (theirs, _) = http.accept().unwrap();
    theirs.set_nonblocking(true).unwrap(); // as Node's accepted sockets are
    client.write_all(req.as_bytes()).unwrap();
    client.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    (client, theirs)
}

fn claim() -> Arc<Claim> {
    Arc::new(Claim { paths: vec!["/websocket".into()], proxy_protocol: false })
}

/// Wait until the driver's fd is readable (at most 2 s), then run one turn.
fn one_turn(inline: &mut Inline) {
    let mut pfd = libc::pollfd { fd: inline.fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 2000) }, 1, "the driver's fd became readable");
    inline.turn();
}

/// Turns until `done` (at most 5 s).
fn turn_until(inline: &mut Inline, mut done: impl FnMut(&Inline) -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !done(inline) {
        assert!(Instant::now() < until, "not within 5 s");
        let mut pfd = libc::pollfd { fd: inline.fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 20) };
        inline.turn();
    }
}

/// The response head (until the blank line), or what came before the read timed out.
fn read_head(client: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[test]
fn a_plain_upgrade_is_taken_in_the_turn_that_decided_and_served_inline() {
    let (_server, mut inline, log, http) = setup(Behavior::default());
    // a frame pipelined after the head, in a segment of its own: "hi", masked
    let req = request("/websocket", "");
    let (mut client, theirs) = connect(&http, &req);
    client.write_all(&[0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2]).unwrap();
    std::thread::sleep(Duration::from_millis(20)); // both segments queued
    inline.watch(theirs.as_raw_fd(), claim(), 7).unwrap();
    one_turn(&mut inline);
    assert_eq!(log.events(), ["examined 7 true"], "taken in the turn that decided");
    drop(theirs); // the consumer closes its own fd
    // the I/O threads answer it and hand it to the driver: its open event, then the message
    // that came with the request, in the driver's turns
    turn_until(&mut inline, |_| log.events().len() >= 3);
    assert_eq!(log.events(), ["examined 7 true", "open /websocket Some(127.0.0.1)", "message hi"]);
    assert_eq!(inline.connections(), 1, "the driver serves it");
    let head = read_head(&mut client);
    assert!(head.starts_with("HTTP/1.1 101"), "{head:?}");
    assert!(head.contains(KEY_ACCEPT), "{head}");
    assert!(!head.to_ascii_lowercase().contains("sec-websocket-extensions"), "{head}");
    let mut echo = [0u8; 4];
    client.read_exact(&mut echo).unwrap();
    assert_eq!(echo, [0x81, 2, b'h', b'i']);
    // served by the driver from then on: a close from the client is answered
    client.write_all(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]).unwrap();
    turn_until(&mut inline, |_| log.events().contains(&"close 1000".to_string()));
    let mut close = [0u8; 4];
    client.read_exact(&mut close).unwrap();
    assert_eq!(close, [0x88, 2, 0x03, 0xe8]);
    turn_until(&mut inline, |d| d.connections() == 0);
}

#[test]
fn anything_else_stays_the_consumers_unread() {
    let (_server, mut inline, log, http) = setup(Behavior::default());
    let plain = "GET /websocket HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let (_client, mut theirs) = connect(&http, plain);
    inline.watch(theirs.as_raw_fd(), claim(), 3).unwrap();
    one_turn(&mut inline);
    assert_eq!(log.events(), ["examined 3 false"]);
    // every byte still there for the HTTP server
    theirs.set_nonblocking(false).unwrap();
    let mut got = vec![0u8; plain.len()];
    theirs.read_exact(&mut got).unwrap();
    assert_eq!(got, plain.as_bytes());
}

#[test]
fn a_deflate_upgrade_stays_on_the_io_threads_and_an_unrouted_path_is_answered_404() {
    let compression = Some(DeflateConfig::default());
    let (_server, mut inline, log, http) = setup(Behavior { compression, ..Behavior::default() });
    // permessage-deflate offered: its connection is served on the I/O threads
    let (mut client, theirs) = connect(&http, &request("/websocket", "Sec-WebSocket-Extensions: permessage-deflate\r\n"));
    inline.watch(theirs.as_raw_fd(), claim(), 1).unwrap();
    one_turn(&mut inline);
    assert_eq!(log.events().first().map(String::as_str), Some("examined 1 true"), "taken in the turn");
    drop(theirs);
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = read_head(&mut client);
    assert!(head.starts_with("HTTP/1.1 101") && head.contains(KEY_ACCEPT), "{head}");
    assert!(head.contains("Sec-WebSocket-Extensions: permessage-deflate"), "{head}");
    // a claimed path without a route: the I/O threads answer 404
    let (mut client, theirs) = connect(&http, &request("/websocket/other", ""));
    let wide = Arc::new(Claim { paths: vec!["/websocket/*".into()], proxy_protocol: false });
    inline.watch(theirs.as_raw_fd(), wide, 2).unwrap();
    one_turn(&mut inline);
    drop(theirs);
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = read_head(&mut client);
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(log.events().contains(&"examined 2 true".to_string()));
}
