//! Admission control for reconnect storms: bounds the upgrades handed to the consumer (JS) per
//! second and the admitted sockets whose first event the consumer has not taken yet, before any
//! consumer code runs. An upgrade over a bound is held (the client waits; its socket costs a
//! sleeping task) until it fits; one that could not fit within `hold` is answered
//! `503 Service Unavailable` with `Retry-After` (Meteor's client backs off and retries).
//!
//! The rate is a virtual-time token bucket (GCRA): each admission books the next slot, `1/rate`
//! after the last one, and may run up to `burst` slots ahead, so a held upgrade knows its wait
//! at once, upgrades pass in arrival order, and the cost is one short lock per upgrade. The
//! pending bound adapts to JS: while JS lags, the open events of admitted sockets wait in the
//! bridge's queue behind the work JS has not done yet, so the bound is reached and new upgrades
//! are held until JS catches up. A server with nothing booked ahead and no open event waiting
//! never refuses: an upgrade is refused only when the slots booked ahead of it already span
//! `hold`, or when JS took no open event for `hold`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Admission limits (the JS layer validates them; 0 turns a bound off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// upgrades admitted per second (0 = no rate bound)
    pub rate: u32,
    /// upgrades admitted at once after a quiet period (the bucket's size; at least 1)
    pub burst: u32,
    /// admitted sockets whose first event the consumer has not taken yet (0 = no bound)
    pub max_pending: u32,
    /// longest an upgrade is held before it is refused, in ms
    pub hold_ms: u32,
    /// the `Retry-After` of a refusal, in seconds
    pub retry_after_s: u32,
}

impl AdmissionConfig {
    /// No bound at all: every upgrade is admitted at once (the `/uws` surface, the pure-Rust
    /// consumers).
    pub const OFF: AdmissionConfig = AdmissionConfig { rate: 0, burst: 1, max_pending: 0, hold_ms: 0, retry_after_s: 1 };

    pub fn is_off(&self) -> bool {
        self.rate == 0 && self.max_pending == 0
    }
}

impl Default for AdmissionConfig {
    /// The main API's and the Meteor adapter's default: 2,000 upgrades a second after a burst of
    /// 1,000, at most 256 admitted sockets waiting for their open event, held up to 5 s,
    /// `Retry-After: 2`. The rate is a coarse guard (5,000 clients reconnecting at once to an idle
    /// server all pass within 2 s, none refused); the pending bound is what adapts to the app: a
    /// storm whose connects cost JS milliseconds each backs the open events up behind that work,
    /// and new upgrades wait until JS has caught up.
    fn default() -> Self {
        AdmissionConfig { rate: 2000, burst: 1000, max_pending: 256, hold_ms: 5000, retry_after_s: 2 }
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
    taken: Notify,
    pub stats: AdmissionStats,
}

impl Admission {
    pub fn new(config: AdmissionConfig) -> Admission {
        Admission {
            config: Mutex::new(config),
            tat: Mutex::new(None),
            pending: AtomicU64::new(0),
            taken: Notify::new(),
            stats: AdmissionStats::default(),
        }
    }

    pub fn config(&self) -> AdmissionConfig {
        *self.config.lock().unwrap()
    }

    pub fn set_config(&self, config: AdmissionConfig) {
        *self.config.lock().unwrap() = config;
        self.taken.notify_waiters();
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
        if c.max_pending > 0 {
            loop {
                let notified = self.taken.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.pending.load(Relaxed) < c.max_pending as u64 {
                    break;
                }
                if !deferred {
                    deferred = true;
                    self.stats.deferred.fetch_add(1, Relaxed);
                }
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(deadline.into()) => return refuse(),
                }
            }
        }
        self.admitted()
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
        // One slot freed: wake one held upgrade (FIFO; a waiter that timed out meanwhile passes
        // the wakeup on), not all of them.
        self.taken.notify_one();
    }
}

#[cfg(test)]
mod tests;
