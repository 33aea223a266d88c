//! The calls JS makes for every message it sends — `sendText(id, string, binary, compress)` and
//! `flushAll()` — as plain N-API callbacks, registered on the module's exports at load time.
//!
//! napi-rs wraps each `#[napi]` function in a "native borrow scope" (thread-local pushes and a
//! mutex per call), which profiled at ~2% of the JS thread's samples at 50 clients × 4 calls in
//! flight; these two calls borrow no JS object past their return, so they need none of it.
//!
//! `sendText` encodes the string straight into the socket's queue with ONE pass over it: the
//! queue reserves 3 bytes per UTF-16 unit (the most UTF-8 can need) and the frame header is sized
//! by the lower bound (one byte per unit) and rewritten once the real length is known — so V8's
//! separate length scan (`Utf8Length`, ~3% of the JS thread) is skipped. Strings above
//! [`ONE_PASS_MAX_UNITS`] are measured first, to keep the reservation tight.

use crate::sockets;
use napi::sys;
use native_ws::{Conn, SendStatus};
use std::cell::RefCell;
use std::ffi::CStr;
use std::ptr;
use std::sync::Arc;

thread_local! {
    /// Sockets with frames queued in this JS tick; flushed once at the end of the tick.
    static DIRTY: RefCell<Vec<Arc<Conn>>> = const { RefCell::new(Vec::new()) };
}

/// Longest string (in UTF-16 units) encoded without measuring it first.
const ONE_PASS_MAX_UNITS: usize = 64 * 1024;

const OK: sys::napi_status = sys::Status::napi_ok;
const CLOSED: u32 = SendStatus::Dropped as u32;

/// Remember a socket that queued frames in this tick (the caller got `newly_dirty` from the core).
pub fn mark_dirty(conn: &Arc<Conn>) {
    DIRTY.with(|d| d.borrow_mut().push(conn.clone()));
}

/// End of the JS tick: write every socket that queued frames (one write per socket).
pub fn flush_dirty() {
    let dirty = DIRTY.with(|d| std::mem::take(&mut *d.borrow_mut()));
    for conn in &dirty {
        conn.flush();
    }
    DIRTY.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_empty() {
            let mut dirty = dirty;
            dirty.clear();
            *d = dirty;
        }
    });
}

unsafe fn throw_type_error(env: sys::napi_env, msg: &CStr) -> sys::napi_value {
    sys::napi_throw_type_error(env, ptr::null(), msg.as_ptr());
    ptr::null_mut()
}

unsafe fn js_u32(env: sys::napi_env, n: u32) -> sys::napi_value {
    let mut v = ptr::null_mut();
    sys::napi_create_uint32(env, n, &mut v);
    v
}

/// `sendText(id, data, binary, compress)` → SendStatus (DROPPED once the socket closed).
unsafe extern "C" fn send_text(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let mut argc = 4usize;
    let mut argv = [ptr::null_mut(); 4];
    if sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr(),
        ptr::null_mut(),
        ptr::null_mut(),
    ) != OK
    {
        return ptr::null_mut();
    }
    let (mut id, mut binary, mut compress) = (0u32, false, false);
    if argc < 4
        || sys::napi_get_value_uint32(env, argv[0], &mut id) != OK
        || sys::napi_get_value_bool(env, argv[2], &mut binary) != OK
        || sys::napi_get_value_bool(env, argv[3], &mut compress) != OK
    {
        return throw_type_error(
            env,
            c"sendText(id: number, data: string, binary: boolean, compress: boolean)",
        );
    }
    let data = argv[1];
    // The length in UTF-16 units is O(1) in V8 (no buffer: only the length is reported).
    let mut units = 0usize;
    if sys::napi_get_value_string_utf16(env, data, ptr::null_mut(), 0, &mut units) != OK {
        return throw_type_error(env, c"send: data must be a string");
    }
    let (min_len, room) = if units <= ONE_PASS_MAX_UNITS {
        (units, units * 3)
    } else {
        let mut bytes = 0usize;
        sys::napi_get_value_string_utf8(env, data, ptr::null_mut(), 0, &mut bytes);
        (bytes, bytes)
    };
    let opcode = if binary { 2 } else { 1 };
    let status = sockets::with(id, |conn| {
        let (s, newly_dirty) = conn.send(opcode, min_len, compress, |out| {
            // N-API writes a NUL after the text: give it one byte more than the text can need.
            out.reserve(room + 1);
            let spare = out.spare_capacity_mut();
            let mut written = 0usize;
            // SAFETY: `spare` has room for room + 1 bytes; N-API writes at most that many (text
            // plus NUL) and reports the initialised text bytes in `written` (<= room).
            sys::napi_get_value_string_utf8(
                env,
                data,
                spare.as_mut_ptr().cast(),
                room + 1,
                &mut written,
            );
            out.set_len(out.len() + written.min(room));
        });
        if newly_dirty {
            mark_dirty(conn);
        }
        s as u32
    });
    js_u32(env, status.unwrap_or(CLOSED))
}

unsafe extern "C" fn flush_all(
    _env: sys::napi_env,
    _info: sys::napi_callback_info,
) -> sys::napi_value {
    flush_dirty();
    ptr::null_mut()
}

/// Add the hot calls to the module's exports.
pub unsafe fn register(env: sys::napi_env, exports: sys::napi_value) -> napi::Result<()> {
    let calls: [(&CStr, sys::napi_callback); 2] = [
        (c"sendText", Some(send_text)),
        (c"flushAll", Some(flush_all)),
    ];
    for (name, cb) in calls {
        let mut f = ptr::null_mut();
        let status = sys::napi_create_function(
            env,
            name.as_ptr(),
            name.to_bytes().len() as isize,
            cb,
            ptr::null_mut(),
            &mut f,
        );
        if status != OK || sys::napi_set_named_property(env, exports, name.as_ptr(), f) != OK {
            return Err(napi::Error::from_reason(format!(
                "registering {}",
                name.to_string_lossy()
            )));
        }
    }
    Ok(())
}
