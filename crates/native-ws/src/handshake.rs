//! The HTTP/1.1 WebSocket opening handshake, server side (RFC 6455 §4.2).
//!
//! Everything here is pure: no I/O and no async runtime. A request head reaches us in one of
//! two ways:
//!
//! * raw bytes read from a socket, parsed with [`parse_request`] (backed by `httparse`);
//! * a request that Node's http server already parsed (method, url, header list), which the
//!   caller turns into a [`Request`] directly when adopting a socket from the `upgrade` event.
//!
//! Both paths then go through [`validate`], and the caller answers with [`write_101`] or
//! [`write_error`].

use base64::Engine as _;

/// A parsed HTTP request head. Header names are lower-cased; values keep their bytes as text
/// (reject non-UTF-8 header values with 400). Order and repeats preserved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// request target as sent (path + optional "?query")
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// First value of header `name` (lower-case name expected).
    ///
    /// The comparison is ASCII case-insensitive, so a header list built from Node's
    /// `rawHeaders` without lower-casing still works.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All values of `name` joined with ", " (how repeated headers combine), None if absent.
    #[must_use]
    pub fn header_joined(&self, name: &str) -> Option<String> {
        let mut values = self.values(name);
        let first = values.next()?;
        let mut joined = String::from(first);
        for v in values {
            joined.push_str(", ");
            joined.push_str(v);
        }
        Some(joined)
    }

    /// The url without the query string.
    #[must_use]
    pub fn path(&self) -> &str {
        match self.url.find('?') {
            Some(i) => &self.url[..i],
            None => &self.url,
        }
    }

    /// Every value of header `name`, in order.
    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP-level refusal: answer with this status and close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// 400, 404, 405, 426, 431, 403, 500, 503 ...
    pub status: u16,
    /// short text/plain body, e.g. "Not a valid websocket request"
    pub message: &'static str,
}

impl HttpError {
    const fn new(status: u16, message: &'static str) -> Self {
        HttpError { status, message }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status,
            reason_phrase(self.status),
            self.message
        )
    }
}

impl std::error::Error for HttpError {}

/// Limits for reading a request head from raw bytes.
pub const MAX_HEAD_BYTES: usize = 16 * 1024; // over → 431
pub const MAX_HEADERS: usize = 100; // over → 431

const NOT_WEBSOCKET: HttpError = HttpError::new(400, "Not a valid websocket request");
const MALFORMED: HttpError = HttpError::new(400, "Malformed HTTP request");
const NEED_HTTP_11: HttpError = HttpError::new(400, "HTTP/1.1 required");
const BAD_HEADER_VALUE: HttpError = HttpError::new(400, "Header value is not valid UTF-8");
const HEAD_TOO_LARGE: HttpError = HttpError::new(431, "Request header fields too large");
const METHOD_NOT_ALLOWED: HttpError = HttpError::new(405, "Method not allowed");
const BAD_VERSION: HttpError = HttpError::new(426, "Unsupported WebSocket version");

/// The GUID of RFC 6455 §1.3, appended to the client key before hashing.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Try to parse a request head at the start of `buf`. Ok(None) = incomplete (need more bytes;
/// but if `buf.len() >= MAX_HEAD_BYTES` with no complete head → Err 431).
/// On success returns the request and the number of bytes consumed (bytes after it belong to the
/// WebSocket stream). Malformed → Err 400. Too many headers → 431. HTTP/1.0 → 400 (upgrade needs 1.1).
///
/// # Errors
/// The [`HttpError`] to answer with: 400 for a malformed head, HTTP/1.0, or a non-UTF-8 header
/// value; 431 for a head over [`MAX_HEAD_BYTES`] or with more than [`MAX_HEADERS`] headers.
pub fn parse_request(buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
    // Never look past the limit: a head that has not ended within MAX_HEAD_BYTES is refused,
    // and this keeps re-parsing of a growing buffer bounded.
    let window = &buf[..buf.len().min(MAX_HEAD_BYTES)];

    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    let consumed = match parsed.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() >= MAX_HEAD_BYTES {
                Err(HEAD_TOO_LARGE)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HEAD_TOO_LARGE),
        Err(_) => return Err(MALFORMED),
    };

    // On Complete httparse has filled all three; treat anything else as malformed.
    let (Some(method), Some(url), Some(version)) = (parsed.method, parsed.path, parsed.version)
    else {
        return Err(MALFORMED);
    };
    if version != 1 {
        return Err(NEED_HTTP_11);
    }

    let mut headers = Vec::with_capacity(parsed.headers.len());
    for h in parsed.headers.iter() {
        let value = std::str::from_utf8(h.value).map_err(|_| BAD_HEADER_VALUE)?;
        headers.push((
            h.name.to_ascii_lowercase(),
            value.trim_matches(is_ows).to_owned(),
        ));
    }

    Ok(Some((
        Request {
            method: method.to_owned(),
            url: url.to_owned(),
            headers,
        },
        consumed,
    )))
}

/// What a valid upgrade request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    /// Sec-WebSocket-Accept value to send back.
    pub accept: String,
    /// Offered subprotocols in order (Sec-WebSocket-Protocol, comma separated, trimmed, all header lines).
    pub protocols: Vec<String>,
    /// Raw Sec-WebSocket-Extensions offers, all header lines joined with ", " ("" if none).
    pub extensions: String,
}

/// Validate a WebSocket upgrade request (RFC 6455 §4.2.1):
/// method GET (else 405); `Upgrade` header contains the token "websocket" (case-insensitive,
/// comma-separated token list) (else 400); `Connection` contains the token "upgrade" (case-insensitive,
/// token list like "keep-alive, Upgrade") (else 400); `Sec-WebSocket-Version` is exactly "13"
/// (missing → 400, other → 426); `Sec-WebSocket-Key` present, exactly one, base64 that decodes to 16 bytes
/// (else 400). The 400 message is "Not a valid websocket request".
///
/// # Errors
/// The [`HttpError`] to answer with when the request is not an acceptable upgrade (405, 400, 426).
pub fn validate(req: &Request) -> Result<Upgrade, HttpError> {
    if req.method != "GET" {
        return Err(METHOD_NOT_ALLOWED);
    }

    let upgrade = req.header_joined("upgrade").ok_or(NOT_WEBSOCKET)?;
    if !has_token(&upgrade, "websocket") {
        return Err(NOT_WEBSOCKET);
    }

    let connection = req.header_joined("connection").ok_or(NOT_WEBSOCKET)?;
    if !has_token(&connection, "upgrade") {
        return Err(NOT_WEBSOCKET);
    }

    let version = req
        .header_joined("sec-websocket-version")
        .ok_or(NOT_WEBSOCKET)?;
    if version.trim_matches(is_ows) != "13" {
        return Err(BAD_VERSION);
    }

    let mut keys = req.values("sec-websocket-key");
    let key = match (keys.next(), keys.next()) {
        (Some(k), None) => k.trim_matches(is_ows),
        _ => return Err(NOT_WEBSOCKET),
    };
    if !is_valid_key(key) {
        return Err(NOT_WEBSOCKET);
    }

    let protocols = req
        .values("sec-websocket-protocol")
        .flat_map(|v| v.split(','))
        .map(|p| p.trim_matches(is_ows))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();

    let extensions = req
        .header_joined("sec-websocket-extensions")
        .unwrap_or_default();

    Ok(Upgrade {
        accept: accept_key(key),
        protocols,
        extensions,
    })
}

/// base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
#[must_use]
pub fn accept_key(key: &str) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key.as_bytes());
    sha.update(WS_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(sha.digest().bytes())
}

/// Append the 101 response: "HTTP/1.1 101 Switching Protocols", Upgrade: websocket,
/// Connection: Upgrade, Sec-WebSocket-Accept, and Sec-WebSocket-Protocol / Sec-WebSocket-Extensions
/// only when Some and non-empty; ends with the blank line.
///
/// CR, LF and NUL bytes are dropped from the header values so a value chosen by application
/// code can never inject extra header lines.
pub fn write_101(
    out: &mut Vec<u8>,
    accept: &str,
    protocol: Option<&str>,
    extensions: Option<&str>,
) {
    out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n");
    out.extend_from_slice(b"Upgrade: websocket\r\n");
    out.extend_from_slice(b"Connection: Upgrade\r\n");
    write_header(out, "Sec-WebSocket-Accept", accept);
    if let Some(p) = protocol.filter(|p| !p.is_empty()) {
        write_header(out, "Sec-WebSocket-Protocol", p);
    }
    if let Some(e) = extensions.filter(|e| !e.is_empty()) {
        write_header(out, "Sec-WebSocket-Extensions", e);
    }
    out.extend_from_slice(b"\r\n");
}

/// Append an error response: status line with the standard reason phrase for the status,
/// "Content-Type: text/plain", "Content-Length", "Connection: close", and for 426 also
/// "Sec-WebSocket-Version: 13"; then the body `message`.
///
/// A status outside 100..=999 cannot be written on a status line and is sent as 500.
pub fn write_error(out: &mut Vec<u8>, status: u16, message: &str) {
    let status = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b"Content-Type: text/plain\r\n");
    write_header(out, "Content-Length", &message.len().to_string());
    out.extend_from_slice(b"Connection: close\r\n");
    if status == 426 {
        out.extend_from_slice(b"Sec-WebSocket-Version: 13\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(message.as_bytes());
}

/// Does request path `path` (no query) match a route pattern? Patterns: "/*" or "*" matches every
/// path; "/prefix/*" matches "/prefix", "/prefix/" and anything under "/prefix/"; any other pattern
/// matches that exact path, and a pattern "/x" also matches "/x/" (trailing slash tolerated).
#[must_use]
pub fn path_matches(pattern: &str, path: &str) -> bool {
    if pattern == "*" || pattern == "/*" {
        return true;
    }
    if let Some(prefix) = pattern.strip_suffix("/*") {
        return match path.strip_prefix(prefix) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        };
    }
    if path == pattern {
        return true;
    }
    !pattern.ends_with('/') && path.strip_suffix('/') == Some(pattern)
}

// ---------------------------------------------------------------------------------------------
// helpers

/// Optional whitespace (RFC 9110 OWS): space or horizontal tab.
fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Does a comma-separated token list contain `token` (ASCII case-insensitive)?
fn has_token(list: &str, token: &str) -> bool {
    list.split(',')
        .any(|t| t.trim_matches(is_ows).eq_ignore_ascii_case(token))
}

/// A Sec-WebSocket-Key must be base64 (with padding) of exactly 16 bytes, i.e. 24 characters.
fn is_valid_key(key: &str) -> bool {
    if key.len() != 24 {
        return false;
    }
    // 24 base64 characters decode to at most 18 bytes.
    let mut raw = [0u8; 18];
    matches!(
        base64::engine::general_purpose::STANDARD.decode_slice(key, &mut raw),
        Ok(16)
    )
}

/// Write "Name: value\r\n", dropping CR/LF/NUL from the value.
fn write_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend(
        value
            .bytes()
            .filter(|&b| b != b'\r' && b != b'\n' && b != 0),
    );
    out.extend_from_slice(b"\r\n");
}

/// The standard reason phrase for a status code (a generic one per class otherwise).
fn reason_phrase(status: u16) -> &'static str {
    if let Some(reason) = standard_reason(status) {
        return reason;
    }
    match status / 100 {
        1 => "Informational",
        2 => "Success",
        3 => "Redirection",
        4 => "Client Error",
        _ => "Server Error",
    }
}

fn standard_reason(status: u16) -> Option<&'static str> {
    Some(match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
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
        write_101(&mut out, ACCEPT, None, None);
        assert_eq!(
            out,
            b"HTTP/1.1 101 Switching Protocols\r\n\
              Upgrade: websocket\r\n\
              Connection: Upgrade\r\n\
              Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
              \r\n"
        );

        let mut out2 = Vec::new();
        write_101(&mut out2, ACCEPT, Some(""), Some(""));
        assert_eq!(out2, out, "empty values are omitted");

        let mut out = b"prefix".to_vec();
        write_101(
            &mut out,
            ACCEPT,
            Some("chat"),
            Some("permessage-deflate; server_no_context_takeover"),
        );
        assert_eq!(
            out,
            b"prefixHTTP/1.1 101 Switching Protocols\r\n\
              Upgrade: websocket\r\n\
              Connection: Upgrade\r\n\
              Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
              Sec-WebSocket-Protocol: chat\r\n\
              Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n\
              \r\n"
        );

        let mut out = Vec::new();
        write_101(&mut out, ACCEPT, Some("chat"), None);
        assert!(out.ends_with(b"Sec-WebSocket-Protocol: chat\r\n\r\n"));

        // no header injection through application-chosen values
        let mut out = Vec::new();
        write_101(&mut out, ACCEPT, Some("a\r\nSet-Cookie: x"), None);
        assert!(out.ends_with(b"Sec-WebSocket-Protocol: aSet-Cookie: x\r\n\r\n"));
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
    fn path_matches_table() {
        let table: &[(&str, &str, bool)] = &[
            ("/*", "/", true),
            ("/*", "/anything/at/all", true),
            ("*", "/", true),
            ("*", "/x", true),
            ("/chat/*", "/chat", true),
            ("/chat/*", "/chat/", true),
            ("/chat/*", "/chat/room", true),
            ("/chat/*", "/chat/room/42", true),
            ("/chat/*", "/chatroom", false),
            ("/chat/*", "/cha", false),
            ("/chat/*", "/", false),
            ("/chat/*", "/other/chat", false),
            ("/a/b/*", "/a/b/c", true),
            ("/a/b/*", "/a/bc", false),
            ("/a/b/*", "/a", false),
            ("/ws", "/ws", true),
            ("/ws", "/ws/", true),
            ("/ws", "/ws//", false),
            ("/ws", "/wss", false),
            ("/ws", "/ws/x", false),
            ("/ws", "/", false),
            ("/ws", "/WS", false),
            ("/", "/", true),
            ("/", "//", false),
            ("/", "/x", false),
            ("/ws/", "/ws/", true),
            ("/ws/", "/ws", false),
            ("/a*", "/a*", true),
            ("/a*", "/ab", false),
        ];
        for &(pattern, path, expected) in table {
            assert_eq!(
                path_matches(pattern, path),
                expected,
                "path_matches({pattern:?}, {path:?})"
            );
        }
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
}
