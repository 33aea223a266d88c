use super::*;

const MS: Duration = Duration::from_millis(1);

/// Admit `n` clients at `now` and name them `first..first + n`.
fn admit(w: &mut Window, first: u32, n: u32, now: Instant) {
    for id in first..first + n {
        assert!(w.has_room(now, false), "room for client {id} (size {}, in flight {})", w.size(), w.in_flight());
        w.admitted(now);
        w.named(id, now);
    }
}

#[test]
fn a_full_window_has_no_room_until_a_client_is_heard_from() {
    let t = Instant::now();
    let mut w = Window::new();
    admit(&mut w, 0, INITIAL, t);
    assert!(!w.has_room(t, false));
    assert!(w.heard(3, false, t));
    assert!(!w.heard(3, false, t), "heard from once");
    assert!(!w.heard(999, false, t), "not in flight");
    assert!(w.has_room(t, false));
    assert_eq!(w.size(), INITIAL, "not calm: no growth");
}

#[test]
fn a_consumer_that_keeps_up_grows_the_window_by_half_per_round() {
    let t = Instant::now();
    let mut w = Window::new();
    let mut id = 0;
    for round in 1..=4 {
        let n = w.size();
        admit(&mut w, id, n, t + round * MS);
        for i in id..id + n {
            assert!(w.heard(i, true, t + round * MS));
        }
        id += n;
        assert!(w.size() > n + n / 4, "round {round}: grows while at least half full ({n} -> {})", w.size());
    }
}

#[test]
fn a_window_not_in_use_does_not_grow() {
    let t = Instant::now();
    let mut w = Window::new();
    // one client at a time, each heard from calmly: the window stays as it is
    for id in 0..100 {
        admit(&mut w, id, 1, t);
        assert!(w.heard(id, true, t));
    }
    assert_eq!(w.size(), INITIAL);
}

#[test]
fn the_window_halves_each_time_the_consumer_falls_behind_not_while_it_stays_behind() {
    let t = Instant::now();
    let mut w = Window::new();
    admit(&mut w, 0, 1, t);
    w.consumer(true);
    assert_eq!(w.size(), INITIAL / 2);
    w.consumer(true);
    w.consumer(true);
    assert_eq!(w.size(), INITIAL / 2, "once per time it falls behind");
    w.consumer(false);
    w.consumer(true);
    assert_eq!(w.size(), INITIAL / 4);
    for _ in 0..10 {
        w.consumer(false);
        w.consumer(true);
    }
    assert_eq!(w.size(), 1, "never below one");
}

#[test]
fn silent_clients_stop_counting_and_a_quiet_window_starts_again() {
    let t = Instant::now();
    let mut w = Window::new();
    admit(&mut w, 0, INITIAL, t);
    assert!(!w.has_room(t + SILENCE / 2, true));
    assert!(w.has_room(t + SILENCE + MS, false), "clients that never spoke leave after SILENCE");
    assert_eq!(w.in_flight(), 0);
    assert_eq!(w.size(), INITIAL, "not calm: no growth");
    admit(&mut w, 50, INITIAL, t + SILENCE + MS);
    assert!(w.has_room(t + 2 * SILENCE + 2 * MS, true));
    assert_eq!(w.size(), 2 * INITIAL, "calm: one more for each silent client");
    // grown, then quiet for longer than MEMORY: back to INITIAL
    let t2 = t + 2 * SILENCE;
    admit(&mut w, 100, INITIAL, t2);
    for id in 100..100 + INITIAL {
        w.heard(id, true, t2);
    }
    assert!(w.size() > INITIAL);
    assert!(w.has_room(t2 + MEMORY + MS, false));
    assert_eq!(w.size(), INITIAL);
}

#[test]
fn an_abandoned_client_leaves_the_window() {
    let t = Instant::now();
    let mut w = Window::new();
    for _ in 0..INITIAL {
        w.admitted(t);
    }
    assert!(!w.has_room(t, false));
    w.abandoned();
    assert!(w.has_room(t, false));
    assert_eq!(w.in_flight(), INITIAL - 1);
}
