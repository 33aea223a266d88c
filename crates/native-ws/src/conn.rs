//! The state a connection shares between its I/O task and the JS thread: the outbound queue (its
//! frames: `outbox`), backpressure accounting and control requests (end, close, timeout);
//! `publish`: one message queued on many connections.
//!
//! Writing is owned by exactly one side at a time. While `io_busy` is false the JS thread may
//! write queued frames straight to the socket at the end of its tick (one vectored write for
//! every frame of the tick, no thread hop). When the kernel refuses bytes, or a message must be compressed
//! (deflate runs only on I/O threads), ownership passes to the I/O task (`io_busy = true`) until
//! it has emptied the queue. The queue lock is never held across an await.

use crate::codec;
use crate::config::{Behavior, CORK_LIMIT, MAX_IDLE_CAPACITY, MAX_PENDING_PONG_BYTES};
use crate::deflate_cache;
use crate::extensions::Negotiated;
use crate::outbox::{send_vectored, Job, Last, Outbox, Payload, State, Take, Taken};
use crate::stats::Stats;
use crate::stream::RawSock;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// A driver that serves its connections on a thread of its own and is woken per connection (the
/// inline driver). A connection without one is served by the threaded driver, woken through
/// [`Conn::wake`]. The connection knows its driver only through this.
pub(crate) trait Driver: Send + Sync {
    /// `id`'s connection needs the driver: its control bits, or reading may resume.
    fn raise(&self, id: u32);
}

/// `send` results, as uWebSockets.js defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SendStatus {
    Backpressure = 0,
    Success = 1,
    Dropped = 2,
}

/// Or'ed into [`Conn::send`]'s opcode: a frame with FIN=0 (a fragment other than the last);
/// fragments are never compressed.
pub const NOT_FINAL: u8 = 0x80;

pub(crate) const CTL_WRITE: u8 = 1;
pub(crate) const CTL_END: u8 = 2;
pub(crate) const CTL_CLOSE: u8 = 4;
pub(crate) const CTL_TIMEOUT: u8 = 8;
pub(crate) const CTL_OVERFLOW: u8 = 16;

pub struct Conn {
    /// Unique per server; the consumer's key for this connection.
    pub id: u32,
    sock: RawSock,
    pub(crate) behavior: Arc<Behavior>,
    pub(crate) deflate: Option<Negotiated>,
    threshold: usize,
    pub(crate) stats: Arc<Stats>,
    out: Mutex<Outbox>,
    /// bytes queued in user space and not yet taken by the kernel
    buffered: AtomicUsize,
    pub(crate) ctl: AtomicU8,
    /// wakes the threaded driver's task
    pub(crate) wake: Notify,
    /// set when another driver serves this connection: it is woken through that instead
    pub(crate) driver: std::sync::OnceLock<Arc<dyn Driver>>,
    timeout_ms: AtomicU32,
}

impl Conn {
    pub(crate) fn new(
        id: u32,
        sock: RawSock,
        behavior: Arc<Behavior>,
        deflate: Option<Negotiated>,
        stats: Arc<Stats>,
    ) -> Conn {
        let threshold = behavior
            .compression
            .as_ref()
            .map_or(usize::MAX, |c| c.threshold);
        Conn {
            id,
            sock,
            timeout_ms: AtomicU32::new(behavior.idle_timeout_ms),
            behavior,
            deflate,
            threshold,
            stats,
            out: Mutex::new(Outbox::new()),
            buffered: AtomicUsize::new(0),
            ctl: AtomicU8::new(0),
            wake: Notify::new(),
            driver: std::sync::OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Outbox> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn request(&self, bits: u8) {
        self.ctl.fetch_or(bits, Release);
        self.notify();
    }

    /// Wake the driver serving this connection.
    fn notify(&self) {
        if let Some(driver) = self.driver.get() {
            driver.raise(self.id);
            return;
        }
        self.wake.notify_one();
    }

    /// Queue one message; `fill` appends its payload to the vector it is given (so a JS string
    /// is encoded straight into the queue, no intermediate copy). `min_len` is a lower bound of
    /// the payload's length (exact for bytes; a string's UTF-16 length, which its UTF-8 form
    /// never undercuts): the header is reserved for it and rewritten, moved only if the length
    /// crosses a header-size step. The caller need not scan a string to size it first.
    /// Returns the status and whether the socket just became dirty (the caller must then call
    /// [`Conn::flush`] at the end of its tick).
    pub fn send(
        &self,
        opcode: u8,
        min_len: usize,
        compress: bool,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> (SendStatus, bool) {
        let mut ob = self.lock();
        if let Err(refused) = self.admit(&mut ob) {
            return (refused, false);
        }
        let fin = opcode & NOT_FINAL == 0;
        let opcode = opcode & !NOT_FINAL;
        let deflate = compress && fin && opcode != codec::OP_CONTINUATION && self.deflate.is_some();
        let ob = &mut *ob;
        // Bytes this message adds to the queue (a compressed job counts uncompressed until the
        // I/O thread compresses it and rebalances).
        let mut queued = None;
        let len = if deflate && min_len >= self.threshold {
            let start = ob.job_data.len();
            fill(&mut ob.job_data);
            let len = ob.job_data.len() - start;
            let key = self.cache_key(&ob.job_data[start..]);
            queued = key.and_then(|key| self.queue_if_compressed(ob, opcode, start, key));
            if queued.is_none() {
                ob.wire.push_job(Job { opcode, len, payload: Payload::Local { start, key } });
            }
            len
        } else {
            let buf = ob.wire.buf_mut();
            let at = buf.len();
            let guess = codec::header_size(min_len, false);
            buf.resize(at + guess, 0);
            fill(buf);
            let len = buf.len() - at - guess;
            if deflate && len >= self.threshold {
                // Longer than its lower bound said and past the threshold: compress it after all.
                let start = ob.job_data.len();
                ob.job_data.extend_from_slice(&buf[at + guess..]);
                buf.truncate(at);
                ob.wire.push_job(Job { opcode, len, payload: Payload::Local { start, key: None } });
            } else {
                let (hdr, n) = codec::encode_header(fin, false, opcode, len, None);
                if n == guess {
                    buf[at..at + n].copy_from_slice(&hdr[..n]);
                } else {
                    buf.splice(at..at + guess, hdr[..n].iter().copied());
                }
            }
            len
        };
        let queued = queued.unwrap_or(len + codec::header_size(len, false));
        self.queued(ob, queued, len)
    }

    /// A message may be queued: Ok while open and under `maxBackpressure`; else what `send`
    /// answers (DROPPED), after closing the socket when it closes on backpressure.
    fn admit(&self, ob: &mut Outbox) -> Result<(), SendStatus> {
        if ob.state != State::Open {
            return Err(SendStatus::Dropped);
        }
        if self.buffered.load(Relaxed) > self.behavior.max_backpressure {
            if self.behavior.close_on_backpressure {
                // Close instead of dropping: the peer learns (1013) and DDP resumes the session;
                // nothing is lost from a socket that stays open. Frames not yet started are
                // dropped; the rest of one the JS thread began stays for the task, which sends
                // it, then the close frame (see `Task::overflow`).
                ob.state = State::Closed;
                ob.wire.cut_after_current_frame();
                ob.job_data = Vec::new();
                ob.last = Last::None;
                self.request(CTL_OVERFLOW);
            } else {
                Stats::add(&self.stats.dropped, 1);
            }
            return Err(SendStatus::Dropped);
        }
        Ok(())
    }

    /// A message of `len` payload bytes was queued, adding `queued` bytes: count it and write now
    /// when the tick queued past the cork size. Returns the status and whether the socket just
    /// became dirty.
    fn queued(&self, ob: &mut Outbox, queued: usize, len: usize) -> (SendStatus, bool) {
        self.buffered.fetch_add(queued, Relaxed);
        Stats::add(&self.stats.messages_out, 1);
        Stats::add(&self.stats.bytes_out, len);
        ob.tick_bytes += queued;
        let newly_dirty = !ob.dirty;
        ob.dirty = true;
        let status = if ob.io_busy {
            SendStatus::Backpressure
        } else if ob.tick_bytes > CORK_LIMIT {
            // Past uWS's cork size: write now rather than hold the whole tick in memory.
            self.flush_locked(ob);
            if ob.io_busy {
                SendStatus::Backpressure
            } else {
                SendStatus::Success
            }
        } else {
            SendStatus::Success
        };
        if status == SendStatus::Backpressure {
            ob.want_drain = true;
            Stats::add(&self.stats.backpressure, 1);
        }
        (status, newly_dirty)
    }

    /// The compress-once cache key of a payload this connection compresses (None with server
    /// context takeover, which compresses per connection, or when the payload bypasses the cache).
    fn cache_key(&self, payload: &[u8]) -> Option<deflate_cache::Key> {
        let n = self.deflate.as_ref().filter(|n| n.server_no_context_takeover)?;
        deflate_cache::Key::of(self.deflate_level(), n.server_window_bits, payload)
    }

    /// A message to compress whose compressed form is cached already (a fan-out's sends after
    /// the first compression): queue it as a ready frame (no job for an I/O thread) and drop its
    /// payload from `job_data` (from `start`). Returns the frame's length, or None when it must
    /// be compressed.
    fn queue_if_compressed(&self, ob: &mut Outbox, opcode: u8, start: usize, key: deflate_cache::Key) -> Option<usize> {
        let compressed = deflate_cache::compressed(key, &ob.job_data[start..], &self.stats)?;
        ob.job_data.truncate(start);
        Some(ob.wire.push_frame(true, opcode, &compressed))
    }

    /// The compression level of this connection's route (Meteor's default when unset).
    pub(crate) fn deflate_level(&self) -> u32 {
        self.behavior.compression.as_ref().map_or_else(|| crate::extensions::DeflateConfig::default().level, |c| c.level)
    }

    /// End of the JS tick: write what the tick queued, from this thread when the socket is
    /// ours to write, else leave it to the I/O task.
    pub fn flush(&self) {
        let mut ob = self.lock();
        ob.dirty = false;
        self.flush_locked(&mut ob);
    }

    fn flush_locked(&self, ob: &mut Outbox) {
        ob.tick_bytes = 0;
        if ob.io_busy || ob.greeting || ob.state == State::Closed || ob.wire.is_empty() {
            return;
        }
        if ob.wire.has_jobs() {
            ob.io_busy = true;
            self.request(CTL_WRITE);
            return;
        }
        // Write until done, or until the kernel is full or the peer is gone: in both cases the
        // I/O task takes over, waits for writability and discovers any error itself.
        // SAFETY of the socket: it stays open while state != Closed (the task marks Closed under
        // this lock before it drops the socket).
        let mut written = 0;
        while !ob.wire.is_empty() {
            match ob.wire.write_with(|iov, _| send_vectored(self.sock, iov)) {
                Ok(n) if n > 0 => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        self.wrote(written);
        if ob.wire.is_empty() {
            // The emptied queue goes back to this thread's spares: the next socket written in
            // this tick fills the same, cache-hot buffer (a fan-out's small frames are copied into
            // one warm buffer, not into 500 cold ones), and an idle socket keeps none.
            ob.wire.recycle();
        } else {
            // The kernel is full (or the peer is gone): the I/O task takes over and waits, from
            // the queue's cursor (a frame begun stays whole: see `Wire::cut_after_current_frame`).
            ob.io_busy = true;
            self.request(CTL_WRITE);
        }
    }

    /// Handshake side, before the consumer hears of the connection: the 101 response is written
    /// by the connection's task, first; until then the JS thread's frames wait in the queue
    /// (sends succeed as usual). The consumer's open event is queued before the 101 leaves, so
    /// its open handler runs before anything the client does after seeing the 101 reaches it.
    pub(crate) fn greet(&self) {
        self.lock().greeting = true;
    }

    /// Task side: the 101 response is written; the queue is written as usual from now on.
    pub(crate) fn greeted(&self) {
        self.lock().greeting = false;
    }

    pub(crate) fn wrote(&self, n: usize) {
        if n > 0 {
            let before = self.buffered.fetch_sub(n, Relaxed);
            Stats::add(&self.stats.wire_out, n);
            let limit = self.behavior.max_backpressure;
            if before > limit && before - n <= limit {
                // The task stops reading while the queue is over the limit: resume it.
                self.notify();
            }
        }
    }

    /// The outbound queue is over `maxBackpressure`: the task reads nothing more until it drains.
    pub(crate) fn over_limit(&self) -> bool {
        self.buffered.load(Relaxed) > self.behavior.max_backpressure
    }

    /// Graceful close: everything queued, then a close frame, then wait for the peer's.
    pub fn end(&self, code: u16, reason: &str) {
        let mut ob = self.lock();
        if !self.queue_close_locked(&mut ob, code, reason) {
            return;
        }
        self.flush_locked(&mut ob);
        drop(ob);
        self.request(CTL_END);
    }

    /// Queue our close frame behind everything queued; false if the socket is not open.
    fn queue_close_locked(&self, ob: &mut Outbox, code: u16, reason: &str) -> bool {
        if ob.state != State::Open {
            return false;
        }
        ob.state = State::Ending;
        ob.move_pong();
        ob.last = Last::CloseSent(code, reason.to_string());
        let buf = ob.wire.buf_mut();
        let before = buf.len();
        codec::write_close(buf, code, reason);
        self.buffered.fetch_add(buf.len() - before, Relaxed);
        true
    }

    /// Forceful close: no close frame, queued bytes discarded.
    pub fn close(&self) {
        let mut ob = self.lock();
        if ob.state == State::Closed {
            return;
        }
        ob.state = State::Closed;
        drop(ob);
        self.request(CTL_CLOSE);
    }

    pub fn buffered_amount(&self) -> usize {
        self.buffered.load(Relaxed)
    }

    /// Idle timeout in ms (0 = off), counted from the last frame received, effective immediately.
    pub fn set_timeout(&self, ms: u32) {
        let old = self.timeout_ms.swap(ms, Relaxed);
        // Only an earlier deadline needs the task now. A longer timeout, or none, is found by the
        // timer armed for the old one when it fires (it re-reads the timeout and re-arms): of
        // Meteor's two calls per connection (45 s before DDP, off after) only the first wakes it.
        if ms != 0 && (old == 0 || ms < old) {
            self.request(CTL_TIMEOUT);
        }
    }

    pub(crate) fn timeout_ms(&self) -> u32 {
        self.timeout_ms.load(Relaxed)
    }

    /// Task side: queue a ping behind everything already queued and take over writing.
    /// Returns false (nothing queued) once our close frame is queued or the socket is closed.
    pub(crate) fn queue_ping(&self) -> bool {
        let mut ob = self.lock();
        if ob.state != State::Open {
            return false;
        }
        let buf = ob.wire.buf_mut();
        let before = buf.len();
        codec::write_frame(buf, true, false, codec::OP_PING, b"");
        self.buffered.fetch_add(buf.len() - before, Relaxed);
        ob.io_busy = true;
        true
    }

    /// Task side: answer a ping. Pongs wait unsent up to MAX_PENDING_PONG_BYTES; past that the
    /// newest replaces them (RFC 6455 §5.5.3), so a peer that floods pings and never reads costs
    /// a bounded, counted amount. False once our close frame is queued.
    pub(crate) fn queue_pong(&self, payload: &[u8]) -> bool {
        let mut ob = self.lock();
        if ob.state != State::Open {
            return false;
        }
        let mut pong = match std::mem::replace(&mut ob.last, Last::None) {
            Last::Pong(p) => p,
            _ => Vec::new(),
        };
        let before = pong.len();
        if before + codec::header_size(payload.len(), false) + payload.len() > MAX_PENDING_PONG_BYTES {
            pong.clear();
        }
        codec::write_frame(&mut pong, true, false, codec::OP_PONG, payload);
        self.rebalance(before, pong.len());
        ob.last = Last::Pong(pong);
        ob.io_busy = true;
        true
    }

    /// Task side: a close frame with `code` unless one was queued already (protocol errors,
    /// idle timeout, server shutdown).
    pub(crate) fn queue_close(&self, code: u16, reason: &str) {
        let mut ob = self.lock();
        if self.queue_close_locked(&mut ob, code, reason) {
            ob.io_busy = true;
        }
    }

    /// The close frame we queued, if any.
    pub(crate) fn close_sent(&self) -> Option<(u16, String)> {
        match &self.lock().last {
            Last::CloseSent(code, reason) => Some((*code, reason.clone())),
            _ => None,
        }
    }

    /// Task side: move the queue into `into` (whose wire must be empty), or say why there is
    /// nothing to write (see [`Take`]).
    pub(crate) fn take(&self, into: &mut Taken) -> Take {
        let mut ob = self.lock();
        if ob.state == State::Closed {
            return Take::Closed;
        }
        ob.move_pong();
        if ob.wire.is_empty() {
            ob.io_busy = false;
            let drain = std::mem::take(&mut ob.want_drain);
            ob.wire.clear();
            ob.wire.trim(MAX_IDLE_CAPACITY);
            return if drain { Take::Drained } else { Take::Empty };
        }
        into.wire.clear();
        std::mem::swap(&mut ob.wire, &mut into.wire);
        std::mem::swap(&mut ob.job_data, &mut into.job_data);
        ob.io_busy = true;
        Take::Taken
    }

    /// Compressed messages change the queued byte count once they are compressed.
    pub(crate) fn rebalance(&self, before: usize, after: usize) {
        if after >= before {
            self.buffered.fetch_add(after - before, Relaxed);
        } else {
            self.buffered.fetch_sub(before - after, Relaxed);
        }
    }

    /// Task side, after a backpressure close: the rest of the frame the JS thread began (the
    /// queue holds nothing else any more).
    pub(crate) fn overflow_rest(&self) -> crate::outbox::Wire {
        std::mem::take(&mut self.lock().wire)
    }

    /// Task side, before the socket is dropped: from now on nobody touches the fd.
    pub(crate) fn mark_closed(&self) {
        let mut ob = self.lock();
        ob.state = State::Closed;
        ob.wire = Default::default();
        ob.job_data = Vec::new();
        if matches!(ob.last, Last::Pong(_)) {
            ob.last = Last::None;
        }
        self.buffered.store(0, Relaxed);
    }
}

mod publish;
pub use publish::Published;

#[cfg(test)]
mod tests;
