use super::*;

/// Join sockets `ids` in order; the groups written early, in order.
fn join_all(cork: &mut Cork<u32>, ids: impl IntoIterator<Item = u32>) -> Vec<Vec<u32>> {
    ids.into_iter().map(|id| cork.join(id)).filter(|g| !g.is_empty()).collect()
}

#[test]
fn a_few_sockets_wait_for_the_end_of_the_tick() {
    let mut cork = Cork::new();
    assert!(join_all(&mut cork, 1..FIRST_CORK_SOCKETS as u32).is_empty());
    assert_eq!(cork.end(), (1..FIRST_CORK_SOCKETS as u32).collect::<Vec<_>>());
    assert!(cork.is_empty());
}

#[test]
fn a_full_group_leaves_only_when_the_next_socket_joins() {
    let mut cork = Cork::new();
    let first = FIRST_CORK_SOCKETS as u32;
    // the group is full, but its last socket may still queue more replies in this batch
    assert!(join_all(&mut cork, 1..=first).is_empty());
    assert_eq!(cork.join(first + 1), (1..=first).collect::<Vec<_>>());
    assert_eq!(cork.end(), vec![first + 1]);
}

#[test]
fn a_fan_out_leaves_in_groups_after_the_first_small_one() {
    let mut cork = Cork::new();
    let n = 1 + FIRST_CORK_SOCKETS + 2 * CORK_SOCKETS;
    let groups = join_all(&mut cork, 0..n as u32);
    let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![FIRST_CORK_SOCKETS, CORK_SOCKETS, CORK_SOCKETS]);
    let rest = cork.end();
    // every socket written exactly once, in the order they joined
    let all: Vec<u32> = groups.into_iter().flatten().chain(rest).collect();
    assert_eq!(all, (0..n as u32).collect::<Vec<_>>());
}

#[test]
fn each_tick_starts_with_a_small_group() {
    let mut cork = Cork::new();
    join_all(&mut cork, 0..100);
    let spare = cork.end();
    cork.recycle(spare);
    let groups = join_all(&mut cork, 0..=FIRST_CORK_SOCKETS as u32);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].len(), FIRST_CORK_SOCKETS);
}
