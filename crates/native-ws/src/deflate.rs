//! permessage-deflate (RFC 7692) for the server side.
//!
//! * [`negotiate`] picks the first acceptable `permessage-deflate` offer of a
//!   `Sec-WebSocket-Extensions` request header and builds the response value.
//! * [`Deflater`] compresses one whole message at a time (sync flush, trailing
//!   `00 00 ff ff` removed).
//! * [`Inflater`] decompresses one message at a time, fragment by fragment,
//!   with a hard cap on the inflated size (zip-bomb safe).
//!
//! Pure code: no I/O, no async.
//!
//! ## Window bits and the 8-bit window
//!
//! flate2 only accepts window bits 9..=15 (it asserts, i.e. panics, on 8, both
//! for `Compress` and `Decompress`). zlib itself never deflates with a 256-byte
//! window either: a raw deflate stream requested with 8 bits is refused, and
//! a zlib-wrapped one is silently raised to 9. This module follows zlib:
//!
//! * a peer asking `server_max_window_bits=8` is answered
//!   `server_max_window_bits=8` and we deflate with a 9-bit window. This is
//!   safe because zlib (and zlib-rs, whose algorithms all cap match distances
//!   at `window size - MIN_LOOKAHEAD` = 512 - 262 = 250) never emits a
//!   distance beyond 250 with a 9-bit window, so the output inflates with a
//!   256-byte (8-bit) inflater. The tests check this by decoding the deflate
//!   bit stream and asserting every distance is ≤ 256.
//! * when we tell the client `client_max_window_bits=8`, our inflater uses 9
//!   bits (an inflater with a larger window accepts everything a smaller
//!   deflater produces).
//!
//! ## Integrity
//!
//! Raw deflate has no checksum: a truncated or altered payload may inflate to
//! wrong bytes without any error (same as every zlib-based implementation).
//! Detected cases are reported as [`InflateError::Corrupt`]; in particular the
//! implicit `00 00 ff ff` tail must decode to nothing (it must be the empty
//! stored block that the sender removed), otherwise the message is corrupt.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The tail of a sync flush (empty stored block), removed by the sender and
/// appended again by the receiver.
pub(crate) const SYNC_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Size of the stack buffer the inflater writes into before copying to the
/// caller's vector (bounds every single inflate call).
const INFLATE_CHUNK: usize = 8 * 1024;

/// Smallest capacity step when growing the inflater's output vector.
const INFLATE_MIN_GROW: usize = 4 * 1024;

// ---------------------------------------------------------------------------
// Configuration and negotiation
// ---------------------------------------------------------------------------

/// Server settings, in faye permessage-deflate terms (+ Meteor's threshold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeflateConfig {
    /// Messages shorter than this many bytes are sent uncompressed (checked by
    /// the caller, not by this module).
    pub threshold: usize,
    /// Compression level 0..=9 (values above 9 are treated as 9).
    pub level: u32,
    /// zlib memLevel 1..=9. Accepted for configuration compatibility but NOT
    /// honoured: flate2 fixes memLevel at 8.
    pub mem_level: u8,
    /// zlib strategy 0..=4. Accepted for configuration compatibility but NOT
    /// honoured: flate2 has no strategy control (always the default strategy).
    pub strategy: u8,
    /// Always send `server_no_context_takeover` (reset our deflater after every
    /// message), even when the client did not ask for it.
    pub no_context_takeover: bool,
    /// Server (deflater) window bits, 8..=15 (values outside are clamped).
    /// 8 is announced as 8 but deflated with a 9-bit window (see module docs).
    pub max_window_bits: u8,
    /// Ask the client for `client_no_context_takeover`.
    pub request_no_context_takeover: bool,
    /// Ask the client for `client_max_window_bits=N` (8..=15). Only sent when
    /// the client's offer contains `client_max_window_bits`.
    pub request_max_window_bits: Option<u8>,
}

impl Default for DeflateConfig {
    /// Meteor's defaults: threshold 1024, level 1, mem_level 1, strategy 0,
    /// server no_context_takeover, server window 8 bits, nothing requested from
    /// the client.
    fn default() -> Self {
        DeflateConfig {
            threshold: 1024,
            level: 1,
            mem_level: 1,
            strategy: 0,
            no_context_takeover: true,
            max_window_bits: 8,
            request_no_context_takeover: false,
            request_max_window_bits: None,
        }
    }
}

/// Result of a successful negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Our deflater resets after every message.
    pub server_no_context_takeover: bool,
    /// The client resets its deflater after every message (our inflater may
    /// reset too).
    pub client_no_context_takeover: bool,
    /// Window bits our deflater uses (9..=15, never 8).
    pub server_window_bits: u8,
    /// Window bits our inflater needs (9..=15): 15 unless we told the client a
    /// smaller `client_max_window_bits` (an answered 8 gives 9).
    pub client_window_bits: u8,
    /// Exact `Sec-WebSocket-Extensions` response value, e.g.
    /// `"permessage-deflate; server_no_context_takeover; server_max_window_bits=9"`.
    pub response: String,
}

/// One parsed, syntactically and semantically valid permessage-deflate offer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Offer {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    /// `server_max_window_bits=N` (a value is mandatory).
    server_max_window_bits: Option<u8>,
    /// `client_max_window_bits` present: `Some(None)` bare, `Some(Some(n))` with a value.
    client_max_window_bits: Option<Option<u8>>,
}

/// Pick the first acceptable `permessage-deflate` offer in `offers` (the
/// request's `Sec-WebSocket-Extensions` values joined with commas).
///
/// An offer is unacceptable (and the next one is tried) when it has an
/// unknown parameter, a duplicate parameter, a value on
/// `server_no_context_takeover` / `client_no_context_takeover`, a missing
/// value on `server_max_window_bits`, a window value that is not a decimal
/// 8..=15 without leading zeros (token or quoted string), or broken syntax.
/// Other extensions are skipped. Names are compared ASCII case-insensitively.
///
/// Response rules, in this order after `permessage-deflate`:
/// * `server_no_context_takeover` if the client asked for it or
///   `cfg.no_context_takeover`;
/// * `client_no_context_takeover` if the client asked for it or
///   `cfg.request_no_context_takeover`;
/// * `server_max_window_bits=N` only if the client offered
///   `server_max_window_bits`, with N = min(offered, cfg.max_window_bits).
///   N = 8 is answered as 8 and deflated with 9 bits. When the client did not
///   offer it, nothing is answered and the deflater silently uses
///   max(cfg.max_window_bits, 9) bits (a sender may always use a smaller
///   window).
/// * `client_max_window_bits=M` only if the client offered
///   `client_max_window_bits` AND `cfg.request_max_window_bits` is `Some(r)`:
///   M = min(r, offered value or 15). A bare `client_max_window_bits` is never
///   sent (invalid in a response).
///
/// Inflater window: max(M, 9) when `client_max_window_bits=M` was answered,
/// else 15.
///
/// Returns `None` when no offer is acceptable (then no extension header is
/// sent). Never panics.
pub fn negotiate(offers: &str, cfg: &DeflateConfig) -> Option<Negotiated> {
    let offer = split_outside_quotes(offers, b',')
        .into_iter()
        .filter_map(parse_element)
        .find_map(|(name, params)| {
            if name.eq_ignore_ascii_case("permessage-deflate") {
                parse_offer(&params)
            } else {
                None
            }
        })?;
    Some(build_response(&offer, cfg))
}

fn build_response(offer: &Offer, cfg: &DeflateConfig) -> Negotiated {
    let server_no_context_takeover = offer.server_no_context_takeover || cfg.no_context_takeover;
    let client_no_context_takeover =
        offer.client_no_context_takeover || cfg.request_no_context_takeover;

    let mut response = String::from("permessage-deflate");
    if server_no_context_takeover {
        response.push_str("; server_no_context_takeover");
    }
    if client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }

    let our_server_bits = cfg.max_window_bits.clamp(8, 15);
    let server_window_bits = match offer.server_max_window_bits {
        Some(offered) => {
            let answered = offered.min(our_server_bits);
            response.push_str("; server_max_window_bits=");
            response.push_str(&answered.to_string());
            answered.max(9)
        }
        None => our_server_bits.max(9),
    };

    let client_window_bits = match (offer.client_max_window_bits, cfg.request_max_window_bits) {
        (Some(offered), Some(requested)) => {
            let answered = requested.clamp(8, 15).min(offered.unwrap_or(15));
            response.push_str("; client_max_window_bits=");
            response.push_str(&answered.to_string());
            answered.max(9)
        }
        _ => 15,
    };

    Negotiated {
        server_no_context_takeover,
        client_no_context_takeover,
        server_window_bits,
        client_window_bits,
        response,
    }
}

/// Validate the parameters of one permessage-deflate offer.
fn parse_offer(params: &[Param<'_>]) -> Option<Offer> {
    let mut offer = Offer::default();
    for (name, value) in params {
        if name.eq_ignore_ascii_case("server_no_context_takeover") {
            if value.is_some() || offer.server_no_context_takeover {
                return None;
            }
            offer.server_no_context_takeover = true;
        } else if name.eq_ignore_ascii_case("client_no_context_takeover") {
            if value.is_some() || offer.client_no_context_takeover {
                return None;
            }
            offer.client_no_context_takeover = true;
        } else if name.eq_ignore_ascii_case("server_max_window_bits") {
            if offer.server_max_window_bits.is_some() {
                return None;
            }
            offer.server_max_window_bits = Some(parse_window_bits(value.as_deref()?)?);
        } else if name.eq_ignore_ascii_case("client_max_window_bits") {
            if offer.client_max_window_bits.is_some() {
                return None;
            }
            offer.client_max_window_bits = Some(match value {
                None => None,
                Some(v) => Some(parse_window_bits(v)?),
            });
        } else {
            return None;
        }
    }
    Some(offer)
}

/// A decimal 8..=15 without leading zeros.
fn parse_window_bits(v: &str) -> Option<u8> {
    if v.is_empty() || v.len() > 2 || v.starts_with('0') || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u8 = v.parse().ok()?;
    (8..=15).contains(&n).then_some(n)
}

/// RFC 7230 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_tchar)
}

/// Split `s` at every `sep` byte that is not inside a quoted string
/// (backslash escapes honoured inside quotes). An unterminated quote simply
/// runs to the end of `s`; the piece holding it fails validation later.
fn split_outside_quotes(s: &str, sep: u8) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_quotes {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_quotes = false;
            }
        } else if b == b'"' {
            in_quotes = true;
        } else if b == sep {
            // `sep` is ASCII, so `start..i` are char boundaries.
            pieces.push(&s[start..i]);
            start = i + 1;
        }
    }
    pieces.push(&s[start..]);
    pieces
}

/// An extension parameter: name and (unquoted) value.
type Param<'a> = (&'a str, Option<String>);

/// Parse one extension element `name *( ";" param [ "=" value ] )`.
/// Returns `None` for empty elements and for elements with broken syntax.
fn parse_element(element: &str) -> Option<(&str, Vec<Param<'_>>)> {
    let parts = split_outside_quotes(element, b';');
    let name = parts[0].trim_ascii();
    if !is_token(name) {
        return None;
    }
    let mut params = Vec::with_capacity(parts.len() - 1);
    for part in &parts[1..] {
        let part = part.trim_ascii();
        let (pname, value) = match part.split_once('=') {
            Some((n, v)) => (n.trim_ascii(), Some(parse_value(v.trim_ascii())?)),
            None => (part, None),
        };
        if !is_token(pname) {
            return None;
        }
        params.push((pname, value));
    }
    Some((name, params))
}

/// A parameter value: a token or a quoted string (returned unquoted).
fn parse_value(v: &str) -> Option<String> {
    let Some(rest) = v.strip_prefix('"') else {
        return is_token(v).then(|| v.to_string());
    };
    let mut value = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?),
            // The closing quote must end the value.
            '"' => return chars.as_str().is_empty().then_some(value),
            _ => value.push(c),
        }
    }
    None // unterminated
}

// ---------------------------------------------------------------------------
// Compression
// ---------------------------------------------------------------------------

/// Message compressor (raw deflate, one sync-flushed chunk per message).
///
/// memLevel is fixed at 8 and the strategy at the default by flate2.
pub struct Deflater {
    inner: Compress,
    no_context_takeover: bool,
}

impl Deflater {
    /// `level` 0..=9 (higher is treated as 9); `window_bits` 9..=15 (8 is
    /// raised to 9, values outside are clamped). With `no_context_takeover`
    /// the stream is reset after every message.
    pub fn new(level: u32, window_bits: u8, no_context_takeover: bool) -> Self {
        let inner = Compress::new_with_window_bits(
            Compression::new(level.min(9)),
            false,
            window_bits.clamp(9, 15),
        );
        Deflater {
            inner,
            no_context_takeover,
        }
    }

    /// Compress one whole message and APPEND the payload (sync-flushed, the
    /// trailing `00 00 ff ff` removed) to `out`, growing it as needed. With
    /// no_context_takeover the stream is reset after the message.
    ///
    /// Empty input produces the single byte `0x00` (RFC 7692 §7.2.3.6).
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if input.is_empty() {
            // An empty non-final stored block header; the receiver's appended
            // 00 00 ff ff completes it. Our stream is byte-aligned after the
            // previous sync flush, and the window is unaffected.
            out.push(0x00);
            return;
        }
        let start = out.len();
        if !self.deflate_into(input, out) {
            // Not expected to happen with a healthy flate2 stream; never panic
            // in a server: send the message as stored blocks from a fresh
            // stream (the peer's window may keep old data; we never refer to it).
            out.truncate(start);
            self.inner.reset();
            push_stored_blocks(input, out);
        }
        if self.no_context_takeover {
            self.inner.reset();
        }
    }

    /// Returns false if the deflater failed or its output did not end with
    /// the sync-flush marker.
    fn deflate_into(&mut self, input: &[u8], out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let mut pos = 0;
        loop {
            let want = (input.len() - pos) / 2 + 128;
            if out.capacity() - out.len() < want {
                out.reserve(want);
            }
            let (in0, out0) = (self.inner.total_in(), self.inner.total_out());
            let res = self
                .inner
                .compress_vec(&input[pos..], out, FlushCompress::Sync);
            let consumed = (self.inner.total_in() - in0) as usize;
            let produced = (self.inner.total_out() - out0) as usize;
            pos += consumed;
            if res.is_err() {
                return false;
            }
            let has_space = out.len() < out.capacity();
            if pos == input.len() && has_space {
                // All input taken and output not full: the flush is complete.
                break;
            }
            if consumed == 0 && produced == 0 && has_space {
                return false; // no progress possible
            }
        }
        if out[start..].ends_with(&SYNC_TAIL) {
            out.truncate(out.len() - SYNC_TAIL.len());
            true
        } else {
            false
        }
    }
}

/// Fallback payload: the message as non-final stored blocks followed by the
/// header byte of the empty stored block whose LEN/NLEN (`00 00 ff ff`) the
/// receiver appends.
fn push_stored_blocks(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(input.len() + input.len() / 65535 * 5 + 6);
    for chunk in input.chunks(65535) {
        let len = chunk.len() as u16;
        out.push(0x00);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.push(0x00);
}

// ---------------------------------------------------------------------------
// Decompression
// ---------------------------------------------------------------------------

/// Why inflating a message failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InflateError {
    /// inflated size would exceed the cap → close 1009
    TooBig,
    /// corrupt deflate data → close 1007
    Corrupt,
}

/// Message decompressor for one connection (raw inflate). Constructing it is
/// cheap enough to do lazily, on the first compressed message.
///
/// A sender may end a message with a final (`BFINAL`) block instead of a sync
/// flush (RFC 7692 §7.2.3.5): the rest of that message is then ignored, as
/// zlib does, and the stream restarts for the next message.
///
/// The window size bounds memory only: zlib(-rs) also resolves distances
/// against output written during the same call, so a sender exceeding the
/// negotiated window is not reliably reported as corrupt.
pub struct Inflater {
    inner: Decompress,
    no_context_takeover: bool,
    /// A final block ended the deflate stream inside the current message.
    stream_ended: bool,
}

impl Inflater {
    /// `window_bits` 9..=15 (8 is raised to 9, values outside are clamped).
    /// With `no_context_takeover` the stream is reset after every message.
    pub fn new(window_bits: u8, no_context_takeover: bool) -> Self {
        Inflater {
            inner: Decompress::new_with_window_bits(false, window_bits.clamp(9, 15)),
            no_context_takeover,
            stream_ended: false,
        }
    }

    /// Feed the next compressed fragment of the current message; APPEND the
    /// inflated bytes to `out`.
    ///
    /// `max_len` caps the whole inflated message (pass the same `out` for
    /// every fragment): `out.len()` never exceeds it, `out` is grown in steps
    /// up to at most `max_len` of capacity, and `Err(TooBig)` is returned as
    /// soon as one more byte would be needed.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), InflateError> {
        self.inflate(input, out, max_len, FlushDecompress::None)
    }

    /// End of message: inflate the implicit `00 00 ff ff` tail (same cap; it
    /// must decode to nothing, else `Corrupt`), then reset the stream if
    /// no_context_takeover (or if the sender ended the deflate stream).
    pub fn finish(&mut self, out: &mut Vec<u8>, max_len: usize) -> Result<(), InflateError> {
        if !self.stream_ended {
            let before = out.len();
            self.inflate(&SYNC_TAIL, out, max_len, FlushDecompress::Sync)?;
            if out.len() != before && !self.stream_ended {
                return Err(InflateError::Corrupt);
            }
        }
        if self.no_context_takeover || self.stream_ended {
            self.reset();
        }
        Ok(())
    }

    /// Drop any partial-message state and the window (fresh stream).
    pub fn reset(&mut self) {
        self.inner.reset(false);
        self.stream_ended = false;
    }

    fn inflate(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_len: usize,
        flush: FlushDecompress,
    ) -> Result<(), InflateError> {
        if self.stream_ended {
            return Ok(()); // trailing bytes after a final block are ignored
        }
        if out.len() > max_len {
            return Err(InflateError::TooBig);
        }
        let mut chunk = [0u8; INFLATE_CHUNK];
        let mut pos = 0;
        loop {
            let room = max_len - out.len();
            // One byte more than the room: producing it proves the message is
            // too big, without ever growing `out` past the cap.
            let limit = INFLATE_CHUNK.min(room.saturating_add(1));
            let (in0, out0) = (self.inner.total_in(), self.inner.total_out());
            let res = self
                .inner
                .decompress(&input[pos..], &mut chunk[..limit], flush);
            let consumed = (self.inner.total_in() - in0) as usize;
            let produced = (self.inner.total_out() - out0) as usize;
            pos += consumed;
            // Bytes produced before a decode error count first, so the error reported depends
            // on the stream, never on where the sender cut it into fragments.
            if produced > room {
                return Err(InflateError::TooBig);
            }
            let status = res.map_err(|_| InflateError::Corrupt)?;
            if produced > 0 {
                append_capped(out, &chunk[..produced], max_len);
            }
            if status == Status::StreamEnd {
                self.stream_ended = true;
                return Ok(());
            }
            if produced == limit {
                continue; // output full: more may be pending
            }
            if pos == input.len() {
                return Ok(());
            }
            if consumed == 0 && produced == 0 {
                // Input left, output space left, no progress: not a valid stream.
                return Err(InflateError::Corrupt);
            }
        }
    }
}

/// Append `data` to `out` (the caller guarantees `out.len() + data.len() <=
/// max_len`), growing the capacity geometrically but never past `max_len`.
fn append_capped(out: &mut Vec<u8>, data: &[u8], max_len: usize) {
    let needed = out.len() + data.len();
    if needed > out.capacity() {
        let target = out
            .capacity()
            .saturating_mul(2)
            .max(INFLATE_MIN_GROW)
            .min(max_len)
            .max(needed);
        out.reserve_exact(target - out.len());
    }
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests;
