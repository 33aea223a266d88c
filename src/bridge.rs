//! The JS bridge: a [`Handler`] that queues events from the I/O threads and delivers everything
//! queued since the last delivery in ONE threadsafe-function call (one JS wakeup per batch).
//! Message payloads are appended to one byte arena per batch (no allocation per message); the
//! JS strings and Buffers are built on the JS thread from it.
//!
//! Batch layout handed to JS: a flat array `[tag, value, tag, value, ...]` where
//! `tag = id * 8 + kind` (see the `KIND_*` constants, mirrored in index.js).

use napi::bindgen_prelude::*;
use napi::sys;
use crate::sockets;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use native_ws::{Conn, Handler, OpenInfo, UpgradeInfo};
use std::ptr;
use std::sync::{Arc, Mutex};

pub const KIND_OPEN: u32 = 0;
pub const KIND_TEXT: u32 = 1;
pub const KIND_BINARY: u32 = 2;
pub const KIND_DRAIN: u32 = 3;
pub const KIND_CLOSE: u32 = 4;
pub const KIND_UPGRADE: u32 = 5;

enum Event {
    Open(Arc<Conn>, Box<OpenInfo>),
    Message { id: u32, binary: bool, start: usize, end: usize },
    Drain(u32),
    Close(u32, u16, String),
    Upgrade(Box<UpgradeInfo>),
}

#[derive(Default)]
struct Queue {
    events: Vec<Event>,
    data: Vec<u8>,
    /// a delivery is pending (at most one TSFN call in flight)
    armed: bool,
    /// emptied buffers from the last delivery, reused
    spare: Option<(Vec<Event>, Vec<u8>)>,
}

pub type Wake = ThreadsafeFunction<(), (), Batch, Status, false, false, 0>;

pub struct Bridge {
    queue: Mutex<Queue>,
    wake: Mutex<Option<Wake>>,
}

/// What one delivery carries to JS.
pub struct Batch {
    bridge: Arc<Bridge>,
}

impl Bridge {
    pub fn new() -> Arc<Bridge> {
        Arc::new(Bridge { queue: Mutex::new(Queue::default()), wake: Mutex::new(None) })
    }

    pub fn set_wake(&self, wake: Option<Wake>) {
        *self.wake.lock().unwrap() = wake;
    }

    pub fn with_wake(&self, f: impl FnOnce(&mut Wake)) {
        if let Some(w) = self.wake.lock().unwrap().as_mut() {
            f(w);
        }
    }

    fn push(&self, event: Event) {
        self.queue.lock().unwrap().events.push(event);
    }

    /// JS thread: take everything queued; the next event will wake JS again.
    fn take(&self) -> (Vec<Event>, Vec<u8>) {
        let mut q = self.queue.lock().unwrap();
        q.armed = false;
        let (mut events, mut data) = q.spare.take().unwrap_or_default();
        std::mem::swap(&mut events, &mut q.events);
        std::mem::swap(&mut data, &mut q.data);
        (events, data)
    }

    fn recycle(&self, mut events: Vec<Event>, mut data: Vec<u8>) {
        events.clear();
        data.clear();
        if data.capacity() > 1 << 20 {
            data = Vec::new();
        }
        self.queue.lock().unwrap().spare = Some((events, data));
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
        let mut q = self.queue.lock().unwrap();
        let start = q.data.len();
        q.data.extend_from_slice(data);
        let end = q.data.len();
        q.events.push(Event::Message { id: conn.id, binary, start, end });
    }

    fn drain(&self, conn: &Arc<Conn>) {
        self.push(Event::Drain(conn.id));
    }

    fn close(&self, conn: &Arc<Conn>, code: u16, reason: &str) {
        self.push(Event::Close(conn.id, code, reason.to_string()));
    }

    fn flush(&self) {
        let mut q = self.queue.lock().unwrap();
        if q.armed || q.events.is_empty() {
            return;
        }
        q.armed = true;
        drop(q);
        let wake = self.wake.lock().unwrap();
        if let Some(w) = wake.as_ref() {
            // The callback takes the queue itself (see `batch_for`); the call only wakes JS.
            w.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Builds the JS array for one delivery (runs on the JS thread inside the TSFN callback).
pub fn batch_for(bridge: &Arc<Bridge>) -> Batch {
    Batch { bridge: bridge.clone() }
}

unsafe fn check(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::from_status(Status::from(status)))
    }
}

unsafe fn js_string(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check(sys::napi_create_string_utf8(env, bytes.as_ptr().cast(), bytes.len() as isize, &mut v))?;
    Ok(v)
}

unsafe fn js_number(env: sys::napi_env, n: f64) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check(sys::napi_create_double(env, n, &mut v))?;
    Ok(v)
}

unsafe fn js_array(env: sys::napi_env, items: &[sys::napi_value]) -> Result<sys::napi_value> {
    let mut arr = ptr::null_mut();
    check(sys::napi_create_array_with_length(env, items.len(), &mut arr))?;
    for (i, item) in items.iter().enumerate() {
        check(sys::napi_set_element(env, arr, i as u32, *item))?;
    }
    Ok(arr)
}

/// Headers as ONE string `name\0value\0name\0value` (one JS string per socket, parsed on demand).
unsafe fn js_headers(env: sys::napi_env, headers: &[(String, String)]) -> Result<sys::napi_value> {
    let mut flat = String::with_capacity(headers.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (k, v) in headers {
        flat.push_str(k);
        flat.push('\0');
        flat.push_str(v);
        flat.push('\0');
    }
    js_string(env, flat.as_bytes())
}

unsafe fn js_addr(env: sys::napi_env, addr: &std::net::SocketAddr) -> Result<[sys::napi_value; 2]> {
    let ip = match addr.ip() {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        ip => ip.to_string(),
    };
    Ok([js_string(env, ip.as_bytes())?, js_number(env, addr.port() as f64)?])
}

fn tag(id: u32, kind: u32) -> f64 {
    id as f64 * 8.0 + kind as f64
}

impl ToNapiValue for Batch {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let bridge = val.bridge;
        let (mut events, data) = bridge.take();
        let mut arr = ptr::null_mut();
        check(sys::napi_create_array_with_length(env, events.len() * 2, &mut arr))?;
        let mut i = 0u32;
        for ev in events.drain(..) {
            let (t, v) = match ev {
                Event::Message { id, binary, start, end } => {
                    let bytes = &data[start..end];
                    if binary {
                        let mut out = ptr::null_mut();
                        let mut buf = ptr::null_mut();
                        check(sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut buf, &mut out))?;
                        (tag(id, KIND_BINARY), out)
                    } else {
                        (tag(id, KIND_TEXT), js_string(env, bytes)?)
                    }
                }
                Event::Open(conn, info) => {
                    let id = conn.id;
                    sockets::insert(conn);
                    let [ip, port] = js_addr(env, &info.remote)?;
                    let items = [
                        ip,
                        port,
                        js_string(env, info.url.as_bytes())?,
                        js_string(env, info.protocol.as_bytes())?,
                        js_string(env, info.extensions.as_bytes())?,
                        js_number(env, info.route as f64)?,
                        js_number(env, info.token as f64)?,
                        js_headers(env, &info.headers)?,
                    ];
                    (tag(id, KIND_OPEN), js_array(env, &items)?)
                }
                Event::Drain(id) => (tag(id, KIND_DRAIN), js_number(env, 0.0)?),
                Event::Close(id, code, reason) => {
                    sockets::remove(id);
                    let items = [js_number(env, code as f64)?, js_string(env, reason.as_bytes())?];
                    (tag(id, KIND_CLOSE), js_array(env, &items)?)
                }
                Event::Upgrade(info) => {
                    let protocols: Vec<_> =
                        info.protocols.iter().map(|p| js_string(env, p.as_bytes())).collect::<Result<_>>()?;
                    let [ip, port] = js_addr(env, &info.remote)?;
                    let items = [
                        js_number(env, info.token as f64)?,
                        js_number(env, info.route as f64)?,
                        js_string(env, info.method.as_bytes())?,
                        js_string(env, info.url.as_bytes())?,
                        ip,
                        port,
                        js_array(env, &protocols)?,
                        js_string(env, info.extensions.as_bytes())?,
                        js_headers(env, &info.headers)?,
                    ];
                    (tag(0, KIND_UPGRADE), js_array(env, &items)?)
                }
            };
            check(sys::napi_set_element(env, arr, i, js_number(env, t)?))?;
            check(sys::napi_set_element(env, arr, i + 1, v))?;
            i += 2;
        }
        bridge.recycle(events, data);
        Ok(arr)
    }
}
