//! Admission control for reconnect storms: bounds the upgrades handed to the consumer (JS) per
//! second, the admitted sockets whose first event the consumer has not taken yet, and how long
//! the consumer's oldest waiting event may have waited (its lag), before any consumer code runs. An upgrade over a bound is held (the client waits; its socket costs a
//! sleeping task) until it fits; one that could not fit within `hold` is answered
//! `503 Service Unavailable` with `Retry-After` (Meteor's client backs off and retries).
//!
//! The rate is a virtual-time token bucket (GCRA): each admission books the next slot, `1/rate`
//! after the last one, and may run up to `burst` slots ahead, so a held upgrade knows its wait
//! at once, upgrades pass in arrival order, and the cost is one short lock per upgrade. The lag
//! bound adapts to the app: when a storm's connects cost JS milliseconds each, the consumer's
//! queue backs up and its oldest event waits longer than `max_lag`; new upgrades are then held,
//! one at a time at the door in arrival order, until the backlog is served (existing clients'
//! calls wait in that same queue, so this keeps their latency near `max_lag`). A server with
//! nothing booked ahead and no backlog never refuses: an upgrade is refused only when the slots
//! booked ahead of it already span `hold`, or when the consumer stayed behind for `hold`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

/// How often the upgrade at the door looks again while the consumer is behind.
const DOOR_POLL: Duration = Duration::from_millis(5);
/// While upgrades queue at the door, [`DOOR_BATCH`] pass per this interval at most (500 a
/// second): an admitted client's first message reaches the consumer's queue a moment after its
/// 101, so without spacing the door would let hundreds through before the lag they cause shows.
const DOOR_SPACING: Duration = Duration::from_millis(2);
const DOOR_BATCH: u64 = 1;

/// The consumer's backlog, as admission sees it: the JS bridge's events not yet handled, and the
/// inline driver's input not yet read (its sockets are read on the consumer's thread).
pub trait Backlog: Send + Sync {
    /// How long the oldest event not yet handled by the consumer has waited (zero when none).
    fn oldest_wait(&self) -> Duration;
}

/// Admission limits (the JS layer validates them; 0 turns a bound off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// upgrades admitted per second (0 = no rate bound)
    pub rate: u32,
    /// upgrades admitted at once after a quiet period (the bucket's size; at least 1)
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
    /// The main API's and the Meteor adapter's default: 2,000 upgrades a second after a burst of
    /// 1,000, at most 256 admitted sockets waiting for their open event, new upgrades held while
    /// the consumer's oldest event has waited more than 10 ms, held up to 5 s, `Retry-After: 2`.
    /// The rate is a coarse guard (5,000 clients reconnecting at once to an idle server all pass
    /// within 2 s); the lag bound is what adapts to the app.
    fn default() -> Self {
        AdmissionConfig { rate: 2000, burst: 1000, max_pending: 256, max_lag_ms: 10, hold_ms: 5000, retry_after_s: 2 }
    }
}

/// What admission decided for one upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// go on (the consumer will get the upgrade or open event)
    Admit,
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
    /// upgrades that passed the door (for its spacing)
    through_door: AtomicU64,
    /// one held upgrade at a time looks at the consumer's state; the others queue (FIFO)
    door: tokio::sync::Mutex<()>,
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
            through_door: AtomicU64::new(0),
            door: tokio::sync::Mutex::new(()),
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

    /// Whether the consumer is behind: too many opens not taken, or its backlog too old.
    fn behind(&self, c: &AdmissionConfig) -> bool {
        (c.max_pending > 0 && self.pending.load(Relaxed) >= c.max_pending as u64)
            || (c.max_lag_ms > 0 && self.lag() > Duration::from_millis(c.max_lag_ms as u64))
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
    /// upgrade counts as pending until [`Admission::taken`] (or [`Admission::forget`]).
    pub async fn admit(&self) -> Verdict {
        let c = self.config();
        if c.is_off() {
            return self.admitted();
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
        if self.waiting.load(Relaxed) == 0 && !self.behind(&c) {
            return self.admitted();
        }
        if !deferred {
            self.stats.deferred.fetch_add(1, Relaxed);
        }
        let _at_door = Waiting::new(&self.waiting);
        match self.at_the_door(&c, deadline).await {
            true => self.admitted(),
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
        while self.behind(c) {
            if tokio::time::Instant::now() + DOOR_POLL > deadline {
                return false;
            }
            tokio::time::sleep(DOOR_POLL).await;
        }
        // every DOOR_BATCH-th passage, the door stays closed behind us a moment (with a batch of
        // 1, every passage)
        #[allow(clippy::modulo_one)]
        let closes_behind = self.through_door.fetch_add(1, Relaxed) % DOOR_BATCH == DOOR_BATCH - 1;
        if closes_behind {
            tokio::time::sleep(DOOR_SPACING).await;
        }
        true
    }

    fn admitted(&self) -> Verdict {
        self.pending.fetch_add(1, Relaxed);
        self.stats.admitted.fetch_add(1, Relaxed);
        Verdict::Admit
    }

    /// The consumer took an admitted socket's first event (its upgrade or its open event).
    pub fn taken(&self) {
        self.forget();
    }

    /// An admitted upgrade will never reach the consumer (the client left before the 101).
    pub fn forget(&self) {
        let _ = self.pending.fetch_update(Relaxed, Relaxed, |p| p.checked_sub(1));
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
