//! Admission control for reconnect storms: before any consumer code runs, an upgrade is held
//! while the consumer (JS) is behind, so a storm that would starve the consumer's thread is let in
//! at the pace the consumer absorbs it, and one it keeps up with passes at full speed.
//!
//! "Behind" is measured, not assumed: the consumer's lag (how long its oldest unhandled event, or
//! its unread input, has waited) is over `max_lag`, or `max_pending` admitted sockets still wait
//! for the consumer to take their first event, or the admission window is full: as many admitted
//! clients are in flight (not heard from yet) as the consumer has lately absorbed at once
//! ([`window`]). There is no fixed rate that a healthy server could exceed (an optional token
//! bucket, `rate`/`burst`, off by default, caps the rate for those who want one).
//!
//! While it is behind, upgrades queue at a door and pass in arrival order as room comes. An
//! upgrade held longer than `hold` is answered `503 Service Unavailable` with `Retry-After`
//! (Meteor's client backs off and retries): nothing waits forever and nothing is dropped
//! unanswered.

mod window;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use window::Window;

/// How often the upgrade at the door looks again while the consumer is behind.
const DOOR_POLL: Duration = Duration::from_millis(1);

/// The consumer's backlog, as admission sees it: the JS bridge's events not yet handled, and the
/// inline driver's input not yet read (its sockets are read on the consumer's thread).
pub trait Backlog: Send + Sync {
    /// How long the oldest event not yet handled by the consumer has waited (zero when none).
    fn oldest_wait(&self) -> Duration;
}

/// Admission limits (the JS layer validates them; 0 turns a bound off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// a fixed cap on upgrades admitted per second (0 = none, the default)
    pub rate: u32,
    /// with `rate`: upgrades admitted at once after a quiet period (the bucket's size; at least 1)
    pub burst: u32,
    /// admitted sockets whose first event the consumer has not taken yet (0 = no bound)
    pub max_pending: u32,
    /// longest the consumer's oldest waiting event may have waited, in ms (0 = no bound)
    pub max_lag_ms: u32,
    /// longest an upgrade is held before it is refused, in ms
    pub hold_ms: u32,
    /// the `Retry-After` of a refusal, in seconds
    pub retry_after_s: u32,
}

impl AdmissionConfig {
    /// No bound at all: every upgrade is admitted at once (the `/uws` surface, the pure-Rust
    /// consumers).
    pub const OFF: AdmissionConfig =
        AdmissionConfig { rate: 0, burst: 1, max_pending: 0, max_lag_ms: 0, hold_ms: 0, retry_after_s: 1 };

    pub fn is_off(&self) -> bool {
        self.rate == 0 && self.max_pending == 0 && self.max_lag_ms == 0
    }
}

impl Default for AdmissionConfig {
    /// The main API's and the Meteor adapter's default: no fixed rate, new upgrades held while the
    /// consumer's oldest event has waited more than 10 ms or 256 admitted sockets wait for their
    /// open event, held up to 5 s, then `Retry-After: 2`.
    fn default() -> Self {
        AdmissionConfig { rate: 0, burst: 1000, max_pending: 256, max_lag_ms: 10, hold_ms: 5000, retry_after_s: 2 }
    }
}

/// What admission decided for one upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// go on (the consumer will get the upgrade or open event); `watch`: it counts in the
    /// admission window, and the server names its connection ([`Admission::watch`]) or gives it
    /// up ([`Admission::abandoned`])
    Admit { watch: bool },
    /// answer 503 with `Retry-After: retry_after_s`
    Refuse { retry_after_s: u32 },
}

/// Counters of `stats()`.
#[derive(Default, Debug)]
pub struct AdmissionStats {
    pub admitted: AtomicU64,
    /// upgrades that had to wait (whether admitted or refused after)
    pub deferred: AtomicU64,
    pub refused: AtomicU64,
}

pub struct Admission {
    config: Mutex<AdmissionConfig>,
    /// the theoretical arrival time of the next admission (GCRA); None before the first
    tat: Mutex<Option<Instant>>,
    /// admitted sockets whose first event the consumer has not taken yet
    pending: AtomicU64,
    /// upgrades held at the door or queued for it
    waiting: AtomicU64,
    /// one held upgrade at a time looks at the consumer's state; the others queue (FIFO)
    door: tokio::sync::Mutex<()>,
    window: Mutex<Window>,
    /// the window's clients in flight (read without its lock: [`Admission::listening`])
    in_flight: AtomicU64,
    /// wakes the upgrade at the door when a client leaves the window
    room_made: tokio::sync::Notify,
    backlogs: Mutex<Vec<Weak<dyn Backlog>>>,
    pub stats: AdmissionStats,
}

impl Admission {
    pub fn new(config: AdmissionConfig) -> Admission {
        Admission {
            config: Mutex::new(config),
            tat: Mutex::new(None),
            pending: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            door: tokio::sync::Mutex::new(()),
            window: Mutex::new(Window::new()),
            in_flight: AtomicU64::new(0),
            room_made: tokio::sync::Notify::new(),
            backlogs: Mutex::new(Vec::new()),
            stats: AdmissionStats::default(),
        }
    }

    pub fn config(&self) -> AdmissionConfig {
        *self.config.lock().unwrap()
    }

    pub fn set_config(&self, config: AdmissionConfig) {
        *self.config.lock().unwrap() = config;
    }

    /// One more place the consumer's lag is read (held weakly: the consumer owns admission).
    pub fn add_backlog(&self, backlog: Weak<dyn Backlog>) {
        self.backlogs.lock().unwrap().push(backlog);
    }

    /// How long the consumer's oldest unhandled event (or unread input) has waited: the longest
    /// of its backlogs.
    pub fn lag(&self) -> Duration {
        let backlogs = self.backlogs.lock().unwrap();
        backlogs.iter().filter_map(Weak::upgrade).map(|b| b.oldest_wait()).max().unwrap_or(Duration::ZERO)
    }

    /// Whether an upgrade may pass now: not too many opens wait to be taken and (with a lag
    /// bound) the consumer's backlog is young enough and the window has room, whose place the
    /// upgrade then takes.
    fn room(&self, c: &AdmissionConfig) -> bool {
        if c.max_pending > 0 && self.pending.load(Relaxed) >= c.max_pending as u64 {
            return false;
        }
        if c.max_lag_ms == 0 {
            return true;
        }
        let lag = self.lag();
        let max_lag = Duration::from_millis(c.max_lag_ms as u64);
        let behind = lag > max_lag;
        let mut w = self.window.lock().unwrap();
        w.consumer(lag > max_lag / 2);
        let now = Instant::now();
        if behind || !w.has_room(now, lag < max_lag / 4) {
            return false;
        }
        w.admitted(now);
        self.in_flight.store(w.in_flight() as u64, Relaxed);
        true
    }

    /// The admission window's size and its clients in flight (for `stats()`; the silent ones
    /// forgotten first).
    pub fn window(&self) -> (u32, u32) {
        let mut w = self.window.lock().unwrap();
        w.forget_silent(Instant::now(), false);
        self.in_flight.store(w.in_flight() as u64, Relaxed);
        (w.size(), w.in_flight())
    }

    /// Admitted sockets whose first event the consumer has not taken yet.
    pub fn pending(&self) -> u64 {
        self.pending.load(Relaxed)
    }

    /// Book a rate slot at `now`: how long to wait for it, or None when it is further than
    /// `hold` away (nothing is booked then).
    fn book(&self, c: &AdmissionConfig, now: Instant) -> Option<Duration> {
        if c.rate == 0 {
            return Some(Duration::ZERO);
        }
        let interval = Duration::from_secs_f64(1.0 / c.rate as f64);
        let tolerance = interval * c.burst.max(1).saturating_sub(1);
        let mut tat = self.tat.lock().unwrap();
        let t = tat.map_or(now, |t| t.max(now));
        let start = t.checked_sub(tolerance).map_or(now, |s| s.max(now));
        let wait = start - now;
        if wait > Duration::from_millis(c.hold_ms as u64) {
            return None;
        }
        *tat = Some(t + interval);
        Some(wait)
    }

    /// Decide one upgrade (on an I/O thread, before the consumer hears of it). An admitted
    /// upgrade counts as pending until [`Admission::taken`] (or [`Admission::abandoned`]).
    pub async fn admit(&self) -> Verdict {
        let c = self.config();
        if c.is_off() {
            return self.admitted(&c);
        }
        let now = Instant::now();
        let deadline = now + Duration::from_millis(c.hold_ms as u64);
        let refuse = || {
            self.stats.refused.fetch_add(1, Relaxed);
            Verdict::Refuse { retry_after_s: c.retry_after_s }
        };
        let Some(wait) = self.book(&c, now) else {
            return refuse();
        };
        let mut deferred = false;
        if !wait.is_zero() {
            deferred = true;
            self.stats.deferred.fetch_add(1, Relaxed);
            tokio::time::sleep(wait).await;
        }
        // Fast path: nobody at the door and the consumer keeps up.
        if self.waiting.load(Relaxed) == 0 && self.room(&c) {
            return self.admitted(&c);
        }
        if !deferred {
            self.stats.deferred.fetch_add(1, Relaxed);
        }
        let _at_door = Waiting::new(&self.waiting);
        match self.at_the_door(&c, deadline).await {
            true => self.admitted(&c),
            false => refuse(),
        }
    }

    /// Queue for the door (arrival order), then wait there until the consumer is no longer
    /// behind; false when `deadline` passes first.
    async fn at_the_door(&self, c: &AdmissionConfig, deadline: Instant) -> bool {
        let deadline = tokio::time::Instant::from_std(deadline);
        let Ok(_door) = tokio::time::timeout_at(deadline, self.door.lock()).await else {
            return false;
        };
        while !self.room(c) {
            if tokio::time::Instant::now() + DOOR_POLL > deadline {
                return false;
            }
            // the lag is looked at again each poll; room in the window wakes us sooner
            let _ = tokio::time::timeout(DOOR_POLL, self.room_made.notified()).await;
        }
        true
    }

    fn admitted(&self, c: &AdmissionConfig) -> Verdict {
        self.pending.fetch_add(1, Relaxed);
        self.stats.admitted.fetch_add(1, Relaxed);
        Verdict::Admit { watch: c.max_lag_ms > 0 }
    }

    /// A window's admitted upgrade has its connection, `id`: in flight until the consumer hears
    /// from it ([`Admission::heard_from`]).
    pub fn watch(&self, id: u32) {
        self.window.lock().unwrap().named(id, Instant::now());
    }

    /// Whether clients are in flight: the consumer then tells [`Admission::heard_from`] the
    /// sockets of the messages and closes it handled (one atomic load).
    pub fn listening(&self) -> bool {
        self.in_flight.load(Relaxed) > 0
    }

    /// The consumer handled a message or the close of connection `id`: if it was in flight, it
    /// leaves the window (which grows while the consumer keeps up).
    pub fn heard_from(&self, id: u32) {
        let c = self.config();
        let calm = self.lag() < Duration::from_millis(c.max_lag_ms as u64) / 4;
        let mut w = self.window.lock().unwrap();
        let before = w.in_flight();
        w.heard(id, calm, Instant::now());
        if w.in_flight() < before {
            self.in_flight.store(w.in_flight() as u64, Relaxed);
            self.room_made.notify_one();
        }
    }

    /// The consumer took an admitted socket's first event (its upgrade or its open event).
    pub fn taken(&self) {
        let _ = self.pending.fetch_update(Relaxed, Relaxed, |p| p.checked_sub(1));
    }

    /// An admitted upgrade will have no connection (the client left before the 101, or the
    /// consumer's upgrade hook refused it): no longer `pending` when it still counted so, and out
    /// of the window when it was in (`watch`).
    pub fn abandoned(&self, pending: bool, watch: bool) {
        if pending {
            self.taken();
        }
        if watch {
            let mut w = self.window.lock().unwrap();
            w.abandoned();
            self.in_flight.store(w.in_flight() as u64, Relaxed);
            self.room_made.notify_one();
        }
    }
}

/// Counts an upgrade at the door (or queued for it) while it lives, even if its handshake is
/// dropped meanwhile (timeout, shutdown).
struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    fn new(n: &'a AtomicU64) -> Waiting<'a> {
        n.fetch_add(1, Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests;
