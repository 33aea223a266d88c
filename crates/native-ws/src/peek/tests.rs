use super::*;

fn claim(proxy_protocol: bool) -> Claim {
    Claim { paths: vec!["/websocket".into(), "/sockjs/*".into()], proxy_protocol }
}

const UPGRADE: &[u8] = b"GET /websocket HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

#[test]
fn an_upgrade_on_a_claimed_path_is_mine_once_its_head_is_whole() {
    let d = claim(false);
    assert_eq!(d.verdict(UPGRADE), Verdict::Mine);
    // Split anywhere before the end of the head: not decided yet.
    for cut in [0, 1, 3, 4, 10, 30, UPGRADE.len() - 1] {
        assert_eq!(d.verdict(&UPGRADE[..cut]), Verdict::Wait, "cut at {cut}");
    }
    // Frames pipelined after the head change nothing.
    let mut with_frames = UPGRADE.to_vec();
    with_frames.extend_from_slice(&[0x81, 0x80, 1, 2, 3, 4]);
    assert_eq!(d.verdict(&with_frames), Verdict::Mine);
    // A pattern path, a query, an absolute-form target.
    let other = String::from_utf8_lossy(UPGRADE).replace("GET /websocket", "GET /sockjs/123/abc/websocket?x=1");
    assert_eq!(d.verdict(other.as_bytes()), Verdict::Mine);
    let absolute = String::from_utf8_lossy(UPGRADE).replace("GET /websocket", "GET http://x/websocket");
    assert_eq!(d.verdict(absolute.as_bytes()), Verdict::Mine);
}

#[test]
fn anything_else_is_theirs_as_soon_as_it_shows() {
    let d = claim(false);
    // Another method: decided on its first byte.
    assert_eq!(d.verdict(b"P"), Verdict::Theirs);
    assert_eq!(d.verdict(b"POST /websocket HTTP/1.1\r\n"), Verdict::Theirs);
    assert_eq!(d.verdict(b"\x16\x03\x01"), Verdict::Theirs, "a TLS hello");
    // Another path: decided once the request line is whole, before the headers.
    assert_eq!(d.verdict(b"GET /other HTTP/1.1\r\nHo"), Verdict::Theirs);
    assert_eq!(d.verdict(b"GET /websocketx HTTP/1.1\r\n"), Verdict::Theirs);
    assert_eq!(d.verdict(b"GET /other"), Verdict::Wait, "the line is not whole yet");
    // Our path but not an upgrade, as Node's parser sees one.
    let plain = b"GET /websocket HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(d.verdict(plain), Verdict::Theirs);
    let no_connection = String::from_utf8_lossy(UPGRADE).replace("Connection: keep-alive, Upgrade\r\n", "");
    assert_eq!(d.verdict(no_connection.as_bytes()), Verdict::Theirs);
    let no_upgrade = String::from_utf8_lossy(UPGRADE).replace("Upgrade: websocket\r\n", "");
    assert_eq!(d.verdict(no_upgrade.as_bytes()), Verdict::Theirs);
    // HTTP/1.0, a malformed head, a target the core refuses: the HTTP server answers them.
    let http10 = String::from_utf8_lossy(UPGRADE).replace("HTTP/1.1", "HTTP/1.0");
    assert_eq!(d.verdict(http10.as_bytes()), Verdict::Theirs);
    assert_eq!(d.verdict(b"GET /websocket HTTP/1.1\r\nbad header\r\n\r\n"), Verdict::Theirs);
    assert_eq!(d.verdict(b"GET http://% HTTP/1.1\r\n"), Verdict::Theirs);
    // A head over the limit.
    let mut big = b"GET /websocket HTTP/1.1\r\nX: ".to_vec();
    big.resize(handshake::MAX_HEAD_BYTES + 10, b'a');
    assert_eq!(d.verdict(&big), Verdict::Theirs);
}

#[test]
fn with_the_proxy_protocol_the_header_comes_first() {
    let d = claim(true);
    let mut v1 = b"PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n".to_vec();
    v1.extend_from_slice(UPGRADE);
    assert_eq!(d.verdict(&v1), Verdict::Mine);
    assert_eq!(d.verdict(&v1[..20]), Verdict::Wait, "a partial header");
    assert_eq!(d.verdict(&v1[..60]), Verdict::Wait, "a partial request");
    assert_eq!(d.verdict(UPGRADE), Verdict::Theirs, "no header: the HTTP server's reader refuses it");
    let mut plain = b"PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n".to_vec();
    plain.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(d.verdict(&plain), Verdict::Theirs);
}

#[tokio::test]
async fn examine_peeks_without_consuming_and_decides_split_heads() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let d = claim(false);
    // A head in three packets: Mine, and every byte is still there to read.
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    let writer = tokio::spawn(async move {
        for part in [&UPGRADE[..5], &UPGRADE[5..40], &UPGRADE[40..]] {
            c.write_all(part).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        c
    });
    let stream = Stream::Tcp(s);
    assert_eq!(examine(&stream, &d).await, Verdict::Mine);
    let _c = writer.await.unwrap();
    let Stream::Tcp(mut s) = stream else { unreachable!() };
    let mut got = vec![0u8; UPGRADE.len()];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(got, UPGRADE);
    // A plain request: Theirs, unread.
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    c.write_all(b"GET /x HTTP/1.1\r\n\r\n").await.unwrap();
    let stream = Stream::Tcp(s);
    assert_eq!(examine(&stream, &d).await, Verdict::Theirs);
    // The peer's end before a decision: Theirs.
    let c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (s, _) = l.accept().await.unwrap();
    drop(c);
    assert_eq!(examine(&Stream::Tcp(s), &d).await, Verdict::Theirs);
}

#[test]
fn every_prefix_of_a_proxied_upgrade_waits() {
    let d = claim(true);
    let mut v1 = b"PROXY TCP4 192.0.2.77 127.0.0.1 7777 80\r\n".to_vec();
    v1.extend_from_slice(UPGRADE);
    for cut in 0..v1.len() {
        assert_eq!(d.verdict(&v1[..cut]), Verdict::Wait, "cut at {cut}: {:?}", String::from_utf8_lossy(&v1[..cut]));
    }
    assert_eq!(d.verdict(&v1), Verdict::Mine);
}

#[test]
fn look_sees_heads_longer_than_its_first_peek_and_gives_up_at_the_limit() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let d = claim(false);
    let (server, mut client) = std::os::unix::net::UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    assert_eq!(look(server.as_raw_fd(), &d, false), Verdict::Wait, "nothing yet");
    // An upgrade whose head is longer than the first peek (a long cookie).
    let long = String::from_utf8_lossy(UPGRADE).replace("Host: x\r\n", &format!("Host: x\r\nCookie: {}\r\n", "c".repeat(3 * FIRST_PEEK)));
    client.write_all(long.as_bytes()).unwrap();
    assert_eq!(look(server.as_raw_fd(), &d, false), Verdict::Mine);
    // A head that does not end within the limit: the HTTP server's (its 431).
    let (server, mut client) = std::os::unix::net::UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    let mut big = b"GET /websocket HTTP/1.1\r\nX: ".to_vec();
    big.resize(handshake::MAX_HEAD_BYTES + 100, b'a');
    client.write_all(&big).unwrap();
    assert_eq!(look(server.as_raw_fd(), &d, false), Verdict::Theirs);
    // Undecided, and the peer has ended: it never will be.
    let (server, mut client) = std::os::unix::net::UnixStream::pair().unwrap();
    server.set_nonblocking(true).unwrap();
    client.write_all(&UPGRADE[..40]).unwrap();
    assert_eq!(look(server.as_raw_fd(), &d, false), Verdict::Wait);
    assert_eq!(look(server.as_raw_fd(), &d, true), Verdict::Theirs);
}
