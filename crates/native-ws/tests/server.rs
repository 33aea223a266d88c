//! The server driven over real sockets by an independent client implementation
//! (fastwebsockets in the client role), with a pure-Rust echo handler: no Node involved.
//! `DDP_TRANSPORT_NATIVE_IO=inline` runs every test with the inline driver (on a thread of the
//! test's own, as a consumer's event loop would run it), else the threaded one.

use fastwebsockets::{FragmentCollector, Frame, OpCode, Payload, Role, WebSocket};
use native_ws::codec::{OP_BINARY, OP_TEXT};
use native_ws::{Behavior, Conn, Handler, OpenInfo, Server};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Default)]
struct Echo {
    opened: AtomicUsize,
    closes: Mutex<Vec<u16>>,
}

impl Handler for Echo {
    fn open(&self, _conn: &Arc<Conn>, _info: OpenInfo) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }
    fn message(&self, conn: &Arc<Conn>, data: &[u8], binary: bool) {
        let opcode = if binary { OP_BINARY } else { OP_TEXT };
        conn.send(opcode, data.len(), true, |out| out.extend_from_slice(data));
        conn.flush();
    }
    fn close(&self, _conn: &Arc<Conn>, code: u16, _reason: &str) {
        self.closes.lock().unwrap().push(code);
    }
}

fn start(behavior: Behavior) -> (Server, Arc<Echo>, u16) {
    let echo = Arc::new(Echo::default());
    let server = Server::new(1, echo.clone()).unwrap();
    if std::env::var("DDP_TRANSPORT_NATIVE_IO").as_deref() == Ok("inline") {
        drive_inline(&server);
    }
    server.add_route("/*", behavior);
    let port = server.listen("127.0.0.1", 0, false).unwrap().port();
    (server, echo, port)
}

/// The inline driver's event loop: wait for its fd (or its next deadline), run a turn; until the
/// server shuts down, at most 120 s.
#[cfg(target_os = "linux")]
fn drive_inline(server: &Server) {
    let mut inline = server.serve_inline().unwrap();
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut next = None;
        while inline.is_open() && std::time::Instant::now() < until {
            let wait = next.map_or(50, |d: std::time::Instant| d.saturating_duration_since(std::time::Instant::now()).as_millis().clamp(1, 50) as i32);
            let mut pfd = libc::pollfd { fd: inline.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, wait) };
            next = inline.turn();
        }
    });
}

#[cfg(not(target_os = "linux"))]
fn drive_inline(_server: &Server) {
    panic!("the inline driver is Linux-only");
}

async fn upgrade(port: u16, extra: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req = format!(
        "GET /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    (s, String::from_utf8(head).unwrap())
}

async fn client(port: u16) -> FragmentCollector<TcpStream> {
    let (s, head) = upgrade(port, "").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    FragmentCollector::new(WebSocket::after_handshake(s, Role::Client))
}

#[tokio::test]
async fn echoes_text_binary_large_and_fragmented_messages() {
    let (_server, echo, port) = start(Behavior::default());
    let mut ws = client(port).await;
    ws.write_frame(Frame::text(Payload::Borrowed(b"hello"))).await.unwrap();
    let f = ws.read_frame().await.unwrap();
    assert_eq!((f.opcode, &f.payload[..]), (OpCode::Text, &b"hello"[..]));

    let big = vec![7u8; 3 << 20];
    ws.write_frame(Frame::binary(Payload::Borrowed(&big))).await.unwrap();
    let f = ws.read_frame().await.unwrap();
    assert_eq!(f.opcode, OpCode::Binary);
    assert_eq!(f.payload.len(), big.len());

    ws.write_frame(Frame::new(false, OpCode::Text, None, Payload::Borrowed(b"frag"))).await.unwrap();
    ws.write_frame(Frame::new(false, OpCode::Continuation, None, Payload::Borrowed(b"men"))).await.unwrap();
    ws.write_frame(Frame::new(true, OpCode::Continuation, None, Payload::Borrowed(b"ted"))).await.unwrap();
    let f = ws.read_frame().await.unwrap();
    assert_eq!(&f.payload[..], b"fragmented");

    ws.write_frame(Frame::close(4000, b"bye")).await.unwrap();
    let f = ws.read_frame().await.unwrap();
    assert_eq!(f.opcode, OpCode::Close);
    assert_eq!(u16::from_be_bytes([f.payload[0], f.payload[1]]), 4000);
    for _ in 0..100 {
        if !echo.closes.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(echo.opened.load(Ordering::SeqCst), 1);
    assert_eq!(*echo.closes.lock().unwrap(), vec![4000]);
}

#[tokio::test]
async fn protocol_errors_close_with_their_code_and_others_are_unaffected() {
    let (_server, _echo, port) = start(Behavior { max_payload: 1024, ..Behavior::default() });
    let mut good = client(port).await;
    // (raw bytes after the handshake, expected close code)
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (vec![0x81, 0x02, b'h', b'i'], 1002),                 // unmasked
        (vec![0xC1, 0x80, 0, 0, 0, 0], 1002),                 // RSV1 without extension
        (vec![0x83, 0x80, 0, 0, 0, 0], 1002),                 // reserved opcode
        (vec![0x81, 0x81, 0, 0, 0, 0, 0xff], 1007),           // invalid UTF-8
        (vec![0x82, 0xFE, 0x04, 0x01, 0, 0, 0, 0], 1009),     // 1025 bytes > max
        (vec![0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe7], 1002),     // close code 999
    ];
    for (bytes, code) in cases {
        let (mut s, _) = upgrade(port, "").await;
        s.write_all(&bytes).await.unwrap();
        let mut frame = [0u8; 4];
        s.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame[0], 0x88, "close frame expected for {bytes:?}");
        assert_eq!(u16::from_be_bytes([frame[2], frame[3]]), code, "case {bytes:?}");
        good.write_frame(Frame::text(Payload::Borrowed(b"still here"))).await.unwrap();
        assert_eq!(&good.read_frame().await.unwrap().payload[..], b"still here");
    }
}

#[tokio::test]
async fn bad_handshakes_get_http_errors() {
    let (_server, _echo, port) = start(Behavior::default());
    let (_, head) = upgrade(port, "Sec-WebSocket-Version: 8\r\n").await;
    assert!(head.starts_with("HTTP/1.1 4"), "{head}");
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
}

#[tokio::test]
async fn compression_is_negotiated_and_compressed_frames_echo() {
    let behavior = Behavior {
        compression: Some(native_ws::DeflateConfig { threshold: 0, ..Default::default() }),
        ..Behavior::default()
    };
    let (_server, _echo, port) = start(behavior);
    let (mut s, head) = upgrade(port, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n").await;
    assert!(head.contains("Sec-WebSocket-Extensions: permessage-deflate"), "{head}");
    // An uncompressed text frame is legal on a compressed connection; the reply is compressed.
    let text = b"compressible compressible compressible";
    let mut frame = vec![0x81, 0x80 | text.len() as u8, 0, 0, 0, 0];
    frame.extend_from_slice(text);
    s.write_all(&frame).await.unwrap();
    let mut hdr = [0u8; 2];
    s.read_exact(&mut hdr).await.unwrap();
    assert_eq!(hdr[0], 0xC1, "FIN + RSV1 + text");
    let mut payload = vec![0u8; (hdr[1] & 0x7f) as usize];
    s.read_exact(&mut payload).await.unwrap();
    let mut inflater = native_ws::deflate::Inflater::new(15, false);
    let mut out = Vec::new();
    inflater.feed(&payload, &mut out, 1 << 20).unwrap();
    inflater.finish(&mut out, 1 << 20).unwrap();
    assert_eq!(out, text);
}

/// The paths the Node binding imports: a compile-time check that they keep resolving.
#[test]
fn binding_api_paths_resolve() {
    #[allow(unused_imports)]
    use native_ws::{
        codec::{is_valid_close_code, CLOSE_TRY_AGAIN, OP_BINARY, OP_TEXT},
        handshake::Request,
        path_matches, release_id, Behavior, Conn, Decision, DeflateConfig, Handler, OpenInfo,
        SendStatus, Server, Stats, UpgradeInfo,
    };
    let _ = DeflateConfig::default();
    assert!(path_matches("/ws", "/ws/"));
    assert!(is_valid_close_code(CLOSE_TRY_AGAIN));
}

#[cfg(unix)]
#[test]
fn servers_that_share_a_port_both_bind_and_an_exclusive_one_is_refused() {
    let server = || {
        let s = Server::new(1, Arc::new(Echo::default())).unwrap();
        s.add_route("/*", Behavior::default());
        s
    };
    let (a, b, c) = (server(), server(), server());
    let port = a.listen("127.0.0.1", 0, true).unwrap().port();
    assert_eq!(b.listen("127.0.0.1", port, true).unwrap().port(), port, "a second shared listener");
    let err = c.listen("127.0.0.1", port, false).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
}

/// A driver that stopped (its host could not watch its fd) takes no connections: they are served
/// on the I/O threads, not closed.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn connections_stay_threaded_once_the_inline_driver_stopped() {
    let echo = Arc::new(Echo::default());
    let server = Server::new(1, echo.clone()).unwrap();
    server.serve_inline().unwrap().shutdown();
    server.add_route("/*", Behavior::default());
    let port = server.listen("127.0.0.1", 0, false).unwrap().port();
    let mut ws = client(port).await;
    ws.write_frame(Frame::text(Payload::Borrowed(b"still served"))).await.unwrap();
    let f = ws.read_frame().await.unwrap();
    assert_eq!((f.opcode, &f.payload[..]), (OpCode::Text, &b"still served"[..]));
}
