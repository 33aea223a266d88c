//! The inline I/O mode in Node's event loop: the core's inline driver ([`native_ws::inline`])
//! watched by one libuv poll handle on its fd, plus one libuv timer for its deadlines. When
//! either fires, on the JS thread: one turn of the driver (sockets read, frames parsed, messages
//! staged in the bridge), then the bridge delivers them right there (`Bridge::deliver_here`),
//! inside a callback scope, so promise jobs and `process.nextTick`s run before the event loop
//! goes on — as for any I/O callback of Node's. A message thus reaches JS in the wakeup that read
//! it, without crossing threads; replies leave from the same thread as before.
//!
//! libuv's functions are looked up in the process when the mode starts (`dlsym`), not linked: a
//! runtime that implements N-API without libuv (Bun, Deno) lacks them or `napi_get_uv_event_loop`,
//! and the app then runs the threaded mode ([`InlineHost::start`] answers None).

use crate::bridge::Bridge;
use napi::sys;
use native_ws::inline::Inline;
use native_ws::Server;
use std::cell::RefCell;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::{Arc, OnceLock};

type Handle = *mut c_void;
type PollCb = unsafe extern "C" fn(Handle, c_int, c_int);
type TimerCb = unsafe extern "C" fn(Handle);
type CloseCb = unsafe extern "C" fn(Handle);

/// libuv's handle types (uv.h's `uv_handle_type`) and poll events used here.
const UV_POLL: c_int = 8;
const UV_TIMER: c_int = 13;
const UV_READABLE: c_int = 1;

/// The libuv functions this module calls, found in the running process.
struct Uv {
    handle_size: unsafe extern "C" fn(c_int) -> usize,
    poll_init: unsafe extern "C" fn(*mut sys::uv_loop_s, Handle, c_int) -> c_int,
    poll_start: unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int,
    timer_init: unsafe extern "C" fn(*mut sys::uv_loop_s, Handle) -> c_int,
    timer_start: unsafe extern "C" fn(Handle, TimerCb, u64, u64) -> c_int,
    timer_stop: unsafe extern "C" fn(Handle) -> c_int,
    close: unsafe extern "C" fn(Handle, CloseCb),
    unref: unsafe extern "C" fn(Handle),
    set_data: unsafe extern "C" fn(Handle, *mut c_void),
    get_data: unsafe extern "C" fn(Handle) -> *mut c_void,
    /// the loop's time blocked waiting for I/O, ns (Node turns the measure on for its event loop
    /// utilization); the thread's load is not reported without it
    idle_time: Option<unsafe extern "C" fn(*mut sys::uv_loop_s) -> u64>,
}

fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        /// The function `name` of the process as `F` (a function pointer type).
        ///
        /// # Safety
        /// `F` must be the C signature of the function of that name.
        unsafe fn sym<F: Copy>(name: &CStr) -> Option<F> {
            assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
            // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the process.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: a function's address, read as the pointer type the caller names.
            (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
        }
        // SAFETY: each symbol is libuv's function of that name, whose C signature is the field's.
        unsafe {
            Some(Uv {
                handle_size: sym(c"uv_handle_size")?,
                poll_init: sym(c"uv_poll_init")?,
                poll_start: sym(c"uv_poll_start")?,
                timer_init: sym(c"uv_timer_init")?,
                timer_start: sym(c"uv_timer_start")?,
                timer_stop: sym(c"uv_timer_stop")?,
                close: sym(c"uv_close")?,
                unref: sym(c"uv_unref")?,
                set_data: sym(c"uv_handle_set_data")?,
                get_data: sym(c"uv_handle_get_data")?,
                idle_time: sym(c"uv_metrics_idle_time"),
            })
        }
    })
    .as_ref()
}

/// Memory for one libuv handle of `kind` (pointer-aligned), freed by [`free_handle`].
fn alloc_handle(uv: &Uv, kind: c_int) -> Handle {
    // SAFETY: libuv's own size of its handle type.
    let words = unsafe { (uv.handle_size)(kind) }.div_ceil(8);
    Box::into_raw(vec![0u64; words].into_boxed_slice()) as *mut u64 as Handle
}

/// # Safety
/// `h` came from [`alloc_handle`] with the same `kind`, and libuv is done with it.
unsafe fn free_handle(uv: &Uv, h: Handle, kind: c_int) {
    let words = (uv.handle_size)(kind).div_ceil(8);
    drop(Box::from_raw(ptr::slice_from_raw_parts_mut(h as *mut u64, words)));
}

/// The inline driver in Node's event loop (JS thread only). Heap-allocated at a fixed address:
/// both handles point to it. Stopped by the app's `close`, its finalizer or the environment's
/// teardown, whichever comes first ([`InlineHost::stop`]); freed once libuv has closed both
/// handles and the app let go of it ([`InlineHost::release`]).
pub struct InlineHost {
    env: sys::napi_env,
    uv_loop: *mut sys::uv_loop_s,
    driver: RefCell<Option<Inline>>,
    /// when the timer is due (None: stopped)
    due: std::cell::Cell<Option<std::time::Instant>>,
    /// the last load sample: when, and the loop's idle time then (ns)
    load_sample: std::cell::Cell<(std::time::Instant, u64)>,
    bridge: Arc<Bridge>,
    poll: Handle,
    timer: Handle,
    /// the async resource of the callback scope a turn runs in
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    /// handles libuv has not finished closing
    open_handles: std::cell::Cell<u8>,
    /// stopped by the environment's teardown: its references go with it
    env_gone: std::cell::Cell<bool>,
    stopped: std::cell::Cell<bool>,
    /// the app no longer holds the host
    released: std::cell::Cell<bool>,
}

impl InlineHost {
    /// Serve `server`'s upgraded connections on this (the JS) thread. None where the runtime
    /// has no libuv loop to watch a fd with: the app stays in the threaded mode.
    pub fn start(env: sys::napi_env, server: &Server, bridge: Arc<Bridge>) -> Option<*mut InlineHost> {
        let uv = uv()?;
        let mut lp = ptr::null_mut();
        // SAFETY: JS thread, live env.
        if unsafe { sys::napi_get_uv_event_loop(env, &mut lp) } != sys::Status::napi_ok || lp.is_null() {
            return None;
        }
        let (resource, context) = async_resource(env)?;
        let driver = server.serve_inline().ok()?;
        let fd = driver.fd();
        // SAFETY: the JS thread's live loop.
        let idle = uv.idle_time.map_or(0, |f| unsafe { f(lp) });
        let host = Box::into_raw(Box::new(InlineHost {
            env,
            uv_loop: lp,
            driver: RefCell::new(Some(driver)),
            due: std::cell::Cell::new(None),
            load_sample: std::cell::Cell::new((std::time::Instant::now(), idle)),
            bridge,
            poll: alloc_handle(uv, UV_POLL),
            timer: alloc_handle(uv, UV_TIMER),
            resource,
            context,
            open_handles: std::cell::Cell::new(2),
            env_gone: std::cell::Cell::new(false),
            stopped: std::cell::Cell::new(false),
            released: std::cell::Cell::new(false),
        }));
        // SAFETY: fresh handles on the JS thread's loop; `host` outlives them (freed in on_close).
        unsafe {
            let h = &*host;
            (uv.timer_init)(lp, h.timer);
            (uv.set_data)(h.timer, host as *mut c_void);
            (uv.unref)(h.timer);
            let ok = (uv.poll_init)(lp, h.poll, fd) == 0;
            (uv.set_data)(h.poll, host as *mut c_void);
            (uv.unref)(h.poll);
            if !ok || (uv.poll_start)(h.poll, UV_READABLE, on_poll) != 0 {
                // Stop the driver: the server then keeps every connection on the I/O threads,
                // and the app runs (and reports) the threaded mode.
                InlineHost::stop(host);
                InlineHost::release(host);
                return None;
            }
            sys::napi_add_env_cleanup_hook(env, Some(cleanup), host as *mut c_void);
        }
        Some(host)
    }

    /// Drop the driver's connections and close the handles (JS thread). Once is enough: later
    /// calls do nothing.
    ///
    /// # Safety
    /// `host` came from [`InlineHost::start`] and was not released.
    pub unsafe fn stop(host: *mut InlineHost) {
        let uv = uv().expect("resolved at start");
        let h = &*host;
        if h.stopped.replace(true) {
            return;
        }
        sys::napi_remove_env_cleanup_hook(h.env, Some(cleanup), host as *mut c_void);
        if let Some(mut d) = h.driver.borrow_mut().take() {
            d.shutdown();
        }
        (uv.timer_stop)(h.timer);
        (uv.close)(h.poll, on_close);
        (uv.close)(h.timer, on_close);
    }

    /// The app lets go of the host (after [`InlineHost::stop`]): freed now if libuv is done with
    /// its handles, else when it is.
    ///
    /// # Safety
    /// `host` came from [`InlineHost::start`], was stopped, and is released once.
    pub unsafe fn release(host: *mut InlineHost) {
        (*host).released.set(true);
        if (*host).open_handles.get() == 0 {
            free_host(host);
        }
    }

    /// Tell the driver how busy this thread was since the last report, once a window has passed
    /// (admission control holds new clients back while it is saturated).
    fn report_load(&self, driver: &Inline) {
        let Some(idle_time) = uv().and_then(|uv| uv.idle_time) else { return };
        let (then, idle_then) = self.load_sample.get();
        let window = then.elapsed();
        if window < native_ws::inline::LOAD_WINDOW {
            return;
        }
        // SAFETY: JS thread, the host's live loop.
        let idle = unsafe { idle_time(self.uv_loop) };
        if idle == 0 {
            // The loop does not measure it (never idle yet is no loop of Node's): no report.
            return;
        }
        let idle_ns = idle.saturating_sub(idle_then);
        let busy = window.saturating_sub(std::time::Duration::from_nanos(idle_ns));
        driver.report_load(busy, window);
        self.load_sample.set((std::time::Instant::now(), idle));
    }

    /// One turn: the driver's, then the bridge's delivery, in a callback scope.
    unsafe fn turn(&self) {
        let env = self.env;
        let mut scope = ptr::null_mut();
        sys::napi_open_handle_scope(env, &mut scope);
        let mut resource = ptr::null_mut();
        sys::napi_get_reference_value(env, self.resource, &mut resource);
        let mut cb_scope = ptr::null_mut();
        let scoped = !resource.is_null() && sys::napi_open_callback_scope(env, resource, self.context, &mut cb_scope) == sys::Status::napi_ok;
        let next = {
            let mut driver = self.driver.borrow_mut();
            match driver.as_mut() {
                Some(d) => {
                    self.report_load(d);
                    let _staging = self.bridge.inline_turn();
                    d.turn()
                }
                None => None,
            }
        };
        self.bridge.deliver_here(env);
        let mut pending = false;
        sys::napi_is_exception_pending(env, &mut pending);
        if pending {
            // What Node does with an exception thrown from an I/O callback: 'uncaughtException'.
            let mut e = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut e);
            sys::napi_fatal_exception(env, e);
        }
        if scoped {
            sys::napi_close_callback_scope(env, cb_scope);
        }
        sys::napi_close_handle_scope(env, scope);
        if self.driver.borrow().is_some() {
            self.arm(next);
        }
    }

    /// Run a turn at `at` (None: no deadline), unless the fd wakes the driver first.
    unsafe fn arm(&self, at: Option<std::time::Instant>) {
        let uv = uv().expect("resolved at start");
        self.due.set(at);
        match at {
            Some(at) => {
                let ms = at.saturating_duration_since(std::time::Instant::now()).as_millis() as u64;
                (uv.timer_start)(self.timer, on_timer, ms + 1, 0);
            }
            None => {
                (uv.timer_stop)(self.timer);
            }
        }
    }

    /// Wait on this thread for the first bytes of a connection Node accepted (see
    /// `Inline::watch`); the verdict comes as the `examined` event of a later turn. Err when the
    /// driver cannot (stopped, or inside its own turn): the caller examines elsewhere.
    pub fn watch(&self, fd: i32, claim: Arc<native_ws::peek::Claim>, token: u64) -> std::io::Result<()> {
        let mut driver = self.driver.try_borrow_mut().map_err(std::io::Error::other)?;
        let d = driver.as_mut().ok_or_else(|| std::io::Error::other("the inline driver has stopped"))?;
        d.watch(fd, claim, token)?;
        // Its wait ends at the latest WAIT from now: the timer must fire by then.
        let end = std::time::Instant::now() + native_ws::peek::WAIT;
        if self.due.get().is_none_or(|due| due > end) {
            // SAFETY: JS thread, the host's live loop and timer (the driver is still there).
            unsafe { self.arm(Some(end)) };
        }
        Ok(())
    }
}

/// The async resource every turn's callback scope names (one per host).
fn async_resource(env: sys::napi_env) -> Option<(sys::napi_ref, sys::napi_async_context)> {
    // SAFETY: JS thread, live env; the reference and context live as long as the host.
    unsafe {
        let mut object = ptr::null_mut();
        let mut name = ptr::null_mut();
        let mut context = ptr::null_mut();
        let mut r = ptr::null_mut();
        let ok = sys::napi_create_object(env, &mut object) == sys::Status::napi_ok
            && sys::napi_create_string_utf8(env, c"ddp-transport-native:inline".as_ptr(), -1, &mut name) == sys::Status::napi_ok
            && sys::napi_async_init(env, object, name, &mut context) == sys::Status::napi_ok
            && sys::napi_create_reference(env, object, 1, &mut r) == sys::Status::napi_ok;
        ok.then_some((r, context))
    }
}

unsafe fn host_of(h: Handle) -> &'static InlineHost {
    let uv = uv().expect("resolved at start");
    &*((uv.get_data)(h) as *const InlineHost)
}

unsafe extern "C" fn on_poll(h: Handle, _status: c_int, _events: c_int) {
    host_of(h).turn();
}

unsafe extern "C" fn on_timer(h: Handle) {
    host_of(h).turn();
}

unsafe extern "C" fn on_close(h: Handle) {
    let uv = uv().expect("resolved at start");
    let host = (uv.get_data)(h) as *mut InlineHost;
    let kind = if h == (*host).poll { UV_POLL } else { UV_TIMER };
    free_handle(uv, h, kind);
    let left = (*host).open_handles.get() - 1;
    (*host).open_handles.set(left);
    if left == 0 && (*host).released.get() {
        free_host(host);
    }
}

unsafe fn free_host(host: *mut InlineHost) {
    let host = Box::from_raw(host);
    if !host.env_gone.get() {
        sys::napi_delete_reference(host.env, host.resource);
        sys::napi_async_destroy(host.env, host.context);
    }
}

/// The environment is going away (worker exit, process exit) with the app still open.
unsafe extern "C" fn cleanup(arg: *mut c_void) {
    (*(arg as *mut InlineHost)).env_gone.set(true);
    InlineHost::stop(arg as *mut InlineHost);
}
