//! Pacing of a consumer that hands queued events to a single-threaded event loop in chunks (the
//! JS bridge): a turn may spend at most [`TURN_BUDGET`] of the loop's time, after which the rest
//! waits for the next turn so that timers and other I/O run in between.
//!
//! The budget is checked between chunks, so a chunk's size is chosen from the measured cost of
//! an event (a moving average): small enough that the last chunk of a turn overshoots the budget
//! by about one event's cost, large enough that a light batch is one chunk (one call).
//!
//! A delivery that went idle (delivered everything) before the budget was spent leaves the turn
//! open: the consumer says whether its next delivery is in the same turn (Node called it again
//! without returning to the event loop, see src/bridge.rs), so that a chain of light deliveries is
//! bounded by one budget too.

use std::time::{Duration, Instant};

/// Time one turn of the event loop may spend delivering events before it yields.
pub const TURN_BUDGET: Duration = Duration::from_millis(5);

/// Estimated cost of one event before anything was measured (a cheap JS handler).
const INITIAL_EVENT_COST_NS: f64 = 2_000.0;

/// A turn's budget and the running estimate of what one event costs.
pub struct Pacer {
    budget: Duration,
    /// moving average of ns per event, over the chunks delivered so far (all turns)
    event_cost_ns: f64,
    turn: Option<Instant>,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new(TURN_BUDGET)
    }
}

impl Pacer {
    pub fn new(budget: Duration) -> Pacer {
        Pacer { budget, event_cost_ns: INITIAL_EVENT_COST_NS, turn: None }
    }

    /// A delivery starts at `now`: in the current turn when `same_turn` (and there is one), else
    /// in a new turn.
    pub fn begin(&mut self, now: Instant, same_turn: bool) {
        if !same_turn {
            self.turn = None;
        }
        self.turn.get_or_insert(now);
    }

    /// The turn is over (the consumer yielded to the event loop).
    pub fn end(&mut self) {
        self.turn = None;
    }

    /// Whether the turn's budget is spent at `now`.
    pub fn spent(&self, now: Instant) -> bool {
        self.turn.is_some_and(|t| now.saturating_duration_since(t) >= self.budget)
    }

    /// The turn's budget left at `now` (all of it outside a turn).
    pub fn left(&self, now: Instant) -> Duration {
        match self.turn {
            Some(t) => self.budget.saturating_sub(now.saturating_duration_since(t)),
            None => self.budget,
        }
    }

    /// How many events the next chunk may hold: the budget left divided by the estimated cost
    /// of one, at least 1 and at most `max`.
    pub fn chunk(&self, now: Instant, max: usize) -> usize {
        let n = self.left(now).as_nanos() as f64 / self.event_cost_ns;
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
