//! permessage-deflate (RFC 7692) compression streams, server side. The negotiation (offers,
//! parameters, [`DeflateConfig`]) is in [`crate::extensions`].
//!
//! * [`Deflater`] compresses one whole message at a time (sync flush, trailing
//!   `00 00 ff ff` removed).
//! * [`Inflater`] decompresses one message at a time, fragment by fragment,
//!   with a hard cap on the inflated size (zip-bomb safe).
//! * Per-I/O-thread pools, so that an idle connection holds no stream:
//!   `with_shared_deflater` runs a message through the thread's compressor for
//!   server_no_context_takeover connections, and `take_pooled_inflater` /
//!   `give_back_inflater` lend a spare inflater for one message, to
//!   client_no_context_takeover connections and to context-takeover ones with
//!   a small window, which keep only a [`SavedWindow`] between messages.
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
use std::cell::RefCell;

/// Window bits flate2 (like zlib) accepts; a negotiated 8 is served by [`MIN_WINDOW_BITS`]
/// (see the module docs).
pub(crate) const MIN_WINDOW_BITS: u8 = 9;
pub(crate) const MAX_WINDOW_BITS: u8 = 15;

/// The tail of a sync flush (empty stored block), removed by the sender and
/// appended again by the receiver.
pub(crate) const SYNC_TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Size of the stack buffer the inflater writes into before copying to the
/// caller's vector (bounds every single inflate call).
const INFLATE_CHUNK: usize = 8 * 1024;

/// Smallest capacity step when growing the inflater's output vector.
const INFLATE_MIN_GROW: usize = 4 * 1024;

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
            window_bits.clamp(MIN_WINDOW_BITS, MAX_WINDOW_BITS),
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
    /// A stored block holds at most this many bytes (its LEN is 16 bits).
    const MAX_STORED: usize = u16::MAX as usize;
    out.reserve(input.len() + input.len() / MAX_STORED * 5 + 6);
    for chunk in input.chunks(MAX_STORED) {
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
            inner: Decompress::new_with_window_bits(
                false,
                window_bits.clamp(MIN_WINDOW_BITS, MAX_WINDOW_BITS),
            ),
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
    ///
    /// Returns whether the sender ended its deflate stream in this message (the next message
    /// starts a new stream, with an empty window).
    pub fn finish(&mut self, out: &mut Vec<u8>, max_len: usize) -> Result<bool, InflateError> {
        if !self.stream_ended {
            let before = out.len();
            self.inflate(&SYNC_TAIL, out, max_len, FlushDecompress::Sync)?;
            if out.len() != before && !self.stream_ended {
                return Err(InflateError::Corrupt);
            }
        }
        let ended = self.stream_ended;
        if self.no_context_takeover || ended {
            self.reset();
        }
        Ok(ended)
    }

    /// Drop any partial-message state and the window (fresh stream).
    pub fn reset(&mut self) {
        self.inner.reset(false);
        self.stream_ended = false;
    }

    /// Continue a context-takeover stream in a fresh inflater: `window` is the stream's last
    /// output bytes (at most the window size; see [`SavedWindow`]). Call on a reset inflater,
    /// before the first [`Inflater::feed`] of a message.
    pub fn resume(&mut self, window: &[u8]) {
        if !window.is_empty() {
            // A raw inflater takes a dictionary at any point between messages; it cannot fail
            // for a stream that has not started (and a failure would surface as Corrupt).
            let _ = self.inner.set_dictionary(window);
        }
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
// A parked inflate window
// ---------------------------------------------------------------------------

/// Context-takeover connections whose client window is at most this many bits park it in a
/// [`SavedWindow`] between messages (≤ 4 KiB copied in and out per message); larger windows keep
/// a dedicated inflater.
pub(crate) const PARKED_WINDOW_MAX_BITS: u8 = 12;

/// The inflate window of a context-takeover connection between two messages: the last bytes its
/// client's stream produced, at most `1 << window_bits` (the farthest a back-reference may reach).
/// With it the connection lends a pooled [`Inflater`] per message ([`Inflater::resume`]) instead
/// of keeping one: an idle connection holds these bytes, not an inflater's ~10 KiB of state and
/// window pages. Used for small windows only (the bytes are copied twice per message).
#[derive(Default)]
pub struct SavedWindow {
    bytes: Vec<u8>,
}

impl SavedWindow {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Append one message's inflated output to the stream history, keeping the last
    /// `1 << window_bits` bytes.
    pub fn push(&mut self, output: &[u8], window_bits: u8) {
        let size = 1usize << window_bits.clamp(MIN_WINDOW_BITS, MAX_WINDOW_BITS);
        if output.len() >= size {
            self.bytes.clear();
            self.bytes.extend_from_slice(&output[output.len() - size..]);
        } else {
            let keep = size - output.len();
            if self.bytes.len() > keep {
                self.bytes.drain(..self.bytes.len() - keep);
            }
            self.bytes.extend_from_slice(output);
        }
    }

    /// The stream restarted (the client ended it with a final block).
    pub fn clear(&mut self) {
        self.bytes = Vec::new();
    }
}

// ---------------------------------------------------------------------------
// Per-I/O-thread pools
// ---------------------------------------------------------------------------

thread_local! {
    /// With server_no_context_takeover one compressor per thread (and level and window) serves
    /// every socket.
    static SHARED_DEFLATERS: RefCell<Vec<((u32, u8), Deflater)>> = const { RefCell::new(Vec::new()) };
    /// Inflaters lent for one message, reset: to connections whose client resets its context per
    /// message (client_no_context_takeover), and to context-takeover connections with a small
    /// window, which resume their [`SavedWindow`] in it. After each message the inflater comes
    /// back, so an idle connection holds none and no message allocates one.
    static SPARE_INFLATERS: RefCell<Vec<(u8, Box<Inflater>)>> = const { RefCell::new(Vec::new()) };
}

const MAX_SPARE_INFLATERS: usize = 8;

/// Run `f` with this thread's no-context-takeover deflater for `level` and `window_bits`
/// (created on first use; it resets after every message, so every socket may use it).
pub(crate) fn with_shared_deflater<R>(
    level: u32,
    window_bits: u8,
    f: impl FnOnce(&mut Deflater) -> R,
) -> R {
    SHARED_DEFLATERS.with(|cell| {
        let mut list = cell.borrow_mut();
        let i = match list.iter().position(|(k, _)| *k == (level, window_bits)) {
            Some(i) => i,
            None => {
                list.push((
                    (level, window_bits),
                    Deflater::new(level, window_bits, true),
                ));
                list.len() - 1
            }
        };
        f(&mut list[i].1)
    })
}

/// A no-context-takeover inflater for `window_bits`: one of this thread's spares, else a new one.
/// Hand it back with [`give_back_inflater`] once its message is finished.
pub(crate) fn take_pooled_inflater(window_bits: u8) -> Box<Inflater> {
    let spare = SPARE_INFLATERS.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.iter().position(|(b, _)| *b == window_bits)?;
        Some(s.swap_remove(i).1)
    });
    spare.unwrap_or_else(|| Box::new(Inflater::new(window_bits, true)))
}

/// Return an inflater from [`take_pooled_inflater`] after [`Inflater::finish`] (which reset it,
/// so nothing of its connection is left in it). Dropped when the thread has enough spares.
pub(crate) fn give_back_inflater(window_bits: u8, inflater: Box<Inflater>) {
    debug_assert!(inflater.no_context_takeover, "only pooled (resetting) inflaters come back");
    SPARE_INFLATERS.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < MAX_SPARE_INFLATERS {
            s.push((window_bits, inflater));
        }
    });
}

#[cfg(test)]
mod tests;
