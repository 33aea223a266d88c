//! What the server tells its consumer. The JS bridge implements it by queueing events and
//! delivering them to JS in batches; the benchmark's pure-Rust responder answers inline.
//! Every method runs on the thread of the connection's driver (an I/O thread; with the inline
//! driver, the thread that turns it: [`crate::inline`]) and must not block.

use crate::conn::Conn;
use std::net::SocketAddr;
use std::sync::Arc;

/// The request of an upgrade waiting for the consumer's decision.
#[derive(Debug, Clone)]
pub struct UpgradeInfo {
    /// Pass it back to [`crate::Server::decide`].
    pub token: u64,
    pub route: u32,
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// None for a unix socket (its peer has no address)
    pub remote: Option<SocketAddr>,
    /// The client a PROXY protocol header named (see [`crate::Server::set_proxy_protocol`]);
    /// None without one, or when it named none (LOCAL, UNKNOWN).
    pub proxied: Option<SocketAddr>,
    pub protocols: Vec<String>,
    pub extensions: String,
}

#[derive(Debug, Clone)]
pub enum Decision {
    /// `protocol`: the subprotocol chosen (kept only if the client offered it). `extensions`: the
    /// permessage-deflate offer to negotiate from instead of the request's (uWS's `res.upgrade`
    /// argument: "" turns compression off for this client); None: the request's. `headers`:
    /// extra headers of the 101 response.
    Accept { protocol: Option<String>, extensions: Option<String>, headers: Vec<(String, String)> },
    /// `reason`: the status line's reason phrase (None: the standard one); `headers`: extra
    /// response headers (see [`crate::handshake::write_refusal`]).
    Reject { status: u16, reason: Option<String>, body: String, headers: Vec<(String, String)> },
}

/// What a new connection was opened with.
#[derive(Debug, Clone)]
pub struct OpenInfo {
    pub route: u32,
    /// The upgrade token when the route has an upgrade hook (links the hook's user data), else 0.
    pub token: u64,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// None for a unix socket (its peer has no address)
    pub remote: Option<SocketAddr>,
    /// The client a PROXY protocol header named (see [`crate::Server::set_proxy_protocol`]);
    /// None without one, or when it named none (LOCAL, UNKNOWN).
    pub proxied: Option<SocketAddr>,
    pub protocol: String,
    pub extensions: String,
}

pub trait Handler: Send + Sync + 'static {
    /// Only for routes with `upgrade_hook`: answer later with `Server::decide(token, ..)`.
    fn upgrade(&self, _info: UpgradeInfo) {}
    /// The client of an upgrade still waiting for the consumer's decision went away.
    fn upgrade_aborted(&self, _token: u64) {}
    /// A connection given to [`crate::Server::examine`] (or, on Linux, the inline driver's
    /// `Inline::watch`) is decided: `mine` when the core took
    /// it (an upgrade on the claimed paths), else it is the caller's again, every byte unread.
    fn examined(&self, _token: u64, _mine: bool) {}
    fn open(&self, conn: &Arc<Conn>, info: OpenInfo);
    /// One complete message; `data` is valid UTF-8 when `binary` is false.
    fn message(&self, conn: &Arc<Conn>, data: &[u8], binary: bool);
    /// A ping (`pong` false) or pong received, for routes with `report_control` (after the
    /// core queued its answer to a ping).
    fn control(&self, _conn: &Arc<Conn>, _payload: &[u8], _pong: bool) {}
    /// The outbound buffer emptied after a send returned BACKPRESSURE.
    fn drain(&self, _conn: &Arc<Conn>) {}
    /// Exactly once per opened connection.
    fn close(&self, conn: &Arc<Conn>, code: u16, reason: &str);
    /// End of one read's worth of events: a good moment to wake the consumer.
    fn flush(&self) {}
}
