//! Constants the JS layer reads from the addon (lib/constants.js), so each is defined once, here
//! or in the core: send results, the event kinds of a batch, route and permessage-deflate
//! and admission-control defaults, and the close codes an endpoint may send.

use crate::bridge::EventKind;
use crate::send::SendKind;
use crate::{AdmissionOptions, CompressionOptions};
use napi_derive::napi;
use native_ws::codec::{is_valid_close_code, CLOSE_TRY_AGAIN};
use native_ws::{AdmissionConfig, DeflateConfig};
use native_ws::{Behavior, SendStatus};

#[napi(object)]
pub struct SendStatuses {
    pub backpressure: u32,
    pub success: u32,
    pub dropped: u32,
}

#[napi(object)]
pub struct EventKinds {
    pub open: u32,
    pub text: u32,
    pub binary: u32,
    pub drain: u32,
    pub close: u32,
    pub upgrade: u32,
    pub ping: u32,
    pub pong: u32,
    pub aborted: u32,
    pub claimed: u32,
    pub returned: u32,
    /// `tag = id * kinds + kind`
    pub kinds: u32,
}

/// `Behavior::default()` in the JS API's names.
#[napi(object)]
pub struct RouteDefaults {
    pub max_payload_length: f64,
    pub max_fragments: u32,
    pub idle_timeout_ms: u32,
    pub max_backpressure: f64,
    pub close_on_backpressure_limit: bool,
    pub send_pings_automatically: bool,
}

/// `send`'s optional fifth argument (see send.rs `SendKind`).
#[napi(object)]
pub struct SendKinds {
    pub message: u32,
    pub first_fragment: u32,
    pub fragment: u32,
    pub last_fragment: u32,
    pub ping: u32,
}

#[napi(object)]
pub struct CloseCodeRange {
    pub from: u32,
    pub to: u32,
}

#[napi(object)]
pub struct Constants {
    pub send_status: SendStatuses,
    pub send_kind: SendKinds,
    /// Route patterns with this prefix are matched by uWebSockets.js's rules (native_ws::route).
    pub uws_pattern_prefix: String,
    pub event: EventKinds,
    pub route_defaults: RouteDefaults,
    pub compression_defaults: CompressionOptions,
    /// Admission control's defaults (native_ws::AdmissionConfig::default()).
    pub admission_defaults: AdmissionOptions,
    /// Time one event-loop turn may spend on delivered events, ms (native_ws::pacing::TURN_BUDGET).
    pub turn_budget_ms: f64,
    pub close_code_ranges: Vec<CloseCodeRange>,
    /// The close code of a socket closed for `closeOnBackpressureLimit`.
    pub backpressure_close_code: u32,
    /// How long an upgrade's handshake may take, ms (native_ws::config::HANDSHAKE_TIMEOUT); also
    /// bounds the wait for a PROXY header read by JS (lib/proxy-header.js).
    pub handshake_timeout_ms: f64,
}

/// The close codes `is_valid_close_code` accepts, as inclusive ranges.
fn close_code_ranges() -> Vec<CloseCodeRange> {
    let mut ranges: Vec<CloseCodeRange> = Vec::new();
    for code in (0..=u16::MAX).filter(|&c| is_valid_close_code(c)) {
        match ranges.last_mut() {
            Some(r) if r.to + 1 == code as u32 => r.to = code as u32,
            _ => ranges.push(CloseCodeRange { from: code as u32, to: code as u32 }),
        }
    }
    ranges
}

#[napi]
pub fn constants() -> Constants {
    let b = Behavior::default();
    Constants {
        send_status: SendStatuses {
            backpressure: SendStatus::Backpressure as u32,
            success: SendStatus::Success as u32,
            dropped: SendStatus::Dropped as u32,
        },
        send_kind: SendKinds {
            message: SendKind::Message as u32,
            first_fragment: SendKind::FirstFragment as u32,
            fragment: SendKind::Fragment as u32,
            last_fragment: SendKind::LastFragment as u32,
            ping: SendKind::Ping as u32,
        },
        uws_pattern_prefix: native_ws::UWS_PATTERN_PREFIX.to_string(),
        event: EventKinds {
            open: EventKind::Open as u32,
            text: EventKind::Text as u32,
            binary: EventKind::Binary as u32,
            drain: EventKind::Drain as u32,
            close: EventKind::Close as u32,
            upgrade: EventKind::Upgrade as u32,
            ping: EventKind::Ping as u32,
            pong: EventKind::Pong as u32,
            aborted: EventKind::Aborted as u32,
            claimed: EventKind::Claimed as u32,
            returned: EventKind::Returned as u32,
            kinds: EventKind::COUNT,
        },
        route_defaults: RouteDefaults {
            max_payload_length: b.max_payload as f64,
            max_fragments: b.max_fragments,
            idle_timeout_ms: b.idle_timeout_ms,
            max_backpressure: b.max_backpressure as f64,
            close_on_backpressure_limit: b.close_on_backpressure,
            send_pings_automatically: b.send_pings,
        },
        compression_defaults: CompressionOptions::from(&DeflateConfig::default()),
        admission_defaults: AdmissionOptions::from(&AdmissionConfig::default()),
        turn_budget_ms: native_ws::pacing::TURN_BUDGET.as_secs_f64() * 1000.0,
        close_code_ranges: close_code_ranges(),
        backpressure_close_code: CLOSE_TRY_AGAIN as u32,
        handshake_timeout_ms: native_ws::config::HANDSHAKE_TIMEOUT.as_secs_f64() * 1000.0,
    }
}
