//! RFC 6455 frame codec: header parsing and writing, payload masking, close frames and
//! incremental UTF-8 validation.
//!
//! We own the frame codec because fastwebsockets (0.10) rejects every frame with RSV1 set, and
//! permessage-deflate (RFC 7692) signals a compressed message with exactly that bit. This module
//! is pure and allocation-light: no tokio, no I/O, no dependencies beyond `std`. It serves the
//! server role (reading masked client frames, writing unmasked frames) and also a client role
//! (reading unmasked server frames, writing masked frames) for the load generator and tests.

use std::fmt;

pub const OP_CONTINUATION: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

// close codes used by the server
pub const CLOSE_NORMAL: u16 = 1000;
pub const CLOSE_GOING_AWAY: u16 = 1001;
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// Reported locally when a close frame carries no status; never sent.
pub const CLOSE_NO_STATUS: u16 = 1005;
/// Reported locally when the connection dropped without a close frame; never sent.
pub const CLOSE_ABNORMAL: u16 = 1006;
pub const CLOSE_INVALID_DATA: u16 = 1007;
pub const CLOSE_POLICY: u16 = 1008;
pub const CLOSE_TOO_BIG: u16 = 1009;
pub const CLOSE_INTERNAL: u16 = 1011;
pub const CLOSE_TRY_AGAIN: u16 = 1013;

/// TLS handshake failure; like 1005 and 1006 it must never appear on the wire.
const CLOSE_TLS_HANDSHAKE: u16 = 1015;

/// Largest payload a control frame may carry.
const MAX_CONTROL_PAYLOAD: usize = 125;

/// A protocol violation: the connection must be failed with close `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: u16,
    pub reason: &'static str,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "websocket protocol error {}: {}", self.code, self.reason)
    }
}

impl std::error::Error for ProtocolError {}

#[inline]
const fn protocol_error(reason: &'static str) -> ProtocolError {
    ProtocolError {
        code: CLOSE_PROTOCOL_ERROR,
        reason,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub fin: bool,
    pub rsv1: bool,
    pub opcode: u8,
    pub mask: Option<[u8; 4]>,
    pub payload_len: u64,
    /// bytes taken by the header (2..=14)
    pub header_len: usize,
}

/// Which side's frames we are reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// We are the server, reading frames sent by a client (they must be masked).
    Server,
    /// We are the client, reading frames sent by a server (they must not be masked).
    Client,
}

const FIN_BIT: u8 = 0x80;
const RSV1_BIT: u8 = 0x40;
const RSV2_BIT: u8 = 0x20;
const RSV3_BIT: u8 = 0x10;
const OPCODE_BITS: u8 = 0x0F;
const MASK_BIT: u8 = 0x80;
const LEN_BITS: u8 = 0x7F;
/// Values of the 7-bit length that announce a 16-bit or a 64-bit extended length; smaller values
/// are the payload length itself.
const LEN_16_BIT: u8 = 126;
const LEN_64_BIT: u8 = 127;

/// Close, ping and pong (opcodes 8 and up); 0..=7 are data frames.
#[inline]
pub fn is_control(opcode: u8) -> bool {
    opcode & 0x08 != 0
}

/// Checks everything that can be judged from the first header byte alone.
#[inline]
fn check_first_byte(b0: u8, allow_rsv1: bool) -> Result<(), ProtocolError> {
    if b0 & RSV2_BIT != 0 {
        return Err(protocol_error("RSV2 set without a negotiated extension"));
    }
    if b0 & RSV3_BIT != 0 {
        return Err(protocol_error("RSV3 set without a negotiated extension"));
    }
    let opcode = b0 & OPCODE_BITS;
    match opcode {
        OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG => {}
        _ => return Err(protocol_error("reserved opcode")),
    }
    let rsv1 = b0 & RSV1_BIT != 0;
    if is_control(opcode) {
        if b0 & FIN_BIT == 0 {
            return Err(protocol_error("fragmented control frame"));
        }
        if rsv1 {
            return Err(protocol_error("RSV1 set on a control frame"));
        }
    }
    if rsv1 && !allow_rsv1 {
        return Err(protocol_error("RSV1 set without a negotiated extension"));
    }
    Ok(())
}

/// Parse a frame header at the start of `buf`. Ok(None) = need more bytes.
///
/// Role::Server: frames MUST be masked (unmasked → 1002). Role::Client: frames MUST NOT be masked
/// (masked → 1002).
///
/// Errors (all code 1002): RSV2 or RSV3 set; RSV1 set when `allow_rsv1` is false; reserved opcodes
/// 3-7 and 0xB-0xF; control frame (opcode >= 8) with FIN=0 or payload_len > 125; 64-bit length with
/// the most significant bit set. Non-minimal length encodings are accepted. RSV1 on a control frame
/// is always an error; RSV1 on a continuation frame (when `allow_rsv1`) is only reported in `rsv1`,
/// the message layer decides. Errors detectable from the first byte are reported as soon as that
/// byte is available.
pub fn parse_header(
    buf: &[u8],
    role: Role,
    allow_rsv1: bool,
) -> Result<Option<FrameHeader>, ProtocolError> {
    let Some(&b0) = buf.first() else {
        return Ok(None);
    };
    check_first_byte(b0, allow_rsv1)?;
    let Some(&b1) = buf.get(1) else {
        return Ok(None);
    };

    let fin = b0 & FIN_BIT != 0;
    let rsv1 = b0 & RSV1_BIT != 0;
    let opcode = b0 & OPCODE_BITS;
    let masked = b1 & MASK_BIT != 0;

    match role {
        Role::Server if !masked => return Err(protocol_error("client frame is not masked")),
        Role::Client if masked => return Err(protocol_error("server frame is masked")),
        _ => {}
    }

    let len7 = b1 & LEN_BITS;
    let (payload_len, mut pos) = match len7 {
        LEN_16_BIT => {
            let Some(ext) = buf.get(2..4) else {
                return Ok(None);
            };
            (u64::from(u16::from_be_bytes([ext[0], ext[1]])), 4)
        }
        LEN_64_BIT => {
            let Some(ext) = buf.get(2..10) else {
                return Ok(None);
            };
            let mut b = [0u8; 8];
            b.copy_from_slice(ext);
            let len = u64::from_be_bytes(b);
            if len & (1 << 63) != 0 {
                return Err(protocol_error(
                    "payload length has the most significant bit set",
                ));
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };

    if is_control(opcode) && payload_len > MAX_CONTROL_PAYLOAD as u64 {
        return Err(protocol_error(
            "control frame payload longer than 125 bytes",
        ));
    }

    let mask = if masked {
        let Some(k) = buf.get(pos..pos + 4) else {
            return Ok(None);
        };
        pos += 4;
        Some([k[0], k[1], k[2], k[3]])
    } else {
        None
    };

    Ok(Some(FrameHeader {
        fin,
        rsv1,
        opcode,
        mask,
        payload_len,
        header_len: pos,
    }))
}

/// XOR `data` with `key`, where `data` starts `offset` bytes into the frame payload (so a payload
/// unmasked in several pieces gives the same result as in one).
///
/// The bulk is processed 16 bytes at a time with the key rotated to `offset` and widened to a
/// `u128`; unaligned access is done through `from_ne_bytes`/`to_ne_bytes`, which the compiler turns
/// into plain (vector) loads and stores. Since 16 is a multiple of 4, the tail keeps the same key
/// phase and is finished bytewise.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    let phase = offset & 3;
    let mut rotated = [0u8; 4];
    for (i, r) in rotated.iter_mut().enumerate() {
        *r = key[(phase + i) & 3];
    }

    let mut wide = [0u8; 16];
    for (i, w) in wide.iter_mut().enumerate() {
        *w = rotated[i & 3];
    }
    let wide = u128::from_ne_bytes(wide);

    let mut chunks = data.chunks_exact_mut(16);
    for chunk in &mut chunks {
        let mut b = [0u8; 16];
        b.copy_from_slice(chunk);
        let v = u128::from_ne_bytes(b) ^ wide;
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= rotated[i & 3];
    }
}

/// Number of header bytes for a payload of `len` (2, 4 or 10), plus 4 if masked.
#[inline]
pub fn header_size(len: usize, masked: bool) -> usize {
    let base = if len < usize::from(LEN_16_BIT) {
        2
    } else if len <= u16::MAX as usize {
        4
    } else {
        10
    };
    if masked {
        base + 4
    } else {
        base
    }
}

/// Append a frame header. `mask` Some(key) for client frames (the caller masks the payload).
/// Lengths always use the minimal encoding.
pub fn write_header(
    out: &mut Vec<u8>,
    fin: bool,
    rsv1: bool,
    opcode: u8,
    len: usize,
    mask: Option<[u8; 4]>,
) {
    let (hdr, n) = encode_header(fin, rsv1, opcode, len, mask);
    out.extend_from_slice(&hdr[..n]);
}

/// A frame header as bytes: the first `n` of the returned array (2 to 14).
pub fn encode_header(
    fin: bool,
    rsv1: bool,
    opcode: u8,
    len: usize,
    mask: Option<[u8; 4]>,
) -> ([u8; 14], usize) {
    let mut b0 = opcode & OPCODE_BITS;
    if fin {
        b0 |= FIN_BIT;
    }
    if rsv1 {
        b0 |= RSV1_BIT;
    }
    let mask_bit = if mask.is_some() { MASK_BIT } else { 0 };

    let mut hdr = [0u8; 14];
    hdr[0] = b0;
    let mut n = 2;
    if len < usize::from(LEN_16_BIT) {
        hdr[1] = mask_bit | len as u8;
    } else if len <= u16::MAX as usize {
        hdr[1] = mask_bit | LEN_16_BIT;
        hdr[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        n = 4;
    } else {
        hdr[1] = mask_bit | LEN_64_BIT;
        hdr[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        n = 10;
    }
    if let Some(key) = mask {
        hdr[n..n + 4].copy_from_slice(&key);
        n += 4;
    }
    (hdr, n)
}

/// In `buf`, a run of whole unmasked frames starting at `from`: the first frame boundary at or
/// after `at` (`buf.len()` if the frame containing `at` is incomplete).
#[must_use]
pub fn frame_boundary(buf: &[u8], from: usize, at: usize) -> usize {
    let mut pos = from;
    while pos < at && pos + 2 <= buf.len() {
        let len7 = buf[pos + 1] & LEN_BITS;
        let (len, hdr) = match len7 {
            LEN_16_BIT if pos + 4 <= buf.len() => (u64::from(u16::from_be_bytes([buf[pos + 2], buf[pos + 3]])), 4),
            LEN_64_BIT if pos + 10 <= buf.len() => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&buf[pos + 2..pos + 10]);
                (u64::from_be_bytes(b), 10)
            }
            LEN_16_BIT | LEN_64_BIT => return buf.len(),
            n => (u64::from(n), 2),
        };
        pos = pos.saturating_add(hdr).saturating_add(len as usize);
    }
    pos.min(buf.len()).max(at.min(buf.len()))
}

/// Append one whole unmasked (server) frame: header + payload.
pub fn write_frame(out: &mut Vec<u8>, fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) {
    out.reserve(header_size(payload.len(), false) + payload.len());
    write_header(out, fin, rsv1, opcode, payload.len(), None);
    out.extend_from_slice(payload);
}

/// Append one whole masked (client) frame: header + payload XORed with `key`.
pub fn write_masked_frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8], key: [u8; 4]) {
    out.reserve(header_size(payload.len(), true) + payload.len());
    write_header(out, fin, false, opcode, payload.len(), Some(key));
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], key, 0);
}

/// Longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
fn truncate_on_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Append a server close frame with `code` and `reason` (reason truncated on a UTF-8 char boundary
/// so the payload is <= 125 bytes). Codes 1005/1006/1015 must never be sent: an empty close payload
/// is written instead for those.
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    if matches!(code, CLOSE_NO_STATUS | CLOSE_ABNORMAL | CLOSE_TLS_HANDSHAKE) {
        write_frame(out, true, false, OP_CLOSE, &[]);
        return;
    }
    let reason = truncate_on_char_boundary(reason, MAX_CONTROL_PAYLOAD - 2);
    let mut payload = [0u8; MAX_CONTROL_PAYLOAD];
    payload[..2].copy_from_slice(&code.to_be_bytes());
    payload[2..2 + reason.len()].copy_from_slice(reason.as_bytes());
    write_frame(out, true, false, OP_CLOSE, &payload[..2 + reason.len()]);
}

/// Is `code` valid to RECEIVE in a close frame (RFC 6455 §7.4.1/7.4.2 + IANA registry)?
/// Valid: 1000-1003, 1007-1014, 3000-4999. Everything else is invalid.
#[inline]
pub fn is_valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Decode a received close payload: empty → Ok((1005, "")); 1 byte → Err 1002; invalid code →
/// Err 1002; reason not UTF-8 → Err 1007.
pub fn parse_close_payload(payload: &[u8]) -> Result<(u16, &str), ProtocolError> {
    match payload {
        [] => Ok((CLOSE_NO_STATUS, "")),
        [_] => Err(protocol_error("close payload of one byte")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !is_valid_close_code(code) {
                return Err(protocol_error("invalid close code"));
            }
            match std::str::from_utf8(reason) {
                Ok(reason) => Ok((code, reason)),
                Err(_) => Err(ProtocolError {
                    code: CLOSE_INVALID_DATA,
                    reason: "close reason is not valid UTF-8",
                }),
            }
        }
    }
}

/// Length of the UTF-8 sequence introduced by lead byte `b` (only called on leads that
/// `from_utf8` accepted as the start of an incomplete sequence, i.e. C2..=F4).
#[inline]
fn utf8_sequence_len(b: u8) -> usize {
    if b >= 0xF0 {
        4
    } else if b >= 0xE0 {
        3
    } else {
        2
    }
}

/// Incremental UTF-8 validation for a text message whose bytes arrive in pieces (fragments, or
/// inflater output). Carries an incomplete trailing sequence (<= 3 bytes) between calls.
///
/// Once a piece has been rejected, every further `feed` of the same message returns false; a
/// `feed` with `fin = true` (whatever its result) or `reset` starts a fresh message.
#[derive(Debug, Default, Clone)]
pub struct Utf8Validator {
    /// Incomplete trailing sequence carried over from the previous piece (a valid prefix).
    pending: [u8; 4],
    pending_len: u8,
    /// The current message has already been found invalid.
    failed: bool,
}

impl Utf8Validator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Validate the next piece. Returns false as soon as the bytes so far cannot be a prefix of
    /// valid UTF-8. When `fin` is true, an incomplete trailing sequence is invalid.
    pub fn feed(&mut self, bytes: &[u8], fin: bool) -> bool {
        let ok = self.feed_inner(bytes, fin);
        if fin {
            self.reset();
        } else if !ok {
            self.failed = true;
        }
        ok
    }

    pub fn reset(&mut self) {
        *self = Self::default();
    }

    fn feed_inner(&mut self, mut bytes: &[u8], fin: bool) -> bool {
        if self.failed {
            return false;
        }

        if self.pending_len > 0 {
            // Complete the carried sequence with bytes from this piece.
            let have = usize::from(self.pending_len);
            let need = utf8_sequence_len(self.pending[0]) - have;
            let take = need.min(bytes.len());
            self.pending[have..have + take].copy_from_slice(&bytes[..take]);
            let total = have + take;
            match std::str::from_utf8(&self.pending[..total]) {
                Ok(_) => {
                    self.pending_len = 0;
                    bytes = &bytes[take..];
                }
                Err(e) if e.error_len().is_some() => return false,
                Err(_) => {
                    // Still a valid but incomplete prefix: this piece was consumed entirely.
                    self.pending_len = total as u8;
                    return !fin;
                }
            }
        }

        match std::str::from_utf8(bytes) {
            Ok(_) => true,
            Err(e) => {
                if e.error_len().is_some() || fin {
                    return false;
                }
                let tail = &bytes[e.valid_up_to()..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.pending_len = tail.len() as u8;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests;
