//! One message to many connections (`publish`): the payload is encoded once into one buffer and
//! that buffer is queued on every connection (a shared frame, see `outbox`): nothing is copied
//! per socket. Compressed, the message is looked up once in the compress-once cache; the first
//! I/O thread that needs it compresses it for every socket, and the compressed payload is shared
//! the same way.

use super::{Conn, SendStatus};
use crate::codec;
use crate::deflate_cache::{self, Cached};
use crate::outbox::{Job, Payload};
use crate::stats::Stats;
use bytes::Bytes;

/// A message being published: its frame (built once, header included: the same bytes for every
/// subscriber), its payload (a slice of the same buffer, for compressing), and its compress-once
/// entries (one per deflate parameters met among the sockets, looked up on first use).
pub struct Published {
    opcode: u8,
    pub(super) frame: Bytes,
    pub(super) payload: Bytes,
    cached: Vec<((u32, u8), Cached)>,
}

/// Room for the longest header in front of a payload being written.
const HEADROOM: usize = 10;

impl Published {
    /// A text or binary message (`opcode` [`codec::OP_TEXT`] or [`codec::OP_BINARY`]) whose
    /// payload `fill` appends to the vector it is given: written once, straight into the buffer
    /// every subscriber's queue will refer to (its header goes in front, no copy).
    pub fn build(opcode: u8, fill: impl FnOnce(&mut Vec<u8>)) -> Published {
        let mut buf = vec![0u8; HEADROOM];
        fill(&mut buf);
        let len = buf.len() - HEADROOM;
        let (head, n) = codec::encode_header(true, false, opcode, len, None);
        buf[HEADROOM - n..HEADROOM].copy_from_slice(&head[..n]);
        let frame = Bytes::from(buf).slice(HEADROOM - n..);
        let payload = frame.slice(n..);
        Published { opcode, frame, payload, cached: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.payload.len()
    }

    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// The compress-once entry for `level` and window `bits`.
    pub(super) fn cached(&mut self, level: u32, bits: u8) -> &Cached {
        let i = match self.cached.iter().position(|(p, _)| *p == (level, bits)) {
            Some(i) => i,
            None => {
                self.cached.push(((level, bits), deflate_cache::cached_or_alone(level, bits, &self.payload)));
                self.cached.len() - 1
            }
        };
        &self.cached[i].1
    }
}

impl Conn {
    /// Queue a published message (see [`Published`]), behind what this connection queued
    /// already; the same answers as [`Conn::send`].
    pub fn publish(&self, msg: &mut Published, compress: bool) -> (SendStatus, bool) {
        let mut ob = self.lock();
        if let Err(refused) = self.admit(&mut ob) {
            return (refused, false);
        }
        let ob = &mut *ob;
        let len = msg.payload.len();
        let queued = match self.deflate.as_ref().filter(|_| compress && len >= self.threshold) {
            None => ob.wire.push_shared(&msg.frame),
            Some(n) if n.server_no_context_takeover => {
                let opcode = msg.opcode;
                let cached = msg.cached(self.deflate_level(), n.server_window_bits);
                match cached.ready() {
                    Some(compressed) => {
                        Stats::add(&self.stats.compressions_reused, 1);
                        ob.wire.push_frame(true, opcode, compressed)
                    }
                    None => {
                        let payload = Payload::Cached(cached.clone());
                        ob.wire.push_job(Job { opcode, len, payload });
                        len + codec::header_size(len, false)
                    }
                }
            }
            Some(_) => {
                // Context takeover: this connection's own deflater compresses it.
                let payload = Payload::Shared(msg.payload.clone());
                ob.wire.push_job(Job { opcode: msg.opcode, len, payload });
                len + codec::header_size(len, false)
            }
        };
        self.queued(ob, queued, len)
    }
}
