//! native-ws: the pure-Rust WebSocket server core of ddp-transport-native.
//!
//! One module per protocol concern:
//! - [`admission`]: admission control for reconnect storms (upgrades per second, opens waiting).
//! - [`handshake`]: HTTP/1.1 upgrade parsing (httparse) and validation, 101/error responses.
//! - [`codec`]: our own RFC 6455 frame codec (fastwebsockets 0.10 rejects RSV1, which
//!   permessage-deflate needs, so the server's frame reader and writer are ours).
//! - [`extensions`]: permessage-deflate (RFC 7692) negotiation (offers, [`DeflateConfig`]).
//! - [`deflate`]: permessage-deflate streams: compressor, bounded inflater, per-thread pools.
//! - [`target`]: request targets (origin and absolute form) and which are refused.
//! - [`route`]: route patterns and which one a request path matches.
//! - [`message`]: frames → messages (fragments, limits, inflating, UTF-8).
//! - [`proxy`]: the PROXY protocol header (v1, v2) before the upgrade, when turned on.
//! - [`conn`]: the state a connection shares with the JS thread (sends, publishes, backpressure,
//!   closes); `outbox`: its outbound queue (owned frames and shared ones, vectored writes).
//! - [`cork`]: which sockets a JS tick's sends are written on together, and when a group leaves.
//! - [`task`]: a connection's state machine (read → codec → message → handler; writes; timers),
//!   driven by a tokio task on an I/O thread, or by [`inline`]: on the consumer's own thread.
//! - [`server`]: the runtime, listeners, socket adoption, the handshake flow; `stream`: a
//!   connection's socket, TCP or unix (adopted from a Node server listening on a path).
//! - [`handler`]: the trait the consumer implements (the JS bridge, or a pure-Rust responder).
//! - [`pacing`]: how long one turn of the consumer's event loop may spend on delivered events.
//! - [`config`]: per-route settings ([`Behavior`]) and fixed limits; [`stats`]: live counters.
//!
//! Data flows socket → codec → message → handler (batched by the consumer) with no back-and-forth.
//!
//! Each module's unit tests are in `<module>/tests.rs`; helpers they share (a PRNG, a raw-deflate
//! stream inspector) are in `testutil`, compiled for tests only.

pub mod admission;
pub mod codec;
pub mod config;
pub mod conn;
pub mod cork;
pub mod deflate;
#[cfg(unix)]
pub mod peek;
mod deflate_cache;
mod outbox;
mod spare;
pub mod extensions;
pub mod handler;
pub mod handshake;
#[cfg(target_os = "linux")]
pub mod inline;
pub mod message;
pub mod pacing;
pub mod proxy;
pub mod route;
pub mod server;
pub mod stats;
mod stream;
pub mod target;
mod task;
#[cfg(test)]
mod testutil;

pub use admission::{Admission, AdmissionConfig, Backlog};
pub use config::Behavior;
pub use conn::{Conn, Published, SendStatus};
pub use extensions::DeflateConfig;
pub use handler::{Decision, Handler, OpenInfo, UpgradeInfo};
pub use route::{path_matches, route_params, UWS_PATTERN_PREFIX};
pub use server::{release_id, Server};
pub use stats::Stats;
