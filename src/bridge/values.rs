//! Batch values: one event as its (tag, value) pair of JS values, built on the JS thread (the
//! strings and Buffers from the batch's arena; objects with named fields for open, close and
//! upgrade events).

use super::{check, Event, EventKind};
use crate::sockets;
use napi::bindgen_prelude::*;
use napi::sys;
use std::ffi::CStr;
use std::ptr;

unsafe fn js_string(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check(sys::napi_create_string_utf8(
        env,
        bytes.as_ptr().cast(),
        bytes.len() as isize,
        &mut v,
    ))?;
    Ok(v)
}

/// A Buffer with a copy of `bytes`.
unsafe fn js_buffer(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    let mut buf = ptr::null_mut();
    check(sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut buf, &mut out))?;
    Ok(out)
}

unsafe fn js_number(env: sys::napi_env, n: f64) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check(sys::napi_create_double(env, n, &mut v))?;
    Ok(v)
}

unsafe fn js_array(env: sys::napi_env, items: &[sys::napi_value]) -> Result<sys::napi_value> {
    let mut arr = ptr::null_mut();
    check(sys::napi_create_array_with_length(
        env,
        items.len(),
        &mut arr,
    ))?;
    for (i, item) in items.iter().enumerate() {
        check(sys::napi_set_element(env, arr, i as u32, *item))?;
    }
    Ok(arr)
}

/// An object with these named properties (open, close and upgrade events: not per message).
unsafe fn js_object(env: sys::napi_env, props: &[(&CStr, sys::napi_value)]) -> Result<sys::napi_value> {
    let mut obj = ptr::null_mut();
    check(sys::napi_create_object(env, &mut obj))?;
    for (name, value) in props {
        check(sys::napi_set_named_property(env, obj, name.as_ptr(), *value))?;
    }
    Ok(obj)
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

/// The peer address as Node's `socket.remoteAddress` / `remotePort` write it for the same
/// connection: the socket's own family decides, so an IPv4 client of a dual-stack (`::`)
/// listener is `::ffff:127.0.0.1`, as Node (and so sockjs) reports it; a unix socket's peer has
/// no address (both undefined).
unsafe fn js_addr(env: sys::napi_env, addr: Option<&std::net::SocketAddr>) -> Result<[sys::napi_value; 2]> {
    let Some(addr) = addr else {
        let mut undefined = ptr::null_mut();
        check(sys::napi_get_undefined(env, &mut undefined))?;
        return Ok([undefined, undefined]);
    };
    Ok([
        js_string(env, addr.ip().to_string().as_bytes())?,
        js_number(env, addr.port() as f64)?,
    ])
}

fn tag(id: u32, kind: EventKind) -> f64 {
    id as f64 * EventKind::COUNT as f64 + kind as u32 as f64
}

/// One event as its (tag, value) pair of JS values.
pub(super) unsafe fn event_values(
    env: sys::napi_env,
    ev: Event,
    data: &[u8],
) -> Result<(sys::napi_value, sys::napi_value)> {
    let (t, v) = match ev {
        Event::Message {
            id,
            binary,
            start,
            end,
        } => {
            let bytes = &data[start..end];
            if binary {
                (tag(id, EventKind::Binary), js_buffer(env, bytes)?)
            } else {
                (tag(id, EventKind::Text), js_string(env, bytes)?)
            }
        }
        Event::Control { id, pong, payload } => {
            let kind = if pong { EventKind::Pong } else { EventKind::Ping };
            (tag(id, kind), js_buffer(env, &payload)?)
        }
        Event::Aborted(token) => (tag(0, EventKind::Aborted), js_number(env, token as f64)?),
        Event::Examined(token, mine) => {
            let kind = if mine { EventKind::Claimed } else { EventKind::Returned };
            (tag(0, kind), js_number(env, token as f64)?)
        }
        Event::Open(conn, info) => {
            let id = conn.id;
            sockets::insert(conn);
            let [ip, port] = js_addr(env, info.remote.as_ref())?;
            let [proxied_ip, proxied_port] = js_addr(env, info.proxied.as_ref())?;
            let props = [
                (c"remoteAddress", ip),
                (c"remotePort", port),
                (c"proxiedAddress", proxied_ip),
                (c"proxiedPort", proxied_port),
                (c"url", js_string(env, info.url.as_bytes())?),
                (c"protocol", js_string(env, info.protocol.as_bytes())?),
                (c"extensions", js_string(env, info.extensions.as_bytes())?),
                (c"route", js_number(env, info.route as f64)?),
                (c"token", js_number(env, info.token as f64)?),
                (c"headers", js_headers(env, &info.headers)?),
            ];
            (tag(id, EventKind::Open), js_object(env, &props)?)
        }
        Event::Drain(id) => (tag(id, EventKind::Drain), js_number(env, 0.0)?),
        Event::Close(id, code, reason) => {
            sockets::remove(id);
            let props = [
                (c"code", js_number(env, code as f64)?),
                (c"reason", js_string(env, reason.as_bytes())?),
            ];
            (tag(id, EventKind::Close), js_object(env, &props)?)
        }
        Event::Upgrade(info) => {
            let protocols: Vec<_> = info
                .protocols
                .iter()
                .map(|p| js_string(env, p.as_bytes()))
                .collect::<Result<_>>()?;
            let [ip, port] = js_addr(env, info.remote.as_ref())?;
            let [proxied_ip, proxied_port] = js_addr(env, info.proxied.as_ref())?;
            let props = [
                (c"token", js_number(env, info.token as f64)?),
                (c"route", js_number(env, info.route as f64)?),
                (c"method", js_string(env, info.method.as_bytes())?),
                (c"url", js_string(env, info.url.as_bytes())?),
                (c"remoteAddress", ip),
                (c"remotePort", port),
                (c"proxiedAddress", proxied_ip),
                (c"proxiedPort", proxied_port),
                (c"protocols", js_array(env, &protocols)?),
                (c"extensions", js_string(env, info.extensions.as_bytes())?),
                (c"headers", js_headers(env, &info.headers)?),
            ];
            (tag(0, EventKind::Upgrade), js_object(env, &props)?)
        }
    };
    Ok((js_number(env, t)?, v))
}
