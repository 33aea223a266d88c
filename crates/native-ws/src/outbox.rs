//! A connection's outbound queue: the frames waiting for the wire ([`Wire`]) and the state the JS
//! thread and the connection's I/O task share about it ([`Outbox`]; who writes when: see `conn`).
//!
//! A [`Wire`] is one byte buffer of the socket's own frames (its sends, control frames) with whole
//! frames inserted between them where they were queued ([`Insert`]):
//! - a **shared** frame: ONE buffer for every socket it goes to ([`Bytes`], reference counted): a
//!   published message's whole frame (header included: the same bytes for every subscriber), or
//!   a compressed payload of the compress-once cache, behind a header kept in the insert. Nothing
//!   is copied per socket: the kernel copies each socket's bytes straight from that buffer.
//! - a **job**: a message an I/O thread must compress; it becomes a shared frame in place once
//!   compressed (`Task::prepare`), so nothing queued around it moves.
//!
//! Inserts sit where the buffer ended when they were queued, a frame boundary: the buffer holds
//! whole frames only and each insert is one whole frame, in queue order.
//!
//! A wire is written from a cursor (bytes of the buffer written, inserts written; an insert
//! written in part keeps its unwritten rest) with vectored writes: one `sendmsg` hands the kernel
//! the buffer's runs and the inserts' headers and payloads in order, and a write that stops inside
//! a shared payload resumes at the right byte of it. Written bytes are never moved or copied: the
//! wire is cleared once all of it is out.
//!
//! Frames shorter than [`SHARE_MIN`] are copied into the buffer instead: below that, appending
//! the bytes costs no more than an insert (a reference count, two more pieces for the kernel).

use crate::codec;
use crate::deflate_cache::{Cached, Key};
use crate::spare::Spares;
use crate::stream::RawSock;
use bytes::{Buf, Bytes};
use std::io::{self, IoSlice};

/// Shortest frame (header included) queued as a shared insert rather than copied. Measured with
/// `timing_share_threshold` (outbox/tests.rs; 2-core EPYC VM, glibc 2.35): queueing and handing a
/// frame to the kernel costs ~95-120 ns as an insert whatever its size, and ~80 ns copied at
/// 128 bytes, ~110 ns at 2 KiB, 150-180 ns at 2.5-4 KiB (memcpy changes strategy past 2 KiB) and
/// µs at 16 KiB; with the `sendmsg` itself (~10 µs on loopback TCP) the two are within noise
/// below 2 KiB, and sharing saves ~40% of it at 16 KiB.
pub const SHARE_MIN: usize = 2048;

/// Most pieces (buffer runs, headers, payloads) one vectored write hands the kernel.
const MAX_IOV: usize = 64;

/// Longest frame header: 2 bytes, 2 + 2 or 2 + 8 bytes of length (server frames are unmasked).
const MAX_HEADER: usize = 10;

thread_local! {
    /// Emptied queues of the sockets this thread wrote: a bounded cork fills at most CORK_SOCKETS
    /// queues of about CORK_LIMIT bytes before they are written and come back.
    static SPARE_BUFS: Spares<u8> = const { Spares::new(crate::config::CORK_SOCKETS, 2 * crate::config::CORK_LIMIT) };
    static SPARE_INSERTS: Spares<Insert> = const { Spares::new(crate::config::CORK_SOCKETS, 64) };
}

/// A message waiting for an I/O thread to compress it.
pub(crate) struct Job {
    pub opcode: u8,
    /// its length before compression (what the buffered amount counts until it is compressed)
    pub len: usize,
    pub payload: Payload,
}

/// Where a job's bytes are.
pub(crate) enum Payload {
    /// `job_data[start..start + len]` of its queue; with its compress-once cache key when the
    /// queueing thread computed it already
    Local { start: usize, key: Option<Key> },
    /// a published message (for a socket that compresses with context takeover)
    Shared(Bytes),
    /// a published message's compress-once entry: whoever compresses it first does it for all
    Cached(Cached),
}

pub(crate) enum Body {
    /// what is left to write of the payload
    Shared(Bytes),
    Job(Job),
}

/// A whole frame inserted into a [`Wire`] before `buf[at]`: `head` then `body` (a published
/// frame is all body: one buffer, header included, for every subscriber).
pub(crate) struct Insert {
    at: usize,
    /// a header kept here: `head[from..len]` is left to write
    head: [u8; MAX_HEADER],
    head_len: u8,
    head_from: u8,
    /// some of it is written
    started: bool,
    body: Body,
}

impl Insert {
    #[cfg(test)]
    fn unwritten(&self) -> usize {
        let body = match &self.body {
            Body::Shared(b) => b.len(),
            Body::Job(job) => job.len,
        };
        usize::from(self.head_len - self.head_from) + body
    }
}

/// Frames ready for the wire (and jobs to compress first); see the module docs.
#[derive(Default)]
pub(crate) struct Wire {
    buf: Vec<u8>,
    inserts: Vec<Insert>,
    /// bytes of `buf` written
    pos: usize,
    /// inserts written
    next: u32,
    /// inserts that are jobs: nothing is written while there are any
    jobs: u32,
}

impl Wire {
    pub(crate) const fn new() -> Wire {
        Wire { buf: Vec::new(), inserts: Vec::new(), pos: 0, next: 0, jobs: 0 }
    }

    /// Nothing left to write (and no job).
    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len() && self.next as usize == self.inserts.len()
    }

    pub(crate) fn has_jobs(&self) -> bool {
        self.jobs > 0
    }

    /// Bytes left to write (jobs counted uncompressed).
    #[cfg(test)]
    pub(crate) fn unwritten(&self) -> usize {
        let inserts: usize = self.inserts[self.next as usize..].iter().map(Insert::unwritten).sum();
        self.buf.len() - self.pos + inserts
    }

    /// The buffer, for appending whole frames (a thread spare when it had none). Its bytes up to
    /// the length it has now are queued already: callers only append (or cut back what they
    /// appended).
    pub(crate) fn buf_mut(&mut self) -> &mut Vec<u8> {
        if self.buf.capacity() == 0 {
            self.buf = SPARE_BUFS.with(Spares::take);
        }
        &mut self.buf
    }

    fn insert(&mut self, head: &[u8], body: Body) {
        if self.inserts.capacity() == 0 {
            self.inserts = SPARE_INSERTS.with(Spares::take);
        }
        let mut h = [0u8; MAX_HEADER];
        h[..head.len()].copy_from_slice(head);
        let at = self.buf.len();
        self.inserts.push(Insert { at, head: h, head_len: head.len() as u8, head_from: 0, started: false, body });
    }

    /// Queue a whole final frame with `payload`: shared when it is at least [`SHARE_MIN`] bytes,
    /// else copied into the buffer. Returns its length on the wire.
    pub(crate) fn push_frame(&mut self, rsv1: bool, opcode: u8, payload: &Bytes) -> usize {
        self.push_frame_as(rsv1, opcode, payload, |len| len >= SHARE_MIN)
    }

    fn push_frame_as(&mut self, rsv1: bool, opcode: u8, payload: &Bytes, share: impl FnOnce(usize) -> bool) -> usize {
        let (head, n) = codec::encode_header(true, rsv1, opcode, payload.len(), None);
        let len = n + payload.len();
        if !share(len) {
            let buf = self.buf_mut();
            buf.extend_from_slice(&head[..n]);
            buf.extend_from_slice(payload);
        } else {
            self.insert(&head[..n], Body::Shared(payload.clone()));
        }
        len
    }

    /// Queue a whole frame (header included): shared when it is at least [`SHARE_MIN`] bytes,
    /// else copied into the buffer. Returns its length.
    pub(crate) fn push_shared(&mut self, frame: &Bytes) -> usize {
        if frame.len() < SHARE_MIN {
            self.buf_mut().extend_from_slice(frame);
        } else {
            self.insert(&[], Body::Shared(frame.clone()));
        }
        frame.len()
    }

    /// Queue bytes that are not a frame (the 101 response): they go out whole, before anything
    /// queued after them, and are never cut (counted as a frame begun).
    pub(crate) fn push_unbroken(&mut self, bytes: Bytes) {
        self.insert(&[], Body::Shared(bytes));
        if let Some(ins) = self.inserts.last_mut() {
            ins.started = true;
        }
    }

    /// Queue a message to compress (its frame takes the place of the job once compressed).
    pub(crate) fn push_job(&mut self, job: Job) {
        self.insert(&[], Body::Job(job));
        self.jobs += 1;
    }

    /// Replace every job by its compressed frame: `compress` gives the compressed payload.
    /// Returns the bytes the jobs were counted for, and the bytes of their frames.
    pub(crate) fn compress_jobs(&mut self, mut compress: impl FnMut(&Job) -> Bytes) -> (usize, usize) {
        let (mut before, mut after) = (0, 0);
        if self.jobs == 0 {
            return (0, 0);
        }
        for ins in &mut self.inserts[self.next as usize..] {
            let Body::Job(job) = &ins.body else { continue };
            let payload = compress(job);
            before += job.len + codec::header_size(job.len, false);
            let (head, n) = codec::encode_header(true, true, job.opcode, payload.len(), None);
            after += n + payload.len();
            ins.head[..n].copy_from_slice(&head[..n]);
            ins.head_len = n as u8;
            ins.body = Body::Shared(payload);
        }
        self.jobs = 0;
        (before, after)
    }

    /// One vectored write from the cursor: `write` gets the next pieces (at most [`MAX_IOV`]) and
    /// their total length and returns how many bytes it wrote; the cursor moves past them.
    pub(crate) fn write_with(&mut self, write: impl FnOnce(&[IoSlice<'_>], usize) -> io::Result<usize>) -> io::Result<usize> {
        debug_assert_eq!(self.jobs, 0, "jobs are compressed before their queue is written");
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let (count, total) = self.slices(&mut iov);
        let n = write(&iov[..count], total)?;
        self.advance(n);
        Ok(n)
    }

    /// The next unwritten pieces, in order, into `iov`: (pieces, bytes).
    fn slices<'a>(&'a self, iov: &mut [IoSlice<'a>]) -> (usize, usize) {
        fn add<'a>(iov: &mut [IoSlice<'a>], count: &mut usize, total: &mut usize, bytes: &'a [u8]) {
            if !bytes.is_empty() {
                iov[*count] = IoSlice::new(bytes);
                *count += 1;
                *total += bytes.len();
            }
        }
        let (mut count, mut total) = (0, 0);
        let mut pos = self.pos;
        for ins in &self.inserts[self.next as usize..] {
            // Room for the run before it, its header and its payload.
            if count + 3 > iov.len() {
                return (count, total);
            }
            add(iov, &mut count, &mut total, &self.buf[pos..ins.at]);
            pos = ins.at;
            add(iov, &mut count, &mut total, &ins.head[usize::from(ins.head_from)..usize::from(ins.head_len)]);
            match &ins.body {
                Body::Shared(b) => add(iov, &mut count, &mut total, b),
                Body::Job(_) => return (count, total),
            }
        }
        if count < iov.len() {
            add(iov, &mut count, &mut total, &self.buf[pos..]);
        }
        (count, total)
    }

    /// `n` more bytes are written.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let next = self.next as usize;
            let end = self.inserts.get(next).map_or(self.buf.len(), |i| i.at);
            if self.pos < end {
                let k = n.min(end - self.pos);
                self.pos += k;
                n -= k;
                continue;
            }
            let Some(ins) = self.inserts.get_mut(next) else {
                debug_assert!(false, "wrote more than was queued");
                return;
            };
            ins.started = true;
            let k = n.min(usize::from(ins.head_len - ins.head_from));
            ins.head_from += k as u8;
            n -= k;
            let Body::Shared(b) = &mut ins.body else {
                debug_assert!(false, "a job is never written");
                return;
            };
            let k = n.min(b.len());
            b.advance(k);
            n -= k;
            if ins.head_from == ins.head_len && b.is_empty() {
                // Written: let go of the shared buffer now, not when the queue is cleared.
                ins.body = Body::Shared(Bytes::new());
                self.next += 1;
            }
        }
    }

    /// Drop every frame not started: what is written stays, and so does the rest of a frame the
    /// cursor is in (a frame on the wire is never cut). Jobs are never started: all go.
    pub(crate) fn cut_after_current_frame(&mut self) {
        let next = self.next as usize;
        let keep = match self.inserts.get(next) {
            Some(ins) if ins.at == self.pos && ins.started => next + 1,
            _ => next,
        };
        if keep == next {
            // Frames in the buffer start at 0 and after each insert (inserts sit at boundaries).
            let from = if next > 0 { self.inserts[next - 1].at } else { 0 };
            let end = codec::frame_boundary(&self.buf, from, self.pos);
            self.buf.truncate(end);
        } else {
            self.buf.truncate(self.pos);
        }
        self.inserts.truncate(keep);
        self.jobs = 0;
    }

    /// Forget everything (written or not); the buffers keep their capacity.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.inserts.clear();
        self.pos = 0;
        self.next = 0;
        self.jobs = 0;
    }

    /// All written: the buffers go back to this thread's spares (the next socket written in this
    /// tick fills the same, cache-hot buffer; an idle socket keeps none).
    pub(crate) fn recycle(&mut self) {
        let Wire { buf, inserts, .. } = std::mem::take(self);
        SPARE_BUFS.with(|s| s.give_back(buf));
        SPARE_INSERTS.with(|s| s.give_back(inserts));
    }

    /// Free buffers grown past `max` bytes (an idle queue keeps at most that much).
    pub(crate) fn trim(&mut self, max: usize) {
        if self.buf.capacity() > max {
            self.buf = Vec::new();
        }
        if self.inserts.capacity() * std::mem::size_of::<Insert>() > max {
            self.inserts = Vec::new();
        }
    }

    #[cfg(test)]
    pub(crate) fn buf(&self) -> &[u8] {
        &self.buf
    }

    #[cfg(test)]
    pub(crate) fn buf_capacity(&self) -> usize {
        self.buf.capacity()
    }

    #[cfg(test)]
    pub(crate) fn job_count(&self) -> usize {
        self.jobs as usize
    }

    /// The bytes left to write, in order (no jobs).
    #[cfg(test)]
    pub(crate) fn unwritten_bytes(&self) -> Vec<u8> {
        let mut iov = [IoSlice::new(&[]); 1024];
        let (count, _) = self.slices(&mut iov);
        assert!(count < iov.len());
        iov[..count].iter().flat_map(|s| s.iter().copied()).collect()
    }
}

/// One vectored send on a socket: never raises SIGPIPE (like std's `send`), never blocks (the
/// socket is non-blocking).
pub(crate) fn send_vectored(fd: RawSock, iov: &[IoSlice<'_>]) -> io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let n = if let [one] = iov {
            // One piece (a fan-out's usual flush: one shared frame): plain send, a little
            // cheaper for the kernel than a message header and a vector.
            // SAFETY: `one` is valid for reads of its length for the call.
            unsafe { libc::send(fd, one.as_ptr().cast(), one.len(), libc::MSG_NOSIGNAL) }
        } else {
            // SAFETY: IoSlice is ABI-compatible with iovec; the msghdr borrows `iov` for the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = iov.len() as _;
            unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) }
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        use std::io::Write;
        // SAFETY: the caller keeps the socket open for the call (on Windows std's write_vectored
        // is one WSASend of every piece).
        (&*unsafe { crate::stream::borrowed(fd) }).write_vectored(iov)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Open,
    /// a close frame is queued; nothing more may be sent
    Ending,
    /// the socket is (being) closed; the fd must not be used
    Closed,
}

/// One slot for two things that never coexist (keeps `Conn` small).
pub(crate) enum Last {
    None,
    /// Pending pong frames, at most MAX_PENDING_PONG_BYTES: past that a newer ping's pong
    /// replaces them (RFC 6455 §5.5.3); appended to the queue when the task takes it.
    Pong(Vec<u8>),
    /// Code and reason of the close frame we queued.
    CloseSent(u16, String),
}

/// The queue a connection shares between its I/O task and the JS thread (under `Conn`'s lock).
pub(crate) struct Outbox {
    pub state: State,
    pub wire: Wire,
    /// payloads of the jobs whose payload is [`Payload::Local`]
    pub job_data: Vec<u8>,
    /// the I/O task owns writing
    pub io_busy: bool,
    /// the 101 response is not written yet: the JS thread queues, the task writes (see
    /// [`crate::Conn::greet`])
    pub greeting: bool,
    /// a send returned BACKPRESSURE: emit `drain` when the queue empties
    pub want_drain: bool,
    /// in the JS thread's list of sockets to flush
    pub dirty: bool,
    /// bytes queued in the current JS tick
    pub tick_bytes: usize,
    /// the pending pong while open, the close frame we queued once ending
    pub last: Last,
}

impl Outbox {
    pub(crate) const fn new() -> Outbox {
        Outbox {
            state: State::Open,
            wire: Wire::new(),
            job_data: Vec::new(),
            io_busy: false,
            greeting: false,
            want_drain: false,
            dirty: false,
            tick_bytes: 0,
            last: Last::None,
        }
    }

    /// The pending pong goes to the end of the wire queue.
    pub(crate) fn move_pong(&mut self) {
        if let Last::Pong(pong) = &self.last {
            self.wire.buf_mut().extend_from_slice(pong);
            self.last = Last::None;
        }
    }
}

/// What [`crate::Conn::take`] found in the queue.
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

/// The queue as the I/O task writes it (moved out of the [`Outbox`]).
#[derive(Default)]
pub(crate) struct Taken {
    pub wire: Wire,
    pub job_data: Vec<u8>,
}

#[cfg(test)]
mod tests;
