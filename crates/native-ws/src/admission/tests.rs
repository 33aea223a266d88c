use super::*;
use std::sync::Arc;

fn cfg(rate: u32, burst: u32, max_pending: u32, hold_ms: u32) -> AdmissionConfig {
    AdmissionConfig { rate, burst, max_pending, max_lag_ms: 0, hold_ms, retry_after_s: 3 }
}

/// A consumer whose oldest event has waited `lag_ms`.
struct Lag(std::sync::atomic::AtomicU64);

impl Backlog for Lag {
    fn oldest_wait(&self) -> Duration {
        Duration::from_millis(self.0.load(Relaxed))
    }
}

fn counts(a: &Admission) -> (u64, u64, u64) {
    let s = &a.stats;
    (s.admitted.load(Relaxed), s.deferred.load(Relaxed), s.refused.load(Relaxed))
}

#[tokio::test]
async fn off_admits_everything_at_once() {
    let a = Admission::new(AdmissionConfig::OFF);
    let t0 = Instant::now();
    for _ in 0..10_000 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    }
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(counts(&a), (10_000, 0, 0));
}

#[tokio::test]
async fn a_quiet_server_admits_a_burst_at_once_then_spreads_the_rest_at_the_rate() {
    let a = Admission::new(cfg(100, 10, 0, 2000));
    let t0 = Instant::now();
    for _ in 0..10 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    }
    assert!(t0.elapsed() < Duration::from_millis(50), "the burst waits for nothing");
    assert_eq!(counts(&a), (10, 0, 0));
    // the next five wait for their slots: 10 ms apart
    for _ in 0..5 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    }
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(40), "5 more at 100/s took {took:?}");
    assert_eq!(counts(&a), (15, 5, 0));
}

#[tokio::test]
async fn upgrades_whose_slot_is_further_than_hold_are_refused_at_once_with_retry_after() {
    let a = Arc::new(Admission::new(cfg(10, 1, 0, 250)));
    // slots at 0, 100, 200 ms fit within a 250 ms hold; the fourth (300 ms) does not
    let held: Vec<_> = (0..3).map(|_| { let a = a.clone(); tokio::spawn(async move { a.admit().await }) }).collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t0 = Instant::now();
    assert_eq!(a.admit().await, Verdict::Refuse { retry_after_s: 3 });
    assert!(t0.elapsed() < Duration::from_millis(50), "refused without holding");
    for h in held {
        assert_eq!(h.await.unwrap(), Verdict::Admit { watch: false });
    }
    assert_eq!(counts(&a), (3, 2, 1));
}

#[tokio::test]
async fn pending_open_events_hold_new_upgrades_until_the_consumer_takes_one() {
    let a = Arc::new(Admission::new(cfg(0, 1, 2, 400)));
    assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    assert_eq!(a.pending(), 2);
    let third = { let a = a.clone(); tokio::spawn(async move { a.admit().await }) };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!third.is_finished(), "held while two open events wait");
    a.taken();
    assert_eq!(third.await.unwrap(), Verdict::Admit { watch: false });
    assert_eq!(a.pending(), 2);
    // nobody takes anything: the next one is refused after the hold
    let t0 = Instant::now();
    assert_eq!(a.admit().await, Verdict::Refuse { retry_after_s: 3 });
    assert!(t0.elapsed() >= Duration::from_millis(350), "held for the hold time first");
    assert_eq!(counts(&a), (3, 2, 1));
    // giving up an upgrade (the client left before its 101) frees a slot as taking does
    a.abandoned(true, false);
    a.abandoned(true, false);
    a.abandoned(true, false); // never below zero
    assert_eq!(a.pending(), 0);
}

#[tokio::test]
async fn after_a_storm_a_quiet_server_admits_again_without_waiting() {
    let a = Arc::new(Admission::new(cfg(50, 5, 0, 100)));
    // 20 at once: 5 pass, the next 5 fit within 100 ms at 50/s, the rest are refused
    let storm: Vec<_> = (0..20).map(|_| { let a = a.clone(); tokio::spawn(async move { a.admit().await }) }).collect();
    let mut refused = 0;
    for h in storm {
        if !matches!(h.await.unwrap(), Verdict::Admit { .. }) {
            refused += 1;
        }
    }
    assert!((9..=11).contains(&refused), "a storm over rate × hold is refused in part: {refused}");
    tokio::time::sleep(Duration::from_millis(300)).await; // the bucket refills (5 slots at 50/s = 100 ms)
    let t0 = Instant::now();
    for _ in 0..5 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: false });
    }
    assert!(t0.elapsed() < Duration::from_millis(30));
}

#[test]
fn the_default_is_on_and_off_is_off() {
    assert!(AdmissionConfig::default().max_lag_ms > 0);
    assert_eq!(AdmissionConfig::default().rate, 0, "no fixed rate by default");
    assert!(!AdmissionConfig::default().is_off());
    assert!(AdmissionConfig::OFF.is_off());
}

#[tokio::test]
async fn a_lagging_consumer_holds_upgrades_at_the_door_in_order_until_it_catches_up() {
    let a = Arc::new(Admission::new(AdmissionConfig { max_lag_ms: 20, ..cfg(0, 1, 0, 2000) }));
    let lag = Arc::new(Lag(std::sync::atomic::AtomicU64::new(0)));
    a.add_backlog(Arc::downgrade(&(lag.clone() as Arc<dyn Backlog>)));
    // keeping up: admitted at once
    assert_eq!(a.admit().await, Verdict::Admit { watch: true });
    assert_eq!(counts(&a), (1, 0, 0));
    // behind: held, in arrival order
    lag.0.store(100, Relaxed);
    let order = Arc::new(Mutex::new(Vec::new()));
    let held: Vec<_> = (0..5)
        .map(|i| {
            let (a, order) = (a.clone(), order.clone());
            let h = tokio::spawn(async move {
                let v = a.admit().await;
                order.lock().unwrap().push(i);
                v
            });
            h
        })
        .collect();
    for _ in 0..5 {
        tokio::task::yield_now().await; // each reaches the door in turn
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(order.lock().unwrap().is_empty(), "none passes while the consumer is behind");
    lag.0.store(0, Relaxed);
    for h in held {
        assert_eq!(h.await.unwrap(), Verdict::Admit { watch: true });
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4], "arrival order");
    assert_eq!(counts(&a), (6, 5, 0));
    // behind for longer than the hold: refused
    lag.0.store(100, Relaxed);
    let short = Admission::new(AdmissionConfig { max_lag_ms: 20, ..cfg(0, 1, 0, 100) });
    short.add_backlog(Arc::downgrade(&(lag.clone() as Arc<dyn Backlog>)));
    assert_eq!(short.admit().await, Verdict::Refuse { retry_after_s: 3 });
}

fn lagging(a: &Admission, ms: u64) -> Arc<Lag> {
    let lag = Arc::new(Lag(std::sync::atomic::AtomicU64::new(ms)));
    a.add_backlog(Arc::downgrade(&(lag.clone() as Arc<dyn Backlog>)));
    lag
}

#[tokio::test]
async fn a_storm_the_consumer_keeps_up_with_passes_at_full_speed() {
    let a = Admission::new(AdmissionConfig::default());
    let _lag = lagging(&a, 0);
    let t0 = Instant::now();
    for id in 0..20_000 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: true });
        a.taken();
        a.watch(id);
        assert!(a.listening());
        a.heard_from(id);
    }
    assert!(t0.elapsed() < Duration::from_secs(1), "20,000 in {:?}", t0.elapsed());
    assert_eq!(counts(&a), (20_000, 0, 0), "none waited");
    assert!(!a.listening());
}

#[tokio::test]
async fn new_clients_not_heard_from_fill_the_window_and_hold_the_next_until_one_is() {
    let a = Arc::new(Admission::new(AdmissionConfig::default()));
    let _lag = lagging(&a, 0);
    let (size, _) = a.window();
    for id in 0..size {
        assert_eq!(a.admit().await, Verdict::Admit { watch: true });
        a.taken();
        a.watch(id);
    }
    assert_eq!(a.window(), (size, size));
    let next = { let a = a.clone(); tokio::spawn(async move { a.admit().await }) };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!next.is_finished(), "held while the window is full");
    a.heard_from(0); // the consumer handled client 0's first message
    let t0 = Instant::now();
    assert_eq!(next.await.unwrap(), Verdict::Admit { watch: true });
    assert!(t0.elapsed() < Duration::from_millis(20), "woken when room was made");
    assert_eq!(counts(&a), (size as u64 + 1, 1, 0));
    // a client that leaves before its 101 leaves the window too
    a.abandoned(true, true);
    assert_eq!(a.window().1, size - 1);
}

#[tokio::test]
async fn a_consumer_over_half_its_lag_bound_halves_the_window() {
    let a = Arc::new(Admission::new(AdmissionConfig::default())); // maxLagMs 10
    let lag = lagging(&a, 0);
    let (size, _) = a.window();
    for id in 0..size / 2 {
        assert_eq!(a.admit().await, Verdict::Admit { watch: true }); // half full: in use
        a.watch(id);
    }
    lag.0.store(6, Relaxed); // over half the bound, under the bound: the window halves, and is full
    let next = { let a = a.clone(); tokio::spawn(async move { a.admit().await }) };
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!next.is_finished(), "held: the halved window is full");
    assert_eq!(a.window(), (size / 2, size / 2));
    a.heard_from(0);
    assert_eq!(next.await.unwrap(), Verdict::Admit { watch: true });
    assert_eq!(a.window(), (size / 2, size / 2), "no growth while the lag is over a quarter of the bound");
    // a lag over the bound holds upgrades; under the hold they are refused
    lag.0.store(50, Relaxed);
    let short = Admission::new(AdmissionConfig { hold_ms: 50, ..AdmissionConfig::default() });
    short.add_backlog(Arc::downgrade(&(lag.clone() as Arc<dyn Backlog>)));
    assert_eq!(short.admit().await, Verdict::Refuse { retry_after_s: 2 });
}
