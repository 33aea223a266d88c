//! The state a connection shares between its I/O task and the JS thread: the outbound queue,
//! backpressure accounting and control requests (end, close, timeout).
//!
//! Writing is owned by exactly one side at a time. While `io_busy` is false the JS thread may
//! write queued frames straight to the socket at the end of its tick (one `write` for every frame
//! of the tick, no thread hop). When the kernel refuses bytes, or a message must be compressed
//! (deflate runs only on I/O threads), ownership passes to the I/O task (`io_busy = true`) until
//! it has emptied the queue. The queue lock is never held across an await.

use crate::codec;
use crate::deflate_cache;
use crate::spare::Spares;
use crate::config::{Behavior, CORK_LIMIT, MAX_IDLE_CAPACITY, MAX_PENDING_PONG_BYTES};
use crate::extensions::Negotiated;
use crate::stats::Stats;
use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

thread_local! {
    /// Emptied outbound queues of the sockets this thread wrote: a bounded cork fills at most
    /// CORK_SOCKETS queues of about CORK_LIMIT bytes before they are written and come back.
    static SPARE_QUEUES: Spares = const { Spares::new(crate::config::CORK_SOCKETS, 2 * CORK_LIMIT) };
}

fn take_spare() -> Vec<u8> {
    SPARE_QUEUES.with(Spares::take)
}

fn give_back_spare(buf: Vec<u8>) {
    SPARE_QUEUES.with(|s| s.give_back(buf));
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// a close frame is queued; nothing more may be sent
    Ending,
    /// the socket is (being) closed; the fd must not be used
    Closed,
}

/// A message waiting for the I/O thread to compress it, inserted at byte `at` of the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    pub at: usize,
    pub opcode: u8,
    pub start: usize,
    pub len: usize,
    /// its compress-once cache key, when the queueing thread computed it already
    pub key: Option<deflate_cache::Key>,
}

/// What [`Conn::take`] found in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The queue moved into the caller's [`Taken`]: the I/O task writes it and keeps writing.
    Taken,
    /// Nothing queued: writing goes back to the JS thread.
    Empty,
    /// Nothing queued, and a send returned BACKPRESSURE since the last drain: writing goes back
    /// to the JS thread and the consumer's `drain` is due.
    Drained,
    /// The socket is closed: nothing may be written any more.
    Closed,
}

/// Outbound bytes handed from the queue to the I/O task.
#[derive(Default)]
pub(crate) struct Taken {
    pub buf: Vec<u8>,
    pub jobs: Vec<Job>,
    pub job_data: Vec<u8>,
    /// `buf` starts with this many bytes of a frame the JS thread began writing
    pub partial: usize,
}

struct Outbox {
    state: State,
    /// frames ready for the wire
    buf: Vec<u8>,
    /// messages to compress, in order, with their payloads in `job_data`
    jobs: Vec<Job>,
    job_data: Vec<u8>,
    /// the I/O task owns writing
    io_busy: bool,
    /// bytes queued in the current JS tick
    tick_bytes: usize,
    /// a send returned BACKPRESSURE: emit `drain` when the queue empties
    want_drain: bool,
    /// in the JS thread's list of sockets to flush
    dirty: bool,
    /// `buf` starts with this many bytes of a frame partly written by the JS thread
    partial: u32,
    /// the pending pong while open, the close frame we queued once ending
    last: Last,
}

/// One slot for two things that never coexist (keeps `Conn` small).
enum Last {
    None,
    /// Pending pong frames, at most MAX_PENDING_PONG_BYTES: past that a newer ping's pong
    /// replaces them (RFC 6455 §5.5.3); appended to `buf` when the task takes the queue.
    Pong(Vec<u8>),
    /// Code and reason of the close frame we queued.
    CloseSent(u16, String),
}

pub struct Conn {
    /// Unique per server; the consumer's key for this connection.
    pub id: u32,
    fd: RawFd,
    pub(crate) behavior: Arc<Behavior>,
    pub(crate) deflate: Option<Negotiated>,
    threshold: usize,
    pub(crate) stats: Arc<Stats>,
    out: Mutex<Outbox>,
    /// bytes queued in user space and not yet taken by the kernel
    buffered: AtomicUsize,
    pub(crate) ctl: AtomicU8,
    pub(crate) wake: Notify,
    timeout_ms: AtomicU32,
}

impl Conn {
    pub(crate) fn new(
        id: u32,
        fd: RawFd,
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
            fd,
            timeout_ms: AtomicU32::new(behavior.idle_timeout_ms),
            behavior,
            deflate,
            threshold,
            stats,
            out: Mutex::new(Outbox {
                state: State::Open,
                buf: Vec::new(),
                jobs: Vec::new(),
                job_data: Vec::new(),
                io_busy: false,
                tick_bytes: 0,
                want_drain: false,
                dirty: false,
                partial: 0,
                last: Last::None,
            }),
            buffered: AtomicUsize::new(0),
            ctl: AtomicU8::new(0),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Outbox> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn request(&self, bits: u8) {
        self.ctl.fetch_or(bits, Release);
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
        if ob.state != State::Open {
            return (SendStatus::Dropped, false);
        }
        let buffered = self.buffered.load(Relaxed);
        if buffered > self.behavior.max_backpressure {
            if self.behavior.close_on_backpressure {
                // Close instead of dropping: the peer learns (1013) and DDP resumes the session;
                // nothing is lost from a socket that stays open. Frames not yet started are
                // dropped; the rest of one the JS thread began stays for the task, which sends
                // it, then the close frame (see `Task::overflow`).
                ob.state = State::Closed;
                let keep = ob.partial as usize;
                ob.buf.truncate(keep);
                ob.jobs = Vec::new();
                ob.job_data = Vec::new();
                ob.last = Last::None;
                drop(ob);
                self.request(CTL_OVERFLOW);
            } else {
                Stats::add(&self.stats.dropped, 1);
            }
            return (SendStatus::Dropped, false);
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
                ob.jobs.push(Job {
                    at: ob.buf.len(),
                    opcode,
                    start,
                    len,
                    key,
                });
            }
            len
        } else {
            if ob.buf.capacity() == 0 {
                ob.buf = take_spare();
            }
            let at = ob.buf.len();
            let guess = codec::header_size(min_len, false);
            ob.buf.resize(at + guess, 0);
            fill(&mut ob.buf);
            let len = ob.buf.len() - at - guess;
            if deflate && len >= self.threshold {
                // Longer than its lower bound said and past the threshold: compress it after all.
                let start = ob.job_data.len();
                ob.job_data.extend_from_slice(&ob.buf[at + guess..]);
                ob.buf.truncate(at);
                ob.jobs.push(Job {
                    at,
                    opcode,
                    start,
                    len,
                    key: None,
                });
            } else {
                let (hdr, n) = codec::encode_header(fin, false, opcode, len, None);
                if n == guess {
                    ob.buf[at..at + n].copy_from_slice(&hdr[..n]);
                } else {
                    ob.buf.splice(at..at + guess, hdr[..n].iter().copied());
                }
            }
            len
        };
        let queued = queued.unwrap_or(len + codec::header_size(len, false));
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
        if ob.buf.capacity() == 0 {
            ob.buf = take_spare();
        }
        let at = ob.buf.len();
        codec::write_header(&mut ob.buf, true, true, opcode, compressed.bytes().len(), None);
        ob.buf.extend_from_slice(compressed.bytes());
        ob.job_data.truncate(start);
        Some(ob.buf.len() - at)
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
        if ob.io_busy || ob.state == State::Closed || (ob.buf.is_empty() && ob.jobs.is_empty()) {
            return;
        }
        if !ob.jobs.is_empty() {
            ob.io_busy = true;
            self.request(CTL_WRITE);
            return;
        }
        // Write until done, or until the kernel is full or the peer is gone: in both cases the
        // I/O task takes over, waits for writability and discovers any error itself.
        let mut written = 0;
        while written < ob.buf.len() {
            match self.write_fd(&ob.buf[written..]) {
                Ok(n) if n > 0 => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        self.wrote(written);
        if written == ob.buf.len() {
            // The emptied queue goes back to this thread's spares: the next socket written in
            // this tick fills the same, cache-hot buffer (a fan-out copies each frame into one
            // warm buffer, not into 500 cold ones), and an idle socket keeps none.
            give_back_spare(std::mem::take(&mut ob.buf));
        } else {
            // The kernel is full (or the peer is gone): the I/O task takes over and waits.
            // Remember where the first whole frame starts (a backpressure close cuts there).
            ob.partial = (codec::frame_boundary(&ob.buf, 0, written) - written) as u32;
            ob.buf.drain(..written);
            ob.io_busy = true;
            self.request(CTL_WRITE);
        }
    }

    /// Non-blocking write on the socket from the JS thread. Only called under the queue lock
    /// while the state is not Closed, so the fd is open and still ours.
    fn write_fd(&self, bytes: &[u8]) -> io::Result<usize> {
        // SAFETY: the fd stays open while state != Closed (the task marks Closed under this lock
        // before it drops the socket), and ManuallyDrop keeps this borrow from closing it.
        let stream = ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(self.fd) });
        (&*stream).write(bytes)
    }

    pub(crate) fn wrote(&self, n: usize) {
        if n > 0 {
            let before = self.buffered.fetch_sub(n, Relaxed);
            Stats::add(&self.stats.wire_out, n);
            let limit = self.behavior.max_backpressure;
            if before > limit && before - n <= limit {
                // The task stops reading while the queue is over the limit: resume it.
                self.wake.notify_one();
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
        Self::move_pong(ob);
        ob.last = Last::CloseSent(code, reason.to_string());
        let before = ob.buf.len();
        codec::write_close(&mut ob.buf, code, reason);
        self.buffered.fetch_add(ob.buf.len() - before, Relaxed);
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
        // timer armed for the old one when it fires (it re-reads the timeout and re-arms), so
        // Meteor's two calls per connection (45 s before DDP, off after) wake no I/O thread.
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
        let before = ob.buf.len();
        codec::write_frame(&mut ob.buf, true, false, codec::OP_PING, b"");
        self.buffered.fetch_add(ob.buf.len() - before, Relaxed);
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

    /// The pending pong goes to the end of the wire queue.
    fn move_pong(ob: &mut Outbox) {
        if let Last::Pong(pong) = &ob.last {
            ob.buf.extend_from_slice(pong);
            ob.last = Last::None;
        }
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

    /// Task side: move the queue into `into` (which must be empty), or say why there is nothing
    /// to write (see [`Take`]).
    pub(crate) fn take(&self, into: &mut Taken) -> Take {
        let mut ob = self.lock();
        if ob.state == State::Closed {
            return Take::Closed;
        }
        Self::move_pong(&mut *ob);
        if ob.buf.is_empty() && ob.jobs.is_empty() {
            ob.io_busy = false;
            let drain = std::mem::take(&mut ob.want_drain);
            if ob.buf.capacity() > MAX_IDLE_CAPACITY {
                ob.buf = Vec::new();
            }
            return if drain { Take::Drained } else { Take::Empty };
        }
        std::mem::swap(&mut ob.buf, &mut into.buf);
        std::mem::swap(&mut ob.jobs, &mut into.jobs);
        std::mem::swap(&mut ob.job_data, &mut into.job_data);
        into.partial = std::mem::take(&mut ob.partial) as usize;
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
    pub(crate) fn overflow_rest(&self) -> Vec<u8> {
        let mut ob = self.lock();
        ob.partial = 0;
        std::mem::take(&mut ob.buf)
    }

    /// Task side, before the socket is dropped: from now on nobody touches the fd.
    pub(crate) fn mark_closed(&self) {
        let mut ob = self.lock();
        ob.state = State::Closed;
        ob.buf = Vec::new();
        ob.jobs = Vec::new();
        ob.job_data = Vec::new();
        if matches!(ob.last, Last::Pong(_)) {
            ob.last = Last::None;
        }
        self.buffered.store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests;
