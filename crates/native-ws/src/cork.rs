//! The bounded cork of one JS tick (or one batch the bridge delivered): the sockets that queued
//! frames wait and are written together, each once, at the end of the tick. A large fan-out
//! does not wait for its last send: the first [`FIRST_CORK_SOCKETS`] sockets, and then every
//! [`CORK_SOCKETS`], are written as a group as soon as the next socket queues a frame.
//!
//! Not when the group's last socket joins: its first frame was queued a moment ago and the
//! handler that queued it may queue more (a client's pipelined calls, handled one after the other in the
//! same batch, answer on the same socket). Writing it then would split those replies over two
//! writes, and a client that writes its next calls per read of replies splits its next calls the
//! same way (the coalesced echo lost ~5–10 % calls/s to that once the bridge wrote per batch).

use crate::config::{CORK_SOCKETS, FIRST_CORK_SOCKETS};

/// Sockets (`T`: a handle to one) waiting to be written, and how many may wait before a group
/// is written early.
pub struct Cork<T> {
    waiting: Vec<T>,
    bound: usize,
}

impl<T> Default for Cork<T> {
    fn default() -> Self {
        Cork::new()
    }
}

impl<T> Cork<T> {
    pub const fn new() -> Cork<T> {
        Cork { waiting: Vec::new(), bound: FIRST_CORK_SOCKETS }
    }

    /// `socket` queued its first frame since it was last written. Returns the sockets to write
    /// now: none, or when the bound was reached by the sockets before it, those (a group of
    /// exactly the bound), and `socket` starts the next group.
    pub fn join(&mut self, socket: T) -> Vec<T> {
        let ready = if self.waiting.len() >= self.bound {
            self.bound = CORK_SOCKETS;
            std::mem::replace(&mut self.waiting, Vec::with_capacity(CORK_SOCKETS))
        } else {
            Vec::new()
        };
        self.waiting.push(socket);
        ready
    }

    /// The tick (or batch) is over: every waiting socket, to write now; the next tick's first
    /// group is small again. Hand the emptied vector back with [`Cork::recycle`].
    pub fn end(&mut self) -> Vec<T> {
        self.bound = FIRST_CORK_SOCKETS;
        std::mem::take(&mut self.waiting)
    }

    /// Reuse `spare`'s allocation for the next tick (if nothing joined meanwhile).
    pub fn recycle(&mut self, mut spare: Vec<T>) {
        if self.waiting.is_empty() {
            spare.clear();
            self.waiting = spare;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests;
