use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_turn_is_spent_after_its_budget() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    assert!(!p.spent(t0), "no turn yet");
    p.begin(t0);
    p.begin(t0 + 3 * MS); // a later call in the same turn does not restart it
    assert!(!p.spent(t0 + 4 * MS));
    assert!(p.spent(t0 + 5 * MS));
    p.end();
    assert!(!p.spent(t0 + 6 * MS), "a new turn starts fresh");
}

#[test]
fn chunks_follow_the_measured_cost_of_an_event() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    p.begin(t0);
    // cheap events (1 µs): the whole budget is thousands of them, capped by `max`
    for _ in 0..20 {
        p.record(1000, MS);
    }
    assert_eq!(p.chunk(t0, 1024), 1024);
    // expensive events (100 µs, a Meteor method): about the budget left / 100 µs
    for _ in 0..20 {
        p.record(10, MS);
    }
    let n = p.chunk(t0, 1024);
    assert!((45..=55).contains(&n), "5 ms / 100 µs ≈ 50, got {n}");
    let n = p.chunk(t0 + 4 * MS, 1024);
    assert!((9..=11).contains(&n), "1 ms left / 100 µs ≈ 10, got {n}");
    // never zero, even past the budget or with a very slow event
    p.record(1, 50 * MS);
    assert_eq!(p.chunk(t0 + 6 * MS, 1024), 1);
}

#[test]
fn an_empty_chunk_changes_nothing() {
    let mut p = Pacer::new(5 * MS);
    let before = p.event_cost_ns();
    p.record(0, MS);
    assert_eq!(p.event_cost_ns(), before);
}

#[test]
fn a_delivery_right_after_an_idle_one_continues_its_turn() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    p.begin(t0);
    p.pause(t0 + 2 * MS);
    // called again at once (Node chained the call): the same turn, its budget counts on
    p.begin(t0 + 2 * MS + TURN_GAP / 2);
    assert!(!p.spent(t0 + 4 * MS));
    assert!(p.spent(t0 + 5 * MS), "a chain of idle deliveries shares one budget");
    p.pause(t0 + 5 * MS);
    // called again later: the loop ran in between, a new turn
    let t1 = t0 + 5 * MS + TURN_GAP * 2;
    p.begin(t1);
    assert!(!p.spent(t1 + 4 * MS));
    assert!(p.spent(t1 + 5 * MS));
    // ended (yielded to the loop): the next call starts fresh even right away
    p.end();
    p.begin(t1 + 5 * MS);
    assert!(!p.spent(t1 + 9 * MS));
}

#[test]
fn pausing_without_a_turn_does_nothing() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    p.pause(t0);
    p.begin(t0 + 10 * MS);
    assert!(!p.spent(t0 + 14 * MS));
    assert!(p.spent(t0 + 15 * MS));
}
