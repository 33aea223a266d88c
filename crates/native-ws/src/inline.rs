//! The inline driver: upgraded connections served on the consumer's own thread, in the wakeup of
//! its event loop that found them ready (uWebSockets.js's model). The I/O threads still accept,
//! read the HTTP head, admit and answer the upgrade; after the 101 they hand the socket over
//! ([`hand_over`]). From then on one epoll instance of ours ([`Inline::fd`]) holds every inline
//! socket; the consumer watches that one fd in its own event loop (Node: a libuv poll handle) and
//! calls [`Inline::turn`] when it is readable and when the deadline `turn` returned has passed. A
//! turn reads each ready socket once (at most one read buffer), runs the frames through the same
//! state machine as the threaded driver ([`crate::task`]), writes what the socket can take and
//! fires the deadlines due: a message reaches the handler without crossing threads, and the
//! handler (the JS bridge) delivers it in the same wakeup.
//!
//! A socket that had more to read than one buffer is served again on the next turn, which the
//! driver asks for by waking its own fd: one socket cannot keep the others (or the consumer's
//! timers) waiting. Anything that needs a connection's attention from elsewhere (a send that
//! found the kernel full, `end`, `close`, a shorter idle timeout, the I/O threads' hand-over) goes
//! through the driver's [`Signal`], which wakes the same fd.
//!
//! Connections that negotiated permessage-deflate stay with the threaded driver (see
//! [`hand_over`]): their compression and inflation then run beside the consumer's thread.
//!
//! The driver also waits, for an attached HTTP server, for the first bytes of connections it
//! accepted that did not show yet whether they are an upgrade for the core ([`Inline::watch`],
//! [`looks`]): each is decided in the turn its bytes arrive, on the consumer's thread.

use crate::codec;
use crate::conn::{Conn, Driver};
use crate::admission::Backlog;
use crate::handler::{Handler, OpenInfo};
use crate::peek::{Claim, Verdict};
use crate::stream::{RawSock, Stream};
use crate::task::{Outcome, Socket, Task};
use mio::unix::SourceFd;
use mio::{Events, Poll, Token, Waker};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::{AcqRel, Acquire, Relaxed, Release}};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::Interest;
use tokio::time::Instant;

mod looks;

/// Takes a connection of the consumer's HTTP server that is an upgrade on `claim`'s paths: its
/// fd (the consumer's, duplicated by the taker) goes to the I/O threads, which answer the
/// upgrade ([`crate::Server::take`]).
pub(crate) type Taker = Box<dyn Fn(RawFd, &Claim) -> io::Result<()> + Send>;

/// The token of the driver's own wakeups (connection tokens are their ids).
const WAKER: Token = Token(usize::MAX);
/// Readiness events taken from the kernel per call.
const EVENTS: usize = 1024;
/// How often the consumer's host reports its thread's load ([`Inline::report_load`]), at most.
pub const LOAD_WINDOW: Duration = Duration::from_millis(20);
/// The busy share of a window above which the consumer's thread counts as saturated.
const SATURATED: f64 = 0.98;

/// A connection whose upgrade was answered, on its way to the driver.
struct Adopted {
    conn: Arc<Conn>,
    fd: OwnedFd,
    /// the 101 response, written by the driver after the open event is queued
    hello: Vec<u8>,
    initial: Vec<u8>,
    info: OpenInfo,
}

/// The driver's mailbox: connections handed over and connections that need attention, from any
/// thread; the first entry since the last turn wakes the driver's fd.
pub struct Signal {
    adopted: Mutex<Vec<Adopted>>,
    raised: Mutex<Vec<u32>>,
    pending: AtomicBool,
    closed: AtomicBool,
    waker: Waker,
    /// the driver's fd (its epoll instance), while `closed` is false
    fd: RawFd,
    /// when the last turn ended: µs after `epoch` (0: none yet)
    turn_end: AtomicU64,
    /// when the consumer's host last reported its thread's load (µs after `epoch`; 0: never)
    load_at: AtomicU64,
    /// the end of the first window of the saturated streak the reports describe now (µs after
    /// `epoch`; 0: the thread is not saturated)
    saturated_since: AtomicU64,
    epoch: std::time::Instant,
}

impl Driver for Signal {
    fn raise(&self, id: u32) {
        self.raised.lock().unwrap().push(id);
        self.wake();
    }
}

impl Signal {
    /// The server shut down: connections handed over from now on are closed; the driver's next
    /// turn drops the ones it serves.
    pub(crate) fn close(&self) {
        self.closed.store(true, Release);
        self.wake();
    }

    /// False once the server shut down or the driver stopped.
    pub(crate) fn is_open(&self) -> bool {
        !self.closed.load(Acquire)
    }

    /// µs from `epoch` to now (at least 1: 0 means none).
    fn now_us(&self) -> u64 {
        (self.epoch.elapsed().as_micros() as u64).max(1)
    }

    fn wake(&self) {
        if !self.pending.swap(true, AcqRel) {
            let _ = self.waker.wake();
        }
    }
}

/// Admission control's view of the inline driver (I/O threads, at an upgrade), the longer of two
/// waits:
/// - input waiting for the consumer's thread (the driver's fd is readable) has waited at most
///   since the last turn ended (that turn read everything ready then). Unlike the threaded
///   mode's, this input is not in the bridge's queue until a turn reads it: without this, a JS
///   thread stuck in one long task would look idle.
/// - a saturated thread: its host's reports ([`Inline::report_load`]) say it has been busy for
///   more than [`SATURATED`] of each window since the first of them. Such a thread still turns
///   often, so no input waits long, yet every new client's first messages take time that its
///   other work (existing clients, accepting connections) then lacks. Its wait counts from the
///   end of the first saturated window, so a short burst (a handful of opens) is no backlog. It
///   counts while the thread still turns (input waits, or a turn ended within half a window) and
///   the last report is at most two windows old: a thread that stopped turning is idle (or stuck,
///   which the first wait sees), and the door opens at once when the load ends.
impl Backlog for Signal {
    fn oldest_wait(&self) -> Duration {
        if !self.is_open() {
            return Duration::ZERO;
        }
        let end = self.turn_end.load(Relaxed);
        if end == 0 {
            return Duration::ZERO;
        }
        let now = self.now_us();
        let window = LOAD_WINDOW.as_micros() as u64;
        let waiting = self.input_waiting();
        let unread = if waiting { now.saturating_sub(end) } else { 0 };
        // Still turning: input waits, or a turn ended within half a window.
        let busy = waiting || now.saturating_sub(end) <= window / 2;
        let since = self.saturated_since.load(Relaxed);
        let fresh = now.saturating_sub(self.load_at.load(Relaxed)) <= 2 * window;
        let saturated = if since != 0 && fresh && busy { now.saturating_sub(since) } else { 0 };
        Duration::from_micros(unread.max(saturated))
    }
}

impl Signal {
    /// Whether the driver's fd is readable now: the consumer's next turn has work.
    pub(crate) fn input_waiting(&self) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; a zero timeout never blocks.
        unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
    }
}

/// Hand an upgraded connection to the inline driver (I/O thread, once the upgrade is accepted).
/// The consumer hears of it (its open event) from the driver's thread, in the turn that writes
/// the 101 response `hello`.
pub(crate) fn hand_over(
    signal: &Arc<Signal>,
    conn: Arc<Conn>,
    stream: Stream,
    (hello, initial): (Vec<u8>, Vec<u8>),
    info: OpenInfo,
    handler: &Arc<dyn Handler>,
) {
    match stream.into_fd() {
        Ok(fd) if signal.is_open() => {
            let _ = conn.driver.set(signal.clone());
            signal.adopted.lock().unwrap().push(Adopted { conn, fd, hello, initial, info });
            signal.wake();
        }
        // The socket could not leave the I/O thread's poller (or the driver is gone): the
        // connection is over before it started, and the consumer hears both ends of it.
        _ => {
            handler.open(&conn, info);
            conn.stats.closed(codec::CLOSE_ABNORMAL);
            handler.close(&conn, codec::CLOSE_ABNORMAL, "");
            handler.flush();
        }
    }
}

/// An inline connection's socket and the readiness the kernel reported for it (edge-triggered:
/// set by an event, cleared when a syscall would block, as tokio keeps it).
pub(crate) struct Sock {
    fd: OwnedFd,
    readable: Cell<bool>,
    writable: Cell<bool>,
    /// the peer shut down or reset the connection: that state lasts and brings no new event, so
    /// reading goes on until the read says so (a short read no longer means "drained": the data
    /// and the hang-up can come in one event)
    hung_up: Cell<bool>,
}

impl Socket for Sock {
    fn raw(&self) -> RawSock {
        self.fd.as_raw_fd()
    }

    fn try_io(&self, interest: Interest, op: impl FnOnce() -> io::Result<usize>) -> io::Result<usize> {
        let r = op();
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            if interest.is_readable() {
                self.readable.set(self.hung_up.get());
            } else {
                self.writable.set(false);
            }
        }
        r
    }
}

struct Slot {
    task: Task<Sock>,
    /// the deadline a timer entry is queued for (entries for other instants are stale)
    armed: Option<Instant>,
    /// in this turn's (or the next turn's) list of connections to serve
    queued: bool,
}

/// The inline driver (see the module doc). Lives on the consumer's thread.
pub struct Inline {
    poll: Poll,
    events: Events,
    signal: Arc<Signal>,
    handler: Arc<dyn Handler>,
    /// by connection id (small integers, see `server::ids`)
    slots: Vec<Option<Box<Slot>>>,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    ready: Vec<u32>,
    /// connections with more to read, served on the next turn
    again: Vec<u32>,
    /// connections of the consumer's HTTP server waiting for their first bytes
    looks: looks::Looks,
    /// where a connection found to be ours goes
    taker: Taker,
}

impl Inline {
    pub(crate) fn new(handler: Arc<dyn Handler>, taker: Taker) -> io::Result<Inline> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let fd = poll.as_raw_fd();
        Ok(Inline {
            poll,
            events: Events::with_capacity(EVENTS),
            signal: Arc::new(Signal {
                adopted: Mutex::new(Vec::new()),
                raised: Mutex::new(Vec::new()),
                pending: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                waker,
                fd,
                turn_end: AtomicU64::new(0),
                load_at: AtomicU64::new(0),
                saturated_since: AtomicU64::new(0),
                epoch: std::time::Instant::now(),
            }),
            handler,
            slots: Vec::new(),
            timers: BinaryHeap::new(),
            ready: Vec::new(),
            again: Vec::new(),
            looks: looks::Looks::default(),
            taker,
        })
    }

    pub(crate) fn signal(&self) -> Arc<Signal> {
        self.signal.clone()
    }

    /// The fd to watch for readability: when it is readable, call [`Inline::turn`].
    pub fn fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// False once the server shut down (the consumer may stop watching the fd).
    pub fn is_open(&self) -> bool {
        self.signal.is_open()
    }

    /// Connections the driver serves.
    pub fn connections(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Wait for the first bytes of `fd`, a connection the consumer's HTTP server accepted and has
    /// not read (see [`crate::peek`]), for at most [`crate::peek::WAIT`]. In the turn they
    /// decide, the handler hears [`Handler::examined`] with `token`: `mine` when they are an
    /// upgrade on `claim`'s paths (the core has taken the connection: the consumer closes its
    /// fd), else the connection is the consumer's again, unread. The fd stays the consumer's
    /// meanwhile: open, and not read by it.
    pub fn watch(&mut self, fd: RawFd, claim: Arc<Claim>, token: u64) -> io::Result<()> {
        if !self.is_open() {
            return Err(io::Error::other("the inline driver has stopped"));
        }
        self.looks.watch(self.poll.registry(), fd, claim, token)
    }

    /// Connections waiting for their first bytes ([`Inline::watch`]).
    pub fn watched(&self) -> usize {
        self.looks.len()
    }

    /// The consumer's host reports its thread's load: busy (not waiting for I/O) for `busy` of
    /// the last `window` (at least [`LOAD_WINDOW`] long). Admission control reads it (see
    /// [`Signal`]'s backlog).
    pub fn report_load(&self, busy: Duration, window: Duration) {
        let s = &self.signal;
        let now = s.now_us();
        if window.is_zero() || busy.as_secs_f64() < SATURATED * window.as_secs_f64() {
            s.saturated_since.store(0, Relaxed);
        } else if s.saturated_since.load(Relaxed) == 0 {
            s.saturated_since.store(now, Relaxed);
        }
        s.load_at.store(now, Relaxed);
    }

    /// Serve everything ready now (never waits). Returns when the driver next needs a turn
    /// without its fd becoming readable: the earliest deadline (idle timeout, ping, close wait).
    pub fn turn(&mut self) -> Option<std::time::Instant> {
        match self.poll.poll(&mut self.events, Some(Duration::ZERO)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.events.clear(),
        }
        let mut ready = std::mem::take(&mut self.ready);
        ready.append(&mut self.again);
        let mut looked = Vec::new();
        for ev in self.events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            if let Some(index) = looks::index_of(ev.token()) {
                looked.push((index, ev.is_read_closed() || ev.is_error()));
                continue;
            }
            let id = ev.token().0 as u32;
            let Some(slot) = slot_mut(&mut self.slots, id) else { continue };
            let sock = slot.task.socket();
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                sock.readable.set(true);
            }
            if ev.is_read_closed() || ev.is_error() {
                sock.hung_up.set(true);
            }
            if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
                sock.writable.set(true);
            }
            if !std::mem::replace(&mut slot.queued, true) {
                ready.push(id);
            }
        }
        if !self.is_open() {
            self.shutdown();
            return None;
        }
        if self.signal.pending.swap(false, AcqRel) {
            let adopted = std::mem::take(&mut *self.signal.adopted.lock().unwrap());
            for a in adopted {
                self.adopt(a, &mut ready);
            }
            let raised = std::mem::take(&mut *self.signal.raised.lock().unwrap());
            for id in raised {
                if let Some(slot) = slot_mut(&mut self.slots, id) {
                    if !std::mem::replace(&mut slot.queued, true) {
                        ready.push(id);
                    }
                }
            }
        }
        for &id in &ready {
            self.step(id);
        }
        ready.clear();
        self.ready = ready;
        for (index, ended) in looked {
            if let Some((token, fd, claim, verdict)) = self.looks.look(self.poll.registry(), index, ended) {
                self.decided(token, fd, &claim, verdict);
            }
        }
        self.fire_timers();
        // Events not followed by a flush of their own (an open without bytes yet) reach the
        // handler's queue with the turn.
        self.handler.flush();
        if !self.again.is_empty() {
            self.signal.wake();
        }
        self.signal.turn_end.store(self.signal.now_us(), Relaxed);
        let timer = self.timers.peek().map(|Reverse((t, _))| t.into_std());
        match (timer, self.looks.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A watched connection is decided: ours (taken, unless the taker cannot: then it stays the
    /// consumer's) or the consumer's.
    fn decided(&mut self, token: u64, fd: RawFd, claim: &Claim, verdict: Verdict) {
        let mine = verdict == Verdict::Mine && (self.taker)(fd, claim).is_ok();
        self.handler.examined(token, mine);
    }

    /// Drop every connection now (sockets closed, no close events), as the threaded driver's
    /// runtime shutdown does; connections handed over later are closed as they arrive.
    pub fn shutdown(&mut self) {
        self.signal.close();
        self.signal.adopted.lock().unwrap().clear();
        self.looks.clear(self.poll.registry());
        self.slots.clear();
        self.timers.clear();
        self.again.clear();
    }

    /// A connection handed over: the consumer's open event, the 101 response, then its first
    /// bytes. The consumer's handler runs in this turn, so before anything the client does once
    /// it has the 101.
    fn adopt(&mut self, a: Adopted, ready: &mut Vec<u32>) {
        let Adopted { conn, fd, hello, initial, info } = a;
        let id = conn.id;
        self.handler.open(&conn, info);
        let sock = Sock { fd, readable: Cell::new(false), writable: Cell::new(false), hung_up: Cell::new(false) };
        let raw = sock.fd.as_raw_fd();
        let mut task = Task::new(conn, self.handler.clone(), sock);
        task.greet(hello);
        let both = mio::Interest::READABLE | mio::Interest::WRITABLE;
        if self.poll.registry().register(&mut SourceFd(&raw), Token(id as usize), both).is_err() {
            task.end(crate::task::abnormal());
            return;
        }
        if let Some(out) = task.start(initial) {
            let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
            task.end(out);
            return;
        }
        let i = id as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(Box::new(Slot { task, armed: None, queued: true }));
        ready.push(id);
    }

    /// Serve one connection: what was asked of it, its input, its output (the threaded
    /// driver's order), then re-arm its deadline.
    fn step(&mut self, id: u32) {
        let Some(slot) = slot_mut(&mut self.slots, id) else { return };
        slot.queued = false;
        let task = &mut slot.task;
        let mut out = None;
        if task.asked() {
            out = task.on_control();
        }
        if out.is_none() && task.wants_read() && task.socket().readable.get() {
            out = task.on_readable();
            if out.is_none() && task.wants_read() && task.socket().readable.get() {
                slot.queued = true;
                self.again.push(id);
            }
        }
        if out.is_none() && task.wants_write() && task.socket().writable.get() {
            out = task.pump();
        }
        match out {
            Some(out) => self.finish(id, out),
            None => self.arm(id),
        }
    }

    fn arm(&mut self, id: u32) {
        let Some(slot) = slot_mut(&mut self.slots, id) else { return };
        if let Some(d) = slot.task.deadline() {
            if slot.armed.is_none_or(|a| d < a) {
                slot.armed = Some(d);
                self.timers.push(Reverse((d, id)));
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        let handler = &self.handler;
        // A connection undecided after the whole wait is the consumer's.
        self.looks.expire(self.poll.registry(), now.into_std(), |token| handler.examined(token, false));
        while let Some(&Reverse((t, id))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(slot) = slot_mut(&mut self.slots, id) else { continue };
            if slot.armed != Some(t) {
                continue; // stale: a later deadline replaced it
            }
            slot.armed = None;
            match slot.task.on_timer() {
                Some(out) => self.finish(id, out),
                None => self.arm(id),
            }
        }
    }

    fn finish(&mut self, id: u32, out: Outcome) {
        let Some(slot) = self.slots.get_mut(id as usize).and_then(Option::take) else { return };
        let _ = self.poll.registry().deregister(&mut SourceFd(&slot.task.socket().raw()));
        slot.task.end(out);
    }
}

fn slot_mut(slots: &mut [Option<Box<Slot>>], id: u32) -> Option<&mut Slot> {
    slots.get_mut(id as usize).and_then(|s| s.as_deref_mut())
}

impl Drop for Inline {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;
