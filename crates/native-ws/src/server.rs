//! The server: a tokio runtime on a small dedicated pool, routes, standalone listeners,
//! adoption of sockets that Node's http.Server already accepted (same port), the internal
//! loopback listener for sockets without an fd (TLS in Node), and the handshake flow.

use crate::admission::{Admission, AdmissionConfig, Verdict};
use crate::config::{Behavior, HANDSHAKE_TIMEOUT};
use crate::conn::Conn;
use crate::extensions;
use crate::handler::{Decision, Handler, OpenInfo, UpgradeInfo};
use crate::handshake::{self, HttpError, Request};
use crate::proxy;
use crate::route;
use crate::stats::Stats;
use crate::stream::Stream;
use crate::task;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
#[cfg(unix)]
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// Connection ids: small integers, unique across every server of the process, recycled only
/// when the consumer says it is done with one ([`release_id`]) — so a consumer can keep
/// per-connection state in a plain vector indexed by id.
mod ids {
    use std::sync::Mutex;

    static POOL: Mutex<(u32, Vec<u32>)> = Mutex::new((0, Vec::new()));

    pub fn take() -> u32 {
        let mut pool = POOL.lock().unwrap();
        if let Some(id) = pool.1.pop() {
            return id;
        }
        pool.0 += 1;
        pool.0
    }

    pub fn give_back(id: u32) {
        POOL.lock().unwrap().1.push(id);
    }
}

/// The consumer has seen a connection's close and holds no more references to its id: the id
/// may be given to a new connection. Optional (ids that are never released are never reused).
pub fn release_id(id: u32) {
    ids::give_back(id);
}

/// First line a connection to the internal listener must send: `PEER <secret> <ip> <port>\r\n`,
/// or `PEER <secret>\r\n` for a peer without an address (a unix socket).
const PREAMBLE_TAG: &str = "PEER ";

struct Shared {
    handler: Arc<dyn Handler>,
    routes: RwLock<Vec<(String, Arc<Behavior>)>>,
    stats: Arc<Stats>,
    next_token: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Decision>>>,
    draining: AtomicBool,
    secret: String,
    admission: Arc<Admission>,
    /// connections to the own listeners start with a PROXY protocol header (required)
    proxy_protocol: AtomicBool,
    /// upgraded connections go to the inline driver ([`Server::serve_inline`])
    #[cfg(target_os = "linux")]
    inline: std::sync::OnceLock<Arc<crate::inline::Signal>>,
}

pub struct Server {
    runtime: Option<Runtime>,
    shared: Arc<Shared>,
    listeners: Mutex<Vec<AbortHandle>>,
    internal: Mutex<Option<SocketAddr>>,
}

/// Where a connection's HTTP request comes from.
enum Source {
    /// read it from the socket
    Socket,
    /// read it from the socket after the internal listener's preamble
    Preamble,
    /// read it from the socket, after a PROXY header when the flag says so (a connection of an
    /// attached server the core claimed: [`Server::examine`])
    #[cfg(unix)]
    Claimed(bool),
    /// Node already parsed it; these bytes followed the head; the client a PROXY header read by
    /// the consumer named (see [`Server::adopt`], unix only)
    #[cfg(unix)]
    Parsed(Request, Vec<u8>, Option<SocketAddr>),
}

fn random_secret() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    (0..4)
        .map(|i| {
            let mut h = RandomState::new().build_hasher();
            h.write_u64(i);
            format!("{:016x}", h.finish())
        })
        .collect()
}

impl Server {
    /// Start the I/O pool (`threads` tokio workers).
    pub fn new(threads: usize, handler: Arc<dyn Handler>) -> io::Result<Server> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("native-ws-io")
            .enable_all()
            .build()?;
        Ok(Server {
            runtime: Some(runtime),
            shared: Arc::new(Shared {
                handler,
                routes: RwLock::new(Vec::new()),
                stats: Arc::new(Stats::default()),
                next_token: AtomicU64::new(1),
                pending: Mutex::new(HashMap::new()),
                draining: AtomicBool::new(false),
                secret: random_secret(),
                admission: Arc::new(Admission::new(AdmissionConfig::OFF)),
                proxy_protocol: AtomicBool::new(false),
                #[cfg(target_os = "linux")]
                inline: std::sync::OnceLock::new(),
            }),
            listeners: Mutex::new(Vec::new()),
            internal: Mutex::new(None),
        })
    }

    /// Serve upgraded connections on the caller's thread from now on: the returned driver's fd
    /// must be watched and its turns run there (see [`crate::inline`]). Connections that
    /// negotiated permessage-deflate stay on the I/O threads. Once per server.
    #[cfg(target_os = "linux")]
    pub fn serve_inline(&self) -> io::Result<crate::inline::Inline> {
        let (shared, rt) = (self.shared.clone(), self.rt().handle().clone());
        let taker: crate::inline::Taker = Box::new(move |fd, claim| take(&shared, &rt, fd, claim));
        let inline = crate::inline::Inline::new(self.shared.handler.clone(), taker)?;
        let signal = inline.signal();
        self.shared.inline.set(signal.clone()).map_err(|_| io::Error::other("the inline driver is set already"))?;
        let backlog: Arc<dyn crate::admission::Backlog> = signal;
        // Held weakly by admission: the server's `inline` keeps it.
        self.shared.admission.add_backlog(Arc::downgrade(&backlog));
        Ok(inline)
    }

    fn rt(&self) -> &Runtime {
        self.runtime.as_ref().expect("server is running")
    }

    /// Add a route; returns its index (reported in [`OpenInfo::route`]).
    pub fn add_route(&self, pattern: &str, behavior: Behavior) -> u32 {
        let mut routes = self.shared.routes.write().unwrap();
        routes.push((pattern.to_string(), Arc::new(behavior)));
        (routes.len() - 1) as u32
    }

    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Admission control (off until configured): its limits, counters, and the door through
    /// which the consumer reports the first events it took ([`Admission::taken`]).
    pub fn admission(&self) -> &Arc<Admission> {
        &self.shared.admission
    }

    /// Bind `host:port` (port 0 = any) and accept on the I/O pool. A port in use fails loudly
    /// (EADDRINUSE), unless `share`: then the port is bound with SO_REUSEPORT (Unix), so that
    /// processes which all bind it that way share it and the kernel spreads their connections
    /// (node:cluster workers each listening on one port). Windows has no SO_REUSEPORT: there
    /// `share` is ignored.
    pub fn listen(&self, host: &str, port: u16, share: bool) -> io::Result<SocketAddr> {
        let addr = (host, port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("cannot resolve {host}")))?;
        self.accept_on(bind(addr, share)?, Source::Socket)
    }

    fn listen_on(&self, addr: SocketAddr, source: Source) -> io::Result<SocketAddr> {
        self.accept_on(bind(addr, false)?, source)
    }

    fn accept_on(&self, std_listener: std::net::TcpListener, source: Source) -> io::Result<SocketAddr> {
        std_listener.set_nonblocking(true)?;
        let local = std_listener.local_addr()?;
        let _enter = self.rt().enter();
        let listener = TcpListener::from_std(std_listener)?;
        let preamble = matches!(source, Source::Preamble);
        let shared = self.shared.clone();
        let handle = self.rt().spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, remote)) => {
                        let source = if preamble { Source::Preamble } else { Source::Socket };
                        tokio::spawn(serve(shared.clone(), stream.into(), Some(remote), source));
                    }
                    // Out of fds or similar: back off instead of spinning.
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                }
            }
        });
        self.listeners.lock().unwrap().push(handle.abort_handle());
        Ok(local)
    }

    /// The internal loopback listener for sockets without an fd, opened on first use on
    /// 127.0.0.1 port 0 (kernel-chosen, never colliding). Returns its address and the secret
    /// that its preamble line must carry.
    pub fn internal_listener(&self) -> io::Result<(SocketAddr, String)> {
        let mut internal = self.internal.lock().unwrap();
        if let Some(addr) = *internal {
            return Ok((addr, self.shared.secret.clone()));
        }
        let addr = self.listen_on(SocketAddr::from(([127, 0, 0, 1], 0)), Source::Preamble)?;
        *internal = Some(addr);
        Ok((addr, self.shared.secret.clone()))
    }

    /// Take over a socket accepted by someone else (Node's http.Server): `fd` is duplicated
    /// (the caller then closes its own), `req` is the request head it parsed, `head` the bytes
    /// that followed it, `proxied` the client a PROXY header named when the caller read one (see
    /// [`proxy::parse`]): reported as [`OpenInfo::proxied`], as on the own listener. The
    /// handshake is validated and answered here. Unix only: Node on Windows gives JS no socket
    /// handle, and attach() pipes such sockets to the internal listener.
    #[cfg(unix)]
    pub fn adopt(&self, fd: RawFd, req: Request, head: Vec<u8>, proxied: Option<SocketAddr>) -> io::Result<()> {
        // Only the dup happens on the caller's (JS) thread; the rest of the set-up runs on an
        // I/O thread: one syscall and one wake-up for the caller per upgrade.
        // SAFETY: the caller guarantees `fd` is an open socket for the duration of this call.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let shared = self.shared.clone();
        self.rt().spawn(async move {
            // A peer already gone (ENOTCONN) or a socket tokio cannot take: drop it, as the
            // listener drops a failed accept.
            let Ok((stream, remote)) = Stream::adopt(owned) else { return };
            serve(shared, stream, remote, Source::Parsed(req, head, proxied)).await;
        });
        Ok(())
    }

    /// Take a connection the consumer's HTTP server accepted and has not read, whose first bytes
    /// are an upgrade on `claim`'s paths (see [`crate::peek`]): `fd` is duplicated here (the
    /// caller then closes its own); the request is read and answered on an I/O thread as on the
    /// own listener.
    #[cfg(unix)]
    pub fn take(&self, fd: RawFd, claim: &crate::peek::Claim) -> io::Result<()> {
        take(&self.shared, self.rt().handle(), fd, claim)
    }

    /// Examine, on an I/O thread, a connection the consumer's HTTP server accepted, before that
    /// server reads it (see [`crate::peek`]; the inline driver waits on the consumer's thread
    /// instead: [`crate::inline::Inline::watch`]): `fd` is duplicated here (the caller keeps
    /// its own); an upgrade on the claimed paths is then served as on the own listener, anything
    /// else is left unread. Either way the handler hears [`Handler::examined`] with `token`; the
    /// caller closes its fd when the core took the connection, else gives the connection to its
    /// HTTP server.
    #[cfg(unix)]
    pub fn examine(&self, fd: RawFd, claim: Arc<crate::peek::Claim>, token: u64) -> io::Result<()> {
        // SAFETY: the caller guarantees `fd` is an open socket for the duration of this call.
        let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let shared = self.shared.clone();
        self.rt().spawn(async move {
            // Not ours: the copy is deregistered and closed here, before the caller hears, so its
            // own fd then has the connection alone.
            let claimed = match Stream::adopt(owned) {
                Ok((stream, remote)) => (crate::peek::examine(&stream, &claim).await == crate::peek::Verdict::Mine).then_some((stream, remote)),
                Err(_) => None,
            };
            shared.handler.examined(token, claimed.is_some());
            shared.handler.flush();
            if let Some((stream, remote)) = claimed {
                serve(shared, stream, remote, Source::Claimed(claim.proxy_protocol)).await;
            }
        });
        Ok(())
    }

    /// Answer an upgrade the handler was asked about.
    pub fn decide(&self, token: u64, decision: Decision) {
        if let Some(tx) = self.shared.pending.lock().unwrap().remove(&token) {
            let _ = tx.send(decision);
        }
    }

    /// Require a PROXY protocol header (v1 or v2, see [`proxy`]) at the start of every connection
    /// to the own listeners (not the internal listener; an adopted socket's header is read by the
    /// caller, see [`Server::adopt`]): the client it names
    /// is reported as [`OpenInfo::proxied`]; a connection without a valid one is closed.
    pub fn set_proxy_protocol(&self, on: bool) {
        self.shared.proxy_protocol.store(on, Relaxed);
    }

    /// While draining, new upgrades are refused with 503.
    pub fn set_draining(&self, on: bool) {
        self.shared.draining.store(on, Relaxed);
    }

    /// Stop every listener (the ports are released).
    pub fn stop_listening(&self) {
        for h in self.listeners.lock().unwrap().drain(..) {
            h.abort();
        }
        *self.internal.lock().unwrap() = None;
    }

    /// Stop everything now: listeners, handshakes and connections are dropped (sockets closed).
    pub fn shutdown(&mut self) {
        self.stop_listening();
        #[cfg(target_os = "linux")]
        if let Some(signal) = self.shared.inline.get() {
            signal.close();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Removes a pending upgrade decision if the handshake is abandoned (timeout, disconnect).
/// An admitted upgrade on its way to a connection: if the handshake ends before the 101 is
/// written (the client left, the handshake timed out, an upgrade hook refused it), admission
/// gives it up: as pending (unless `pending` is false: a route with an upgrade hook, whose
/// upgrade event always reaches the consumer) and from its window when it was in (`watch`).
struct AdmittedGuard<'a> {
    admission: &'a Admission,
    pending: bool,
    watch: bool,
}

impl AdmittedGuard<'_> {
    fn disarm(mut self) {
        self.pending = false;
        self.watch = false;
    }
}

impl Drop for AdmittedGuard<'_> {
    fn drop(&mut self) {
        self.admission.abandoned(self.pending, self.watch);
    }
}

struct PendingGuard<'a>(&'a Shared, u64);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.0.pending.lock().unwrap().remove(&self.1);
    }
}

/// The one door for a connection of the consumer's HTTP server that the core claims once its
/// first bytes are known ([`Server::take`], the inline driver's taker).
#[cfg(unix)]
fn take(shared: &Arc<Shared>, rt: &tokio::runtime::Handle, fd: RawFd, claim: &crate::peek::Claim) -> io::Result<()> {
    // SAFETY: the caller guarantees `fd` is an open socket for the duration of this call.
    let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
    let (shared, proxy_protocol) = (shared.clone(), claim.proxy_protocol);
    rt.spawn(async move {
        let Ok((stream, remote)) = Stream::adopt(owned) else { return };
        serve(shared, stream, remote, Source::Claimed(proxy_protocol)).await;
    });
    Ok(())
}

async fn serve(shared: Arc<Shared>, mut stream: Stream, remote: Option<SocketAddr>, source: Source) {
    stream.set_nodelay();
    let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, accept_upgrade(&shared, &mut stream, remote, source)).await;
    let Ok(Some((conn, hello, leftover, info))) = accepted else {
        // Refused (answered already) or too slow (slowloris): drop the socket.
        return;
    };
    #[cfg(target_os = "linux")]
    // A driver that stopped (the server shuts down, or its host could not start it) takes no
    // more connections: they stay with the threaded driver.
    if let Some(signal) = shared.inline.get().filter(|s| s.is_open() && conn.deflate.is_none()) {
        crate::inline::hand_over(signal, conn, stream, (hello, leftover), info, &shared.handler);
        return;
    }
    // A task of its own: an idle connection then carries none of the handshake's state.
    tokio::spawn(task::run(conn, stream, hello, leftover, shared.handler.clone(), info));
}

async fn refuse(shared: &Shared, stream: &mut Stream, e: HttpError) -> Option<Accepted> {
    refuse_with::<&str, &str>(shared, stream, e.status, None, &[], e.message).await
}

async fn refuse_with<N: AsRef<str>, V: AsRef<str>>(
    shared: &Shared,
    stream: &mut Stream,
    status: u16,
    reason: Option<&str>,
    headers: &[(N, V)],
    body: &str,
) -> Option<Accepted> {
    Stats::add(&shared.stats.upgrades_rejected, 1);
    let mut out = Vec::new();
    handshake::write_refusal(&mut out, status, reason, headers, body);
    let _ = stream.write_all(&out).await;
    let _ = stream.shutdown().await;
    None
}

/// Read the request head; after the internal listener's preamble when `preamble` is set.
/// Returns the request, the bytes after it and, with a preamble, the peer it names (`Some(None)`
/// for a peer without an address: a unix socket).
#[allow(clippy::type_complexity)]
async fn read_head(
    stream: &mut Stream,
    preamble: bool,
    secret: &str,
    early: Vec<u8>,
) -> Result<Option<(Request, Vec<u8>, Option<Option<SocketAddr>>)>, HttpError> {
    /// The head is read in steps of this many bytes.
    const STEP: usize = 1024;
    // `early`: bytes read past a PROXY header, the start of the request (perhaps all of it).
    if let Some((req, used)) = handshake::parse_request(&early)? {
        return Ok(Some((req, early[used..].to_vec(), None)));
    }
    let mut buf: Vec<u8> = early;
    let mut peer = None;
    let mut start = 0;
    loop {
        stream.readable().await.map_err(|_| HttpError { status: 400, message: "read failed" })?;
        buf.reserve(STEP);
        match stream.try_read_buf(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return Ok(None),
        }
        if preamble && peer.is_none() {
            let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
                if buf.len() > 256 {
                    return Ok(None);
                }
                continue;
            };
            peer = Some(parse_preamble(&buf[..eol], secret).ok_or(HttpError { status: 400, message: "bad preamble" })?);
            start = eol + 2;
        }
        if let Some((req, used)) = handshake::parse_request(&buf[start..])? {
            return Ok(Some((req, buf[start + used..].to_vec(), peer)));
        }
    }
}

/// `PEER <secret> <ip> <port>` (a TCP peer) or `PEER <secret>` (a peer without an address).
fn parse_preamble(line: &[u8], secret: &str) -> Option<Option<SocketAddr>> {
    let line = std::str::from_utf8(line).ok()?.strip_prefix(PREAMBLE_TAG)?;
    let mut parts = line.split(' ');
    if parts.next()? != secret {
        return None;
    }
    let Some(ip) = parts.next() else { return Some(None) };
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let port: u16 = parts.next()?.parse().ok()?;
    Some(Some(SocketAddr::new(ip, port)))
}

/// Wait for the consumer's decision on an upgrade while watching the socket: `None` when the
/// client closes (or the socket fails) first. Bytes the client sends meanwhile (frames
/// pipelined after its request) are kept in `leftover`, up to 64 KiB; past that
/// the socket is no longer watched.
async fn await_decision(
    stream: &Stream,
    mut rx: oneshot::Receiver<Decision>,
    leftover: &mut Vec<u8>,
) -> Option<Result<Decision, oneshot::error::RecvError>> {
    /// Bytes a client may send before its upgrade is answered.
    const MAX_EARLY_BYTES: usize = 64 * 1024;
    loop {
        if leftover.len() >= MAX_EARLY_BYTES {
            return Some(rx.await);
        }
        tokio::select! {
            decision = &mut rx => return Some(decision),
            ready = stream.readable() => {
                ready.ok()?;
                leftover.reserve(1024);
                match stream.try_read_buf(leftover) {
                    Ok(0) => return None,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return None,
                }
            }
        }
    }
}

/// An accepted upgrade: the connection, its 101 response (not written yet: the connection's
/// task writes it once the consumer's open event is queued), the bytes read past the request
/// head, and what the open event tells.
type Accepted = (Arc<Conn>, Vec<u8>, Vec<u8>, OpenInfo);

/// The opening handshake of one connection: read the request head (unless Node parsed it),
/// validate and route it, negotiate permessage-deflate, ask the upgrade hook, compose the 101
/// and create the connection. `None` when the request was refused (already answered) or the peer
/// went away.
async fn accept_upgrade(
    shared: &Shared,
    stream: &mut Stream,
    mut remote: Option<SocketAddr>,
    source: Source,
) -> Option<Accepted> {
    let mut proxied = None;
    let (req, mut leftover) = match source {
        #[cfg(unix)]
        Source::Parsed(req, head, p) => {
            proxied = p;
            (req, head)
        }
        Source::Socket | Source::Preamble | Source::Claimed(_) => {
            let preamble = matches!(source, Source::Preamble);
            let proxy_header = match source {
                Source::Claimed(p) => p,
                Source::Socket => shared.proxy_protocol.load(Relaxed),
                _ => false,
            };
            let mut early = Vec::new();
            if proxy_header {
                // No valid header (or the peer left): close without an answer.
                (proxied, early) = proxy::read_header(stream).await?;
            }
            match read_head(stream, preamble, &shared.secret, early).await {
                Ok(Some((req, rest, peer))) => {
                    if let Some(p) = peer {
                        remote = p;
                    }
                    (req, rest)
                }
                Ok(None) => return None,
                Err(e) => return refuse(shared, stream, e).await,
            }
        }
    };
    let upgrade = match handshake::validate(&req) {
        Ok(u) => u,
        Err(e) => return refuse(shared, stream, e).await,
    };
    if shared.draining.load(Relaxed) {
        return refuse(shared, stream, HttpError { status: 503, message: "Server is draining" }).await;
    }
    let route = {
        let routes = shared.routes.read().unwrap();
        route::select(routes.iter().map(|(p, _)| p.as_str()), req.path()).map(|i| (i as u32, routes[i].1.clone()))
    };
    let Some((route, behavior)) = route else {
        return refuse(shared, stream, HttpError { status: 404, message: "Not found" }).await;
    };
    // Before the consumer hears of it: hold or refuse over the admission limits.
    let watch = match shared.admission.admit().await {
        Verdict::Admit { watch } => watch,
        Verdict::Refuse { retry_after_s } => {
            let retry = retry_after_s.to_string();
            return refuse_with(shared, stream, 503, None, &[("Retry-After", retry.as_str())], "Server is busy, retry later").await;
        }
    };
    // Admitted: pending until the consumer takes the upgrade event (hook) or the open event.
    let admitted = AdmittedGuard { admission: &shared.admission, pending: !behavior.upgrade_hook, watch };
    let mut protocol = None;
    // The application's permessage-deflate offer, when it gives one (uWS's res.upgrade argument).
    let mut offer = None;
    let mut extra = Vec::new();
    let mut token = 0;
    if behavior.upgrade_hook {
        token = shared.next_token.fetch_add(1, Relaxed);
        let (tx, rx) = oneshot::channel();
        shared.pending.lock().unwrap().insert(token, tx);
        let _guard = PendingGuard(shared, token);
        shared.handler.upgrade(UpgradeInfo {
            token,
            route,
            method: req.method.clone(),
            url: req.url.clone(),
            headers: req.headers.clone(),
            remote,
            proxied,
            protocols: upgrade.protocols.clone(),
            extensions: upgrade.extensions.clone(),
        });
        shared.handler.flush();
        let Some(decision) = await_decision(stream, rx, &mut leftover).await else {
            // The client went away before the answer: the consumer hears of it (uWS's onAborted).
            shared.handler.upgrade_aborted(token);
            shared.handler.flush();
            return None;
        };
        match decision {
            Ok(Decision::Accept { protocol: p, extensions, headers }) => {
                protocol = p.filter(|p| upgrade.protocols.iter().any(|o| o == p));
                offer = extensions;
                extra = headers;
            }
            Ok(Decision::Reject { status, reason, body, headers }) => {
                return refuse_with(shared, stream, status, reason.as_deref(), &headers, &body).await;
            }
            Err(_) => return refuse(shared, stream, HttpError { status: 500, message: "Upgrade not answered" }).await,
        }
    }
    let offered = offer.as_deref().unwrap_or(&upgrade.extensions);
    let negotiated = behavior.compression.as_ref().and_then(|c| extensions::negotiate(offered, c));
    let extensions = negotiated.as_ref().map(|n| n.response.clone());
    let mut hello = Vec::with_capacity(256);
    handshake::write_101(&mut hello, &upgrade.accept, protocol.as_deref(), extensions.as_deref(), &extra);
    admitted.disarm(); // the open event carries it to the consumer now
    Stats::add(&shared.stats.upgrades_accepted, 1);
    shared.stats.opened();
    let id = ids::take();
    if watch {
        shared.admission.watch(id);
    }
    let conn = Arc::new(Conn::new(id, stream.raw(), behavior, negotiated, shared.stats.clone()));
    conn.greet();
    let info = OpenInfo {
        route,
        token,
        url: req.url,
        headers: req.headers,
        remote,
        proxied,
        protocol: protocol.unwrap_or_default(),
        extensions: extensions.unwrap_or_default(),
    };
    Some((conn, hello, leftover, info))
}

/// Connections the kernel queues for a listener before it accepts them (Node's and uWS.js's are
/// 511 and 512; std's 128 overflows when a few hundred clients connect at once, and each
/// overflowed SYN costs its client a one-second retransmit).
const BACKLOG: i32 = 1024;

/// A listener on `addr` (SO_REUSEADDR, as std sets it), with SO_REUSEPORT when `share` (see
/// [`Server::listen`]; not on Windows, where the flag does not exist).
fn bind(addr: SocketAddr, share: bool) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    #[cfg(unix)]
    {
        socket.set_reuse_address(true)?;
        if share {
            socket.set_reuse_port(true)?;
        }
    }
    #[cfg(not(unix))]
    let _ = share;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}
