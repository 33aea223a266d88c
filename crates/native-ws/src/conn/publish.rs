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

/// A message being published: its payload, and its compress-once entries (one per deflate
/// parameters met among the sockets, looked up on first use).
pub struct Published {
    opcode: u8,
    pub(super) payload: Bytes,
    cached: Vec<((u32, u8), Cached)>,
}

impl Published {
    /// A text or binary message (`opcode` [`codec::OP_TEXT`] or [`codec::OP_BINARY`]).
    pub fn new(opcode: u8, payload: Bytes) -> Published {
        Published { opcode, payload, cached: Vec::new() }
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
            None => ob.wire.push_frame(false, msg.opcode, &msg.payload),
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
