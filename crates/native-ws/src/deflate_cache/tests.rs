use super::*;
use crate::deflate::Inflater;
use std::sync::atomic::Ordering::Relaxed;

fn inflate(payload: &[u8]) -> Vec<u8> {
    let mut inf = Inflater::new(15, true);
    let mut out = Vec::new();
    inf.feed(payload, &mut out, 1 << 20).unwrap();
    inf.finish(&mut out, 1 << 20).unwrap();
    out
}

/// A 4 KiB document unique to this test (the cache is process-wide).
fn doc(tag: &str) -> Vec<u8> {
    let mut d = include_bytes!("../deflate/doc4k.json").to_vec();
    d.extend_from_slice(tag.as_bytes());
    d
}

#[test]
fn identical_payloads_compress_once() {
    let stats = Stats::default();
    let input = doc("identical_payloads_compress_once");
    let (mut a, mut b) = (Vec::new(), vec![0xAA]);
    compress_shared(1, 15, &input, &stats, &mut a);
    compress_shared(1, 15, &input, &stats, &mut b);
    assert_eq!(stats.compressions.load(Relaxed), 1);
    assert_eq!(stats.compressions_reused.load(Relaxed), 1);
    assert_eq!(b[0], 0xAA, "appended after what `out` held");
    assert_eq!(a, b[1..], "byte-identical payloads");
    assert_eq!(inflate(&a), input);
    // The same bytes with other parameters are another entry.
    let mut c = Vec::new();
    compress_shared(1, 9, &input, &stats, &mut c);
    assert_eq!(stats.compressions.load(Relaxed), 2);
    assert_eq!(inflate(&c), input);
}

#[test]
fn across_threads_one_compression() {
    let stats = Arc::new(Stats::default());
    let input = Arc::new(doc("across_threads_one_compression"));
    let outs: Vec<Vec<u8>> = (0..8)
        .map(|_| {
            let (stats, input) = (stats.clone(), input.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                compress_shared(1, 15, &input, &stats, &mut out);
                out
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert_eq!(stats.compressions.load(Relaxed), 1);
    assert_eq!(stats.compressions_reused.load(Relaxed), 7);
    assert!(outs.iter().all(|o| *o == outs[0]));
}

#[test]
fn same_hash_different_bytes_is_a_miss() {
    let mut cache = Cache::new(16, 1 << 20);
    let a = cache.entry(Key { hash: 42, params: (1, 15) }, b"first message");
    let b = cache.entry(Key { hash: 42, params: (1, 15) }, b"other message");
    let c = cache.entry(Key { hash: 42, params: (1, 9) }, b"first message");
    assert!(!Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
    assert_eq!(cache.buckets[&42].len(), 3);
    assert!(Arc::ptr_eq(&a, &cache.entry(Key { hash: 42, params: (1, 15) }, b"first message")));
    assert_eq!(cache.order.len(), 3);
}

#[test]
fn bounded_by_entries_and_bytes() {
    let mut cache = Cache::new(4, 1 << 20);
    for i in 0..10u64 {
        cache.entry(Key { hash: i, params: (1, 15) }, &i.to_le_bytes());
    }
    assert_eq!(cache.order.len(), 4);
    assert_eq!(cache.buckets.len(), 4);
    // The newest stay.
    assert!(cache.buckets.contains_key(&9) && !cache.buckets.contains_key(&5));

    let mut cache = Cache::new(1000, 10_000);
    for i in 0..50u64 {
        cache.entry(Key { hash: i % 3, params: (1, 15) }, &vec![i as u8; 1000]);
        assert!(cache.bytes <= 10_000);
    }
    assert_eq!(cache.order.len(), 5);
    assert_eq!(cache.buckets.values().map(Vec::len).sum::<usize>(), 5);
}

#[test]
fn large_inputs_bypass_the_cache() {
    let stats = Stats::default();
    let input = vec![b'x'; MAX_INPUT + 1];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    compress_shared(1, 15, &input, &stats, &mut a);
    compress_shared(1, 15, &input, &stats, &mut b);
    assert_eq!(stats.compressions.load(Relaxed), 2);
    assert_eq!(stats.compressions_reused.load(Relaxed), 0);
    assert_eq!(a, b);
}
