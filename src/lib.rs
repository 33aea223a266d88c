//! The `#[napi]` layer: translates between JS values and the `native-ws` core. No protocol
//! logic lives here; validation of options happens in lib/options.js, which owns the public API.
//!
//! - bridge.rs: events from the I/O threads to JS, in batches (one threadsafe call per batch),
//!   at most one turn's budget per event-loop turn.
//! - inline.rs: the inline I/O mode's place in Node's event loop (a libuv poll handle on the
//!   core's inline driver; its events delivered by the bridge in the same wakeup).
//! - send.rs: the one door for outbound messages (`send`, `flushAll`).
//! - sockets.rs: open connections by id, as the JS thread sees them.
//! - constants.rs: constants JS reads from here (defined once).

mod bridge;
#[cfg(target_os = "linux")]
mod inline;
// Only `#[napi]` uses what it defines, and a test build registers nothing with Node.
#[cfg_attr(test, allow(dead_code))]
mod constants;
mod send;
mod sockets;

use bridge::Bridge;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use native_ws::DeflateConfig;
use native_ws::handshake::Request;
use native_ws::{AdmissionConfig, Behavior, Decision, Server};
use std::sync::Arc;

/// `send` and `flushAll`, the per-message calls, are plain N-API callbacks (see send.rs).
#[napi(module_exports)]
pub fn hot_calls(exports: Object, env: Env) -> Result<()> {
    // SAFETY: called once at module load on the JS thread with the module's env and exports.
    unsafe { send::register(env.raw(), exports.raw()) }
}

#[napi(object)]
pub struct CompressionOptions {
    pub threshold: f64,
    pub level: u32,
    pub mem_level: u32,
    pub strategy: u32,
    pub no_context_takeover: bool,
    pub max_window_bits: u32,
    pub request_no_context_takeover: bool,
    pub request_max_window_bits: Option<u32>,
}

impl From<&CompressionOptions> for DeflateConfig {
    fn from(c: &CompressionOptions) -> Self {
        DeflateConfig {
            threshold: c.threshold as usize,
            level: c.level,
            mem_level: c.mem_level as u8,
            strategy: c.strategy as u8,
            no_context_takeover: c.no_context_takeover,
            max_window_bits: c.max_window_bits as u8,
            request_no_context_takeover: c.request_no_context_takeover,
            request_max_window_bits: c.request_max_window_bits.map(|b| b as u8),
        }
    }
}

impl From<&DeflateConfig> for CompressionOptions {
    fn from(d: &DeflateConfig) -> Self {
        CompressionOptions {
            threshold: d.threshold as f64,
            level: d.level,
            mem_level: d.mem_level as u32,
            strategy: d.strategy as u32,
            no_context_takeover: d.no_context_takeover,
            max_window_bits: d.max_window_bits as u32,
            request_no_context_takeover: d.request_no_context_takeover,
            request_max_window_bits: d.request_max_window_bits.map(u32::from),
        }
    }
}

#[napi(object)]
pub struct RouteOptions {
    pub max_payload_length: f64,
    pub max_fragments: u32,
    pub idle_timeout_ms: u32,
    pub max_backpressure: f64,
    pub close_on_backpressure_limit: bool,
    pub send_pings_automatically: bool,
    pub upgrade_hook: bool,
    pub report_control: bool,
    pub compression: Option<CompressionOptions>,
}

/// Admission control limits (validated by lib/options.js; 0 turns a bound off).
#[napi(object)]
pub struct AdmissionOptions {
    pub upgrades_per_second: u32,
    pub burst: u32,
    pub max_pending_opens: u32,
    pub max_lag_ms: u32,
    pub hold_ms: u32,
    pub retry_after_seconds: u32,
}

impl From<&AdmissionOptions> for AdmissionConfig {
    fn from(o: &AdmissionOptions) -> Self {
        AdmissionConfig {
            rate: o.upgrades_per_second,
            burst: o.burst,
            max_pending: o.max_pending_opens,
            max_lag_ms: o.max_lag_ms,
            hold_ms: o.hold_ms,
            retry_after_s: o.retry_after_seconds,
        }
    }
}

impl From<&AdmissionConfig> for AdmissionOptions {
    fn from(c: &AdmissionConfig) -> Self {
        AdmissionOptions {
            upgrades_per_second: c.rate,
            burst: c.burst,
            max_pending_opens: c.max_pending,
            max_lag_ms: c.max_lag_ms,
            hold_ms: c.hold_ms,
            retry_after_seconds: c.retry_after_s,
        }
    }
}

#[napi(object)]
pub struct InternalListener {
    pub port: u32,
    pub secret: String,
}

#[napi(object)]
pub struct NativeStats {
    pub connections: f64,
    pub upgrades_accepted: f64,
    pub upgrades_rejected: f64,
    pub messages_in: f64,
    pub messages_out: f64,
    pub bytes_in: f64,
    pub bytes_out: f64,
    pub wire_bytes_in: f64,
    pub wire_bytes_out: f64,
    pub backpressure_events: f64,
    pub dropped: f64,
    /// messages compressed (once per message when the compress-once cache reuses it)
    pub compressions: f64,
    /// compressed messages sent with a payload from the compress-once cache
    pub compressions_reused: f64,
    /// admission control bounds upgrades (not `AdmissionConfig::OFF`)
    pub admission_on: bool,
    /// upgrades admission control let through
    pub admission_admitted: f64,
    /// upgrades held before they were admitted or refused
    pub admission_deferred: f64,
    /// upgrades answered 503 with Retry-After
    pub admission_refused: f64,
    /// admitted sockets whose first event JS has not taken yet
    pub admission_waiting: f64,
    /// the admission window's size: new clients that may be in flight at once
    pub admission_window: f64,
    /// new clients admitted that JS has not heard from yet (their first message or close)
    pub admission_in_flight: f64,
    /// flat [code, count, code, count, ...]
    pub closes: Vec<f64>,
}

fn io_error(e: std::io::Error) -> Error {
    let code = match e.kind() {
        std::io::ErrorKind::AddrInUse => "EADDRINUSE",
        std::io::ErrorKind::AddrNotAvailable => "EADDRNOTAVAIL",
        std::io::ErrorKind::PermissionDenied => "EACCES",
        std::io::ErrorKind::InvalidInput => "EINVAL",
        _ => "EIO",
    };
    Error::new(Status::GenericFailure, format!("{code}: {e}"))
}

#[napi]
pub struct NativeApp {
    server: Option<Server>,
    bridge: Arc<Bridge>,
    /// what `claim` registered, by index (see native_ws::peek)
    #[cfg(unix)]
    claims: Vec<Arc<native_ws::peek::Claim>>,
    /// the inline I/O mode, when it runs (see inline.rs)
    #[cfg(target_os = "linux")]
    inline: Option<*mut inline::InlineHost>,
}

#[napi]
impl NativeApp {
    /// `dispatch(tag, value, tag, value, ...)` receives every batch of events (see bridge.rs).
    /// `inline`: serve upgraded connections on this thread where the runtime allows it
    /// (see `io_mode`).
    #[napi(constructor)]
    pub fn new(env: Env, threads: u32, inline: bool, dispatch: Function<(), ()>) -> Result<Self> {
        let bridge = Bridge::new(env.raw(), dispatch.raw())?;
        let server = Server::new(threads as usize, bridge.clone()).map_err(io_error)?;
        bridge.set_admission(server.admission().clone());
        let backlog: Arc<dyn native_ws::Backlog> = bridge.clone();
        server.admission().add_backlog(Arc::downgrade(&backlog));
        #[cfg(target_os = "linux")]
        let inline = if inline { inline::InlineHost::start(env.raw(), &server, bridge.clone()) } else { None };
        #[cfg(not(target_os = "linux"))]
        let _ = inline;
        Ok(NativeApp {
            server: Some(server),
            bridge,
            #[cfg(unix)]
            claims: Vec::new(),
            #[cfg(target_os = "linux")]
            inline,
        })
    }

    /// Where upgraded connections are served: "inline" (on the JS thread) or "threads".
    #[napi(getter)]
    pub fn io_mode(&self) -> &'static str {
        #[cfg(target_os = "linux")]
        if self.inline.is_some() {
            return "inline";
        }
        "threads"
    }

    fn server(&self) -> Result<&Server> {
        self.server
            .as_ref()
            .ok_or_else(|| Error::new(Status::GenericFailure, "app is closed"))
    }

    #[napi]
    pub fn add_route(&self, pattern: String, o: RouteOptions) -> Result<u32> {
        let compression = o.compression.as_ref().map(DeflateConfig::from);
        let behavior = Behavior {
            max_payload: o.max_payload_length as usize,
            max_fragments: o.max_fragments,
            idle_timeout_ms: o.idle_timeout_ms,
            max_backpressure: o.max_backpressure as usize,
            close_on_backpressure: o.close_on_backpressure_limit,
            send_pings: o.send_pings_automatically,
            compression,
            upgrade_hook: o.upgrade_hook,
            report_control: o.report_control,
        };
        Ok(self.server()?.add_route(&pattern, behavior))
    }

    /// Returns the bound port. Errors start with the errno name (e.g. "EADDRINUSE: ...").
    /// `share`: bind with SO_REUSEPORT (see native_ws::Server::listen).
    #[napi]
    pub fn listen(&self, host: String, port: u32, share: Option<bool>) -> Result<u32> {
        let addr = self
            .server()?
            .listen(&host, port as u16, share.unwrap_or(false))
            .map_err(io_error)?;
        Ok(addr.port() as u32)
    }

    #[napi]
    pub fn internal_listener(&self) -> Result<InternalListener> {
        let (addr, secret) = self.server()?.internal_listener().map_err(io_error)?;
        Ok(InternalListener {
            port: addr.port() as u32,
            secret,
        })
    }

    /// Claim WebSocket upgrades on `paths` among the connections an attached server accepts
    /// (after a PROXY header when `proxy_protocol`); returns the claim for `examine`. Unix only.
    #[napi]
    pub fn claim(&mut self, paths: Vec<String>, proxy_protocol: bool) -> u32 {
        #[cfg(unix)]
        {
            self.claims.push(Arc::new(native_ws::peek::Claim { paths, proxy_protocol }));
            (self.claims.len() - 1) as u32
        }
        #[cfg(not(unix))]
        {
            let _ = (paths, proxy_protocol);
            0
        }
    }

    /// One look, without waiting, at what a connection Node accepted holds now (see
    /// native_ws::peek::look): 0 not decided yet (then `examine` it), 1 an upgrade on
    /// `claim`'s paths (then `take` it), 2 anything else (Node's, nothing read). Unix only.
    #[napi]
    pub fn look_now(&self, fd: i32, claim: u32) -> Result<u32> {
        #[cfg(unix)]
        {
            use native_ws::peek::Verdict;
            let claim = self.claim_of(claim)?;
            Ok(match native_ws::peek::look(fd, &claim, false) {
                Verdict::Wait => 0,
                Verdict::Mine => 1,
                Verdict::Theirs => 2,
            })
        }
        #[cfg(not(unix))]
        {
            let _ = (fd, claim);
            Ok(2)
        }
    }

    /// Take a connection Node accepted and has not read, whose first bytes `lookNow` found to
    /// be an upgrade on `claim`'s paths: its fd is duplicated here (the caller then closes
    /// Node's handle) and the core answers the upgrade (see native_ws::Server::take). Unix only;
    /// a call elsewhere throws.
    #[napi]
    pub fn take(&self, fd: i32, claim: u32) -> Result<()> {
        #[cfg(unix)]
        {
            let claim = self.claim_of(claim)?;
            self.server()?.take(fd, &claim).map_err(io_error)
        }
        #[cfg(not(unix))]
        {
            let _ = (fd, claim);
            Err(Error::new(Status::GenericFailure, "take: Node has no socket fd to hand over on this platform".to_owned()))
        }
    }

    /// Wait for the first bytes of a connection Node accepted and has not read (`lookNow`
    /// found them undecided): on this thread in the inline mode (Linux), else on an I/O thread
    /// (with a duplicate of the fd). A `claimed` event with `token` follows when the core took
    /// the connection (the caller then closes Node's handle), `returned` when it is Node's, unread
    /// (see native_ws::inline::Inline::watch, native_ws::Server::examine). Unix only; a call
    /// elsewhere throws.
    #[napi]
    pub fn examine(&self, fd: i32, claim: u32, token: f64) -> Result<()> {
        #[cfg(unix)]
        {
            let claim = self.claim_of(claim)?;
            #[cfg(target_os = "linux")]
            if let Some(host) = self.inline {
                // SAFETY: JS thread; the host lives while `inline` holds it.
                if unsafe { &*host }.watch(fd, claim.clone(), token as u64).is_ok() {
                    return Ok(());
                }
            }
            self.server()?.examine(fd, claim, token as u64).map_err(io_error)
        }
        #[cfg(not(unix))]
        {
            let _ = (fd, claim, token);
            Err(Error::new(Status::GenericFailure, "examine: Node has no socket fd to hand over on this platform".to_owned()))
        }
    }

    #[cfg(unix)]
    fn claim_of(&self, claim: u32) -> Result<Arc<native_ws::peek::Claim>> {
        self.claims.get(claim as usize).cloned().ok_or_else(|| Error::new(Status::InvalidArg, format!("no claim {claim}")))
    }

    /// Take over a socket from Node: its fd (duplicated here), the request head Node parsed
    /// (`headers` flat: name, value, ...), the bytes that followed it and, when JS read a PROXY
    /// header from the socket (`parseProxyHeader`), the client it named. Unix only: on Windows
    /// Node gives JS no socket handle and attach() never calls this (it pipes to the internal
    /// listener); a call there throws.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn adopt(
        &self,
        fd: i32,
        method: String,
        url: String,
        http_version: String,
        headers: Vec<String>,
        head: BufferSlice,
        proxied_address: Option<String>,
        proxied_port: Option<u32>,
    ) -> Result<()> {
        let req = Request::parsed_elsewhere(method, &url, &http_version, &headers);
        let proxied = match (proxied_address, proxied_port) {
            (Some(ip), Some(port)) => {
                let ip: std::net::IpAddr = ip
                    .parse()
                    .map_err(|_| Error::new(Status::InvalidArg, format!("adopt: proxied address {ip:?} is not an IP address")))?;
                let port = u16::try_from(port).map_err(|_| Error::new(Status::InvalidArg, format!("adopt: proxied port {port} is out of range")))?;
                Some(std::net::SocketAddr::new(ip, port))
            }
            _ => None,
        };
        #[cfg(unix)]
        return self.server()?.adopt(fd, req, head.to_vec(), proxied).map_err(io_error);
        #[cfg(not(unix))]
        {
            let _ = (fd, req, head, proxied);
            Err(Error::new(
                Status::GenericFailure,
                "adopt: Node has no socket fd to hand over on this platform; attach() pipes upgrades to the internal listener".to_owned(),
            ))
        }
    }

    /// Answer an upgrade: accept (`protocol`, `extensions`: the offer to negotiate from, or the
    /// request's when null) or refuse (`status`, `reason` phrase, `body`); `headers` flat
    /// (name, value, ...) for the 101 or the refusal.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &self,
        token: f64,
        accept: bool,
        protocol: Option<String>,
        extensions: Option<String>,
        status: u32,
        reason: Option<String>,
        body: String,
        headers: Vec<String>,
    ) -> Result<()> {
        let headers = headers.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        let decision = if accept {
            Decision::Accept { protocol, extensions, headers }
        } else {
            Decision::Reject { status: status as u16, reason, body, headers }
        };
        self.server()?.decide(token as u64, decision);
        Ok(())
    }

    /// Admission control's limits (`None`: off; see native_ws::admission).
    #[napi]
    pub fn set_admission(&self, o: Option<AdmissionOptions>) -> Result<()> {
        let config = o.as_ref().map_or(AdmissionConfig::OFF, AdmissionConfig::from);
        self.server()?.admission().set_config(config);
        Ok(())
    }

    /// Connections to the own listeners must start with a PROXY protocol header (v1 or v2).
    #[napi]
    pub fn set_proxy_protocol(&self, on: bool) -> Result<()> {
        self.server()?.set_proxy_protocol(on);
        Ok(())
    }

    #[napi]
    pub fn set_draining(&self, on: bool) -> Result<()> {
        self.server()?.set_draining(on);
        Ok(())
    }

    #[napi]
    pub fn stop_listening(&self) -> Result<()> {
        self.server()?.stop_listening();
        Ok(())
    }

    /// The bridge's own handle, for `settle` (see [`BridgeHandle`]).
    #[napi]
    pub fn bridge_handle(&self) -> BridgeHandle {
        BridgeHandle { bridge: self.bridge.clone() }
    }

    /// Keep the Node event loop alive (listening or sockets open) or not.
    #[napi]
    pub fn set_ref(&self, env: Env, on: bool) {
        self.bridge.set_ref(env.raw(), on);
    }

    #[napi]
    pub fn stats(&self) -> Result<NativeStats> {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.server()?.stats();
        let adm = self.server()?.admission();
        let window = adm.window();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Relaxed) as f64;
        Ok(NativeStats {
            connections: s.connections.load(Relaxed) as f64,
            upgrades_accepted: n(&s.upgrades_accepted),
            upgrades_rejected: n(&s.upgrades_rejected),
            messages_in: n(&s.messages_in),
            messages_out: n(&s.messages_out),
            bytes_in: n(&s.bytes_in),
            bytes_out: n(&s.bytes_out),
            wire_bytes_in: n(&s.wire_in),
            wire_bytes_out: n(&s.wire_out),
            backpressure_events: n(&s.backpressure),
            dropped: n(&s.dropped),
            compressions: n(&s.compressions),
            compressions_reused: n(&s.compressions_reused),
            admission_on: !adm.config().is_off(),
            admission_admitted: n(&adm.stats.admitted),
            admission_deferred: n(&adm.stats.deferred),
            admission_refused: n(&adm.stats.refused),
            admission_waiting: adm.pending() as f64,
            admission_window: window.0 as f64,
            admission_in_flight: window.1 as f64,
            closes: s
                .closes_by_code()
                .into_iter()
                .flat_map(|(c, k)| [c as f64, k as f64])
                .collect(),
        })
    }

    /// Stop the I/O threads; sockets still open are closed. Releases the threadsafe function.
    #[napi]
    pub fn close(&mut self, env: Env) {
        if let Some(mut server) = self.server.take() {
            server.shutdown();
        }
        #[cfg(target_os = "linux")]
        if let Some(host) = self.inline.take() {
            // SAFETY: JS thread; the host came from start and leaves `inline` here, once.
            unsafe {
                inline::InlineHost::stop(host);
                inline::InlineHost::release(host);
            }
        }
        self.bridge.release(env.raw());
    }
}

impl Drop for NativeApp {
    /// An app collected without `close()`: its inline driver stops with it (JS thread).
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(host) = self.inline.take() {
            if let Some(mut server) = self.server.take() {
                server.shutdown();
            }
            // SAFETY: JS thread (finalizer); the host came from start and leaves `inline` here.
            unsafe {
                inline::InlineHost::stop(host);
                inline::InlineHost::release(host);
            }
        }
    }
}

/// The bridge apart from the app: `settle` may deliver events, whose handlers may call the app
/// (`app.close()` needs the app mutably), so it must not hold a borrow of the `NativeApp`.
#[napi]
pub struct BridgeHandle {
    bridge: Arc<Bridge>,
}

#[napi]
impl BridgeHandle {
    /// After a delivery, from a `setImmediate`: deliver what waits (one turn's worth), else let
    /// the next event wake JS (see bridge.rs). Works after `close` too (then it does nothing).
    #[napi]
    pub fn settle(&self, env: Env) {
        self.bridge.settle(env.raw());
    }

    /// From a `setImmediate` queued when a turn's first events reached JS: the event loop got to
    /// its check phase, so the next delivery starts a new turn (see bridge.rs, fairness).
    #[napi]
    pub fn turn_over(&self) {
        self.bridge.turn_over();
    }
}

#[napi]
pub fn end(id: u32, code: u32, reason: String) {
    sockets::with(id, |c| c.end(code as u16, &reason));
}

#[napi]
pub fn close(id: u32) {
    sockets::with(id, |c| c.close());
}

#[napi]
pub fn buffered_amount(id: u32) -> f64 {
    sockets::with(id, |c| c.buffered_amount() as f64).unwrap_or(0.0)
}

#[napi]
pub fn set_idle_timeout(id: u32, ms: u32) {
    sockets::with(id, |c| c.set_timeout(ms));
}

/// The app closed without delivering these sockets' close events: forget them.
#[napi]
pub fn forget(id: u32) {
    sockets::remove(id);
}

/// The route pattern rule of the core (so JS decides "ours or not" exactly as Rust routes).
#[napi]
pub fn path_matches(pattern: String, path: String) -> bool {
    native_ws::path_matches(&pattern, &path)
}

/// The route parameters of `path` under `pattern` as flat [name, value, ...] (":name" segments in
/// pattern order), or null when the path does not match (see native_ws::route).
#[napi]
pub fn route_params(pattern: String, path: String) -> Option<Vec<String>> {
    native_ws::route_params(&pattern, &path)
        .map(|ps| ps.into_iter().flat_map(|(n, v)| [n.to_string(), v.to_string()]).collect())
}

/// A request target in origin form (an absolute-form target gives its path and query), as the
/// core routes it; null for a target the core refuses with 400 (see native_ws::target).
#[napi]
pub fn origin_form(url: String) -> Option<String> {
    native_ws::target::origin_form(&url).map(std::borrow::Cow::into_owned)
}

/// A PROXY protocol header at the start of `buf` (native_ws::proxy::parse, its caps included).
/// `error` set: not a valid header (close the connection); else `length` bytes of header and the
/// client it names in `address`/`port` (none for LOCAL, UNKNOWN: the TCP peer is the client).
#[napi(object)]
pub struct ProxyHeader {
    pub length: u32,
    pub address: Option<String>,
    pub port: Option<u32>,
    pub error: Option<String>,
}

/// The PROXY header at the start of `buf`; null while a valid one could still follow (read more).
#[napi]
pub fn parse_proxy_header(buf: BufferSlice) -> Option<ProxyHeader> {
    use native_ws::proxy::{parse, Parsed};
    match parse(&buf) {
        Parsed::Incomplete => None,
        Parsed::Invalid(why) => Some(ProxyHeader { length: 0, address: None, port: None, error: Some(why.to_string()) }),
        Parsed::Header { len, source } => Some(ProxyHeader {
            length: len as u32,
            address: source.map(|a| a.ip().to_string()),
            port: source.map(|a| u32::from(a.port())),
            error: None,
        }),
    }
}
