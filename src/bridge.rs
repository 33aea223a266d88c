//! The JS bridge: a [`Handler`] that queues events from the I/O threads and delivers everything
//! queued since the last delivery in ONE threadsafe-function call (one JS wakeup per batch).
//! Message payloads are appended to one byte arena per batch (no allocation per message); the
//! JS strings and Buffers are built on the JS thread from it.
//!
//! Batch layout handed to JS: the dispatch function's ARGUMENTS are `tag, value, tag, value, ...`
//! where `tag = id * EventKind::COUNT + kind` (see [`EventKind`], which JS reads through
//! constants.rs). Open, close and upgrade values are objects with named fields. Passing them as
//! arguments of one `napi_call_function` costs one copy onto V8's stack, where building an array
//! costs one `napi_set_element` API call per value (~3% of the JS thread at 50×4). At most
//! [`MAX_ARGS`] per call; a bigger batch is several calls in the same wakeup.
//!
//! The threadsafe function is N-API's own (`napi_create_threadsafe_function`), driven directly:
//! the I/O threads only wake it (the events travel in the queue, not in the call).
//!
//! Fairness (one delivery per event-loop turn, bounded in time): Node runs a threadsafe
//! function's callback again in the same wakeup, without returning to the event loop, when the
//! function is called while its callback runs (up to 1,000 times per wakeup: nodejs/node#38506).
//! "While its callback runs" includes the promise jobs and `process.nextTick`s the handlers left
//! behind: Node runs those when the callback returns, inside the same wakeup (a `CallbackScope`
//! per call). When the I/O threads woke JS for events that arrived during a delivery, a saturated
//! server therefore stayed in that loop for seconds and timers, other I/O and `setImmediate`
//! starved — and with Meteor 3, whose method handlers run in promise jobs, the jobs of one
//! delivery alone outlast the budget below.
//! So a wakeup stays armed from the I/O threads' side until the JS thread disarms it, and a turn
//! lasts from its first delivery until the event loop's check phase (JS marks it there with a
//! `setImmediate`, `turn_over`): `deliver` hands over events in chunks until the queue is empty or
//! the turn's budget ([`native_ws::pacing`], 5 ms) is spent, counted from the turn's start, so the
//! promise jobs of earlier deliveries in the turn count too. Queue empty: it disarms (the next
//! event wakes JS) and leaves the turn open: if the I/O threads woke JS during the callback or its
//! promise jobs, Node calls it again at once, and that delivery continues the same turn and
//! budget, so a chain of deliveries is bounded by one budget. Budget spent: what is left waits on
//! the JS thread, in order, and JS is asked (a call of the dispatch function with NO arguments) to
//! call `settle` from a `setImmediate`, i.e. after the poll phase's other I/O; `settle` delivers
//! the next turn's worth itself (no second wakeup; timers run before the next `settle`). Under
//! light load it is one wakeup per batch and nothing else (a `setImmediate` hop after every
//! delivery put ~1 ms on the round trip's p99; the turn's marker delays nothing). Every chunk
//! starts with a header pair `-1, ms` (the turn's budget left): JS checks it per event
//! (lib/app.js), and when a chunk's handlers are expensive (a 3 ms DDP login each) it stops inside
//! the chunk, keeps its rest, answers `false`, and settles only once that rest is done. Each
//! chunk's replies are written when its call returns (not at the end of the turn).
//!
//! The inline I/O mode (src/inline.rs) reads sockets on the JS thread itself: while one of its
//! turns runs (`inline_turn`), a flush commits without waking JS, and the turn ends with
//! `deliver_here`, the same delivery (same turn budget and chunks) without the threadsafe
//! function — unless a `settle` is due, which then delivers in order after the turn's other I/O.

use napi::bindgen_prelude::*;
use napi::sys;
use native_ws::pacing::Pacer;
use native_ws::{Admission, Backlog, Conn, Handler, OpenInfo, UpgradeInfo};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

mod values;
use values::event_values;

/// Values per call of the dispatch function (V8 copies arguments onto its stack).
const MAX_ARGS: usize = 2048;

/// Events per call: the arguments less the chunk's header pair, two values per event.
const MAX_EVENTS: usize = (MAX_ARGS - 2) / 2;

/// The tag of a chunk's header pair (its value: the turn's budget left, ms); event tags are >= 0.
const HEADER_TAG: i32 = -1;

/// Events of the current read on this I/O thread. They reach the shared queue together at
/// `flush` (the end of the read), under one lock: JS never takes part of one read, so a client's
/// pipelined calls are handled in one JS batch and their replies leave in one write. (Taking a
/// read's messages half-way made the coalesced benchmark flip between ~230k and ~60–100k calls/s:
/// replies split over two writes make the client split its next calls, and so on.) An I/O thread
/// belongs to one server, hence to one bridge.
#[derive(Default)]
struct Staged {
    events: Vec<Event>,
    data: Vec<u8>,
}

thread_local! {
    static STAGE: RefCell<Staged> = RefCell::new(Staged::default());
    /// The JS thread runs a turn of the inline driver (src/inline.rs): events it stages are
    /// delivered by `deliver_here` at the end of the turn, without a threadsafe-function wakeup.
    static INLINE_TURN: Cell<bool> = const { Cell::new(false) };
}

/// While alive, this thread's flushes commit without waking JS (see [`Bridge::inline_turn`]).
#[cfg(target_os = "linux")]
pub struct InlineTurn(());

#[cfg(target_os = "linux")]
impl Drop for InlineTurn {
    fn drop(&mut self) {
        INLINE_TURN.with(|t| t.set(false));
    }
}

/// The kind of an event in a batch.
#[derive(Clone, Copy)]
pub enum EventKind {
    Open = 0,
    Text = 1,
    Binary = 2,
    Drain = 3,
    Close = 4,
    Upgrade = 5,
    Ping = 6,
    Pong = 7,
    /// the client of an upgrade waiting for a decision went away
    Aborted = 8,
    /// a connection given to `examine` is the core's now (the value: its token)
    Claimed = 9,
    /// a connection given to `examine` is Node's again, unread (the value: its token)
    Returned = 10,
}

impl EventKind {
    /// Kinds per id in a tag (a power of two above the largest kind).
    pub const COUNT: u32 = 16;
}

enum Event {
    Open(Arc<Conn>, Box<OpenInfo>),
    Message {
        id: u32,
        binary: bool,
        start: usize,
        end: usize,
    },
    Drain(u32),
    Close(u32, u16, String),
    Upgrade(Box<UpgradeInfo>),
    /// a ping or pong received (routes with `report_control`; at most 125 bytes, kept inline)
    Control { id: u32, pong: bool, payload: Vec<u8> },
    Aborted(u64),
    Examined(u64, bool),
}

impl Event {
    /// The socket an event is about (None for upgrade-time events).
    fn socket(&self) -> Option<u32> {
        match self {
            Event::Open(conn, _) => Some(conn.id),
            Event::Message { id, .. } | Event::Drain(id) | Event::Close(id, ..) | Event::Control { id, .. } => Some(*id),
            Event::Upgrade(_) | Event::Aborted(_) | Event::Examined(..) => None,
        }
    }
}

#[derive(Default)]
struct Queue {
    events: Vec<Event>,
    data: Vec<u8>,
    /// JS will look at the queue without another wakeup: a TSFN call is in flight, a delivery
    /// runs, or `settle` is due (at most one TSFN call in flight; see the module doc)
    armed: bool,
    /// emptied buffers from the last delivery, reused
    spare: Option<(Vec<Event>, Vec<u8>)>,
    /// when the oldest event in `events` was committed (None when empty)
    since: Option<Instant>,
}

/// N-API's threadsafe function handle. Called from I/O threads only under `Bridge::wake`'s lock,
/// and taken out of it (under the lock) before it is released or finalized.
struct Wake(sys::napi_threadsafe_function);
// SAFETY: napi_call_threadsafe_function may be called from any thread; every other use is on
// the JS thread.
unsafe impl Send for Wake {}

/// The JS thread's side of the queue: events taken but not yet delivered (a turn's budget ran
/// out before them), their payload arena, and the turn's pacing.
#[derive(Default)]
struct Taken {
    events: VecDeque<Event>,
    data: Vec<u8>,
    pacer: Pacer,
    /// the sockets of the chunk's messages and closes, for admission control when it listens
    heard: Vec<u32>,
}

/// How a delivery ended.
enum Turn {
    /// the queue is empty (not yet disarmed)
    Idle,
    /// the turn's budget is spent and events wait
    Spent,
    /// a JS exception is pending (events may wait)
    Exception,
}

/// A reference to the dispatch function, for deliveries that `settle` runs itself (JS thread).
struct Dispatch(sys::napi_ref);
// SAFETY: created, read and deleted on the JS thread only.
unsafe impl Send for Dispatch {}

pub struct Bridge {
    queue: Mutex<Queue>,
    wake: Mutex<Option<Wake>>,
    dispatch: Mutex<Option<Dispatch>>,
    /// used by the JS thread only (a Mutex for Sync; never contended)
    taken: Mutex<Taken>,
    /// the server's admission control, told when JS takes an admitted socket's first event
    admission: OnceLock<Arc<Admission>>,
    /// when the oldest event taken by JS but not handled yet was committed: µs after `epoch`
    /// (0 = none); with the queue's `since`, the consumer's lag admission control reads
    taken_since: AtomicU64,
    epoch: Instant,
    /// events were delivered in this turn of the event loop and JS has not marked its end yet
    /// (`turn_over`, from a `setImmediate`): a delivery now continues the turn (JS thread only)
    turn_open: AtomicBool,
    /// a turn's budget ran out and JS was asked to `settle`: events wait for it (JS thread only)
    settle_due: AtomicBool,
}

impl Bridge {
    /// A bridge whose batches go to `dispatch` (a JS function), called as `dispatch(tag, value, ...)`.
    pub fn new(env: sys::napi_env, dispatch: sys::napi_value) -> Result<Arc<Bridge>> {
        let bridge = Arc::new(Bridge {
            queue: Mutex::new(Queue::default()),
            wake: Mutex::new(None),
            dispatch: Mutex::new(None),
            taken: Mutex::new(Taken::default()),
            admission: OnceLock::new(),
            taken_since: AtomicU64::new(0),
            epoch: Instant::now(),
            turn_open: AtomicBool::new(false),
            settle_due: AtomicBool::new(false),
        });
        let context = Arc::into_raw(bridge.clone()) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        // SAFETY: JS thread, live env and function; `context` is an owned Arc reclaimed in
        // `finalize`, which N-API calls exactly once (after release, or at env teardown).
        unsafe {
            let mut name = ptr::null_mut();
            check(sys::napi_create_string_utf8(env, c"ddp-transport-native".as_ptr(), -1, &mut name))?;
            let status = sys::napi_create_threadsafe_function(
                env,
                dispatch,
                ptr::null_mut(),
                name,
                0,
                1,
                context,
                Some(finalize),
                context,
                Some(deliver),
                &mut tsfn,
            );
            if status != sys::Status::napi_ok {
                drop(Arc::from_raw(context as *const Bridge));
                return Err(Error::from_status(Status::from(status)));
            }
        }
        *bridge.wake.lock().unwrap() = Some(Wake(tsfn));
        let mut r = ptr::null_mut();
        // SAFETY: JS thread, live env and function; deleted in `release`.
        if unsafe { sys::napi_create_reference(env, dispatch, 1, &mut r) } == sys::Status::napi_ok {
            *bridge.dispatch.lock().unwrap() = Some(Dispatch(r));
        }
        Ok(bridge)
    }

    /// µs from `epoch` to `t` (at least 1: 0 means none).
    fn micros(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.epoch).as_micros() as u64).max(1)
    }

    /// The server's admission control (set once, right after the server is made).
    pub fn set_admission(&self, admission: Arc<Admission>) {
        let _ = self.admission.set(admission);
    }

    /// Tell admission control that JS took an admitted socket's first event: its upgrade event
    /// (a route with an upgrade hook), else its open event (token 0); note the socket of a
    /// message or a close in `heard` while admission waits to hear from new clients.
    fn tell_admission(&self, ev: &Event, heard: &mut Vec<u32>) {
        let Some(a) = self.admission.get() else { return };
        match ev {
            Event::Upgrade(_) => a.taken(),
            Event::Open(_, info) if info.token == 0 => a.taken(),
            Event::Message { id, .. } | Event::Close(id, ..) if a.listening() => heard.push(*id),
            _ => {}
        }
    }

    /// JS handled the chunk whose messages and closes came from `heard`'s sockets.
    fn heard(&self, heard: &mut Vec<u32>) {
        if let Some(a) = self.admission.get() {
            for id in heard.drain(..) {
                a.heard_from(id);
            }
        }
    }

    /// Keep the Node event loop alive for this bridge or not (JS thread).
    pub fn set_ref(&self, env: sys::napi_env, on: bool) {
        if let Some(w) = self.wake.lock().unwrap().as_ref() {
            // SAFETY: JS thread, the handle is live while it is in `wake`.
            unsafe {
                if on {
                    sys::napi_ref_threadsafe_function(env, w.0);
                } else {
                    sys::napi_unref_threadsafe_function(env, w.0);
                }
            }
        }
    }

    /// Stop delivering (JS thread): events queued after this are never handed to JS.
    pub fn release(&self, env: sys::napi_env) {
        if let Some(d) = self.dispatch.lock().unwrap().take() {
            // SAFETY: JS thread; the reference is live (it left `dispatch`).
            unsafe {
                sys::napi_delete_reference(env, d.0);
            }
        }
        if let Some(w) = self.wake.lock().unwrap().take() {
            // SAFETY: the handle was live; after this nobody calls it (it left `wake`).
            unsafe {
                sys::napi_release_threadsafe_function(w.0, sys::ThreadsafeFunctionReleaseMode::release);
            }
        }
    }

    fn push(&self, event: Event) {
        STAGE.with(|st| st.borrow_mut().events.push(event));
    }

    /// JS thread: move everything queued to `taken` (whose events were all delivered), under
    /// one lock; `taken`'s emptied buffers become the queue's spares. False when nothing was
    /// queued. The wakeup stays armed: only `settle` disarms it.
    fn refill(&self, taken: &mut Taken) -> bool {
        let mut q = self.queue.lock().unwrap();
        let q = &mut *q;
        if q.events.is_empty() {
            return false;
        }
        let (mut events, mut data) = q.spare.take().unwrap_or_default();
        std::mem::swap(&mut events, &mut q.events);
        std::mem::swap(&mut data, &mut q.data);
        if let Some(t) = q.since.take() {
            self.taken_since.store(self.micros(t), Relaxed);
        }
        let mut old_events = Vec::from(std::mem::replace(&mut taken.events, VecDeque::from(events)));
        let mut old_data = std::mem::replace(&mut taken.data, data);
        old_events.clear();
        old_data.clear();
        if old_data.capacity() > 1 << 20 {
            old_data = Vec::new();
        }
        q.spare = Some((old_events, old_data));
        true
    }

    /// JS thread: if nothing is queued, disarm (the next event wakes JS). False when events wait.
    fn disarm_if_idle(&self) -> bool {
        let mut q = self.queue.lock().unwrap();
        if !q.events.is_empty() {
            return false;
        }
        q.armed = false;
        self.taken_since.store(0, Relaxed);
        true
    }

    /// JS thread, from a `setImmediate` after a delivery whose turn's budget ran out (the turn's
    /// other I/O ran): deliver the next turn's worth right here (no second wakeup: this is a new
    /// turn of the event loop, after its poll phase), or disarm if nothing waits.
    pub fn settle(&self, env: sys::napi_env) {
        self.settle_due.store(false, Relaxed);
        if self.taken.lock().unwrap().events.is_empty() && self.disarm_if_idle() {
            return;
        }
        match self.dispatch_fn(env) {
            // SAFETY: JS thread, live env and function.
            Some(f) => unsafe { run(env, f, self, false) },
            _ => self.wake_js(),
        }
    }

    /// The dispatch function, while the bridge delivers (JS thread).
    fn dispatch_fn(&self, env: sys::napi_env) -> Option<sys::napi_value> {
        if self.wake.lock().unwrap().is_none() {
            return None;
        }
        self.dispatch.lock().unwrap().as_ref().and_then(|d| {
            let mut f = ptr::null_mut();
            // SAFETY: JS thread; the reference lives until `release`.
            let ok = unsafe { sys::napi_get_reference_value(env, d.0, &mut f) } == sys::Status::napi_ok;
            (ok && !f.is_null()).then_some(f)
        })
    }

    /// JS thread: a turn of the inline driver starts; its events are delivered by
    /// [`Bridge::deliver_here`] once it is over.
    #[cfg(target_os = "linux")]
    pub fn inline_turn(&self) -> InlineTurn {
        INLINE_TURN.with(|t| t.set(true));
        InlineTurn(())
    }

    /// JS thread, after a turn of the inline driver, inside its callback scope: deliver what is
    /// queued now, as a threadsafe-function wakeup would (same turn budget) — unless a `settle`
    /// is due, which delivers it after the turn's other I/O.
    #[cfg(target_os = "linux")]
    pub fn deliver_here(&self, env: sys::napi_env) {
        if self.settle_due.load(Relaxed) {
            return;
        }
        if self.queue.lock().unwrap().events.is_empty() && self.taken.lock().unwrap().events.is_empty() {
            return;
        }
        if let Some(f) = self.dispatch_fn(env) {
            // SAFETY: JS thread, live env and function.
            unsafe { run(env, f, self, self.turn_open.load(Relaxed)) }
        }
    }

    /// JS thread, from the `setImmediate` JS queues when a turn's first events reach it: the
    /// event loop reached its check phase, so the next delivery starts a new turn.
    pub fn turn_over(&self) {
        self.turn_open.store(false, Relaxed);
    }

    /// Call the threadsafe function (it only wakes JS: `deliver` takes the queue itself).
    fn wake_js(&self) {
        let wake = self.wake.lock().unwrap();
        if let Some(w) = wake.as_ref() {
            // SAFETY: the handle is live while it is in `wake` (we hold the lock).
            unsafe {
                sys::napi_call_threadsafe_function(w.0, ptr::null_mut(), sys::ThreadsafeFunctionCallMode::nonblocking);
            }
        }
    }
}

/// Admission control's view of JS: how long the oldest event not yet handled has waited (in the
/// queue, or taken by JS and waiting for a later turn).
impl Backlog for Bridge {
    fn oldest_wait(&self) -> Duration {
        let queued = self.queue.lock().unwrap().since;
        let taken = match self.taken_since.load(Relaxed) {
            0 => None,
            us => Some(self.epoch + Duration::from_micros(us)),
        };
        match taken.into_iter().chain(queued).min() {
            Some(t) => t.elapsed(),
            None => Duration::ZERO,
        }
    }
}

impl Handler for Bridge {
    fn upgrade(&self, info: UpgradeInfo) {
        self.push(Event::Upgrade(Box::new(info)));
    }

    fn open(&self, conn: &Arc<Conn>, info: OpenInfo) {
        self.push(Event::Open(conn.clone(), Box::new(info)));
    }

    fn message(&self, conn: &Arc<Conn>, data: &[u8], binary: bool) {
        STAGE.with(|st| {
            let st = &mut *st.borrow_mut();
            let start = st.data.len();
            st.data.extend_from_slice(data);
            st.events.push(Event::Message { id: conn.id, binary, start, end: st.data.len() });
        });
    }

    fn upgrade_aborted(&self, token: u64) {
        self.push(Event::Aborted(token));
    }

    fn examined(&self, token: u64, mine: bool) {
        self.push(Event::Examined(token, mine));
    }

    fn control(&self, conn: &Arc<Conn>, payload: &[u8], pong: bool) {
        self.push(Event::Control { id: conn.id, pong, payload: payload.to_vec() });
    }

    fn drain(&self, conn: &Arc<Conn>) {
        self.push(Event::Drain(conn.id));
    }

    fn close(&self, conn: &Arc<Conn>, code: u16, reason: &str) {
        self.push(Event::Close(conn.id, code, reason.to_string()));
    }

    /// End of one read (or one open/close/drain): commit this thread's staged events to the
    /// queue under one lock and wake JS if no delivery is pending.
    fn flush(&self) {
        let wake_js = STAGE.with(|st| {
            let st = &mut *st.borrow_mut();
            if st.events.is_empty() {
                return false;
            }
            let mut q = self.queue.lock().unwrap();
            let q = &mut *q;
            if q.events.is_empty() {
                q.since = Some(Instant::now());
            }
            if q.events.is_empty() && q.data.is_empty() {
                // JS took everything: hand the staged vectors over, no copy.
                std::mem::swap(&mut q.events, &mut st.events);
                std::mem::swap(&mut q.data, &mut st.data);
            } else {
                let base = q.data.len();
                q.data.extend_from_slice(&st.data);
                st.data.clear();
                q.events.extend(st.events.drain(..).map(|ev| match ev {
                    Event::Message { id, binary, start, end } => {
                        Event::Message { id, binary, start: start + base, end: end + base }
                    }
                    ev => ev,
                }));
            }
            !std::mem::replace(&mut q.armed, true)
        });
        if wake_js && !INLINE_TURN.with(Cell::get) {
            self.wake_js();
        }
    }
}

/// N-API is done with the threadsafe function (released, or the env is going away).
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let bridge = Arc::from_raw(data as *const Bridge);
    bridge.wake.lock().unwrap().take();
}

/// JS thread, once per wakeup: hand what is queued to the dispatch function, for at most one
/// turn's budget (see the module doc).
unsafe extern "C" fn deliver(env: sys::napi_env, js_cb: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    if env.is_null() || js_cb.is_null() {
        return; // the env is being torn down
    }
    // SAFETY: `context` is the Arc leaked in `Bridge::new`, alive until `finalize`.
    let bridge = &*(context as *const Bridge);
    run(env, js_cb, bridge, bridge.turn_open.load(Relaxed));
}

/// One delivery (from the threadsafe function's wakeup, or from `settle`; `same_turn`: the event
/// loop has not reached its check phase since this turn's first delivery): disarm when the queue
/// is empty, else ask JS to `settle` after the turn's other I/O.
unsafe fn run(env: sys::napi_env, js_cb: sys::napi_value, bridge: &Bridge, same_turn: bool) {
    let mut undefined = ptr::null_mut();
    sys::napi_get_undefined(env, &mut undefined);
    let turn = {
        let mut taken = bridge.taken.lock().unwrap();
        let taken = &mut *taken;
        taken.pacer.begin(Instant::now(), same_turn);
        let turn = match deliver_turn(env, js_cb, undefined, bridge, taken) {
            // events that came after the last refill wait for the next turn
            Turn::Idle if !bridge.disarm_if_idle() => Turn::Spent,
            turn => turn,
        };
        // Idle leaves the turn open for a chained delivery.
        if !matches!(turn, Turn::Idle) {
            taken.pacer.end();
        }
        turn
    };
    match turn {
        Turn::Idle => {}
        // Node surfaces the exception when we return, then calls us again at once.
        Turn::Exception => bridge.wake_js(),
        Turn::Spent => {
            bridge.settle_due.store(true, Relaxed);
            let mut result = ptr::null_mut();
            sys::napi_call_function(env, undefined, js_cb, 0, ptr::null(), &mut result);
        }
    }
}

/// Deliver chunks of events (each one call of the dispatch function, sized by the pacer) until
/// the queue is empty, the turn's budget is spent or a JS exception is pending.
unsafe fn deliver_turn(
    env: sys::napi_env,
    js_cb: sys::napi_value,
    undefined: sys::napi_value,
    bridge: &Bridge,
    taken: &mut Taken,
) -> Turn {
    let mut args: Vec<sys::napi_value> = Vec::new();
    let mut header_tag = ptr::null_mut();
    if sys::napi_create_int32(env, HEADER_TAG, &mut header_tag) != sys::Status::napi_ok {
        return Turn::Exception;
    }
    loop {
        if taken.events.is_empty() && !bridge.refill(taken) {
            return Turn::Idle;
        }
        let start = Instant::now();
        if taken.pacer.spent(start) {
            return Turn::Spent;
        }
        let chunk = taken.pacer.chunk(start, MAX_EVENTS);
        let mut scope = ptr::null_mut();
        if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
            return Turn::Exception;
        }
        args.clear();
        let mut left = ptr::null_mut();
        sys::napi_create_double(env, taken.pacer.left(start).as_secs_f64() * 1000.0, &mut left);
        args.extend([header_tag, left]);
        let mut failed = None;
        let mut n = 0;
        let mut socket = None;
        // A chunk never ends inside one socket's run of events (one read's messages, which the
        // I/O thread queues together): a client's pipelined calls are handled in one turn and
        // their replies leave in one write. Bounded by the arguments one call may carry.
        while n < chunk || (n < MAX_EVENTS && socket.is_some() && taken.events.front().map(Event::socket) == Some(socket)) {
            let Some(ev) = taken.events.pop_front() else { break };
            n += 1;
            socket = ev.socket();
            bridge.tell_admission(&ev, &mut taken.heard);
            match event_values(env, ev, &taken.data) {
                Ok((t, v)) => args.extend([t, v]),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // JS answers false when the turn's budget ran out inside the chunk (an expensive handler,
        // e.g. a DDP login): it keeps the chunk's rest and goes on from a setImmediate.
        let mut js_done = true;
        if n > 0 && !left.is_null() {
            // JS marks the turn's end from a setImmediate it queues on a turn's first chunk.
            bridge.turn_open.store(true, Relaxed);
            let mut result = ptr::null_mut();
            if sys::napi_call_function(env, undefined, js_cb, args.len(), args.as_ptr(), &mut result) == sys::Status::napi_ok
                && !result.is_null()
            {
                let mut b = true;
                if sys::napi_get_value_bool(env, result, &mut b) == sys::Status::napi_ok {
                    js_done = b;
                }
            }
        }
        // The chunk's replies leave now, not when the whole turn (up to the budget) is over: a
        // turn of several chunks held every reply until its end (Node runs the nextTick flush
        // only when the wakeup's callback returns), which cost clients that wait for replies
        // before they send again (coalesced echo: -15 % calls/s).
        crate::send::end_of_batch();
        if !taken.heard.is_empty() {
            bridge.heard(&mut taken.heard);
        }
        if let Some(e) = failed {
            // Only on an N-API failure (out of memory): surface it as an exception.
            JsError::from(e).throw_into(env);
        }
        sys::napi_close_handle_scope(env, scope);
        taken.pacer.record(n, start.elapsed());
        let mut pending = false;
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            return Turn::Exception;
        }
        if !js_done {
            return Turn::Spent;
        }
    }
}

unsafe fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_status(Status::from(status)))
    }
}
