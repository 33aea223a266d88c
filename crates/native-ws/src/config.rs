//! Per-route settings (uWS "behavior") and fixed limits.

use crate::extensions::DeflateConfig;
use std::time::Duration;

/// Settings of one route, validated by the caller (the JS layer throws on bad config).
#[derive(Debug, Clone)]
pub struct Behavior {
    /// Largest message in bytes, after inflating, across fragments (→ 1009).
    pub max_payload: usize,
    /// Largest number of frames one message may span (→ 1009).
    pub max_fragments: u32,
    /// Receive idle timeout in ms; 0 = off.
    pub idle_timeout_ms: u32,
    /// Bytes buffered per socket before `send` refuses (DROPPED) or closes.
    pub max_backpressure: usize,
    pub close_on_backpressure: bool,
    /// Ping when half the idle timeout passed without receiving anything.
    pub send_pings: bool,
    /// permessage-deflate settings; None = decline the extension.
    pub compression: Option<DeflateConfig>,
    /// The consumer wants to decide each upgrade (see [`crate::Handler::upgrade`]).
    pub upgrade_hook: bool,
    /// The consumer wants the pings and pongs received ([`crate::Handler::ping`], `pong`).
    pub report_control: bool,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            max_payload: 16 * 1024 * 1024,
            max_fragments: 131_072,
            idle_timeout_ms: 120_000,
            max_backpressure: 16 * 1024 * 1024,
            close_on_backpressure: false,
            send_pings: true,
            compression: None,
            upgrade_hook: false,
            report_control: false,
        }
    }
}

/// A request must complete its HTTP head (and the upgrade hook must answer) within this time.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After sending a close frame, how long we wait for the peer's before closing TCP.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Bytes one JS tick may queue on a socket before `send` writes them right away (uWS's cork size).
pub const CORK_LIMIT: usize = 16 * 1024;
/// Sockets one JS tick may leave waiting before they are written (the bounded cork of a
/// fan-out: the first deliveries leave before the tick's last send).
pub const CORK_SOCKETS: usize = 64;
/// The first batch of a tick is smaller: a fan-out's first deliveries leave after this many
/// sockets' sends (and the I/O threads start compressing them while the tick goes on).
pub const FIRST_CORK_SOCKETS: usize = 8;
/// Largest capacity a connection's outbound queue or message buffer keeps once it is empty.
pub const MAX_IDLE_CAPACITY: usize = 64 * 1024;
/// Pong frames that may wait unsent on one socket: every ping is answered while they fit; past
/// this a newer ping's pong replaces them (RFC 6455 §5.5.3 allows answering only the latest), so
/// a ping flood from a peer that never reads costs at most this much.
pub const MAX_PENDING_PONG_BYTES: usize = 2048;
/// Size of the per-I/O-thread receive buffer.
pub const READ_CHUNK: usize = 64 * 1024;
