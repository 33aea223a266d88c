use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_turn_is_spent_after_its_budget() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    assert!(!p.spent(t0), "no turn yet");
    p.begin(t0, false);
    p.begin(t0 + 3 * MS, true); // a later call in the same turn does not restart it
    assert!(!p.spent(t0 + 4 * MS));
    assert!(p.spent(t0 + 5 * MS));
    p.end();
    assert!(!p.spent(t0 + 6 * MS), "a new turn starts fresh");
}

#[test]
fn chunks_follow_the_measured_cost_of_an_event() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    p.begin(t0, false);
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
fn a_chained_delivery_continues_its_turn_and_a_new_one_starts_fresh() {
    let mut p = Pacer::new(5 * MS);
    let t0 = Instant::now();
    p.begin(t0, false);
    assert_eq!(p.left(t0 + 2 * MS), 3 * MS);
    // called again without returning to the event loop: the same turn, its budget counts on
    p.begin(t0 + 2 * MS, true);
    assert!(!p.spent(t0 + 4 * MS));
    assert!(p.spent(t0 + 5 * MS), "a chain of deliveries shares one budget");
    assert_eq!(p.left(t0 + 6 * MS), Duration::ZERO);
    // a delivery from a new turn of the loop: all of the budget
    let t1 = t0 + 6 * MS;
    p.begin(t1, false);
    assert_eq!(p.left(t1), 5 * MS);
    assert!(!p.spent(t1 + 4 * MS));
    // after end() even a chained call starts a new turn (there is none to continue)
    p.end();
    p.begin(t1 + 5 * MS, true);
    assert!(!p.spent(t1 + 9 * MS));
    assert_eq!(p.left(t1 + 5 * MS), 5 * MS);
}
