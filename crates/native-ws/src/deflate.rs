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
const SYNC_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

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

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    // ---- helpers ---------------------------------------------------------

    fn compressible(rng: &mut Rng, n: usize) -> Vec<u8> {
        const WORDS: [&str; 12] = [
            "msg",
            "\"id\":",
            "\"changed\"",
            "collection",
            "fields",
            "{",
            "}",
            ",",
            "users",
            "\"name\":\"",
            "meteor",
            " ",
        ];
        let mut v = Vec::with_capacity(n + 16);
        while v.len() < n {
            v.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
            if rng.below(8) == 0 {
                v.extend_from_slice(rng.next_u64().to_string().as_bytes());
            }
        }
        v.truncate(n);
        v
    }

    fn compress(d: &mut Deflater, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        d.compress(input, &mut out);
        out
    }

    fn inflate_frag(
        inf: &mut Inflater,
        payload: &[u8],
        frag: usize,
        cap: usize,
    ) -> Result<Vec<u8>, InflateError> {
        let mut out = Vec::new();
        if payload.is_empty() {
            inf.feed(&[], &mut out, cap)?;
        }
        for piece in payload.chunks(frag.max(1)) {
            inf.feed(piece, &mut out, cap)?;
            assert!(out.len() <= cap);
        }
        inf.finish(&mut out, cap)?;
        assert!(out.len() <= cap);
        Ok(out)
    }

    fn cfg() -> DeflateConfig {
        DeflateConfig {
            no_context_takeover: false,
            max_window_bits: 15,
            ..DeflateConfig::default()
        }
    }

    fn neg(offers: &str, cfg: &DeflateConfig) -> Option<(String, u8, u8, bool, bool)> {
        negotiate(offers, cfg).map(|n| {
            (
                n.response,
                n.server_window_bits,
                n.client_window_bits,
                n.server_no_context_takeover,
                n.client_no_context_takeover,
            )
        })
    }

    fn resp(offers: &str, cfg: &DeflateConfig) -> Option<String> {
        negotiate(offers, cfg).map(|n| n.response)
    }

    // ---- negotiation -----------------------------------------------------

    #[test]
    fn default_config_is_meteors() {
        let d = DeflateConfig::default();
        assert_eq!(
            d,
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
        );
    }

    #[test]
    fn browsers_and_libraries_with_meteor_defaults() {
        let d = DeflateConfig::default();
        let expected = Some((
            "permessage-deflate; server_no_context_takeover".to_string(),
            9,
            15,
            true,
            false,
        ));
        // Chrome, faye permessage-deflate2 and ws (default) offer the same.
        assert_eq!(
            neg("permessage-deflate; client_max_window_bits", &d),
            expected
        );
        // Firefox
        assert_eq!(neg("permessage-deflate", &d), expected);
    }

    #[test]
    fn browsers_with_plain_config() {
        let c = cfg();
        let expected = Some(("permessage-deflate".to_string(), 15, 15, false, false));
        assert_eq!(
            neg("permessage-deflate; client_max_window_bits", &c),
            expected
        );
        assert_eq!(neg("permessage-deflate", &c), expected);
        // Chrome with our request for a client window.
        let c10 = DeflateConfig {
            request_max_window_bits: Some(10),
            ..cfg()
        };
        assert_eq!(
            neg("permessage-deflate; client_max_window_bits", &c10),
            Some((
                "permessage-deflate; client_max_window_bits=10".to_string(),
                15,
                10,
                false,
                false
            ))
        );
        // Firefox did not offer client_max_window_bits: we may not ask.
        assert_eq!(
            neg("permessage-deflate", &c10),
            Some(("permessage-deflate".to_string(), 15, 15, false, false))
        );
    }

    #[test]
    fn server_max_window_bits_offered() {
        for offered in 8u8..=15 {
            let offer = format!("permessage-deflate; server_max_window_bits={offered}");
            // cfg max 8: answer 8, deflate with 9.
            let c8 = DeflateConfig {
                max_window_bits: 8,
                ..cfg()
            };
            assert_eq!(
                neg(&offer, &c8),
                Some((
                    "permessage-deflate; server_max_window_bits=8".to_string(),
                    9,
                    15,
                    false,
                    false
                )),
                "{offer}"
            );
            // cfg max 15: answer the offered value.
            assert_eq!(
                neg(&offer, &cfg()),
                Some((
                    format!("permessage-deflate; server_max_window_bits={offered}"),
                    offered.max(9),
                    15,
                    false,
                    false
                )),
                "{offer}"
            );
            // cfg max 11: min of both.
            let c11 = DeflateConfig {
                max_window_bits: 11,
                ..cfg()
            };
            let n = negotiate(&offer, &c11).unwrap();
            let answered = offered.min(11);
            assert_eq!(
                n.response,
                format!("permessage-deflate; server_max_window_bits={answered}")
            );
            assert_eq!(n.server_window_bits, answered.max(9));
        }
        // Not offered: smaller window used silently.
        let c12 = DeflateConfig {
            max_window_bits: 12,
            ..cfg()
        };
        assert_eq!(
            neg("permessage-deflate", &c12),
            Some(("permessage-deflate".to_string(), 12, 15, false, false))
        );
    }

    #[test]
    fn client_max_window_bits_offered() {
        let c10 = DeflateConfig {
            request_max_window_bits: Some(10),
            ..cfg()
        };
        let c8 = DeflateConfig {
            request_max_window_bits: Some(8),
            ..cfg()
        };
        for offered in 8u8..=15 {
            let offer = format!("permessage-deflate; client_max_window_bits={offered}");
            let answered = offered.min(10);
            assert_eq!(
                neg(&offer, &c10),
                Some((
                    format!("permessage-deflate; client_max_window_bits={answered}"),
                    15,
                    answered.max(9),
                    false,
                    false
                )),
                "{offer}"
            );
            assert_eq!(
                neg(&offer, &cfg()),
                Some(("permessage-deflate".to_string(), 15, 15, false, false)),
                "{offer}"
            );
            assert_eq!(
                neg(&offer, &c8),
                Some((
                    "permessage-deflate; client_max_window_bits=8".to_string(),
                    15,
                    9,
                    false,
                    false
                )),
                "{offer}"
            );
        }
    }

    #[test]
    fn no_context_takeover_flags() {
        let c = cfg();
        assert_eq!(
            neg(
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
                &c
            ),
            Some((
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                    .to_string(),
                15,
                15,
                true,
                true
            ))
        );
        assert_eq!(
            resp("permessage-deflate; client_no_context_takeover", &c).unwrap(),
            "permessage-deflate; client_no_context_takeover"
        );
        // Unilaterally added by config.
        let both = DeflateConfig {
            no_context_takeover: true,
            request_no_context_takeover: true,
            ..cfg()
        };
        assert_eq!(
            neg("permessage-deflate", &both),
            Some((
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                    .to_string(),
                15,
                15,
                true,
                true
            ))
        );
        let client_only = DeflateConfig {
            request_no_context_takeover: true,
            ..cfg()
        };
        assert_eq!(
            resp("permessage-deflate; client_max_window_bits", &client_only).unwrap(),
            "permessage-deflate; client_no_context_takeover"
        );
    }

    #[test]
    fn everything_at_once() {
        let c = DeflateConfig {
            max_window_bits: 10,
            request_max_window_bits: Some(12),
            no_context_takeover: true,
            request_no_context_takeover: true,
            ..cfg()
        };
        assert_eq!(
            neg(
                "permessage-deflate; client_max_window_bits=11; server_max_window_bits=14",
                &c
            ),
            Some((
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
                 server_max_window_bits=10; client_max_window_bits=11"
                    .to_string(),
                10,
                11,
                true,
                true
            ))
        );
    }

    #[test]
    fn bad_first_offer_good_second() {
        let c = cfg();
        let bad = [
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
            "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
            "permessage-deflate; server_max_window_bits=7",
            "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits=abc",
            "permessage-deflate; server_max_window_bits=010",
            "permessage-deflate; server_max_window_bits=",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; client_max_window_bits=16",
            "permessage-deflate; client_max_window_bits=\"abc\"",
            "permessage-deflate; client_max_window_bits=-9",
            "permessage-deflate; client_max_window_bits=9.0",
            "permessage-deflate; foo",
            "permessage-deflate; foo=1",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; client_no_context_takeover=true",
            "permessage-deflate; client_no_context_takeover=\"\"",
            "permessage-deflate;",
            "permessage-deflate; ; server_no_context_takeover",
            "permessage-deflate; server max_window_bits=10",
            "permessage-deflate; server_max_window_bits=1 0",
        ];
        for b in bad {
            assert_eq!(resp(b, &c), None, "{b}");
            let two = format!("{b}, permessage-deflate; client_max_window_bits");
            assert_eq!(
                neg(&two, &c),
                Some(("permessage-deflate".to_string(), 15, 15, false, false)),
                "{two}"
            );
            let two = format!("{b}, permessage-deflate; server_no_context_takeover");
            assert_eq!(
                resp(&two, &c).as_deref(),
                Some("permessage-deflate; server_no_context_takeover"),
                "{two}"
            );
        }
    }

    #[test]
    fn first_acceptable_offer_wins() {
        let c = cfg();
        assert_eq!(
            resp(
                "permessage-deflate; server_max_window_bits=10, permessage-deflate",
                &c
            )
            .unwrap(),
            "permessage-deflate; server_max_window_bits=10"
        );
        assert_eq!(
            resp(
                "permessage-deflate, permessage-deflate; server_max_window_bits=10",
                &c
            )
            .unwrap(),
            "permessage-deflate"
        );
    }

    #[test]
    fn other_extensions_are_skipped() {
        let c = cfg();
        assert_eq!(
            resp("x-webkit-deflate-frame, permessage-deflate", &c).unwrap(),
            "permessage-deflate"
        );
        assert_eq!(
            resp(
                "x-webkit-deflate-frame; no_context_takeover, foo; bar=\"a, b; c\", \
                 permessage-deflate; server_no_context_takeover",
                &c
            )
            .unwrap(),
            "permessage-deflate; server_no_context_takeover"
        );
        assert_eq!(resp("x-webkit-deflate-frame", &c), None);
        assert_eq!(resp("deflate-frame, perMessage-deflate2", &c), None);
        // Unknown-extension syntax errors do not hide a later good offer.
        assert_eq!(
            resp("foo bar, permessage-deflate", &c).unwrap(),
            "permessage-deflate"
        );
    }

    #[test]
    fn quoted_values() {
        let c = DeflateConfig {
            request_max_window_bits: Some(15),
            ..cfg()
        };
        assert_eq!(
            neg(
                "permessage-deflate; server_max_window_bits=\"10\"; client_max_window_bits=\"12\"",
                &c
            ),
            Some((
                "permessage-deflate; server_max_window_bits=10; client_max_window_bits=12"
                    .to_string(),
                10,
                12,
                false,
                false
            ))
        );
        assert_eq!(
            resp("permessage-deflate; server_max_window_bits=\"1\\1\"", &c).unwrap(),
            "permessage-deflate; server_max_window_bits=11"
        );
        assert_eq!(
            resp("permessage-deflate; server_max_window_bits=\"10\"x", &c),
            None
        );
        assert_eq!(
            resp("permessage-deflate; server_max_window_bits=\"\"", &c),
            None
        );
        assert_eq!(
            resp("permessage-deflate; server_max_window_bits=\"", &c),
            None
        );
    }

    #[test]
    fn whitespace_variations() {
        let c = cfg();
        let expected = "permessage-deflate; server_no_context_takeover; server_max_window_bits=10";
        for offer in [
            "permessage-deflate;server_no_context_takeover;server_max_window_bits=10",
            "  permessage-deflate ;  server_no_context_takeover ; server_max_window_bits = 10  ",
            "\tpermessage-deflate\t;\tserver_no_context_takeover\t;\tserver_max_window_bits=10\t",
            " , ,permessage-deflate; server_no_context_takeover; server_max_window_bits=\"10\" ,",
            "PERMESSAGE-DEFLATE; Server_No_Context_Takeover; SERVER_MAX_WINDOW_BITS=10",
        ] {
            assert_eq!(resp(offer, &c).as_deref(), Some(expected), "{offer:?}");
        }
    }

    #[test]
    fn garbage_and_empty() {
        let c = cfg();
        for g in [
            "",
            " ",
            ",",
            ", ,",
            ";",
            "permessage",
            "permessage-deflate=1",
            "\"permessage-deflate\"",
            "permessage-deflate\"",
            "permessage-deflate; \"",
            "=; ;=",
            "\u{fffd}\u{0}\u{7f}",
            "permessage-deflate; server_max_window_bits=\u{0661}\u{0660}",
            "permessage-deflate; server_max_window_bits=99999999999999999999999",
            "permessage-deflate; client_max_window_bits=1\u{fffd}",
            "\"permessage-deflate, permessage-deflate\"",
        ] {
            assert_eq!(negotiate(g, &c), None, "{g:?}");
        }
        // Random strings over a nasty alphabet must never panic.
        let alphabet = "permssage-deflt_xwindowbits0123456789=;,\" \\\t\u{e9}";
        let chars: Vec<char> = alphabet.chars().collect();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..5000 {
            let n = rng.below(60);
            let s: String = (0..n).map(|_| chars[rng.below(chars.len())]).collect();
            let _ = negotiate(&s, &c);
            let _ = negotiate(&format!("permessage-deflate; {s}"), &c);
        }
    }

    #[test]
    fn out_of_range_config_is_clamped() {
        let c = DeflateConfig {
            max_window_bits: 200,
            request_max_window_bits: Some(3),
            level: 99,
            ..cfg()
        };
        assert_eq!(
            neg(
                "permessage-deflate; server_max_window_bits=12; client_max_window_bits",
                &c
            ),
            Some((
                "permessage-deflate; server_max_window_bits=12; client_max_window_bits=8"
                    .to_string(),
                12,
                9,
                false,
                false
            ))
        );
        let mut d = Deflater::new(99, 0, false);
        let mut i = Inflater::new(3, false);
        let p = compress(&mut d, b"hello hello hello");
        assert_eq!(
            inflate_frag(&mut i, &p, 1000, 100).unwrap(),
            b"hello hello hello"
        );
    }

    // ---- round trips -----------------------------------------------------

    #[test]
    fn empty_message_payload() {
        for nct in [false, true] {
            let mut d = Deflater::new(6, 15, nct);
            let mut i = Inflater::new(15, nct);
            for _ in 0..3 {
                let p = compress(&mut d, b"");
                assert_eq!(p, [0x00]);
                assert_eq!(inflate_frag(&mut i, &p, 1, 10).unwrap(), b"");
                let p = compress(&mut d, b"abcabcabc");
                assert_eq!(inflate_frag(&mut i, &p, 1, 10).unwrap(), b"abcabcabc");
            }
        }
    }

    #[test]
    fn known_rfc_examples() {
        // RFC 7692 §7.2.3.1: "Hello" compressed.
        let mut i = Inflater::new(15, false);
        let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        assert_eq!(inflate_frag(&mut i, &hello, 1000, 100).unwrap(), b"Hello");
        // §7.2.3.2: second "Hello" with context takeover.
        let again = [0xf2, 0x00, 0x11, 0x00, 0x00];
        assert_eq!(inflate_frag(&mut i, &again, 1, 100).unwrap(), b"Hello");
        // §7.2.3.3: stored block.
        let mut i = Inflater::new(15, false);
        let stored = [
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ];
        assert_eq!(inflate_frag(&mut i, &stored, 3, 100).unwrap(), b"Hello");
        // §7.2.3.5: BFINAL block, then a following message on a fresh stream.
        let fin = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
        assert_eq!(inflate_frag(&mut i, &fin, 1, 100).unwrap(), b"Hello");
        assert_eq!(inflate_frag(&mut i, &hello, 2, 100).unwrap(), b"Hello");
        // §7.2.3.6: empty payload.
        assert_eq!(inflate_frag(&mut i, &[0x00], 1, 100).unwrap(), b"");
    }

    #[test]
    fn round_trip_matrix() {
        const SIZES: [usize; 6] = [0, 1, 100, 1023, 1024, 100 * 1024];
        const FRAGS: [usize; 4] = [1, 7, 1000, usize::MAX];
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        // Pre-generate the 20 messages (both kinds at every size).
        let msgs: Vec<Vec<u8>> = (0..20)
            .map(|i| {
                let size = SIZES[i % SIZES.len()];
                let kind = (i / SIZES.len()) % 2;
                if kind == 0 {
                    rng.bytes(size)
                } else {
                    compressible(&mut rng, size)
                }
            })
            .collect();
        for level in 0..=9u32 {
            for bits in 9..=15u8 {
                for nct in [false, true] {
                    let mut d = Deflater::new(level, bits, nct);
                    let mut inf = Inflater::new(bits, nct);
                    for (i, m) in msgs.iter().enumerate() {
                        let p = compress(&mut d, m);
                        assert!(!p.ends_with(&SYNC_TAIL), "level {level} bits {bits}");
                        assert!(!p.is_empty());
                        let frag = FRAGS[(i / 2) % FRAGS.len()];
                        let got = inflate_frag(&mut inf, &p, frag, m.len()).unwrap();
                        assert!(got == *m, "level {level} bits {bits} nct {nct} msg {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn context_takeover_actually_shrinks_repeats() {
        let mut rng = Rng(7);
        let m = rng.bytes(2000);
        let mut keep = Deflater::new(6, 15, false);
        let mut reset = Deflater::new(6, 15, true);
        let _ = compress(&mut keep, &m);
        let _ = compress(&mut reset, &m);
        let second_keep = compress(&mut keep, &m);
        let second_reset = compress(&mut reset, &m);
        assert!(second_keep.len() < 100, "{}", second_keep.len());
        assert!(second_reset.len() > 1900);
        // A context-takeover payload needs the previous message.
        let mut fresh = Inflater::new(15, false);
        assert!(inflate_frag(&mut fresh, &second_keep, 1000, 10_000) != Ok(m.clone()));
    }

    #[test]
    fn output_appends_to_existing_buffers() {
        let mut d = Deflater::new(1, 15, false);
        let mut out = b"prefix".to_vec();
        d.compress(b"hello hello hello hello", &mut out);
        assert_eq!(&out[..6], b"prefix");
        let mut i = Inflater::new(15, false);
        let mut msg = b"xy".to_vec();
        i.feed(&out[6..], &mut msg, 100).unwrap();
        i.finish(&mut msg, 100).unwrap();
        assert_eq!(msg, b"xyhello hello hello hello");
    }

    #[test]
    fn large_message_small_fragments_every_size() {
        let mut rng = Rng(99);
        let m = compressible(&mut rng, 300 * 1024);
        let mut d = Deflater::new(6, 15, false);
        let p = compress(&mut d, &m);
        for frag in [1usize, 2, 3, 5, 64, 4095, 8192, 65536] {
            let mut d2 = Deflater::new(6, 15, false);
            let p2 = compress(&mut d2, &m);
            assert_eq!(p, p2);
            let mut inf = Inflater::new(15, false);
            assert!(inflate_frag(&mut inf, &p, frag, m.len()).unwrap() == m);
        }
    }

    #[test]
    fn stored_fallback_is_valid() {
        let mut rng = Rng(3);
        for n in [1usize, 100, 65535, 65536, 200_000] {
            let m = rng.bytes(n);
            let mut p = Vec::new();
            push_stored_blocks(&m, &mut p);
            let mut inf = Inflater::new(9, false);
            assert!(inflate_frag(&mut inf, &p, 777, n).unwrap() == m);
        }
    }

    // ---- caps --------------------------------------------------------------

    #[test]
    fn zip_bomb_is_too_big_without_big_allocation() {
        let zeros = vec![0u8; 16 * 1024 * 1024];
        let mut d = Deflater::new(9, 15, false);
        let p = compress(&mut d, &zeros);
        assert!(p.len() < 40 * 1024, "{}", p.len());
        let cap = 1024 * 1024;
        for frag in [usize::MAX, 1000, 1] {
            let mut inf = Inflater::new(15, false);
            let mut out = Vec::new();
            let mut res = Ok(());
            for piece in p.chunks(frag.min(p.len())) {
                res = inf.feed(piece, &mut out, cap);
                assert!(out.len() <= cap);
                if res.is_err() {
                    break;
                }
            }
            if res.is_ok() {
                res = inf.finish(&mut out, cap);
            }
            assert_eq!(res, Err(InflateError::TooBig));
            assert!(out.capacity() <= cap + 64 * 1024, "{}", out.capacity());
        }
    }

    #[test]
    fn exactly_at_cap() {
        let mut rng = Rng(5);
        for n in [1usize, 2, 100, 8191, 8192, 8193, 100_000] {
            for kind in 0..2 {
                let m = if kind == 0 {
                    rng.bytes(n)
                } else {
                    compressible(&mut rng, n)
                };
                for level in [0, 1, 9] {
                    let mut d = Deflater::new(level, 15, true);
                    let p = compress(&mut d, &m);
                    for frag in [1usize, 7, usize::MAX] {
                        let mut inf = Inflater::new(15, true);
                        assert!(inflate_frag(&mut inf, &p, frag, n).unwrap() == m);
                        let mut inf = Inflater::new(15, true);
                        assert_eq!(
                            inflate_frag(&mut inf, &p, frag, n - 1),
                            Err(InflateError::TooBig),
                            "n {n} level {level} frag {frag}"
                        );
                    }
                }
            }
        }
        // Zero cap: empty message ok, one byte too big.
        let mut inf = Inflater::new(15, true);
        assert_eq!(inflate_frag(&mut inf, &[0x00], 1, 0), Ok(vec![]));
        let mut d = Deflater::new(1, 15, true);
        let p = compress(&mut d, b"x");
        assert_eq!(inflate_frag(&mut inf, &p, 1, 0), Err(InflateError::TooBig));
    }

    // ---- corrupt input -------------------------------------------------------

    #[test]
    fn corrupt_inputs() {
        // Invalid block type 3.
        let mut inf = Inflater::new(15, false);
        assert_eq!(
            inflate_frag(&mut inf, &[0xff], 1, 100),
            Err(InflateError::Corrupt)
        );
        // Stored block with bad NLEN.
        let mut inf = Inflater::new(15, false);
        assert_eq!(
            inflate_frag(&mut inf, &[0x00, 0x05, 0x00, 0x00, 0x00], 1, 100),
            Err(InflateError::Corrupt)
        );
        // Truncated stored block: the tail would be data, detected at finish.
        let mut inf = Inflater::new(15, false);
        let stored = [0x00, 0x05, 0x00, 0xfa, 0xff, 0x48];
        assert_eq!(
            inflate_frag(&mut inf, &stored, 2, 100),
            Err(InflateError::Corrupt)
        );
        // A match before the start of the stream: the second message of a
        // context-takeover stream given to a fresh inflater.
        let mut d = Deflater::new(6, 15, false);
        let _ = compress(&mut d, b"abcdef");
        let second = compress(&mut d, b"abcdef");
        let mut fresh = Inflater::new(15, false);
        assert_eq!(
            inflate_frag(&mut fresh, &second, 1000, 100),
            Err(InflateError::Corrupt)
        );
        // Note: a window smaller than the sender's is NOT a reliable error:
        // zlib(-rs) also resolves distances against output written in the
        // same call, so a too-small window is only a memory bound.
    }

    #[test]
    fn fuzz_never_panics() {
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        let mut d = Deflater::new(6, 15, false);
        let valid: Vec<Vec<u8>> = (0..8)
            .map(|i| {
                let m = if i % 2 == 0 {
                    compressible(&mut rng, 500 * i + 10)
                } else {
                    rng.bytes(300 * i)
                };
                compress(&mut d, &m)
            })
            .collect();
        let mut errors = 0;
        for iter in 0..10_000 {
            let input = match iter % 4 {
                0 | 1 => {
                    let n = rng.below(100);
                    rng.bytes(n)
                }
                2 => {
                    // truncated valid payload
                    let v = &valid[rng.below(valid.len())];
                    v[..rng.below(v.len() + 1)].to_vec()
                }
                _ => {
                    // valid payload with flipped bits
                    let mut v = valid[rng.below(valid.len())].clone();
                    for _ in 0..=rng.below(4) {
                        let at = rng.below(v.len());
                        v[at] ^= 1 << rng.below(8);
                    }
                    v
                }
            };
            let cap = [0usize, 10, 1000, 1 << 20][rng.below(4)];
            let bits = 9 + rng.below(7) as u8;
            let mut inf = Inflater::new(bits, rng.below(2) == 0);
            let mut out = Vec::new();
            let mut res = Ok(());
            let mut pos = 0;
            while pos < input.len() && res.is_ok() {
                let n = 1 + rng.below(50);
                let end = (pos + n).min(input.len());
                res = inf.feed(&input[pos..end], &mut out, cap);
                pos = end;
            }
            if res.is_ok() {
                res = inf.finish(&mut out, cap);
            }
            assert!(out.len() <= cap);
            if res.is_err() {
                errors += 1;
                inf.reset();
            }
            // The inflater stays usable after reset (or after a success).
            let mut again = Vec::new();
            if res.is_err() {
                let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
                inf.feed(&hello, &mut again, 100).unwrap();
                inf.finish(&mut again, 100).unwrap();
                assert_eq!(again, b"Hello");
            }
        }
        assert!(errors > 2_000, "{errors}");
    }

    // ---- 8-bit windows --------------------------------------------------------

    /// Minimal raw-deflate decoder used only to inspect the distances a
    /// deflater emits (written for these tests).
    struct BitReader<'a> {
        data: &'a [u8],
        bit: usize,
    }

    impl BitReader<'_> {
        fn bits(&mut self, n: u32) -> u32 {
            let mut v = 0;
            for k in 0..n {
                let byte = self.data[self.bit / 8];
                v |= u32::from((byte >> (self.bit % 8)) & 1) << k;
                self.bit += 1;
            }
            v
        }
        fn align(&mut self) {
            self.bit = self.bit.div_ceil(8) * 8;
        }
    }

    /// Canonical Huffman code: per-length counts and symbols in code order.
    struct Huffman {
        counts: [u16; 16],
        symbols: Vec<u16>,
    }

    impl Huffman {
        fn new(lengths: &[u8]) -> Self {
            let mut counts = [0u16; 16];
            for &l in lengths {
                counts[l as usize] += 1;
            }
            counts[0] = 0;
            let mut offsets = [0u16; 16];
            for l in 1..15 {
                offsets[l + 1] = offsets[l] + counts[l];
            }
            let mut symbols = vec![0u16; lengths.len()];
            for (sym, &l) in lengths.iter().enumerate() {
                if l != 0 {
                    symbols[offsets[l as usize] as usize] = sym as u16;
                    offsets[l as usize] += 1;
                }
            }
            Huffman { counts, symbols }
        }

        fn decode(&self, br: &mut BitReader) -> u16 {
            // Codes of one length are consecutive; walk lengths 1..=15.
            let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
            for len in 1..16 {
                code |= br.bits(1) as i32;
                let count = i32::from(self.counts[len]);
                if code - first < count {
                    return self.symbols[(index + code - first) as usize];
                }
                index += count;
                first = (first + count) << 1;
                code <<= 1;
            }
            panic!("bad huffman code");
        }
    }

    const LEN_BASE: [u16; 29] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
        131, 163, 195, 227, 258,
    ];
    const LEN_EXTRA: [u8; 29] = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ];
    const DIST_BASE: [u16; 30] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
        2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
    ];
    const DIST_EXTRA: [u8; 30] = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12,
        13, 13,
    ];

    /// Decode one message payload (tail re-appended) onto `history`; returns
    /// the largest match distance seen. `history` holds all previous output
    /// of the stream (context takeover).
    fn inspect(payload: &[u8], history: &mut Vec<u8>) -> usize {
        let mut data = payload.to_vec();
        data.extend_from_slice(&SYNC_TAIL);
        let mut br = BitReader {
            data: &data,
            bit: 0,
        };
        let mut max_dist = 0;
        while br.bit < data.len() * 8 {
            let last = br.bits(1);
            assert_eq!(last, 0, "unexpected final block");
            match br.bits(2) {
                0 => {
                    br.align();
                    let len = br.bits(16);
                    let nlen = br.bits(16);
                    assert_eq!(len ^ 0xffff, nlen);
                    for _ in 0..len {
                        history.push(br.bits(8) as u8);
                    }
                }
                t @ (1 | 2) => {
                    let (lit, dist) = if t == 1 {
                        let mut l = [8u8; 288];
                        l[144..256].fill(9);
                        l[256..280].fill(7);
                        (Huffman::new(&l), Huffman::new(&[5u8; 30]))
                    } else {
                        let hlit = br.bits(5) as usize + 257;
                        let hdist = br.bits(5) as usize + 1;
                        let hclen = br.bits(4) as usize + 4;
                        const ORDER: [usize; 19] = [
                            16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
                        ];
                        let mut cl = [0u8; 19];
                        for &o in &ORDER[..hclen] {
                            cl[o] = br.bits(3) as u8;
                        }
                        let clh = Huffman::new(&cl);
                        let mut lengths = Vec::with_capacity(hlit + hdist);
                        while lengths.len() < hlit + hdist {
                            match clh.decode(&mut br) {
                                s @ 0..=15 => lengths.push(s as u8),
                                16 => {
                                    let prev = *lengths.last().unwrap();
                                    for _ in 0..3 + br.bits(2) {
                                        lengths.push(prev);
                                    }
                                }
                                17 => lengths.resize(lengths.len() + 3 + br.bits(3) as usize, 0),
                                _ => lengths.resize(lengths.len() + 11 + br.bits(7) as usize, 0),
                            }
                        }
                        (
                            Huffman::new(&lengths[..hlit]),
                            Huffman::new(&lengths[hlit..]),
                        )
                    };
                    loop {
                        let sym = lit.decode(&mut br) as usize;
                        match sym {
                            0..=255 => history.push(sym as u8),
                            256 => break,
                            _ => {
                                let i = sym - 257;
                                let len = LEN_BASE[i] as usize
                                    + br.bits(u32::from(LEN_EXTRA[i])) as usize;
                                let di = dist.decode(&mut br) as usize;
                                let d = DIST_BASE[di] as usize
                                    + br.bits(u32::from(DIST_EXTRA[di])) as usize;
                                assert!(d <= history.len());
                                max_dist = max_dist.max(d);
                                for _ in 0..len {
                                    history.push(history[history.len() - d]);
                                }
                            }
                        }
                    }
                }
                _ => panic!("block type 3"),
            }
        }
        max_dist
    }

    fn varied_message(rng: &mut Rng, i: usize) -> Vec<u8> {
        // Repeats at distances around and beyond 256 tempt long matches.
        let unit = [40usize, 200, 250, 255, 256, 257, 300, 400, 511, 600][i % 10];
        let kind = i % 3;
        let block = if kind == 0 {
            rng.bytes(unit)
        } else {
            compressible(rng, unit)
        };
        let mut m = Vec::new();
        let total = 100 + rng.below(5000);
        while m.len() < total {
            m.extend_from_slice(&block);
            if rng.below(4) == 0 {
                let n = rng.below(20);
                m.extend_from_slice(&rng.bytes(n));
            }
        }
        m
    }

    #[test]
    fn nine_bit_deflate_output_fits_an_eight_bit_window() {
        let mut rng = Rng(0x8b17);
        for level in 1..=9u32 {
            for nct in [false, true] {
                let mut d = Deflater::new(level, 9, nct);
                // flate2's raw inflater with the smallest window it accepts.
                let mut flate = Decompress::new_with_window_bits(false, 9);
                let mut history = Vec::new();
                let mut max_seen = 0;
                for i in 0..50 {
                    let m = varied_message(&mut rng, i);
                    let p = compress(&mut d, &m);
                    if nct {
                        history.clear();
                    }
                    let start = history.len();
                    let dist = inspect(&p, &mut history);
                    assert!(history[start..] == m[..], "level {level} msg {i}");
                    assert!(dist <= 256, "level {level} msg {i}: distance {dist}");
                    max_seen = max_seen.max(dist);

                    let mut input = p.clone();
                    input.extend_from_slice(&SYNC_TAIL);
                    let mut out = Vec::with_capacity(m.len() + 16);
                    flate
                        .decompress_vec(&input, &mut out, FlushDecompress::Sync)
                        .unwrap();
                    assert!(out == m, "level {level} msg {i}");
                    if nct {
                        flate.reset(false);
                    }
                }
                // zlib caps distances at 512 - 262 = 250 with a 9-bit window.
                assert!(max_seen <= 250, "{max_seen}");
                assert!(max_seen > 100, "{max_seen}");
            }
        }
    }

    #[test]
    fn distance_inspector_sees_long_distances_with_big_windows() {
        // Sanity check that the check above is not vacuous.
        let mut rng = Rng(42);
        let block = rng.bytes(3000);
        let mut m = block.clone();
        m.extend_from_slice(&block);
        let mut d = Deflater::new(6, 15, false);
        let p = compress(&mut d, &m);
        let mut history = Vec::new();
        assert!(inspect(&p, &mut history) >= 3000);
        assert!(history == m);
    }

    #[test]
    fn flate2_refuses_eight_bit_windows() {
        // Observed: flate2 asserts window_bits in 9..=15 for both directions
        // (zlib-rs itself would inflate raw streams with 8, but deflating raw
        // with 8 is refused like in zlib >= 1.2.9). Hence 8 is served by 9.
        let c = std::panic::catch_unwind(|| {
            Compress::new_with_window_bits(Compression::new(1), false, 8)
        });
        assert!(c.is_err());
        let d = std::panic::catch_unwind(|| Decompress::new_with_window_bits(false, 8));
        assert!(d.is_err());
        // Our constructors never panic on 8 (or anything else).
        for bits in [0u8, 8, 9, 15, 16, 255] {
            let _ = Deflater::new(1, bits, false);
            let _ = Inflater::new(bits, false);
        }
    }
}
