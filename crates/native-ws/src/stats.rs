//! Live counters (`app.stats()`): relaxed atomics on the hot path, a lock only per close.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

pub mod memory;

#[derive(Default, Debug)]
pub struct Stats {
    pub connections: AtomicI64,
    pub upgrades_accepted: AtomicU64,
    pub upgrades_rejected: AtomicU64,
    pub messages_in: AtomicU64,
    pub messages_out: AtomicU64,
    /// payload bytes after inflating / before compressing
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// bytes on the wire
    pub wire_in: AtomicU64,
    pub wire_out: AtomicU64,
    /// messages run through a deflater (per message, not per socket, when reused)
    pub compressions: AtomicU64,
    /// compressed messages whose payload came from the compress-once cache (an identical
    /// message with the same parameters, sent to another socket, was compressed already)
    pub compressions_reused: AtomicU64,
    pub backpressure: AtomicU64,
    pub dropped: AtomicU64,
    closes: Mutex<BTreeMap<u16, u64>>,
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Relaxed);
    }

    /// A connection was accepted.
    pub fn opened(&self) {
        self.connections.fetch_add(1, Relaxed);
        memory::opened();
    }

    pub fn closed(&self, code: u16) {
        self.connections.fetch_sub(1, Relaxed);
        memory::closed();
        *self.closes.lock().unwrap().entry(code).or_insert(0) += 1;
    }

    pub fn closes_by_code(&self) -> Vec<(u16, u64)> {
        self.closes.lock().unwrap().iter().map(|(k, v)| (*k, *v)).collect()
    }
}
