//! Pacing of a consumer that hands queued events to a single-threaded event loop in chunks (the
//! JS bridge): a turn may spend at most [`TURN_BUDGET`] of the loop's time, after which the rest
//! waits for the next turn so that timers and other I/O run in between.
//!
//! The budget is checked between chunks, so a chunk's size is chosen from the measured cost of
//! an event (a moving average): small enough that the last chunk of a turn overshoots the budget
//! by about one event's cost, large enough that a light batch is one chunk (one call).
//!
//! A consumer that went idle (delivered everything) before its budget was spent [`pause`]s the
//! turn instead of ending it: if it is called again within [`TURN_GAP`] it is still the same turn
//! (the loop did not run in between: Node calls a threadsafe function again at once when it was
//! woken during its callback), so a chain of light deliveries is bounded by one budget too; a
//! later call starts a new turn.
//!
//! [`pause`]: Pacer::pause

use std::time::{Duration, Instant};

/// Time one turn of the event loop may spend delivering events before it yields.
pub const TURN_BUDGET: Duration = Duration::from_millis(5);

/// A delivery that starts within this time of the previous one's end (after it went idle) is in
/// the same turn of the event loop: the loop cannot have polled, run timers and come back that fast
/// (a chained call comes within a few µs); a misjudged later call only ends its turn early.
pub const TURN_GAP: Duration = Duration::from_micros(100);

/// Estimated cost of one event before anything was measured (a cheap JS handler).
const INITIAL_EVENT_COST_NS: f64 = 2_000.0;

/// A turn's budget and the running estimate of what one event costs.
pub struct Pacer {
    budget: Duration,
    /// moving average of ns per event, over the chunks delivered so far (all turns)
    event_cost_ns: f64,
    turn: Option<Instant>,
    /// when the turn's last delivery went idle (None while delivering, or no turn)
    paused: Option<Instant>,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(TURN_BUDGET)
    }
}

impl Pacer {
    pub fn new(budget: Duration) -> Pacer {
        Pacer { budget, event_cost_ns: INITIAL_EVENT_COST_NS, turn: None, paused: None }
    }

    /// A delivery starts at `now`: it continues the turn if there is one and it did not go idle
    /// more than [`TURN_GAP`] ago, else it starts a new turn.
    pub fn begin(&mut self, now: Instant) {
        if let Some(p) = self.paused.take() {
            if now.saturating_duration_since(p) > TURN_GAP {
                self.turn = None;
            }
        }
        self.turn.get_or_insert(now);
    }

    /// The delivery went idle at `now` with the turn's budget left: a call within [`TURN_GAP`]
    /// continues the turn.
    pub fn pause(&mut self, now: Instant) {
        if self.turn.is_some() {
            self.paused = Some(now);
        }
    }

    /// The turn is over (the consumer yielded to the event loop).
    pub fn end(&mut self) {
        self.turn = None;
        self.paused = None;
    }

    /// Whether the turn's budget is spent at `now`.
    pub fn spent(&self, now: Instant) -> bool {
        self.turn.is_some_and(|t| now.saturating_duration_since(t) >= self.budget)
    }

    /// How many events the next chunk may hold: the budget left divided by the estimated cost
    /// of one, at least 1 and at most `max`.
    pub fn chunk(&self, now: Instant, max: usize) -> usize {
        let left = match self.turn {
            Some(t) => self.budget.saturating_sub(now.saturating_duration_since(t)),
            None => self.budget,
        };
        let n = left.as_nanos() as f64 / self.event_cost_ns;
        (n as usize).clamp(1, max.max(1))
    }

    /// A chunk of `events` took `took`: update the estimate (half the old, half the new).
    pub fn record(&mut self, events: usize, took: Duration) {
        if events == 0 {
            return;
        }
        let per = took.as_nanos() as f64 / events as f64;
        self.event_cost_ns = (self.event_cost_ns + per.max(1.0)) / 2.0;
    }

    pub fn event_cost_ns(&self) -> f64 {
        self.event_cost_ns
    }
}

#[cfg(test)]
mod tests;
