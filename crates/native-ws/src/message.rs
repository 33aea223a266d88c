//! Frames → messages: fragmentation rules, the payload and fragment caps, permessage-deflate
//! inflating (capped on inflated bytes, across fragments) and UTF-8 validation of text
//! (incremental, so a bad sequence fails as soon as it arrives).

use crate::codec::{self, ProtocolError, Role, Utf8Validator};
use crate::config::MAX_IDLE_CAPACITY;
use crate::deflate::{self, InflateError, Inflater, SavedWindow, PARKED_WINDOW_MAX_BITS};
use crate::extensions::Negotiated;
use crate::spare::Spares;

thread_local! {
    /// Message buffers lent while a message is assembled (inflated or fragmented), so an idle
    /// connection keeps none.
    static SPARE_BUFFERS: Spares<u8> = const { Spares::new(8, MAX_IDLE_CAPACITY) };
}

/// One complete message or control frame, borrowed from the read buffer or the message buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    /// `text` payloads are valid UTF-8.
    Data { text: bool, payload: &'a [u8] },
    Ping(&'a [u8]),
    Pong(&'a [u8]),
    Close(u16, &'a str),
}

/// What [`Reader::read`] did with a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Progress {
    /// bytes of whole frames consumed
    pub consumed: usize,
    /// bytes the next (partial) frame needs in total, when known
    pub need: Option<usize>,
    /// a close frame was read: the caller stops reading
    pub closed: bool,
}

const TOO_BIG: ProtocolError = ProtocolError { code: codec::CLOSE_TOO_BIG, reason: "message too big" };
const BAD_UTF8: ProtocolError = ProtocolError { code: codec::CLOSE_INVALID_DATA, reason: "invalid UTF-8" };

/// `Reader::opcode` while no fragmented message is in progress.
const NO_MESSAGE: u8 = 0;

/// Where a connection's inflater comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inflating {
    /// The client resets its context per message: a pooled inflater per message.
    Reset,
    /// Context takeover with a window of at most [`PARKED_WINDOW_MAX_BITS`]: a pooled inflater
    /// per message, resumed from the window parked in the connection.
    Parked,
    /// Context takeover with a larger window: the connection keeps its own inflater (parking
    /// would copy up to 32 KiB in and out per message).
    Own,
}

/// Per-connection message assembly state.
pub struct Reader {
    max_payload: usize,
    max_fragments: u32,
    /// the client's window bits and how this connection gets its inflater
    deflate: Option<(u8, Inflating)>,
    /// a dedicated inflater, or the one lent for the message in progress
    inflater: Option<Box<Inflater>>,
    /// the parked window of an [`Inflating::Parked`] stream
    window: SavedWindow,
    /// opcode of the fragmented message in progress, or [`NO_MESSAGE`]
    opcode: u8,
    compressed: bool,
    /// the compressed message in progress has fed the inflater at least one byte
    fed: bool,
    fragments: u32,
    /// the message being assembled (inflated or fragmented): a buffer lent by the thread's pool
    /// while a message is in progress, empty (no allocation) between messages
    msg: Vec<u8>,
    utf8: Utf8Validator,
}

fn inflate_error(e: InflateError) -> ProtocolError {
    match e {
        InflateError::TooBig => TOO_BIG,
        InflateError::Corrupt => ProtocolError { code: codec::CLOSE_INVALID_DATA, reason: "corrupt deflate data" },
    }
}

impl Reader {
    pub fn new(max_payload: usize, max_fragments: u32, deflate: Option<&Negotiated>) -> Reader {
        Reader {
            max_payload,
            max_fragments,
            deflate: deflate.map(|n| {
                let how = if n.client_no_context_takeover {
                    Inflating::Reset
                } else if n.client_window_bits <= PARKED_WINDOW_MAX_BITS {
                    Inflating::Parked
                } else {
                    Inflating::Own
                };
                (n.client_window_bits, how)
            }),
            inflater: None,
            window: SavedWindow::default(),
            opcode: NO_MESSAGE,
            compressed: false,
            fed: false,
            fragments: 0,
            msg: Vec::new(),
            utf8: Utf8Validator::new(),
        }
    }

    /// Parse every whole frame at the start of `buf` (unmasking in place) and hand each complete
    /// message to `on`. Stops after a close frame.
    pub fn read(
        &mut self,
        buf: &mut [u8],
        on: &mut dyn FnMut(Msg<'_>),
    ) -> Result<Progress, ProtocolError> {
        let mut pos = 0;
        while pos < buf.len() {
            let Some(h) = codec::parse_header(&buf[pos..], Role::Server, self.deflate.is_some())? else {
                return Ok(Progress { consumed: pos, need: None, closed: false });
            };
            let data_frame = !codec::is_control(h.opcode);
            // Caps checked on the header, before any payload is buffered. Compressed frames are
            // capped on inflated bytes later; their wire size may exceed the cap only slightly.
            let limit = if h.rsv1 || (self.compressed && data_frame) {
                self.max_payload.saturating_add(self.max_payload / 16 + 1024)
            } else {
                self.max_payload
            };
            let so_far = if h.opcode == codec::OP_CONTINUATION { self.msg.len() as u64 } else { 0 };
            if data_frame && h.payload_len + so_far > limit as u64 {
                return Err(TOO_BIG);
            }
            let total = h.header_len + h.payload_len as usize;
            if buf.len() - pos < total {
                return Ok(Progress { consumed: pos, need: Some(total), closed: false });
            }
            let payload = &mut buf[pos + h.header_len..pos + total];
            if let Some(key) = h.mask {
                codec::apply_mask(payload, key, 0);
            }
            pos += total;
            match h.opcode {
                codec::OP_PING => on(Msg::Ping(payload)),
                codec::OP_PONG => on(Msg::Pong(payload)),
                codec::OP_CLOSE => {
                    let (code, reason) = codec::parse_close_payload(payload)?;
                    on(Msg::Close(code, reason));
                    return Ok(Progress { consumed: pos, need: None, closed: true });
                }
                codec::OP_CONTINUATION => {
                    if self.opcode == NO_MESSAGE {
                        return Err(ProtocolError { code: codec::CLOSE_PROTOCOL_ERROR, reason: "continuation without a message" });
                    }
                    if h.rsv1 {
                        return Err(ProtocolError { code: codec::CLOSE_PROTOCOL_ERROR, reason: "RSV1 on a continuation frame" });
                    }
                    self.fragments += 1;
                    if self.fragments > self.max_fragments {
                        return Err(ProtocolError { code: codec::CLOSE_TOO_BIG, reason: "too many fragments" });
                    }
                    self.append(payload, h.fin)?;
                    if h.fin {
                        self.deliver(on);
                    }
                }
                _ => {
                    if self.opcode != NO_MESSAGE {
                        return Err(ProtocolError { code: codec::CLOSE_PROTOCOL_ERROR, reason: "expected a continuation frame" });
                    }
                    let text = h.opcode == codec::OP_TEXT;
                    if h.fin && !h.rsv1 {
                        // The common case: a whole message in one frame, delivered in place.
                        if text && std::str::from_utf8(payload).is_err() {
                            return Err(BAD_UTF8);
                        }
                        on(Msg::Data { text, payload });
                        continue;
                    }
                    self.opcode = h.opcode;
                    self.compressed = h.rsv1;
                    self.fragments = 1;
                    self.append(payload, h.fin)?;
                    if h.fin {
                        self.deliver(on);
                    }
                }
            }
        }
        Ok(Progress { consumed: pos, need: None, closed: false })
    }

    /// Add one fragment's payload to the message in progress (inflating it if compressed).
    fn append(&mut self, payload: &[u8], fin: bool) -> Result<(), ProtocolError> {
        if self.msg.capacity() == 0 {
            self.msg = SPARE_BUFFERS.with(Spares::take);
        }
        let start = self.msg.len();
        if self.compressed {
            let (bits, how) = self.deflate.expect("RSV1 accepted only with deflate");
            // A compressed message with no payload bytes at all (no sender makes one: RFC 7692
            // leaves at least an empty block) is an empty message: the inflater is not touched,
            // since the `00 00 ff ff` tail alone would start a stored block and swallow the next
            // message of a context-takeover stream.
            if !payload.is_empty() {
                self.fed = true;
                let window = &self.window;
                let inflater = self.inflater.get_or_insert_with(|| match how {
                    Inflating::Own => Box::new(Inflater::new(bits, false)),
                    Inflating::Reset => deflate::take_pooled_inflater(bits),
                    Inflating::Parked => {
                        let mut inflater = deflate::take_pooled_inflater(bits);
                        inflater.resume(window.bytes());
                        inflater
                    }
                });
                inflater.feed(payload, &mut self.msg, self.max_payload).map_err(inflate_error)?;
            }
            if fin && self.fed {
                let inflater = self.inflater.as_mut().expect("fed above");
                let ended = inflater.finish(&mut self.msg, self.max_payload).map_err(inflate_error)?;
                if how == Inflating::Parked {
                    if ended { self.window.clear() } else { self.window.push(&self.msg, bits) }
                }
                if how != Inflating::Own {
                    // finish() reset it: nothing of this connection is left in it.
                    deflate::give_back_inflater(bits, self.inflater.take().expect("just used"));
                }
            }
        } else {
            if self.msg.len() + payload.len() > self.max_payload {
                return Err(TOO_BIG);
            }
            self.msg.extend_from_slice(payload);
        }
        if self.opcode == codec::OP_TEXT && !self.utf8.feed(&self.msg[start..], fin) {
            return Err(BAD_UTF8);
        }
        Ok(())
    }

    fn deliver(&mut self, on: &mut dyn FnMut(Msg<'_>)) {
        on(Msg::Data { text: self.opcode == codec::OP_TEXT, payload: &self.msg });
        self.opcode = NO_MESSAGE;
        self.compressed = false;
        self.fed = false;
        self.fragments = 0;
        let msg = std::mem::take(&mut self.msg);
        SPARE_BUFFERS.with(|s| s.give_back(msg));
    }
}

#[cfg(test)]
mod tests;
