//! Compress once, send many: a bounded, process-wide cache of compressed message payloads for
//! server_no_context_takeover connections (Meteor's default), shared by every socket and I/O
//! thread. A payload sent to many sockets with the same deflate parameters (a publication's
//! `added`/`changed` stringified once per session by Meteor's mergebox: identical strings) is
//! compressed by the first I/O thread that needs it; every other socket queues the same bytes
//! (one reference-counted buffer, [`Bytes`], written to each socket: see `outbox`).
//!
//! * Correctness: a hit needs the same level, window bits and byte-identical input (the hash only
//!   finds candidates; the bytes are compared). Without context takeover a message's compressed
//!   form depends on nothing else, so the reused bytes are exactly what compressing again would
//!   produce. Sockets with server context takeover never come here.
//! * Once: the entry is inserted before it is compressed, and a second thread wanting the same
//!   entry waits for the first one's result (a few µs) instead of compressing it again.
//! * Bounded: at most [`MAX_ENTRIES`] entries and [`MAX_BYTES`] bytes of inputs and outputs, the
//!   oldest evicted first; inputs above [`MAX_INPUT`] bypass the cache.

use crate::deflate;
use crate::stats::Stats;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

/// Most entries kept.
const MAX_ENTRIES: usize = 1024;
/// Most bytes (inputs + outputs, outputs estimated at insertion as large as their input) kept.
const MAX_BYTES: usize = 8 * 1024 * 1024;
/// Larger inputs are compressed directly (one of them would crowd out many small ones).
const MAX_INPUT: usize = 256 * 1024;

/// One cached message: its parameters, its input bytes, and (once compressed) the payload.
struct Entry {
    params: (u32, u8),
    input: Box<[u8]>,
    output: OnceLock<Bytes>,
}

/// The map and its eviction order; see the module docs.
struct Cache {
    buckets: HashMap<u64, Vec<Arc<Entry>>>,
    order: VecDeque<(u64, Arc<Entry>)>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl Cache {
    fn new(max_entries: usize, max_bytes: usize) -> Cache {
        Cache { buckets: HashMap::new(), order: VecDeque::new(), bytes: 0, max_entries, max_bytes }
    }

    /// The entry with `key` and exactly the bytes `input`, if any.
    fn find(&self, key: Key, input: &[u8]) -> Option<Arc<Entry>> {
        self.buckets
            .get(&key.hash)
            .and_then(|b| b.iter().find(|e| e.params == key.params && *e.input == *input))
            .cloned()
    }

    /// The entry for `key` and `input`: an existing one with the same bytes, else a new, not yet
    /// compressed one (oldest entries evicted to make room).
    fn entry(&mut self, key: Key, input: &[u8]) -> Arc<Entry> {
        if let Some(found) = self.find(key, input) {
            return found;
        }
        let (hash, params) = (key.hash, key.params);
        let cost = 2 * input.len();
        while !self.order.is_empty() && (self.order.len() >= self.max_entries || self.bytes + cost > self.max_bytes) {
            self.evict_oldest();
        }
        let entry = Arc::new(Entry { params, input: input.into(), output: OnceLock::new() });
        self.buckets.entry(hash).or_default().push(entry.clone());
        self.order.push_back((hash, entry.clone()));
        self.bytes += cost;
        entry
    }

    fn evict_oldest(&mut self) {
        let Some((hash, old)) = self.order.pop_front() else { return };
        self.bytes -= 2 * old.input.len();
        if let Some(bucket) = self.buckets.get_mut(&hash) {
            bucket.retain(|e| !Arc::ptr_eq(e, &old));
            if bucket.is_empty() {
                self.buckets.remove(&hash);
            }
        }
    }
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::new(MAX_ENTRIES, MAX_BYTES)));

/// Where a message would sit in the cache: its parameters (level, window bits) and the hash of
/// both with its bytes. Computed once per message, by the thread that queues it, and carried to
/// the I/O thread with the message when it must be compressed there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    params: (u32, u8),
    hash: u64,
}

impl Key {
    /// The key of `input`, or None when it bypasses the cache (above [`MAX_INPUT`]).
    pub(crate) fn of(level: u32, bits: u8, input: &[u8]) -> Option<Key> {
        let params = (level, bits);
        (input.len() <= MAX_INPUT).then(|| Key { params, hash: hash(params, input) })
    }
}

/// A fast non-cryptographic hash of the parameters and bytes (FxHash-style, 8 bytes a step):
/// it only picks candidates, equality is always checked on the bytes.
fn hash(params: (u32, u8), input: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = mix(input.len() as u64, (params.0 as u64) << 8 | params.1 as u64);
    let mut chunks = input.chunks_exact(8);
    for c in &mut chunks {
        h = mix(h, u64::from_le_bytes(c.try_into().unwrap()));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(h, u64::from_le_bytes(tail))
}

/// The compressed payload of `input` (whose key is `key`) if an identical message is compressed
/// already, counting `compressions_reused`; None (nothing inserted) otherwise. For the thread that
/// queues a message: a fan-out's sends after the first compression become ready frames, with no
/// hand-off to an I/O thread.
pub(crate) fn compressed(key: Key, input: &[u8], stats: &Stats) -> Option<Bytes> {
    let found = CACHE.lock().unwrap_or_else(|e| e.into_inner()).find(key, input)?;
    let bytes = found.output.get()?.clone();
    Stats::add(&stats.compressions_reused, 1);
    Some(bytes)
}

/// The no-context-takeover compressed payload of `input` (level, window bits): from the cache
/// when an identical message was compressed already, else compressed now with this thread's
/// shared deflater and kept. Counts `compressions` or `compressions_reused`.
/// (The I/O threads use [`compress_keyed`] with the key the queueing thread computed.)
#[cfg(test)]
pub(crate) fn compress_shared(level: u32, bits: u8, input: &[u8], stats: &Stats, out: &mut Vec<u8>) {
    out.extend_from_slice(&compress_keyed(level, bits, Key::of(level, bits, input), input, stats));
}

/// [`compress_shared`] with the key computed already (None: `input` bypasses the cache).
pub(crate) fn compress_keyed(level: u32, bits: u8, key: Option<Key>, input: &[u8], stats: &Stats) -> Bytes {
    match key {
        Some(key) => cached(key, input).compress(stats),
        None => compress_now(level, bits, input, stats),
    }
}

fn compress_now(level: u32, bits: u8, input: &[u8], stats: &Stats) -> Bytes {
    Stats::add(&stats.compressions, 1);
    let mut out = Vec::new();
    deflate::with_shared_deflater(level, bits, |d| d.compress(input, &mut out));
    Bytes::from(out)
}

/// The cache entry of `input` (inserted, not compressed yet, when there is none): a publish looks
/// its message up once, and every subscriber's queue holds the entry until it is compressed.
pub(crate) fn cached(key: Key, input: &[u8]) -> Cached {
    Cached(CACHE.lock().unwrap_or_else(|e| e.into_inner()).entry(key, input))
}

/// [`cached`] for a published message: its entry, or one of its own, outside the cache, when it
/// bypasses the cache (a large message is still compressed once for all subscribers).
pub(crate) fn cached_or_alone(level: u32, bits: u8, input: &[u8]) -> Cached {
    match Key::of(level, bits, input) {
        Some(key) => cached(key, input),
        None => Cached(Arc::new(Entry { params: (level, bits), input: input.into(), output: OnceLock::new() })),
    }
}

/// One message's cache entry (kept alive by its holders even once evicted).
#[derive(Clone)]
pub(crate) struct Cached(Arc<Entry>);

impl Cached {
    /// The compressed payload, once some thread compressed it.
    pub(crate) fn ready(&self) -> Option<&Bytes> {
        self.0.output.get()
    }

    /// The compressed payload: compressed now by this thread if nobody did (a thread that wants it
    /// while another compresses it waits for that result). Counts `compressions` or
    /// `compressions_reused`.
    pub(crate) fn compress(&self, stats: &Stats) -> Bytes {
        let e = &self.0;
        let mut ran = false;
        let bytes = e.output.get_or_init(|| {
            ran = true;
            compress_now(e.params.0, e.params.1, &e.input, stats)
        });
        if !ran {
            Stats::add(&stats.compressions_reused, 1);
        }
        bytes.clone()
    }
}

#[cfg(test)]
mod tests;
