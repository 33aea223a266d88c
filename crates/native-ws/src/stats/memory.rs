//! Giving memory back after load. A burst of connections (above all permessage-deflate ones, whose
//! zlib windows are large) leaves the C allocator's arenas full of free pages that glibc keeps:
//! without help a server that once saw a burst keeps its peak RSS for good. So the process-wide
//! count of open connections is tracked here (one relaxed atomic per open and per close, nothing
//! per message), and when it falls to a quarter of its peak since the last trim (at least
//! [`MIN_PEAK`] connections went away), one `malloc_trim(0)` runs on a tokio blocking thread:
//! never on an I/O thread, [`SETTLE`] after the fall (a mass close is trimmed once) and at most
//! once per [`MIN_INTERVAL`]. Only on glibc; elsewhere (musl, macOS, Windows) it is a no-op.
//! `DDP_TRANSPORT_NATIVE_TRIM=0` in the environment turns it off.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Below this peak there is too little to give back to bother.
const MIN_PEAK: i64 = 64;
/// Wait this long after the fall before trimming, so that a mass close is trimmed once, at its end.
const SETTLE: Duration = Duration::from_millis(250);
/// At most one trim per this interval.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

static OPEN: AtomicI64 = AtomicI64::new(0);
/// The most connections open at once since the last trim.
static PEAK: AtomicI64 = AtomicI64::new(0);
/// A trim is scheduled (cleared when it ran or was dropped with its runtime).
static PENDING: AtomicBool = AtomicBool::new(false);
/// Milliseconds since [`epoch`] when the last trim ran (0: never).
static LAST_TRIM_MS: AtomicU64 = AtomicU64::new(0);
static TRIMS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("DDP_TRANSPORT_NATIVE_TRIM").map_or(true, |v| v != "0"))
}

/// How many trims ran in this process.
pub fn trims() -> u64 {
    TRIMS.load(Relaxed)
}

/// A connection was accepted.
pub(crate) fn opened() {
    let n = OPEN.fetch_add(1, Relaxed) + 1;
    PEAK.fetch_max(n, Relaxed);
}

/// A connection ended; called on its I/O thread, inside the runtime.
pub(crate) fn closed() {
    let n = OPEN.fetch_sub(1, Relaxed) - 1;
    if should_trim(n, PEAK.load(Relaxed)) && enabled() && !PENDING.swap(true, Relaxed) {
        schedule();
    }
}

fn should_trim(open: i64, peak: i64) -> bool {
    peak - open >= MIN_PEAK && open.max(0) * 4 <= peak
}

/// Clears PENDING when dropped, whether the trim ran or its runtime went away first.
struct Pending;

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING.store(false, Relaxed);
    }
}

fn schedule() {
    let guard = Pending;
    let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
    let since = epoch().elapsed();
    let last = Duration::from_millis(LAST_TRIM_MS.load(Relaxed));
    let wait = SETTLE.max((last + MIN_INTERVAL).saturating_sub(since));
    let blocking = rt.clone();
    rt.spawn(async move {
        tokio::time::sleep(wait).await;
        drop(blocking.spawn_blocking(move || {
            let _guard = guard;
            PEAK.store(OPEN.load(Relaxed), Relaxed);
            release();
            LAST_TRIM_MS.store(epoch().elapsed().as_millis().max(1) as u64, Relaxed);
            TRIMS.fetch_add(1, Relaxed);
        }));
    });
}

/// Hand the allocator's free pages back to the kernel.
fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_after_a_fall_to_a_quarter_of_the_peak() {
        assert!(!should_trim(0, 10), "a small peak is not worth a trim");
        assert!(should_trim(0, 64));
        assert!(should_trim(1250, 5000));
        assert!(!should_trim(1251, 5000));
        assert!(!should_trim(100, 150), "still above a quarter of the peak");
    }

    #[test]
    fn a_fall_schedules_one_trim() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let before = trims();
        rt.block_on(async {
            for _ in 0..200 {
                opened();
            }
            tokio::spawn(async {
                for _ in 0..200 {
                    closed();
                }
            })
            .await
            .unwrap();
            let t0 = Instant::now();
            while trims() == before && t0.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        assert!(trims() > before, "a trim ran after 200 connections closed");
    }
}
