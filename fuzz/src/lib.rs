//! Fuzz harnesses for the native-ws core. Each `fuzz_targets/<name>.rs` calls the function of the
//! same name here. Besides "never panics, never overflows, never allocates without bound", every
//! harness checks properties of the results:
//!
//! * [`handshake`]: raw bytes → `handshake::parse_request`, then `validate`, `negotiate` and the
//!   response writers. A complete head parses the same when cut to its own length, and no prefix
//!   of it is refused (a request arriving in pieces must not be rejected).
//! * [`frames`] / [`frames_deflate`]: `message::Reader::read` fed the way the connection task
//!   feeds it (arbitrary TCP splits, consumed bytes drained, `need` honoured), without and with a
//!   negotiated permessage-deflate. Delivered messages respect the caps and UTF-8 rules, and the
//!   messages and the final outcome are the same whatever the splits (and, with deflate, whatever
//!   the thread's pool of spare inflaters holds).
//! * [`negotiate`]: `extensions::negotiate` with several server configs; the answer is well formed,
//!   only echoes what RFC 7692 allows, and is itself an acceptable offer.
//! * [`inflate`]: `deflate::Inflater::feed/finish` with a cap: the output (length and capacity)
//!   never exceeds the cap; fed whole or in pieces, the results are identical (error kinds
//!   included) and every message gives what an uncapped reference run gives (same bytes, or
//!   TooBig exactly when the reference is longer than the cap).
//! * [`deflate_roundtrip`]: `Deflater` → `Inflater` gives back every message, for every level,
//!   window size and context-takeover mode, with the cap set to the exact message size.
//! * [`proxy`]: `proxy::parse` (PROXY protocol v1/v2): never waits for more past its caps, and a
//!   header is found the same whatever follows it, with every proper prefix of it incomplete (a
//!   header arriving in pieces is reassembled, never refused half-way).

use native_ws::codec::{self, ProtocolError};
use native_ws::deflate::{Deflater, InflateError, Inflater};
use native_ws::extensions::{self, DeflateConfig, Negotiated};
use native_ws::handshake;
use native_ws::message::{Msg, Reader};

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

// ---------------------------------------------------------------------------------------------
// Deterministic splits

/// xorshift64*, seeded from input bytes: decides how the wire bytes are cut into reads.
pub struct Splitter(u64);

impl Splitter {
    pub fn new(seed: &[u8]) -> Self {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for &b in seed {
            s = (s ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
        Splitter(s | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Length of the next piece, 1..=max(remaining,1): mostly tiny (header-splitting) pieces,
    /// sometimes larger ones, sometimes everything that is left.
    pub fn piece(&mut self, remaining: usize) -> usize {
        if remaining == 0 {
            return 0;
        }
        let r = self.next();
        let n = match r & 3 {
            0 => 1 + (r >> 8) as usize % 3,
            1 => 1 + (r >> 8) as usize % 16,
            2 => 1 + (r >> 8) as usize % 300,
            _ => remaining,
        };
        n.min(remaining)
    }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

// ---------------------------------------------------------------------------------------------
// HTTP upgrade

/// Input: the bytes a client sends before (and possibly after) its request head.
pub fn handshake(data: &[u8]) {
    let first = handshake::parse_request(data);
    let Ok(Some((req, consumed))) = first else {
        // Incomplete or refused. An incomplete head must stay incomplete (never an error) for any
        // prefix, except for the size limit.
        if let Ok(None) = first {
            if data.len() >= handshake::MAX_HEAD_BYTES {
                panic!("a head of {} bytes reported incomplete instead of 431", data.len());
            }
        }
        return;
    };
    assert!(consumed > 0 && consumed <= data.len().min(handshake::MAX_HEAD_BYTES));

    // The same head, cut to its own length, parses identically.
    let again = handshake::parse_request(&data[..consumed]);
    assert_eq!(again, Ok(Some((req.clone(), consumed))), "head reparsed differently when cut");

    // A request that arrives in pieces must never be refused before it is complete.
    let mut cuts = Splitter::new(&data[..consumed.min(32)]);
    let mut k = 0;
    while k < consumed {
        k += cuts.piece(consumed - k).min(consumed - k);
        if k >= consumed {
            break;
        }
        match handshake::parse_request(&data[..k]) {
            Ok(None) => {}
            other => panic!("prefix of {k}/{consumed} bytes of a valid head gave {other:?}"),
        }
    }

    let _ = req.path();
    assert!(!req.method.is_empty());
    for (name, _) in &req.headers {
        assert_eq!(name, &name.to_ascii_lowercase(), "header names are lower-cased");
    }
    let mut out = Vec::new();
    match handshake::validate(&req) {
        Ok(up) => {
            assert_eq!(up.accept.len(), 28, "Sec-WebSocket-Accept is base64 of 20 bytes");
            for p in &up.protocols {
                assert!(!p.is_empty() && !p.contains(','));
            }
            let neg = extensions::negotiate(&up.extensions, &DeflateConfig::default());
            handshake::write_101(
                &mut out,
                &up.accept,
                up.protocols.first().map(String::as_str),
                neg.as_ref().map(|n| n.response.as_str()),
                &[("X-From-App", up.extensions.as_str())],
            );
            assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
            assert!(out.ends_with(b"\r\n\r\n"));
            // Values from the request can never inject lines into the response.
            let head = &out[..out.len() - 4];
            let lines = head.split(|&b| b == b'\n').count();
            // the status line, Upgrade, Connection, Sec-WebSocket-Accept, the application's header
            // (a value taken from the request here), then protocol and extensions when chosen
            let expected = 5 + usize::from(!up.protocols.is_empty()) + usize::from(neg.is_some());
            assert_eq!(lines, expected, "101 response has extra lines: {:?}", String::from_utf8_lossy(&out));
        }
        Err(e) => {
            assert!(matches!(e.status, 400 | 405 | 426), "unexpected status {}", e.status);
            handshake::write_error(&mut out, e.status, e.message);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Frames → messages

#[derive(Debug, PartialEq, Eq, Clone)]
enum Event {
    Text(usize, u64),
    Binary(usize, u64),
    Ping(usize, u64),
    Pong(usize, u64),
    Close(u16, String),
}

#[derive(Debug, PartialEq, Eq, Clone)]
enum Outcome {
    /// input exhausted; bytes of a partial frame left over
    Open,
    Closed,
    Failed(ProtocolError),
}

struct Limits {
    max_payload: usize,
    max_fragments: u32,
}

fn record(events: &mut Vec<Event>, m: Msg<'_>, lim: &Limits) {
    match m {
        Msg::Data { text, payload } => {
            assert!(payload.len() <= lim.max_payload, "message of {} bytes over the cap {}", payload.len(), lim.max_payload);
            if text {
                assert!(std::str::from_utf8(payload).is_ok(), "text message is not UTF-8");
                events.push(Event::Text(payload.len(), hash(payload)));
            } else {
                events.push(Event::Binary(payload.len(), hash(payload)));
            }
        }
        Msg::Ping(p) => {
            assert!(p.len() <= 125);
            events.push(Event::Ping(p.len(), hash(p)));
        }
        Msg::Pong(p) => {
            assert!(p.len() <= 125);
            events.push(Event::Pong(p.len(), hash(p)));
        }
        Msg::Close(code, reason) => {
            assert!(code == codec::CLOSE_NO_STATUS || codec::is_valid_close_code(code), "close code {code}");
            assert!(reason.len() <= 123);
            events.push(Event::Close(code, reason.to_owned()));
        }
    }
}

/// Feed `wire` like the connection task does: append a read's worth of bytes to the buffer, run
/// the reader, drain what it consumed, stop at a close frame or an error.
fn feed_reader(
    wire: &[u8],
    lim: &Limits,
    neg: Option<&Negotiated>,
    mut split: Option<Splitter>,
) -> (Vec<Event>, Outcome) {
    let mut reader = Reader::new(lim.max_payload, lim.max_fragments, neg);
    let mut events = Vec::new();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut off = 0;
    while off < wire.len() {
        let n = match split.as_mut() {
            Some(s) => s.piece(wire.len() - off),
            None => wire.len(),
        };
        rbuf.extend_from_slice(&wire[off..off + n]);
        off += n;
        let before = rbuf.len();
        let res = reader.read(&mut rbuf, &mut |m| record(&mut events, m, lim));
        match res {
            Err(e) => return (events, Outcome::Failed(e)),
            Ok(p) => {
                assert!(p.consumed <= before);
                if let Some(need) = p.need {
                    assert!(need > before - p.consumed, "need {need} but {} bytes are buffered", before - p.consumed);
                    // The task reads up to `need` bytes ahead: it must be a real frame size,
                    // bounded by the caps (control frames <= 125 + 14).
                    assert!(need <= lim.max_payload.saturating_mul(2).saturating_add(1024 + 14).max(125 + 14));
                }
                rbuf.drain(..p.consumed);
                if p.closed {
                    return (events, Outcome::Closed);
                }
            }
        }
    }
    (events, Outcome::Open)
}

fn frames_common(data: &[u8], with_deflate: bool) {
    if data.len() < 2 {
        return;
    }
    let (ctl, wire) = data.split_at(2);
    let lim = Limits {
        max_payload: [1 << 16, 125, 1000, 1 << 20][usize::from(ctl[0] & 3)],
        max_fragments: [131_072, 1, 3, 64][usize::from((ctl[0] >> 2) & 3)],
    };
    let neg = if with_deflate {
        let (offer, cfg) = match (ctl[0] >> 4) & 3 {
            0 | 1 => ("permessage-deflate; client_max_window_bits", DeflateConfig::default()),
            2 => ("permessage-deflate; client_no_context_takeover", DeflateConfig::default()),
            _ => (
                "permessage-deflate; client_max_window_bits",
                DeflateConfig { request_max_window_bits: Some(9), ..DeflateConfig::default() },
            ),
        };
        Some(extensions::negotiate(offer, &cfg).expect("a valid offer"))
    } else {
        None
    };
    if !with_deflate {
        let whole = feed_reader(wire, &lim, None, None);
        let split = feed_reader(wire, &lim, None, Some(Splitter::new(ctl)));
        assert_eq!(whole, split, "result depends on how the bytes were split");
        return;
    }
    // message.rs keeps spare inflaters per thread, so a Reader's behaviour could depend on what
    // earlier connections of its thread left behind. Each run gets a fresh thread (an empty
    // pool); the split run's pool is first primed by a no-context-takeover connection. Any
    // difference — from the splits or from the pool — fails, and reproduces from the input alone.
    let neg = neg.as_ref();
    let (whole, split) = std::thread::scope(|scope| {
        let whole = scope.spawn(|| feed_reader(wire, &lim, neg, None));
        let split = scope.spawn(|| {
            prime_inflater_pool();
            feed_reader(wire, &lim, neg, Some(Splitter::new(ctl)))
        });
        (join(whole), join(split))
    });
    assert_eq!(whole, split, "result depends on how the bytes were split or on the thread's inflater pool");
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Let no-context-takeover connections (15- and 9-bit client windows) finish one compressed
/// message each on this thread, so that their inflaters are returned to the thread's pool.
fn prime_inflater_pool() {
    static PRIMERS: std::sync::OnceLock<Vec<(Negotiated, Vec<u8>)>> = std::sync::OnceLock::new();
    let primers = PRIMERS.get_or_init(|| {
        let offers = [
            ("permessage-deflate; client_no_context_takeover", DeflateConfig::default()),
            (
                "permessage-deflate; client_no_context_takeover; client_max_window_bits",
                DeflateConfig { request_max_window_bits: Some(9), ..DeflateConfig::default() },
            ),
        ];
        offers
            .iter()
            .map(|(offer, cfg)| {
                let neg = extensions::negotiate(offer, cfg).expect("a valid offer");
                let mut z = Vec::new();
                Deflater::new(6, neg.client_window_bits, true).compress(b"prime the pool", &mut z);
                let key = [9, 8, 7, 6];
                let mut frame = Vec::new();
                codec::write_header(&mut frame, true, true, codec::OP_BINARY, z.len(), Some(key));
                let start = frame.len();
                frame.extend_from_slice(&z);
                codec::apply_mask(&mut frame[start..], key, 0);
                (neg, frame)
            })
            .collect()
    });
    for (neg, frame) in primers {
        let mut frame = frame.clone();
        let mut reader = Reader::new(1 << 16, 4, Some(neg));
        let mut n = 0;
        reader.read(&mut frame, &mut |_| n += 1).expect("priming message");
        assert_eq!(n, 1);
    }
}

/// Input: 2 control bytes (caps, split seed), then the bytes a client sends after the upgrade.
pub fn frames(data: &[u8]) {
    frames_common(data, false);
}

/// Same as [`frames`] on a connection that negotiated permessage-deflate (control byte 0 bits
/// 4-5 pick the offer: default, `client_no_context_takeover`, or a 9-bit client window).
pub fn frames_deflate(data: &[u8]) {
    frames_common(data, true);
}

// ---------------------------------------------------------------------------------------------
// Extension offers

fn configs() -> [DeflateConfig; 5] {
    [
        DeflateConfig::default(),
        DeflateConfig { no_context_takeover: false, max_window_bits: 15, ..DeflateConfig::default() },
        DeflateConfig { request_no_context_takeover: true, request_max_window_bits: Some(8), ..DeflateConfig::default() },
        DeflateConfig { no_context_takeover: false, max_window_bits: 11, request_max_window_bits: Some(12), ..DeflateConfig::default() },
        DeflateConfig { max_window_bits: 0, request_max_window_bits: Some(200), ..DeflateConfig::default() },
    ]
}

/// Input: a `Sec-WebSocket-Extensions` value (header values reach `negotiate` as UTF-8 text).
pub fn negotiate(data: &[u8]) {
    let Ok(offers) = std::str::from_utf8(data) else { return };
    let lower = offers.to_ascii_lowercase();
    for cfg in configs() {
        let Some(n) = extensions::negotiate(offers, &cfg) else { continue };
        assert!(lower.contains("permessage-deflate"));
        assert!((9..=15).contains(&n.server_window_bits), "{n:?}");
        assert!((9..=15).contains(&n.client_window_bits), "{n:?}");
        assert!(n.response.starts_with("permessage-deflate"));
        assert!(n.response.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{n:?}");
        // Only echo window parameters the client offered (Firefox closes otherwise).
        if n.response.contains("server_max_window_bits") {
            assert!(lower.contains("server_max_window_bits"), "{offers:?} → {n:?}");
        }
        if n.response.contains("client_max_window_bits") {
            assert!(lower.contains("client_max_window_bits"), "{offers:?} → {n:?}");
        }
        assert_eq!(n.server_no_context_takeover, n.response.contains("server_no_context_takeover"));
        assert_eq!(n.client_no_context_takeover, n.response.contains("client_no_context_takeover"));
        // The answer is itself a valid offer, and negotiating it again changes nothing.
        let again = extensions::negotiate(&n.response, &cfg).unwrap_or_else(|| panic!("response {:?} is not a valid offer", n.response));
        assert_eq!(again.server_no_context_takeover, n.server_no_context_takeover);
        assert_eq!(again.client_no_context_takeover, n.client_no_context_takeover);
        assert!(again.server_window_bits <= n.server_window_bits || !n.response.contains("server_max_window_bits"));
        // The negotiated parameters build working (de)compressors.
        let _ = Deflater::new(cfg.level, n.server_window_bits, n.server_no_context_takeover);
        let _ = Inflater::new(n.client_window_bits, n.client_no_context_takeover);
    }
}

// ---------------------------------------------------------------------------------------------
// Inflater

const CAPS: [usize; 8] = [0, 1, 7, 100, 1000, 4096, 65_536, 1 << 20];

/// Split `rest` into messages: records of a 2-byte little-endian length and that many bytes
/// (the last one truncated to what is left).
fn records(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        let len = len.min(body.len());
        out.push(&body[..len]);
        rest = &body[len..];
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Inflated {
    Ok(usize, u64),
    Err(InflateError),
}

fn inflate_messages(msgs: &[&[u8]], bits: u8, nct: bool, cap: usize, mut split: Option<Splitter>) -> Vec<Inflated> {
    let mut inf = Inflater::new(bits, nct);
    let mut results = Vec::new();
    for msg in msgs {
        let mut out = Vec::new();
        let mut off = 0;
        let mut res = loop {
            let n = match split.as_mut() {
                Some(s) => s.piece(msg.len() - off),
                None => msg.len() - off,
            };
            let res = inf.feed(&msg[off..off + n], &mut out, cap);
            assert!(out.len() <= cap, "inflated {} bytes over the cap {cap}", out.len());
            assert!(out.capacity() <= cap, "output capacity {} over the cap {cap}", out.capacity());
            off += n;
            if res.is_err() || off == msg.len() {
                break res;
            }
        };
        if res.is_ok() {
            res = inf.finish(&mut out, cap).map(|_| ());
            assert!(out.len() <= cap);
            assert!(out.capacity() <= cap);
        }
        match res {
            Ok(()) => results.push(Inflated::Ok(out.len(), hash(&out))),
            Err(e) => {
                // The connection is failed: nothing more is inflated.
                results.push(Inflated::Err(e));
                break;
            }
        }
    }
    results
}

/// Cap of the reference run: more than any input of `-max_len` 16 KiB can inflate to (deflate's
/// best ratio is about 1032:1).
const REFERENCE_CAP: usize = 32 << 20;

/// Input: byte 0 = window bits (9 + b % 7) and no_context_takeover (bit 7); byte 1 = cap (low 3
/// bits) and split seed; then messages as records (2-byte LE length + compressed payload, the
/// `00 00 ff ff` tail removed as on the wire).
///
/// Oracle: the same messages inflated whole without a practical cap. For each message, with the
/// cap, fed whole or in pieces: a valid message of L bytes gives exactly the same bytes if
/// L <= cap and TooBig if L > cap (never Corrupt); a corrupt message gives an error. And the
/// results, error kinds included, are the same whole or in pieces (whatever comes first in the
/// stream, a byte past the cap or a decode error, decides; see
/// crates/native-ws/tests/regressions.rs for the input that once broke this).
pub fn inflate(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let bits = 9 + (data[0] & 0x7f) % 7;
    let nct = data[0] & 0x80 != 0;
    let cap = CAPS[usize::from(data[1] & 7)];
    let msgs = records(&data[2..]);
    let reference = inflate_messages(&msgs, bits, nct, REFERENCE_CAP, None);
    if reference.iter().any(|r| *r == Inflated::Err(InflateError::TooBig)) {
        return; // longer than any real input; nothing to compare against
    }
    let whole = inflate_messages(&msgs, bits, nct, cap, None);
    let split = inflate_messages(&msgs, bits, nct, cap, Some(Splitter::new(&data[..2])));
    assert_eq!(whole, split, "inflate result depends on how the payload was split");
    for (how, run) in [("whole", &whole), ("split", &split)] {
        assert!(run.len() <= reference.len());
        for (i, (want, got)) in reference.iter().zip(run.iter()).enumerate() {
            match (want, got) {
                (Inflated::Ok(len, h), Inflated::Ok(len2, h2)) => {
                    assert!(len == len2 && h == h2, "{how}: message {i} inflated differently");
                    assert!(*len <= cap);
                }
                (Inflated::Ok(len, _), Inflated::Err(InflateError::TooBig)) => {
                    assert!(*len > cap, "{how}: message {i} of {len} bytes refused as too big (cap {cap})");
                }
                (Inflated::Ok(len, _), Inflated::Err(InflateError::Corrupt)) => {
                    panic!("{how}: valid message {i} of {len} bytes reported corrupt (cap {cap})");
                }
                (Inflated::Err(_), Inflated::Ok(..)) => {
                    panic!("{how}: corrupt message {i} accepted with the cap {cap}");
                }
                (Inflated::Err(_), Inflated::Err(_)) => {}
            }
        }
        if run.len() < reference.len() {
            assert!(matches!(run.last(), Some(Inflated::Err(_))), "{how}: stopped early without an error");
        }
    }
}

/// Input: byte 0 = level (b % 10), byte 1 = window bits (8 + b % 8) and no_context_takeover
/// (bit 7), then plaintext messages as records. Each message is compressed by `Deflater` and
/// inflated back (in pieces) by `Inflater` with the cap set to its exact length.
pub fn deflate_roundtrip(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let level = u32::from(data[0] % 10);
    let bits = 8 + (data[1] & 0x7f) % 8;
    let nct = data[1] & 0x80 != 0;
    let mut def = Deflater::new(level, bits, nct);
    // A peer told `client_max_window_bits=8` is inflated with 9 bits (see deflate.rs docs).
    let mut inf = Inflater::new(bits.max(9), nct);
    let mut split = Splitter::new(&data[..2]);
    for msg in records(&data[2..]) {
        let mut z = Vec::new();
        def.compress(msg, &mut z);
        let mut out = Vec::new();
        let mut off = 0;
        loop {
            let n = split.piece(z.len() - off);
            inf.feed(&z[off..off + n], &mut out, msg.len()).expect("inflating our own output");
            off += n;
            if off == z.len() {
                break;
            }
        }
        inf.finish(&mut out, msg.len()).expect("finishing our own output");
        assert!(out == msg, "roundtrip changed a message of {} bytes (level {level}, bits {bits}, nct {nct})", msg.len());
    }
}

/// Input: the first bytes of a connection to a listener with the PROXY protocol on.
pub fn proxy(data: &[u8]) {
    use native_ws::proxy::{parse, Parsed, MAX_V2_BYTES};
    match parse(data) {
        Parsed::Incomplete => assert!(data.len() < MAX_V2_BYTES, "waits for more after {} bytes", data.len()),
        Parsed::Invalid(_) => {}
        Parsed::Header { len, source } => {
            assert!(len > 0 && len <= data.len() && len <= MAX_V2_BYTES);
            let whole = parse(&data[..len]);
            assert_eq!(whole, Parsed::Header { len, source }, "cut to its own length");
            for cut in 0..len {
                assert_eq!(parse(&data[..cut]), Parsed::Incomplete, "a prefix of {cut} bytes of a {len}-byte header");
            }
        }
    }
}
