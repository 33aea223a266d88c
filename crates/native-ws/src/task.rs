//! A connection's state machine: reads into a per-thread buffer, runs frames through the message
//! reader, hands messages to the handler, writes what the JS thread left to it (compressing
//! jobs), answers pings and closes, and keeps the idle timer. It does no waiting itself: a driver
//! calls it when the socket is ready, the JS thread asked for something, or its deadline passed —
//! `threaded`: a tokio task on an I/O thread; [`crate::inline`]: the consumer's own thread.
//! [`Socket`] is what the two drivers' sockets have in common.

use crate::codec;
use crate::config::{CLOSE_WAIT, READ_CHUNK};
use crate::conn::{Conn, CTL_CLOSE, CTL_END, CTL_OVERFLOW, CTL_WRITE};
use crate::deflate::Deflater;
use crate::deflate_cache;
use crate::handler::Handler;
use crate::message::{Msg, Reader};
use crate::outbox::{send_vectored, Payload, Take, Taken};
use crate::stats::Stats;
use bytes::Bytes;
use crate::stream::{RawSock, Stream};
use std::cell::RefCell;
use std::io::{self, Read};
use std::sync::atomic::Ordering::Acquire;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::Interest;
use tokio::time::Instant;

thread_local! {
    /// Receive buffer shared by every socket of this I/O thread (nothing per idle socket).
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_CHUNK]);
}

pub(crate) type Outcome = (u16, String);

/// A connection's socket as a driver hands it to the task: its raw handle, and one syscall with
/// the driver's readiness bookkeeping (a WouldBlock from `op` clears the readiness it consumed).
pub(crate) trait Socket {
    fn raw(&self) -> RawSock;
    fn try_io(&self, interest: Interest, op: impl FnOnce() -> io::Result<usize>) -> io::Result<usize>;
}

impl Socket for Stream {
    fn raw(&self) -> RawSock {
        Stream::raw(self)
    }

    fn try_io(&self, interest: Interest, op: impl FnOnce() -> io::Result<usize>) -> io::Result<usize> {
        Stream::try_io(self, interest, op)
    }
}

/// One read or write syscall. A short read means the kernel queue was drained, a partial write
/// that the kernel buffer is full: we then report "would block" to tokio from inside `try_io`,
/// which clears the readiness captured BEFORE the syscall (a newer event keeps it set). This saves
/// the EAGAIN syscall that would otherwise follow every read and every partial write.
fn io_once(
    stream: &impl Socket,
    interest: Interest,
    len: usize,
    mut op: impl FnMut(&std::net::TcpStream) -> io::Result<usize>,
) -> io::Result<usize> {
    let raw = stream.raw();
    let mut done = 0;
    let r = stream.try_io(interest, || {
        // SAFETY: `raw` belongs to `stream`, alive for this call.
        let s = unsafe { crate::stream::borrowed(raw) };
        done = op(&s)?;
        if done > 0 && done < len {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(done)
    });
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && done > 0 => Ok(done),
        r => r,
    }
}

fn read_once(stream: &impl Socket, buf: &mut [u8]) -> io::Result<usize> {
    io_once(stream, Interest::READABLE, buf.len(), |mut s| s.read(buf))
}

/// One vectored write of the next pieces of `out` (see `outbox::Wire`); the wire's cursor moves
/// past what the kernel took.
fn write_once(stream: &impl Socket, out: &mut Taken) -> io::Result<usize> {
    let raw = stream.raw();
    out.wire.write_with(|iov, len| io_once(stream, Interest::WRITABLE, len, |_| send_vectored(raw, iov)))
}

pub(crate) fn abnormal() -> Outcome {
    (codec::CLOSE_ABNORMAL, String::new())
}

pub(crate) struct Task<S: Socket> {
    conn: Arc<Conn>,
    handler: Arc<dyn Handler>,
    reader: Reader,
    /// bytes of a partial frame, kept only while one is pending
    rbuf: Vec<u8>,
    need: usize,
    reading: bool,
    /// the queue this task is writing
    out: Taken,
    /// boxed: only sockets compressing with context takeover have one (~150 bytes inline)
    deflater: Option<Box<Deflater>>,
    want_write: bool,
    /// bytes of the 101 response not written yet (see [`Task::greet`])
    greeting: u32,
    /// we failed the connection: after our close frame, wait for the peer's FIN before closing
    linger: bool,
    /// our side is shut down: read and discard until the peer's FIN (bounded by close_deadline)
    discard: bool,
    /// how the connection ends once the queue is written (close reply, error, timeout)
    finish: Option<Outcome>,
    /// we sent a close frame and wait for the peer's until then
    close_deadline: Option<Instant>,
    last_rx: Instant,
    ping_sent: bool,
    /// dropped after `Drop::drop` marked the connection closed, so the fd is never reused under it
    stream: S,
}

impl<S: Socket> Drop for Task<S> {
    fn drop(&mut self) {
        self.conn.mark_closed();
    }
}

impl<S: Socket> Task<S> {
    /// The task of a connection whose open event went to the handler; the I/O driver then
    /// calls [`Task::start`] with the bytes read past the HTTP head.
    pub(crate) fn new(conn: Arc<Conn>, handler: Arc<dyn Handler>, stream: S) -> Task<S> {
        Task {
            reader: Reader::new(conn.behavior.max_payload, conn.behavior.max_fragments, conn.deflate.as_ref()),
            conn,
            handler,
            rbuf: Vec::new(),
            need: 0,
            reading: true,
            out: Taken::default(),
            deflater: None,
            want_write: false,
            greeting: 0,
            linger: false,
            discard: false,
            finish: None,
            close_deadline: None,
            last_rx: Instant::now(),
            ping_sent: false,
            stream,
        }
    }

    /// The 101 response, written first by [`Task::start`] (the consumer heard of the connection
    /// before: see [`Conn::greet`]).
    pub(crate) fn greet(&mut self, hello: Vec<u8>) {
        if hello.is_empty() {
            return;
        }
        self.greeting = hello.len() as u32;
        self.out.wire.push_unbroken(hello.into());
    }

    /// Write the 101 response, then handle the bytes read past the HTTP head (frames the client
    /// sent right after it).
    pub(crate) fn start(&mut self, initial: Vec<u8>) -> Option<Outcome> {
        if self.greeting > 0 {
            if let Some(out) = self.pump() {
                return Some(out);
            }
        }
        if initial.is_empty() {
            return None;
        }
        Stats::add(&self.conn.stats.wire_in, initial.len());
        self.rbuf = initial;
        let out = self.process_rbuf();
        self.handler.flush();
        out
    }

    /// The connection is over: close the socket (FIN) before telling the consumer; the fd is
    /// released with the task.
    pub(crate) fn end(self, (code, reason): Outcome) {
        let (conn, handler) = (self.conn.clone(), self.handler.clone());
        drop(self);
        conn.stats.closed(code);
        handler.close(&conn, code, &reason);
        handler.flush();
    }

    /// Whether the socket's input is wanted now: nothing is read while the outbound queue is
    /// over its limit (bounded memory whatever the peer sends); `Conn::wrote` wakes the driver
    /// when it drains.
    pub(crate) fn wants_read(&self) -> bool {
        (self.reading && !self.conn.over_limit()) || self.discard
    }

    /// Whether the JS thread asked for something (see [`Task::on_control`]); for the inline driver.
    #[cfg(target_os = "linux")]
    pub(crate) fn asked(&self) -> bool {
        self.conn.ctl.load(Acquire) != 0
    }

    /// The socket (the inline driver keeps its readiness there).
    #[cfg(target_os = "linux")]
    pub(crate) fn socket(&self) -> &S {
        &self.stream
    }

    /// Whether queued bytes wait for the socket to become writable; for the inline driver.
    #[cfg(target_os = "linux")]
    pub(crate) fn wants_write(&self) -> bool {
        self.want_write
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        if let Some(d) = self.close_deadline {
            return Some(d);
        }
        let ms = self.conn.timeout_ms();
        if ms == 0 {
            return None;
        }
        let full = Duration::from_millis(ms as u64);
        if self.conn.behavior.send_pings && !self.ping_sent {
            Some(self.last_rx + full / 2)
        } else {
            Some(self.last_rx + full)
        }
    }

    pub(crate) fn on_timer(&mut self) -> Option<Outcome> {
        let now = Instant::now();
        if let Some(d) = self.close_deadline {
            if now >= d {
                return Some(self.finish.take().unwrap_or_else(abnormal));
            }
            return None;
        }
        let ms = self.conn.timeout_ms();
        if ms == 0 {
            return None;
        }
        let full = Duration::from_millis(ms as u64);
        if now >= self.last_rx + full {
            return self.fail(codec::CLOSE_GOING_AWAY, "idle timeout");
        }
        if self.conn.behavior.send_pings && !self.ping_sent && now >= self.last_rx + full / 2 {
            self.ping_sent = true;
            if self.conn.queue_ping() {
                return self.pump();
            }
        }
        None
    }

    pub(crate) fn on_control(&mut self) -> Option<Outcome> {
        let bits = self.conn.ctl.swap(0, Acquire);
        if bits & CTL_CLOSE != 0 {
            return Some(abnormal());
        }
        if bits & CTL_OVERFLOW != 0 {
            return self.overflow();
        }
        if bits & CTL_END != 0 && self.close_deadline.is_none() {
            // end(): our close frame is queued; wait (bounded) for the peer's.
            self.close_deadline = Some(Instant::now() + CLOSE_WAIT);
            if self.finish.is_none() {
                self.finish = Some(self.conn.close_sent().unwrap_or_else(abnormal));
            }
        }
        if bits & (CTL_WRITE | CTL_END) != 0 {
            return self.pump();
        }
        None
    }

    /// Fail the connection: close frame with `code`, flush, close TCP.
    fn fail(&mut self, code: u16, reason: &str) -> Option<Outcome> {
        self.reading = false;
        self.linger = true;
        self.conn.queue_close(code, reason);
        self.finish = Some((code, reason.to_string()));
        self.close_deadline.get_or_insert(Instant::now() + CLOSE_WAIT);
        self.pump()
    }

    pub(crate) fn on_readable(&mut self) -> Option<Outcome> {
        if self.discard {
            return SCRATCH.with(|cell| match read_once(&self.stream, &mut cell.borrow_mut()[..]) {
                Ok(0) => Some(self.finish.take().unwrap_or_else(abnormal)),
                Ok(_) => None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                Err(_) => Some(self.finish.take().unwrap_or_else(abnormal)),
            });
        }
        if self.rbuf.is_empty() {
            let result = SCRATCH.with(|cell| {
                let mut scratch = cell.borrow_mut();
                match read_once(&self.stream, &mut scratch[..]) {
                    Ok(0) => Err(self.on_eof()),
                    Ok(n) => {
                        self.received(n);
                        match self.process(&mut scratch[..n]) {
                            Ok(consumed) => {
                                if consumed < n {
                                    self.rbuf.extend_from_slice(&scratch[consumed..n]);
                                }
                                Ok(())
                            }
                            Err(out) => Err(out),
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
                    Err(_) => Err(Some(abnormal())),
                }
            });
            self.handler.flush();
            return match result {
                Ok(()) => None,
                Err(out) => out,
            };
        }
        // A partial frame is pending: read straight into its buffer, sized to the frame.
        let want = self.need.saturating_sub(self.rbuf.len()).clamp(4096, READ_CHUNK);
        let len = self.rbuf.len();
        self.rbuf.resize(len + want, 0);
        let read = read_once(&self.stream, &mut self.rbuf[len..]);
        self.rbuf.truncate(len + *read.as_ref().unwrap_or(&0));
        let out = match read {
            Ok(0) => self.on_eof(),
            Ok(n) => {
                self.received(n);
                self.process_rbuf()
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(_) => Some(abnormal()),
        };
        self.handler.flush();
        out
    }

    fn received(&mut self, n: usize) {
        Stats::add(&self.conn.stats.wire_in, n);
        self.last_rx = Instant::now();
        self.ping_sent = false;
    }

    fn on_eof(&mut self) -> Option<Outcome> {
        // The peer closed TCP: normal after our close frame, abnormal otherwise.
        Some(match self.finish.take() {
            Some(out) if self.close_deadline.is_some() => out,
            _ => abnormal(),
        })
    }

    fn process_rbuf(&mut self) -> Option<Outcome> {
        let mut buf = std::mem::take(&mut self.rbuf);
        let result = self.process(&mut buf);
        match result {
            Ok(consumed) => {
                buf.drain(..consumed);
                if buf.is_empty() && buf.capacity() > 2 * READ_CHUNK {
                    buf = Vec::new();
                }
                self.rbuf = buf;
                None
            }
            Err(out) => out,
        }
    }

    /// Run whole frames through the reader; returns the bytes consumed.
    fn process(&mut self, buf: &mut [u8]) -> Result<usize, Option<Outcome>> {
        let conn = &self.conn;
        let handler = &self.handler;
        let deliver = self.close_deadline.is_none();
        let report = deliver && conn.behavior.report_control;
        let mut pong = false;
        let mut peer_close: Option<Outcome> = None;
        let result = self.reader.read(buf, &mut |msg| match msg {
            Msg::Data { text, payload } => {
                Stats::add(&conn.stats.messages_in, 1);
                Stats::add(&conn.stats.bytes_in, payload.len());
                if deliver {
                    handler.message(conn, payload, !text);
                }
            }
            Msg::Ping(p) => {
                pong |= conn.queue_pong(p);
                if report {
                    handler.control(conn, p, false);
                }
            }
            Msg::Pong(p) => {
                if report {
                    handler.control(conn, p, true);
                }
            }
            Msg::Close(code, reason) => peer_close = Some((code, reason.to_string())),
        });
        let progress = match result {
            Ok(p) => p,
            Err(e) => return Err(self.fail(e.code, e.reason)),
        };
        self.need = progress.need.unwrap_or(0);
        if let Some((code, reason)) = peer_close {
            self.reading = false;
            if self.close_deadline.is_some() {
                // The answer to our close frame: done once our queue is out.
                self.close_deadline = Some(Instant::now() + CLOSE_WAIT);
            } else {
                self.conn.queue_close(code, "");
                self.finish = Some((code, reason));
                self.close_deadline = Some(Instant::now() + CLOSE_WAIT);
            }
            self.peer_closed();
            return match self.pump() {
                Some(out) => Err(Some(out)),
                None => Ok(progress.consumed),
            };
        }
        if pong {
            if let Some(out) = self.pump() {
                return Err(Some(out));
            }
        }
        Ok(progress.consumed)
    }

    fn peer_closed(&mut self) {
        // Once the peer's close is in, the close handshake completes when our queue is written.
        if self.finish.is_none() {
            self.finish = Some(self.conn.close_sent().unwrap_or_else(abnormal));
        }
        self.reading = false;
    }

    /// Write what is queued until done or the kernel is full.
    pub(crate) fn pump(&mut self) -> Option<Outcome> {
        loop {
            if self.out.wire.is_empty() {
                match self.conn.take(&mut self.out) {
                    Take::Taken => self.prepare(),
                    nothing @ (Take::Empty | Take::Drained | Take::Closed) => {
                        self.want_write = false;
                        self.out.wire.clear();
                        self.out.wire.trim(crate::config::MAX_IDLE_CAPACITY);
                        if nothing == Take::Drained {
                            self.handler.drain(&self.conn);
                            self.handler.flush();
                        }
                        return self.after_flush();
                    }
                }
            }
            match write_once(&self.stream, &mut self.out) {
                Ok(n) => self.wrote(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.want_write = true;
                    return None;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Some(self.finish.take().filter(|_| !self.reading).unwrap_or_else(abnormal)),
            }
        }
    }

    /// `n` bytes are written: the 101 response's first, then the queue's.
    fn wrote(&mut self, n: usize) {
        let hello = n.min(self.greeting as usize);
        if hello > 0 {
            self.greeting -= hello as u32;
            if self.greeting == 0 {
                self.conn.greeted();
            }
        }
        self.conn.wrote(n - hello);
    }

    /// Everything queued is written: a close handshake we answered (or failed) is complete.
    fn after_flush(&mut self) -> Option<Outcome> {
        if !self.reading && !self.discard && self.finish.is_some() {
            let shut = self.stream_shutdown();
            if !self.linger || shut.is_err() {
                // Close handshake complete: the peer sends nothing after its close frame.
                return self.finish.take();
            }
            // We failed the connection while the peer may still be sending: closing with unread
            // input would send RST, which can destroy our close frame before the peer reads it.
            // Wait (bounded by close_deadline) for the peer's FIN.
            self.discard = true;
        }
        None
    }

    fn stream_shutdown(&self) -> io::Result<()> {
        // SAFETY: the socket belongs to `self.stream`, alive for this call.
        unsafe { crate::stream::borrowed(self.stream.raw()) }.shutdown(std::net::Shutdown::Write)
    }

    /// Compress the taken queue's jobs on this thread: each becomes its compressed frame in
    /// place, the payload shared with every socket that sends the same message when it comes
    /// from the compress-once cache.
    fn prepare(&mut self) {
        if !self.out.wire.has_jobs() {
            return;
        }
        let conn = &self.conn;
        let negotiated = conn.deflate.as_ref().expect("jobs only with deflate");
        let level = conn.deflate_level();
        let bits = negotiated.server_window_bits;
        let (job_data, deflater) = (&self.out.job_data, &mut self.deflater);
        let (before, after) = self.out.wire.compress_jobs(|job| {
            let payload: &[u8] = match &job.payload {
                Payload::Cached(cached) => return cached.compress(&conn.stats),
                Payload::Local { start, .. } => &job_data[*start..*start + job.len],
                Payload::Shared(bytes) => bytes,
            };
            if negotiated.server_no_context_takeover {
                let key = match job.payload {
                    Payload::Local { key: Some(key), .. } => Some(key),
                    _ => deflate_cache::Key::of(level, bits, payload),
                };
                deflate_cache::compress_keyed(level, bits, key, payload, &conn.stats)
            } else {
                Stats::add(&conn.stats.compressions, 1);
                let mut out = Vec::new();
                deflater.get_or_insert_with(|| Box::new(Deflater::new(level, bits, false))).compress(payload, &mut out);
                Bytes::from(out)
            }
        });
        self.out.job_data.clear();
        conn.rebalance(before, after);
    }
}

mod overflow;
mod threaded;
pub(crate) use threaded::run;

#[cfg(test)]
mod tests;
