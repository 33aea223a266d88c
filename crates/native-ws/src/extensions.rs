//! permessage-deflate (RFC 7692) negotiation, server side: [`negotiate`] picks the first
//! acceptable `permessage-deflate` offer of a `Sec-WebSocket-Extensions` request header, per the
//! server's [`DeflateConfig`], and builds the response value ([`Negotiated`]).
//!
//! Pure code: no I/O, no async. The compression streams are in [`crate::deflate`], whose docs
//! explain why a negotiated 8-bit window is answered as 8 and served by 9 bits.

use crate::deflate::{MAX_WINDOW_BITS, MIN_WINDOW_BITS};

/// The smallest window RFC 7692 lets a peer negotiate (`*_max_window_bits=8`); the largest is
/// [`MAX_WINDOW_BITS`].
const MIN_NEGOTIATED_BITS: u8 = 8;

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
    /// Server (deflater) window bits, 8..=15 (values outside are clamped): the
    /// most we answer to a client's `server_max_window_bits`. 8 is announced as 8
    /// but deflated with a 9-bit window (see [`crate::deflate`]). A client that
    /// did not ask gets 15 bits under no_context_takeover (see [`negotiate`]).
    pub max_window_bits: u8,
    /// Ask the client for `client_no_context_takeover`.
    pub request_no_context_takeover: bool,
    /// Bound the client's window (8..=15): `client_max_window_bits=N` when the
    /// client's offer contains `client_max_window_bits`; below 15, a client that
    /// did not offer it is asked for `client_no_context_takeover` instead (as
    /// uWS does for a dedicated decompressor). None: nothing asked.
    pub request_max_window_bits: Option<u8>,
}

/// The client window the server asks for by default ([`DeflateConfig::default`]): small enough
/// that a context-takeover connection parks it between messages (1 KiB, see
/// [`crate::deflate::SavedWindow`]) instead of keeping an inflater; DDP's client→server calls
/// still compress ~3× with it (~3.5× with 15 bits, ~1.3× with no context).
pub const DEFAULT_CLIENT_WINDOW_BITS: u8 = 10;

impl Default for DeflateConfig {
    /// Meteor's defaults: threshold 1024, level 1, mem_level 1, strategy 0,
    /// server no_context_takeover, server window 8 bits; and (our addition, for
    /// the memory of idle sockets) a client window of
    /// [`DEFAULT_CLIENT_WINDOW_BITS`]. `request_max_window_bits: Some(15)` answers
    /// clients exactly as Meteor does.
    fn default() -> Self {
        DeflateConfig {
            threshold: 1024,
            level: 1,
            mem_level: 1,
            strategy: 0,
            no_context_takeover: true,
            max_window_bits: 8,
            request_no_context_takeover: false,
            request_max_window_bits: Some(DEFAULT_CLIENT_WINDOW_BITS),
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
///   `cfg.request_no_context_takeover`, or if `cfg.request_max_window_bits`
///   is below 15 and the client did not offer `client_max_window_bits`;
/// * `server_max_window_bits=N` only if the client offered
///   `server_max_window_bits`, with N = min(offered, cfg.max_window_bits).
///   N = 8 is answered as 8 and deflated with 9 bits. When the client did not
///   offer it, nothing is answered (the window is invisible to the client: it
///   inflates with 15 bits) and the deflater uses 15 bits under
///   server_no_context_takeover (a per-message window of our own, in a
///   compressor shared per I/O thread: on a 4 KiB DDP document zlib-rs level 1
///   is ~2.8× faster and compresses 1.21× better than with 9 bits), else
///   max(cfg.max_window_bits, 9) bits (a per-connection window kept small).
/// * `client_max_window_bits=M` only if the client offered
///   `client_max_window_bits`, `client_no_context_takeover` is not answered,
///   AND `cfg.request_max_window_bits` is `Some(r)`:
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
    // A client window we may not bound (not offered) is bounded to one message instead.
    let unbounded_client = offer.client_max_window_bits.is_none()
        && cfg.request_max_window_bits.is_some_and(|r| r < MAX_WINDOW_BITS);
    let client_no_context_takeover =
        offer.client_no_context_takeover || cfg.request_no_context_takeover || unbounded_client;

    let mut response = String::from("permessage-deflate");
    if server_no_context_takeover {
        response.push_str("; server_no_context_takeover");
    }
    if client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }

    let our_server_bits = cfg
        .max_window_bits
        .clamp(MIN_NEGOTIATED_BITS, MAX_WINDOW_BITS);
    let server_window_bits = match offer.server_max_window_bits {
        Some(offered) => {
            let answered = offered.min(our_server_bits);
            response.push_str("; server_max_window_bits=");
            response.push_str(&answered.to_string());
            answered.max(MIN_WINDOW_BITS)
        }
        // The client did not constrain our window: with no context takeover the window is ours
        // alone (nothing of it outlives a message, and the compressor is shared per I/O thread),
        // so use the largest, which is also the fastest (zlib-rs's level-1 fast path needs it).
        None if server_no_context_takeover => MAX_WINDOW_BITS,
        None => our_server_bits.max(MIN_WINDOW_BITS),
    };

    let client_window_bits = match (offer.client_max_window_bits, cfg.request_max_window_bits) {
        // A client that resets its window per message needs no bound on it (the window lives
        // within one message, in a pooled inflater).
        (Some(offered), Some(requested)) if !client_no_context_takeover => {
            let answered = requested
                .clamp(MIN_NEGOTIATED_BITS, MAX_WINDOW_BITS)
                .min(offered.unwrap_or(MAX_WINDOW_BITS));
            response.push_str("; client_max_window_bits=");
            response.push_str(&answered.to_string());
            answered.max(MIN_WINDOW_BITS)
        }
        _ => MAX_WINDOW_BITS,
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
    (MIN_NEGOTIATED_BITS..=MAX_WINDOW_BITS)
        .contains(&n)
        .then_some(n)
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

#[cfg(test)]
mod tests;
