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
    /// request target in origin form (path + optional "?query"; an absolute-form target is
    /// reduced to it, see [`crate::target::origin_form`]); a refused target as it was sent
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// An HTTP/1.0 (or older) request: refused with 400 "HTTP/1.1 required" (RFC 6455 §4.1
    /// needs HTTP/1.1 or higher). Raw heads are refused while parsing; a request parsed by Node
    /// carries its version here so both entry points answer alike.
    pub before_http_1_1: bool,
    /// The target is not acceptable ([`crate::target`]): refused with 400 "Invalid request
    /// target" by [`validate`], whichever entry point parsed it.
    pub invalid_target: bool,
}

impl Request {
    /// A request another HTTP server parsed (Node's `upgrade` event): its method, target as sent
    /// (absolute-form is reduced to origin form), HTTP version ("1.1") and flat header list
    /// (name, value, name, value, ...).
    pub fn parsed_elsewhere(method: String, target: &str, http_version: &str, flat_headers: &[String]) -> Request {
        let origin = crate::target::origin_form(target);
        Request {
            method,
            invalid_target: origin.is_none(),
            url: origin.map_or_else(|| target.to_owned(), std::borrow::Cow::into_owned),
            headers: flat_headers.chunks_exact(2).map(|p| (p[0].to_ascii_lowercase(), p[1].clone())).collect(),
            before_http_1_1: matches!(http_version, "1.0" | "0.9"),
        }
    }

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
const BAD_TARGET: HttpError = HttpError::new(400, "Invalid request target");
const BAD_HEADER_VALUE: HttpError = HttpError::new(400, "Header value is not valid UTF-8");
const HEAD_TOO_LARGE: HttpError = HttpError::new(431, "Request header fields too large");
const METHOD_NOT_ALLOWED: HttpError = HttpError::new(405, "Method not allowed");
const BAD_VERSION: HttpError = HttpError::new(426, "Unsupported WebSocket version");

/// The only `Sec-WebSocket-Version` we speak (RFC 6455).
const WS_VERSION: &str = "13";

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

    let origin = crate::target::origin_form(url);
    Ok(Some((
        Request {
            method: method.to_owned(),
            invalid_target: origin.is_none(),
            url: origin.map_or_else(|| url.to_owned(), std::borrow::Cow::into_owned),
            headers,
            before_http_1_1: false,
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
    if req.before_http_1_1 {
        return Err(NEED_HTTP_11);
    }
    if req.invalid_target {
        return Err(BAD_TARGET);
    }
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
    if version.trim_matches(is_ows) != WS_VERSION {
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

/// Headers a 101 response sets itself: an application's headers of these names are not written.
const OWN_101_HEADERS: [&str; 5] =
    ["upgrade", "connection", "sec-websocket-accept", "sec-websocket-protocol", "sec-websocket-extensions"];
/// Headers a refusal sets itself (the body's length, closing the connection).
const OWN_REFUSAL_HEADERS: [&str; 3] = ["content-length", "connection", "transfer-encoding"];

/// Append the 101 response: "HTTP/1.1 101 Switching Protocols", Upgrade: websocket,
/// Connection: Upgrade, Sec-WebSocket-Accept, and Sec-WebSocket-Protocol / Sec-WebSocket-Extensions
/// only when Some and non-empty, then the application's `extra` headers (uWS's `writeHeader`
/// before `upgrade`; see [`OWN_101_HEADERS`]); ends with the blank line.
///
/// CR, LF and NUL bytes are dropped from the header values, and header names that are not HTTP
/// tokens are skipped, so a value chosen by application code can never inject extra lines.
pub fn write_101<N: AsRef<str>, V: AsRef<str>>(
    out: &mut Vec<u8>,
    accept: &str,
    protocol: Option<&str>,
    extensions: Option<&str>,
    extra: &[(N, V)],
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
    write_app_headers(out, extra, &OWN_101_HEADERS);
    out.extend_from_slice(b"\r\n");
}

/// Append an error response of the core: status line with the standard reason phrase,
/// "Content-Type: text/plain", "Content-Length", "Connection: close", and for 426 also
/// "Sec-WebSocket-Version: 13"; then the body `message`. See [`write_refusal`].
pub fn write_error(out: &mut Vec<u8>, status: u16, message: &str) {
    write_refusal::<&str, &str>(out, status, None, &[], message);
}

/// Append a refusal: the status line (a status outside 100..=999 cannot be written there and is
/// sent as 500; `reason` is the reason phrase, printable ASCII, the standard one when None or
/// empty), "Content-Type: text/plain" unless `headers` has a Content-Type, "Content-Length",
/// "Connection: close", for 426 "Sec-WebSocket-Version: 13", then `headers` (see
/// [`OWN_REFUSAL_HEADERS`]) and the body `message`.
pub fn write_refusal<N: AsRef<str>, V: AsRef<str>>(
    out: &mut Vec<u8>,
    status: u16,
    reason: Option<&str>,
    headers: &[(N, V)],
    message: &str,
) {
    let status = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    let reason = reason
        .map(|r| r.trim_matches(is_ows))
        .filter(|r| !r.is_empty() && r.bytes().all(|b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b)))
        .unwrap_or_else(|| reason_phrase(status));
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    if !headers.iter().any(|(n, _)| n.as_ref().eq_ignore_ascii_case("content-type")) {
        out.extend_from_slice(b"Content-Type: text/plain\r\n");
    }
    write_header(out, "Content-Length", &message.len().to_string());
    out.extend_from_slice(b"Connection: close\r\n");
    if status == BAD_VERSION.status {
        write_header(out, "Sec-WebSocket-Version", WS_VERSION);
    }
    write_app_headers(out, headers, &OWN_REFUSAL_HEADERS);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(message.as_bytes());
}

/// Write an application's headers, skipping names that are not HTTP tokens and names in `own`.
fn write_app_headers<N: AsRef<str>, V: AsRef<str>>(out: &mut Vec<u8>, headers: &[(N, V)], own: &[&str]) {
    for (name, value) in headers {
        let name = name.as_ref();
        let token = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if token && !own.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            write_header(out, name, value.as_ref());
        }
    }
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
mod tests;
