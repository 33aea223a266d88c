//! Connections an attached server accepted whose first bytes have not shown yet what they are
//! (see [`crate::peek`]), waiting in the inline driver's epoll on the consumer's own thread: no
//! I/O thread and no cross-thread wake-up is involved, and a connection found to be the HTTP
//! server's goes back to it in the turn that read its bytes.
//!
//! The fd is the consumer's own (its HTTP server's accepted handle, not read yet): it is only
//! registered here, never duplicated nor closed, and it is deregistered before the consumer hears
//! the verdict. Only a connection the core takes is duplicated (by the driver's taker).

use crate::peek::{self, Claim, Verdict};
use mio::unix::SourceFd;
use mio::{Registry, Token};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

/// Watch tokens count down from here (the driver's own wake-up is `usize::MAX`); connection
/// tokens are connection ids, small integers counting up from 0.
const TOP: usize = usize::MAX - 1;
/// Tokens above this one are watches'.
const FLOOR: usize = usize::MAX / 2;

struct Watched {
    fd: RawFd,
    claim: Arc<Claim>,
    /// the consumer's name for this connection
    token: u64,
}

/// The connections waiting for their first bytes.
#[derive(Default)]
pub(crate) struct Looks {
    slots: Vec<Option<Watched>>,
    free: Vec<usize>,
    /// when each watch gives up: all wait the same [`peek::WAIT`], so in order of insertion
    /// (entries of watches decided since are stale: their slot is empty or has another token)
    deadlines: VecDeque<(Instant, usize, u64)>,
}

/// The slot index of a watch's token, None for any other token.
pub(crate) fn index_of(token: Token) -> Option<usize> {
    (token.0 > FLOOR && token.0 <= TOP).then(|| TOP - token.0)
}

impl Looks {
    /// Wait for `fd`'s first bytes to decide (at most [`peek::WAIT`]).
    pub(crate) fn watch(&mut self, registry: &Registry, fd: RawFd, claim: Arc<Claim>, token: u64) -> io::Result<()> {
        let index = self.free.pop().unwrap_or(self.slots.len());
        // Edge-triggered: bytes already queued bring an event at once, each new segment another.
        registry.register(&mut SourceFd(&fd), Token(TOP - index), mio::Interest::READABLE).inspect_err(|_| {
            if index < self.slots.len() {
                self.free.push(index);
            }
        })?;
        if index == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[index] = Some(Watched { fd, claim, token });
        self.deadlines.push_back((Instant::now() + peek::WAIT, index, token));
        Ok(())
    }

    /// Look at watch `index`'s bytes after an event (`ended`: the peer shut down its side).
    /// Decided: the watch is over (deregistered); returns its token, fd, claim and verdict.
    pub(crate) fn look(&mut self, registry: &Registry, index: usize, ended: bool) -> Option<(u64, RawFd, Arc<Claim>, Verdict)> {
        let w = self.slots.get(index)?.as_ref()?;
        match peek::look(w.fd, &w.claim, ended) {
            Verdict::Wait => None,
            v => self.end(registry, index).map(|(token, fd, claim)| (token, fd, claim, v)),
        }
    }

    /// The watches whose wait is over by `now` end (deregistered): their tokens, in order.
    pub(crate) fn expire(&mut self, registry: &Registry, now: Instant, mut each: impl FnMut(u64)) {
        while let Some(&(at, index, token)) = self.deadlines.front() {
            if at > now {
                break;
            }
            self.deadlines.pop_front();
            if self.slots.get(index).and_then(Option::as_ref).is_some_and(|w| w.token == token) {
                self.end(registry, index);
                each(token);
            }
        }
    }

    /// When the next watch gives up, if any waits.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        // Drop stale entries first: the driver's timer should not wake for a decided watch.
        while let Some(&(_, index, token)) = self.deadlines.front() {
            if self.slots.get(index).and_then(Option::as_ref).is_some_and(|w| w.token == token) {
                break;
            }
            self.deadlines.pop_front();
        }
        self.deadlines.front().map(|&(at, _, _)| at)
    }

    /// Connections still waiting.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Forget every watch (deregistered; the consumer closes or keeps its fds).
    pub(crate) fn clear(&mut self, registry: &Registry) {
        for index in 0..self.slots.len() {
            self.end(registry, index);
        }
        self.deadlines.clear();
    }

    fn end(&mut self, registry: &Registry, index: usize) -> Option<(u64, RawFd, Arc<Claim>)> {
        let w = self.slots.get_mut(index)?.take()?;
        let _ = registry.deregister(&mut SourceFd(&w.fd));
        self.free.push(index);
        Some((w.token, w.fd, w.claim))
    }
}
