//! The admission window: how many admitted clients may be in flight at once, in flight meaning
//! admitted and not yet heard from by the consumer (its first message taken, or its close).
//! A new client's cost to the consumer (a DDP `connect`, a login, a subscription) comes with its
//! first messages, a round trip after its 101, so the consumer's lag shows it late; the window
//! bounds what can be on its way meanwhile, whatever the clients' round trip.
//!
//! Its size adapts as TCP's congestion window does: it grows by one for each client heard from
//! while the consumer's lag is under a quarter of the bound and the window is in use (at least
//! half full), so it grows by half per round of clients while the consumer absorbs them; it
//! halves each time the consumer's lag goes over half the bound; after a quiet second it starts again
//! from [`INITIAL`]. A client not heard from within [`SILENCE`] (one that waits for the server
//! to speak first) no longer counts, and while the consumer is calm the window grows by one for
//! it too: a storm of silent clients costs the consumer only their open events.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The window's size after a quiet spell: what a storm's first moment may let in at once.
pub const INITIAL: u32 = 16;
/// The largest window.
pub const MAX: u32 = 65_536;
/// A window not half full for this long starts again from [`INITIAL`].
const MEMORY: Duration = Duration::from_secs(1);
/// A client in flight for this long no longer counts (it waits for the server to speak, or its
/// round trip is longer than this).
pub const SILENCE: Duration = Duration::from_millis(100);

pub struct Window {
    size: u32,
    /// admitted, connection not made yet
    unnamed: u32,
    /// admitted, connection made, not heard from: since when
    named: HashMap<u32, Instant>,
    /// when the window was last at least half full
    used_at: Option<Instant>,
    /// the consumer was behind at the last look (the window halves on the way in)
    behind: bool,
    /// when the silent clients were last forgotten
    swept_at: Option<Instant>,
}

impl Window {
    pub fn new() -> Window {
        Window { size: INITIAL, unnamed: 0, named: HashMap::new(), used_at: None, behind: false, swept_at: None }
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn in_flight(&self) -> u32 {
        self.unnamed + self.named.len() as u32
    }

    fn note_use(&mut self, now: Instant) {
        if self.in_flight() * 2 >= self.size {
            self.used_at = Some(now);
        }
    }

    /// Whether one more client fits; when it is full, forgets the silent ones (growing by as
    /// many when `calm`); restarts from [`INITIAL`] after a quiet spell.
    pub fn has_room(&mut self, now: Instant, calm: bool) -> bool {
        self.note_use(now);
        if self.used_at.is_none_or(|t| now.duration_since(t) > MEMORY) {
            self.size = INITIAL;
        }
        if self.in_flight() >= self.size {
            self.forget_silent(now, calm);
        }
        self.in_flight() < self.size
    }

    /// Forget the clients silent for [`SILENCE`] (growing by as many when `calm`).
    pub fn forget_silent(&mut self, now: Instant, calm: bool) {
        let before = self.named.len();
        self.named.retain(|_, &mut since| now.duration_since(since) < SILENCE);
        if calm {
            self.size = (self.size + (before - self.named.len()) as u32).min(MAX);
        }
        self.swept_at = Some(now);
    }

    /// One more client admitted.
    pub fn admitted(&mut self, now: Instant) {
        self.unnamed += 1;
        self.note_use(now);
    }

    /// An admitted client's connection is `id`.
    pub fn named(&mut self, id: u32, now: Instant) {
        self.unnamed = self.unnamed.saturating_sub(1);
        self.named.insert(id, now);
    }

    /// An admitted client will have no connection.
    pub fn abandoned(&mut self) {
        self.unnamed = self.unnamed.saturating_sub(1);
    }

    /// The consumer heard from connection `id` (if it was in flight); `calm`: its lag is under a
    /// quarter of the bound. True when `id` was in flight.
    pub fn heard(&mut self, id: u32, calm: bool, now: Instant) -> bool {
        let known = self.named.remove(&id).is_some();
        if known && calm && (self.in_flight() + 1) * 2 >= self.size {
            self.size = (self.size + 1).min(MAX);
            self.used_at = Some(now);
        }
        // silent clients do not stay in flight for long after a storm: while they do, the
        // consumer reports every message
        if self.swept_at.is_none_or(|t| now.duration_since(t) >= SILENCE) {
            self.forget_silent(now, calm);
        }
        known
    }

    /// Whether the consumer's lag is over half its bound now: the window halves each time it
    /// goes over.
    pub fn consumer(&mut self, behind: bool) {
        if behind && !self.behind {
            self.size = (self.size / 2).max(1);
        }
        self.behind = behind;
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
