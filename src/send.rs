//! The one door for outbound messages: `send(id, data, binary, compress)` queues `data` (a string,
//! or bytes: Buffer, any TypedArray, DataView or ArrayBuffer) as one frame on socket `id`, and
//! `publish(ids, data, binary, compress)` queues one payload, encoded once into one buffer, on many
//! sockets (each queue refers to that buffer: see the core's `outbox`), and `flushAll()` writes
//! every socket that queued frames in this JS tick (one write per socket).
//!
//! Both are plain N-API callbacks, registered on the module's exports at load time: napi-rs
//! wraps each `#[napi]` function in a "native borrow scope" (thread-local pushes and a mutex per
//! call), which profiled at ~2% of the JS thread's samples at 50 clients × 4 calls in flight;
//! these calls borrow no JS object past their return, so they need none of it.
//!
//! A string is encoded straight into the socket's queue with ONE pass over it: the queue reserves
//! 3 bytes per UTF-16 unit (the most UTF-8 can need) and the frame header is sized by the lower
//! bound (one byte per unit) and rewritten once the real length is known — so V8's separate
//! length scan (`Utf8Length`, ~3% of the JS thread) is skipped. Strings above
//! [`ONE_PASS_MAX_UNITS`] are measured first, to keep the reservation tight. Bytes are copied
//! once, from the JS buffer into the queue.

use crate::sockets;
use napi::sys;
use native_ws::codec::{OP_BINARY, OP_CONTINUATION, OP_PING, OP_TEXT};
use native_ws::conn::NOT_FINAL;
use native_ws::cork::Cork;
use native_ws::{Conn, Published, SendStatus};
use std::cell::RefCell;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::Arc;

thread_local! {
    /// Sockets with frames queued in this JS tick (or delivered batch), written together at its
    /// end, or in groups during a large fan-out (see the core's `cork`).
    static CORK: RefCell<Cork<Arc<Conn>>> = const { RefCell::new(Cork::new()) };
}

/// Longest string (in UTF-16 units) encoded without measuring it first.
const ONE_PASS_MAX_UNITS: usize = 64 * 1024;

const OK: sys::napi_status = sys::Status::napi_ok;

/// The optional fifth argument of `send`: what frame to queue (JS reads these via constants.rs).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SendKind {
    /// A whole message (the default).
    Message = 0,
    /// The first fragment of a message (FIN=0, text/binary opcode).
    FirstFragment = 1,
    /// A middle fragment (FIN=0, continuation).
    Fragment = 2,
    /// The last fragment (FIN=1, continuation).
    LastFragment = 3,
    /// A ping (payload at most 125 bytes: longer is cut).
    Ping = 4,
}

impl SendKind {
    fn from_u32(k: u32) -> Option<SendKind> {
        [Self::Message, Self::FirstFragment, Self::Fragment, Self::LastFragment, Self::Ping].get(k as usize).copied()
    }

    /// The opcode (with [`NOT_FINAL`] for a fragment that is not the last) and whether it may be
    /// compressed (fragments and pings never are).
    fn opcode(self, binary: bool) -> (u8, bool) {
        let data = if binary { OP_BINARY } else { OP_TEXT };
        match self {
            SendKind::Message => (data, true),
            SendKind::FirstFragment => (data | NOT_FINAL, false),
            SendKind::Fragment => (OP_CONTINUATION | NOT_FINAL, false),
            SendKind::LastFragment => (OP_CONTINUATION, false),
            SendKind::Ping => (OP_PING, false),
        }
    }
}

/// What `send` answers for a socket that is already closed.
pub const CLOSED: SendStatus = SendStatus::Dropped;

/// Write these sockets' queued frames (one write each).
fn write(conns: &[Arc<Conn>]) {
    for conn in conns {
        conn.flush();
    }
}

/// Queue one frame on `id`; `fill` appends the payload (at least `min_len` bytes).
fn queue(id: u32, opcode: u8, min_len: usize, compress: bool, fill: impl FnOnce(&mut Vec<u8>)) -> SendStatus {
    queue_with(id, |conn| conn.send(opcode, min_len, compress, fill))
}

/// Queue on `id` with `send` (a [`Conn::send`] or [`Conn::publish`]); a socket's first frame
/// of the tick puts it in the cork, which may hand back a group of other sockets to write now.
fn queue_with(id: u32, send: impl FnOnce(&Conn) -> (SendStatus, bool)) -> SendStatus {
    let (status, ready) = sockets::with(id, |conn| {
        let (status, newly_dirty) = send(conn);
        let ready = if newly_dirty { CORK.with(|c| c.borrow_mut().join(conn.clone())) } else { Vec::new() };
        (status, ready)
    })
    .unwrap_or((CLOSED, Vec::new()));
    write(&ready);
    status
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

/// A string `data`: encode it into the queue in one pass (see the module doc).
unsafe fn send_string(env: sys::napi_env, id: u32, data: sys::napi_value, opcode: u8, compress: bool) -> SendStatus {
    // The length in UTF-16 units is O(1) in V8 (no buffer: only the length is reported).
    let mut units = 0usize;
    sys::napi_get_value_string_utf16(env, data, ptr::null_mut(), 0, &mut units);
    let (min_len, room) = if units <= ONE_PASS_MAX_UNITS {
        (units, units * 3)
    } else {
        let mut bytes = 0usize;
        sys::napi_get_value_string_utf8(env, data, ptr::null_mut(), 0, &mut bytes);
        (bytes, bytes)
    };
    queue(id, opcode, min_len, compress, |out| {
        // N-API writes a NUL after the text: give it one byte more than the text can need.
        out.reserve(room + 1);
        let spare = out.spare_capacity_mut();
        let mut written = 0usize;
        // SAFETY: `spare` has room for room + 1 bytes; N-API writes at most that many (text plus
        // NUL) and reports the initialised text bytes in `written` (<= room).
        sys::napi_get_value_string_utf8(env, data, spare.as_mut_ptr().cast(), room + 1, &mut written);
        out.set_len(out.len() + written.min(room));
    })
}

/// Size in bytes of one element of a typed array of N-API type `t`.
fn element_size(t: sys::napi_typedarray_type) -> usize {
    use sys::TypedarrayType as T;
    match t {
        T::int16_array | T::uint16_array => 2,
        T::int32_array | T::uint32_array | T::float32_array => 4,
        T::float64_array | T::bigint64_array | T::biguint64_array => 8,
        _ => 1,
    }
}

/// The bytes of a Buffer/TypedArray, DataView or ArrayBuffer; None for any other value.
unsafe fn bytes_of<'a>(env: sys::napi_env, v: sys::napi_value) -> Option<&'a [u8]> {
    let mut data: *mut c_void = ptr::null_mut();
    let mut len = 0usize;
    let mut is = false;
    if sys::napi_is_typedarray(env, v, &mut is) == OK && is {
        let (mut t, mut count, mut offset) = (0, 0usize, 0usize);
        let mut ab = ptr::null_mut();
        if sys::napi_get_typedarray_info(env, v, &mut t, &mut count, &mut data, &mut ab, &mut offset) != OK {
            return None;
        }
        len = count * element_size(t);
    } else if sys::napi_is_dataview(env, v, &mut is) == OK && is {
        let (mut ab, mut offset) = (ptr::null_mut(), 0usize);
        if sys::napi_get_dataview_info(env, v, &mut len, &mut data, &mut ab, &mut offset) != OK {
            return None;
        }
    } else if sys::napi_is_arraybuffer(env, v, &mut is) == OK && is {
        if sys::napi_get_arraybuffer_info(env, v, &mut data, &mut len) != OK {
            return None;
        }
    } else {
        return None;
    }
    // SAFETY: N-API reports `data` (already adjusted by the view's offset) valid for `len` bytes
    // for as long as the value is alive, i.e. for this call.
    Some(if len == 0 || data.is_null() { &[] } else { std::slice::from_raw_parts(data as *const u8, len) })
}

/// Up to N arguments of a call, and how many were given.
unsafe fn args<const N: usize>(env: sys::napi_env, info: sys::napi_callback_info) -> Option<([sys::napi_value; N], usize)> {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    if sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) != OK {
        return None;
    }
    Some((argv, argc))
}

/// Append the payload to `out`: a string encoded to UTF-8 once, bytes copied once. False (nothing
/// appended) for a value that is neither.
unsafe fn append_payload(env: sys::napi_env, data: sys::napi_value, out: &mut Vec<u8>) -> bool {
    let mut kind = 0;
    sys::napi_typeof(env, data, &mut kind);
    if kind == sys::ValueType::napi_string {
        let mut len = 0usize;
        sys::napi_get_value_string_utf8(env, data, ptr::null_mut(), 0, &mut len);
        // N-API writes a NUL after the text: room for it, not kept.
        out.reserve(len + 1);
        let mut written = 0usize;
        let spare = out.spare_capacity_mut();
        sys::napi_get_value_string_utf8(env, data, spare.as_mut_ptr().cast(), len + 1, &mut written);
        // SAFETY: N-API initialised `written` (<= len) bytes of the spare capacity.
        out.set_len(out.len() + written.min(len));
        true
    } else if let Some(bytes) = bytes_of(env, data) {
        out.extend_from_slice(bytes);
        true
    } else {
        false
    }
}

/// The payload as bytes owned for this call (see [`append_payload`]).
unsafe fn payload_bytes(env: sys::napi_env, data: sys::napi_value) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    append_payload(env, data, &mut out).then_some(out)
}

/// `send(id, data, binary, compress[, kind])` → SendStatus (DROPPED once the socket closed).
/// `kind` is a [`SendKind`] (default: a whole message).
unsafe extern "C" fn send(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let Some((argv, argc)) = args::<5>(env, info) else {
        return ptr::null_mut();
    };
    let (mut id, mut binary, mut compress, mut kind) = (0u32, false, false, 0u32);
    if argc < 4
        || sys::napi_get_value_uint32(env, argv[0], &mut id) != OK
        || sys::napi_get_value_bool(env, argv[2], &mut binary) != OK
        || sys::napi_get_value_bool(env, argv[3], &mut compress) != OK
        || (argc > 4 && sys::napi_get_value_uint32(env, argv[4], &mut kind) != OK)
    {
        return throw_type_error(env, c"send(id: number, data, binary: boolean, compress: boolean, kind?: number)");
    }
    let Some(kind) = SendKind::from_u32(kind) else {
        return throw_type_error(env, c"send: kind must be one of constants().sendKind");
    };
    let (opcode, compressible) = kind.opcode(binary);
    let compress = compress && compressible;
    let data = argv[1];
    let mut js_type = 0;
    sys::napi_typeof(env, data, &mut js_type);
    let status = if kind == SendKind::Ping {
        let Some(mut bytes) = payload_bytes(env, data) else {
            return throw_type_error(env, c"ping: data must be a string, Buffer, ArrayBuffer or ArrayBufferView");
        };
        bytes.truncate(125);
        queue(id, opcode, bytes.len(), false, |out| out.extend_from_slice(&bytes))
    } else if js_type == sys::ValueType::napi_string {
        send_string(env, id, data, opcode, compress)
    } else if let Some(bytes) = bytes_of(env, data) {
        queue(id, opcode, bytes.len(), compress, |out| out.extend_from_slice(bytes))
    } else {
        return throw_type_error(env, c"send: data must be a string, Buffer, ArrayBuffer or ArrayBufferView");
    };
    js_u32(env, status as u32)
}

/// `publish(ids: Uint32Array, data, binary, compress)` → how many sockets queued it (not
/// DROPPED). The payload is encoded (or copied from JS) ONCE into one buffer, queued by reference
/// on every socket (small frames are copied: see the core's `outbox::SHARE_MIN`), in the order
/// of `ids`, each behind whatever that socket already queued.
unsafe extern "C" fn publish(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    const USAGE: &CStr = c"publish(ids: Uint32Array, data: string | bytes, binary: boolean, compress: boolean)";
    let Some((argv, argc)) = args::<4>(env, info) else {
        return ptr::null_mut();
    };
    let (mut binary, mut compress) = (false, false);
    if argc < 4
        || sys::napi_get_value_bool(env, argv[2], &mut binary) != OK
        || sys::napi_get_value_bool(env, argv[3], &mut compress) != OK
    {
        return throw_type_error(env, USAGE);
    }
    let (mut t, mut count, mut offset) = (0, 0usize, 0usize);
    let (mut ptr_ids, mut ab): (*mut c_void, _) = (ptr::null_mut(), ptr::null_mut());
    let mut is = false;
    if sys::napi_is_typedarray(env, argv[0], &mut is) != OK
        || !is
        || sys::napi_get_typedarray_info(env, argv[0], &mut t, &mut count, &mut ptr_ids, &mut ab, &mut offset) != OK
        || t != sys::TypedarrayType::uint32_array
    {
        return throw_type_error(env, USAGE);
    }
    // SAFETY: N-API reports `ptr_ids` valid for `count` u32s while the array is alive (this call).
    let ids: &[u32] = if count == 0 || ptr_ids.is_null() { &[] } else { std::slice::from_raw_parts(ptr_ids as *const u32, count) };
    let opcode = if binary { OP_BINARY } else { OP_TEXT };
    let mut ok = false;
    let mut msg = Published::build(opcode, |out| ok = append_payload(env, argv[1], out));
    if !ok {
        return throw_type_error(env, USAGE);
    }
    let mut queued = 0u32;
    for &id in ids {
        if queue_with(id, |conn| conn.publish(&mut msg, compress)) != SendStatus::Dropped {
            queued += 1;
        }
    }
    js_u32(env, queued)
}

/// The end of a JS tick, or of a batch of events the bridge delivered: write every socket that
/// queued frames; the next sends start a new cork.
pub fn end_of_batch() {
    let waiting = CORK.with(|c| c.borrow_mut().end());
    write(&waiting);
    CORK.with(|c| c.borrow_mut().recycle(waiting));
}

unsafe extern "C" fn flush_all(_env: sys::napi_env, _info: sys::napi_callback_info) -> sys::napi_value {
    end_of_batch();
    ptr::null_mut()
}

/// Add `send` and `flushAll` to the module's exports.
pub unsafe fn register(env: sys::napi_env, exports: sys::napi_value) -> napi::Result<()> {
    let calls: [(&CStr, sys::napi_callback); 3] =
        [(c"send", Some(send)), (c"publish", Some(publish)), (c"flushAll", Some(flush_all))];
    for (name, cb) in calls {
        let mut f = ptr::null_mut();
        let status = sys::napi_create_function(env, name.as_ptr(), name.to_bytes().len() as isize, cb, ptr::null_mut(), &mut f);
        if status != OK || sys::napi_set_named_property(env, exports, name.as_ptr(), f) != OK {
            return Err(napi::Error::from_reason(format!("registering {}", name.to_string_lossy())));
        }
    }
    Ok(())
}
