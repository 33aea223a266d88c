use super::*;
use crate::testutil::Rng;
use std::fmt::Write as _;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

const CHROME: &str = "GET /chat?room=1&x=y HTTP/1.1\r\n\
    Host: localhost:8080\r\n\
    Connection: Upgrade\r\n\
    Pragma: no-cache\r\n\
    Cache-Control: no-cache\r\n\
    User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
    Upgrade: websocket\r\n\
    Origin: http://localhost:8080\r\n\
    Sec-WebSocket-Version: 13\r\n\
    Accept-Encoding: gzip, deflate, br, zstd\r\n\
    Accept-Language: en-US,en;q=0.9\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
    \r\n";

/// RFC 6455 §5.7: a single-frame masked text message containing "Hello".
const MASKED_HELLO: [u8; 11] = [
    0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
];

fn h(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

/// A minimal valid request built directly (as from Node's parsed request).
fn good() -> Request {
    Request {
        method: "GET".into(),
        url: "/ws".into(),
        headers: vec![
            h("host", "example.com"),
            h("upgrade", "websocket"),
            h("connection", "Upgrade"),
            h("sec-websocket-version", "13"),
            h("sec-websocket-key", KEY),
        ],
        before_http_1_1: false,
        invalid_target: false,
    }
}

fn with(mut req: Request, name: &str, value: Option<&str>) -> Request {
    req.headers.retain(|(n, _)| n != name);
    if let Some(v) = value {
        req.headers.push(h(name, v));
    }
    req
}

fn status_of(req: &Request) -> u16 {
    validate(req).expect_err("should be refused").status
}

fn parse_complete(bytes: &[u8]) -> (Request, usize) {
    parse_request(bytes)
        .expect("parse error")
        .expect("incomplete")
}

#[test]
fn rfc_example_accept_key() {
    assert_eq!(accept_key(KEY), ACCEPT);
}

#[test]
fn chrome_request_parses_and_validates() {
    let (req, n) = parse_complete(CHROME.as_bytes());
    assert_eq!(n, CHROME.len());
    assert_eq!(req.method, "GET");
    assert_eq!(req.url, "/chat?room=1&x=y");
    assert_eq!(req.path(), "/chat");
    assert_eq!(req.headers.len(), 12);
    assert_eq!(req.headers[0], h("host", "localhost:8080"));
    assert_eq!(req.header("sec-websocket-key"), Some(KEY));
    assert_eq!(
        req.header("accept-encoding"),
        Some("gzip, deflate, br, zstd")
    );
    assert!(req
        .headers
        .iter()
        .all(|(n, _)| *n == n.to_ascii_lowercase()));

    let up = validate(&req).expect("valid upgrade");
    assert_eq!(up.accept, ACCEPT);
    assert!(up.protocols.is_empty());
    assert_eq!(up.extensions, "permessage-deflate; client_max_window_bits");
}

#[test]
fn split_at_every_byte_with_trailing_frame() {
    let head = CHROME.as_bytes();
    let mut all = head.to_vec();
    all.extend_from_slice(&MASKED_HELLO);
    let (expected, n) = parse_complete(head);
    assert_eq!(n, head.len());

    for i in 0..head.len() {
        assert_eq!(parse_request(&all[..i]), Ok(None), "prefix of {i} bytes");
    }
    for i in head.len()..=all.len() {
        let (req, consumed) = parse_complete(&all[..i]);
        assert_eq!(req, expected, "prefix of {i} bytes");
        assert_eq!(consumed, head.len(), "prefix of {i} bytes");
    }
    assert_eq!(&all[head.len()..], &MASKED_HELLO);
}

#[test]
fn request_accessors() {
    let req = Request {
        method: "GET".into(),
        url: "/a/b?c=d?e".into(),
        headers: vec![h("x", "1"), h("y", "2"), h("x", "3")],
        ..Request::default()
    };
    assert_eq!(req.path(), "/a/b");
    assert_eq!(req.header("x"), Some("1"));
    assert_eq!(req.header("X"), Some("1"));
    assert_eq!(req.header("z"), None);
    assert_eq!(req.header_joined("x").as_deref(), Some("1, 3"));
    assert_eq!(req.header_joined("y").as_deref(), Some("2"));
    assert_eq!(req.header_joined("z"), None);
    let plain = Request {
        url: "/plain".into(),
        ..Request::default()
    };
    assert_eq!(plain.path(), "/plain");
}

#[test]
fn good_request_is_accepted() {
    let up = validate(&good()).unwrap();
    assert_eq!(up.accept, ACCEPT);
    assert!(up.protocols.is_empty());
    assert_eq!(up.extensions, "");
}

#[test]
fn wrong_method_is_405() {
    let mut req = good();
    req.method = "POST".into();
    assert_eq!(status_of(&req), 405);
    req.method = "get".into();
    assert_eq!(status_of(&req), 405);
}

#[test]
fn upgrade_header_checks() {
    assert_eq!(status_of(&with(good(), "upgrade", None)), 400);
    assert_eq!(status_of(&with(good(), "upgrade", Some("h2c"))), 400);
    assert_eq!(status_of(&with(good(), "upgrade", Some("websockets"))), 400);
    assert_eq!(status_of(&with(good(), "upgrade", Some(""))), 400);
    let err = validate(&with(good(), "upgrade", None)).unwrap_err();
    assert_eq!(err.message, "Not a valid websocket request");

    assert!(validate(&with(good(), "upgrade", Some("WebSocket"))).is_ok());
    assert!(validate(&with(good(), "upgrade", Some("h2c, WEBSOCKET"))).is_ok());
}

#[test]
fn connection_header_checks() {
    assert_eq!(status_of(&with(good(), "connection", None)), 400);
    assert_eq!(
        status_of(&with(good(), "connection", Some("keep-alive"))),
        400
    );
    assert_eq!(
        status_of(&with(good(), "connection", Some("upgraded"))),
        400
    );
    assert!(validate(&with(good(), "connection", Some("keep-alive, Upgrade"))).is_ok());
    assert!(validate(&with(good(), "connection", Some("UPGRADE"))).is_ok());
    // Connection split across two header lines.
    let mut req = with(good(), "connection", Some("keep-alive"));
    req.headers.push(h("connection", "upgrade"));
    assert!(validate(&req).is_ok());
}

#[test]
fn version_checks() {
    assert_eq!(status_of(&with(good(), "sec-websocket-version", None)), 400);
    let req = with(good(), "sec-websocket-version", Some("8"));
    let err = validate(&req).unwrap_err();
    assert_eq!(err.status, 426);
    let mut out = Vec::new();
    write_error(&mut out, err.status, err.message);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
    assert!(text.contains("\r\nSec-WebSocket-Version: 13\r\n"));

    assert_eq!(
        status_of(&with(good(), "sec-websocket-version", Some("13, 8"))),
        426
    );
    assert_eq!(
        status_of(&with(good(), "sec-websocket-version", Some("130"))),
        426
    );
}

#[test]
fn key_checks() {
    let bad = |k: Option<&str>| status_of(&with(good(), "sec-websocket-key", k));
    assert_eq!(bad(None), 400);
    assert_eq!(bad(Some("")), 400);
    assert_eq!(bad(Some("not base64 at all!!!!!!!")), 400);
    assert_eq!(bad(Some("dGhlIHNhbXBsZSBub25jZQ")), 400); // no padding
                                                          // 15 bytes
    let k15 = base64::engine::general_purpose::STANDARD.encode([7u8; 15]);
    assert_eq!(bad(Some(&k15)), 400);
    // 17 bytes
    let k17 = base64::engine::general_purpose::STANDARD.encode([7u8; 17]);
    assert_eq!(bad(Some(&k17)), 400);
    // non-canonical trailing bits
    assert_eq!(bad(Some("dGhlIHNhbXBsZSBub25jZR==")), 400);
    // two key headers, even if both are valid
    let mut req = good();
    req.headers.push(h("sec-websocket-key", KEY));
    assert_eq!(status_of(&req), 400);

    // other 16-byte keys are fine
    let k16 = base64::engine::general_purpose::STANDARD.encode([0xffu8; 16]);
    let up = validate(&with(good(), "sec-websocket-key", Some(&k16))).unwrap();
    assert_eq!(up.accept, accept_key(&k16));
}

#[test]
fn repeated_protocol_and_extension_lines() {
    let raw = format!(
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: chat ,  superchat\r\n\
         Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
         Sec-WebSocket-Protocol: v2.json,,\r\n\
         Sec-WebSocket-Extensions: x-custom\r\n\r\n"
    );
    let (req, n) = parse_complete(raw.as_bytes());
    assert_eq!(n, raw.len());
    let up = validate(&req).unwrap();
    assert_eq!(up.protocols, vec!["chat", "superchat", "v2.json"]);
    assert_eq!(
        up.extensions,
        "permessage-deflate; client_max_window_bits, x-custom"
    );
}

#[test]
fn http_1_0_is_400() {
    let raw = format!(
        "GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    assert_eq!(parse_request(raw.as_bytes()).unwrap_err().status, 400);
}

#[test]
fn non_utf8_header_value_is_400() {
    let mut raw = b"GET / HTTP/1.1\r\nX-Thing: ab".to_vec();
    raw.extend_from_slice(&[0xff, 0xfe]);
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(parse_request(&raw).unwrap_err().status, 400);
    // valid UTF-8 beyond ASCII is kept
    let raw = "GET / HTTP/1.1\r\nX-Name: José\r\n\r\n";
    let (req, _) = parse_complete(raw.as_bytes());
    assert_eq!(req.header("x-name"), Some("José"));
}

#[test]
fn head_over_limit_is_431() {
    let big = "a".repeat(MAX_HEAD_BYTES);
    let raw = format!("GET / HTTP/1.1\r\nX-Big: {big}\r\n\r\n");
    assert_eq!(parse_request(raw.as_bytes()).unwrap_err().status, 431);
    // incomplete at exactly the limit
    assert_eq!(
        parse_request(&raw.as_bytes()[..MAX_HEAD_BYTES])
            .unwrap_err()
            .status,
        431
    );
    // one byte short of the limit: still just incomplete
    assert_eq!(
        parse_request(&raw.as_bytes()[..MAX_HEAD_BYTES - 1]),
        Ok(None)
    );

    // a head of exactly MAX_HEAD_BYTES is accepted, extra stream bytes notwithstanding
    let prefix = "GET / HTTP/1.1\r\nX-Big: ";
    let suffix = "\r\n\r\n";
    let fill = "b".repeat(MAX_HEAD_BYTES - prefix.len() - suffix.len());
    let mut exact = format!("{prefix}{fill}{suffix}").into_bytes();
    assert_eq!(exact.len(), MAX_HEAD_BYTES);
    exact.extend_from_slice(&MASKED_HELLO);
    let (_, n) = parse_complete(&exact);
    assert_eq!(n, MAX_HEAD_BYTES);
}

#[test]
fn too_many_headers_is_431() {
    let mut raw = String::from("GET / HTTP/1.1\r\n");
    for i in 0..MAX_HEADERS {
        writeln!(raw, "X-H{i}: v\r").unwrap();
    }
    let ok = format!("{raw}\r\n");
    let (req, _) = parse_complete(ok.as_bytes());
    assert_eq!(req.headers.len(), MAX_HEADERS);

    raw.push_str("X-One-Too-Many: v\r\n\r\n");
    assert_eq!(parse_request(raw.as_bytes()).unwrap_err().status, 431);
}

#[test]
fn garbage_is_400() {
    let cases: [&[u8]; 8] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", // TLS ClientHello
        b"GET\x00/ HTTP/1.1\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        b"GET / FTP/1.1\r\n\r\n",
        b"GET  HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
        b"\xff\xff\xff\xff",
    ];
    for c in cases {
        let r = parse_request(c);
        assert_eq!(
            r.map_err(|e| e.status),
            Err(400),
            "{:?}",
            String::from_utf8_lossy(c)
        );
    }
}

#[test]
fn write_101_exact_bytes() {
    let mut out = Vec::new();
    write_101::<&str, &str>(&mut out, ACCEPT, None, None, &[]);
    assert_eq!(
        out,
        b"HTTP/1.1 101 Switching Protocols\r\n\
          Upgrade: websocket\r\n\
          Connection: Upgrade\r\n\
          Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
          \r\n"
    );

    let mut out2 = Vec::new();
    write_101::<&str, &str>(&mut out2, ACCEPT, Some(""), Some(""), &[]);
    assert_eq!(out2, out, "empty values are omitted");

    let mut out = b"prefix".to_vec();
    write_101(
        &mut out,
        ACCEPT,
        Some("chat"),
        Some("permessage-deflate; server_no_context_takeover"),
        &[("X-Hello", "world")],
    );
    assert_eq!(
        out,
        b"prefixHTTP/1.1 101 Switching Protocols\r\n\
          Upgrade: websocket\r\n\
          Connection: Upgrade\r\n\
          Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
          Sec-WebSocket-Protocol: chat\r\n\
          Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n\
          X-Hello: world\r\n\
          \r\n"
    );

    let mut out = Vec::new();
    write_101::<&str, &str>(&mut out, ACCEPT, Some("chat"), None, &[]);
    assert!(out.ends_with(b"Sec-WebSocket-Protocol: chat\r\n\r\n"));

    // no header injection through application-chosen values
    let mut out = Vec::new();
    write_101::<&str, &str>(&mut out, ACCEPT, Some("a\r\nSet-Cookie: x"), None, &[]);
    assert!(out.ends_with(b"Sec-WebSocket-Protocol: aSet-Cookie: x\r\n\r\n"));

    // an application's headers: never the handshake's own, never a name that is not a token,
    // never a line break in a value
    let mut out = Vec::new();
    let extra = [("Upgrade", "h2c"), ("sec-websocket-accept", "x"), ("Bad Name", "1"), ("X-A", "1\r\nX-B: 2"), ("Set-Cookie", "s=1")];
    write_101(&mut out, ACCEPT, None, None, &extra);
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nX-A: 1X-B: 2\r\nSet-Cookie: s=1\r\n\r\n"), "{text}");
}

#[test]
fn write_refusal_with_the_applications_status_line_and_headers() {
    let mut out = Vec::new();
    let headers = [("WWW-Authenticate", "Token"), ("Content-Length", "999"), ("Connection", "keep-alive")];
    write_refusal(&mut out, 401, Some("Who Are You"), &headers, "go away");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 401 Who Are You\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\
         WWW-Authenticate: Token\r\n\r\ngo away"
    );
    let mut out = Vec::new();
    write_refusal(&mut out, 302, Some("\r\nEvil: 1"), &[("Location", "/elsewhere"), ("Content-Type", "text/html")], "");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 302 Found\r\nContent-Length: 0\r\nConnection: close\r\nLocation: /elsewhere\r\nContent-Type: text/html\r\n\r\n"
    );
}

#[test]
fn write_error_exact_bytes() {
    let mut out = Vec::new();
    write_error(&mut out, 400, "Not a valid websocket request");
    assert_eq!(
        out,
        b"HTTP/1.1 400 Bad Request\r\n\
          Content-Type: text/plain\r\n\
          Content-Length: 29\r\n\
          Connection: close\r\n\
          \r\n\
          Not a valid websocket request"
    );

    let mut out = Vec::new();
    write_error(&mut out, 426, "Unsupported WebSocket version");
    assert_eq!(
        out,
        b"HTTP/1.1 426 Upgrade Required\r\n\
          Content-Type: text/plain\r\n\
          Content-Length: 29\r\n\
          Connection: close\r\n\
          Sec-WebSocket-Version: 13\r\n\
          \r\n\
          Unsupported WebSocket version"
    );

    let mut out = Vec::new();
    write_error(&mut out, 404, "");
    assert_eq!(
        out,
        b"HTTP/1.1 404 Not Found\r\n\
          Content-Type: text/plain\r\n\
          Content-Length: 0\r\n\
          Connection: close\r\n\
          \r\n"
    );

    for (status, reason) in [
        (403, "Forbidden"),
        (405, "Method Not Allowed"),
        (431, "Request Header Fields Too Large"),
        (500, "Internal Server Error"),
        (503, "Service Unavailable"),
    ] {
        let mut out = Vec::new();
        write_error(&mut out, status, "x");
        let line = format!("HTTP/1.1 {status} {reason}\r\n");
        assert!(out.starts_with(line.as_bytes()), "{status}");
        assert!(out.ends_with(b"Content-Length: 1\r\nConnection: close\r\n\r\nx"));
    }

    // multi-byte body: Content-Length counts bytes
    let mut out = Vec::new();
    write_error(&mut out, 400, "é");
    assert!(out.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\né".as_bytes()));
}

#[test]
fn http_error_display() {
    assert_eq!(
        NOT_WEBSOCKET.to_string(),
        "400 Bad Request: Not a valid websocket request"
    );
}

#[test]
fn random_bytes_never_panic() {
    const ALPHABET: &[u8] = b"GETPOST /?=&HTTP/1.0.1\r\n\r\n:: \t,;aAzZ09-_\x00\x7f\x80\xff";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let base = {
        let mut v = CHROME.as_bytes().to_vec();
        v.extend_from_slice(&MASKED_HELLO);
        v
    };
    let mut seen_ok = 0usize;
    let mut seen_err = 0usize;

    for round in 0..10_000 {
        let buf: Vec<u8> = match round % 3 {
            // arbitrary bytes
            0 => {
                let len = rng.below(256);
                (0..len).map(|_| rng.next_u64().to_le_bytes()[0]).collect()
            }
            // bytes drawn from an HTTP-looking alphabet, with a plausible start
            1 => {
                let len = rng.below(512);
                let mut v = b"GET / HTTP/1.1\r\n".to_vec();
                v.extend((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())]));
                v
            }
            // a valid request with a few random mutations and a random truncation
            _ => {
                let mut v = base.clone();
                for _ in 0..=rng.below(4) {
                    let i = rng.below(v.len());
                    v[i] = rng.next_u64().to_le_bytes()[0];
                }
                v.truncate(rng.below(v.len() + 1));
                v
            }
        };

        match parse_request(&buf) {
            Ok(Some((req, n))) => {
                seen_ok += 1;
                assert!(n <= buf.len());
                assert!(n <= MAX_HEAD_BYTES);
                assert!(req.headers.len() <= MAX_HEADERS);
                let _ = req.path();
                if let Err(e) = validate(&req) {
                    let mut out = Vec::new();
                    write_error(&mut out, e.status, e.message);
                    assert!(out.starts_with(b"HTTP/1.1 "));
                }
            }
            Ok(None) => assert!(buf.len() < MAX_HEAD_BYTES),
            Err(e) => {
                seen_err += 1;
                assert!(e.status == 400 || e.status == 431, "{e:?}");
            }
        }
    }
    assert!(seen_ok > 0 && seen_err > 0, "ok={seen_ok} err={seen_err}");
}

#[test]
fn absolute_form_request_target_is_routed_by_its_path() {
    let head = b"GET http://127.0.0.1:3000/websocket?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let (req, n) = parse_request(head).unwrap().unwrap();
    assert_eq!(n, head.len());
    assert_eq!(req.url, "/websocket?x=1");
    assert_eq!(req.path(), "/websocket");
}

#[test]
fn a_malformed_target_is_refused_alike_from_raw_bytes_and_from_node() {
    for target in ["*", "http://%", "/ws%zz", "http://h:99999/ws"] {
        let head = format!(
            "GET {target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {KEY}\r\n\r\n"
        );
        let (raw, _) = parse_request(head.as_bytes()).unwrap().unwrap();
        let flat: Vec<String> = good().headers.into_iter().flat_map(|(n, v)| [n, v]).collect();
        let adopted = Request::parsed_elsewhere("GET".into(), target, "1.1", &flat);
        for req in [&raw, &adopted] {
            let e = validate(req).unwrap_err();
            assert_eq!((e.status, e.message), (400, "Invalid request target"), "{target}");
            assert_eq!(req.url, target, "kept as sent");
        }
    }
    // a valid origin-form path that URL parsers read as an authority is routed as a path
    let adopted = Request::parsed_elsewhere("GET".into(), "//invalid:99999", "1.1", &[]);
    assert_eq!((adopted.invalid_target, adopted.path()), (false, "//invalid:99999"));
}

#[test]
fn a_request_before_http_1_1_is_refused_like_a_raw_http_1_0_head() {
    let raw = parse_request(b"GET /ws HTTP/1.0\r\nHost: x\r\n\r\n").unwrap_err();
    let adopted = validate(&Request { before_http_1_1: true, ..good() }).unwrap_err();
    assert_eq!(raw, adopted);
    assert_eq!((adopted.status, adopted.message), (400, "HTTP/1.1 required"));
}
