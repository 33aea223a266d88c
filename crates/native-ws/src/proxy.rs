//! The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2) in front of the HTTP
//! upgrade on the own listener, when the consumer turns it on ([`crate::Server::set_proxy_protocol`]):
//! a load balancer (HAProxy `send-proxy` / `send-proxy-v2`, a cloud network load balancer) opens
//! every connection with a header naming the client it relays.
//!
//! The header is parsed by the `ppp` crate; this module adds what a server needs around it:
//! reassembly across reads with a bound on the bytes it may take ([`MAX_V1_BYTES`],
//! [`MAX_V2_BYTES`]), the bytes after the header kept (they start the HTTP request), and which
//! address a header yields. A header is required: a connection that does not start with a valid
//! one is closed without an answer (an HTTP error would mean nothing to the proxy). The wait is
//! bounded by the handshake timeout of the caller.

use crate::stream::Stream;
use ppp::v2::{Addresses as V2Addresses, Command, Protocol};
use ppp::v1::Addresses as V1Addresses;
use ppp::{HeaderResult, PartialResult};
use std::io;
use std::net::SocketAddr;

/// Longest version 1 header, CRLF included (the spec's limit; `ppp` enforces it too).
pub const MAX_V1_BYTES: usize = 107;
/// Longest version 2 header accepted: the 16 fixed bytes, the largest address block (two unix
/// paths, 216 bytes) and up to 304 bytes of TLVs. HAProxy's headers without TLVs are 28 (IPv4)
/// or 52 (IPv6) bytes.
pub const MAX_V2_BYTES: usize = 536;
/// The fixed part of a version 2 header: signature (12), version/command, family/protocol,
/// length of the rest (2, big-endian).
const V2_FIXED_BYTES: usize = 16;
/// How a version 1 header starts.
const V1_PREFIX: &[u8] = b"PROXY ";
/// A header is read in steps of this many bytes (at most one step past the header is kept).
const STEP: usize = 1024;

/// What the start of a connection holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A valid header could still follow: read more.
    Incomplete,
    /// A complete header of `len` bytes. `source` is the client it names; `None` when it names
    /// none (v2 LOCAL, a health check of the proxy; v1 UNKNOWN; v2 UNSPEC or unix addresses):
    /// the connection's own peer is the client then.
    Header { len: usize, source: Option<SocketAddr> },
    /// Not a valid header (garbage, malformed, too long, an HTTP request without a header).
    Invalid(&'static str),
}

/// Parse a PROXY header (v1 or v2) at the start of `buf`.
#[must_use]
pub fn parse(buf: &[u8]) -> Parsed {
    // A v2 header announces its length up front: refuse a long one before waiting for it.
    if buf.len() >= V2_FIXED_BYTES && buf.starts_with(ppp::v2::PROTOCOL_PREFIX) {
        let rest = u16::from_be_bytes([buf[14], buf[15]]) as usize;
        if V2_FIXED_BYTES + rest > MAX_V2_BYTES {
            return Parsed::Invalid("PROXY v2 header too long");
        }
    }
    // A v1 line is judged once it is whole (up to its first CR LF): `ppp` judges a partial line
    // by its fields so far and refuses one cut right after a space ("... 56324 "), which a split
    // header may be; and it takes a whole line with fields missing for a partial one.
    let mut v1_line_whole = false;
    if buf.starts_with(&V1_PREFIX[..buf.len().min(V1_PREFIX.len())]) {
        match buf.iter().position(|&b| b == b'\r') {
            None if buf.len() < MAX_V1_BYTES => return Parsed::Incomplete,
            Some(cr) if cr + 1 == buf.len() => return Parsed::Incomplete,
            Some(cr) if buf[cr + 1] != b'\n' => return Parsed::Invalid("malformed PROXY v1 line"),
            Some(_) => v1_line_whole = true,
            None => {}
        }
    }
    let result = HeaderResult::parse(buf);
    if result.is_incomplete() {
        if v1_line_whole {
            return Parsed::Invalid("malformed PROXY v1 line");
        }
        // Cannot happen past the caps (v1: `ppp` gives up at 107 bytes without CRLF; v2: the
        // length check above), kept as the bound of the caller's buffer.
        if buf.len() >= MAX_V2_BYTES {
            return Parsed::Invalid("PROXY header too long");
        }
        return Parsed::Incomplete;
    }
    match result {
        HeaderResult::V1(Ok(h)) => {
            // `ppp` ends an UNKNOWN line at its first LF and measures it up to its first CR:
            // take only a line whose one CR LF is its end (found by `fuzz/` target `proxy`).
            let line = h.header.as_bytes();
            let body = &line[..line.len().saturating_sub(2)];
            if !line.ends_with(b"\r\n") || body.iter().any(|&b| b == b'\r' || b == b'\n') {
                return Parsed::Invalid("malformed PROXY v1 line");
            }
            let source = match h.addresses {
                V1Addresses::Tcp4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                V1Addresses::Tcp6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                V1Addresses::Unknown => None,
            };
            Parsed::Header { len: h.header.len(), source }
        }
        HeaderResult::V2(Ok(h)) => {
            let source = match (h.command, h.protocol, h.addresses) {
                (Command::Local, _, _) => None,
                (Command::Proxy, Protocol::Datagram, _) => {
                    return Parsed::Invalid("PROXY v2 header names a datagram (UDP) connection")
                }
                (Command::Proxy, _, V2Addresses::IPv4(a)) => Some(SocketAddr::from((a.source_address, a.source_port))),
                (Command::Proxy, _, V2Addresses::IPv6(a)) => Some(SocketAddr::from((a.source_address, a.source_port))),
                (Command::Proxy, _, _) => None,
            };
            Parsed::Header { len: h.len(), source }
        }
        HeaderResult::V1(Err(_)) => Parsed::Invalid("not a PROXY header"),
        HeaderResult::V2(Err(_)) => Parsed::Invalid("malformed PROXY v2 header"),
    }
}

/// Read the PROXY header that must open `stream`. Returns the client it names (`None`: the
/// peer itself, see [`Parsed::Header`]) and the bytes read past it; `None` when the connection
/// must be closed (no valid header, or the peer left). Unbounded in time: the caller's
/// handshake timeout bounds it.
pub(crate) async fn read_header(stream: &Stream) -> Option<(Option<SocketAddr>, Vec<u8>)> {
    let mut buf: Vec<u8> = Vec::with_capacity(STEP);
    loop {
        stream.readable().await.ok()?;
        buf.reserve(STEP);
        match stream.try_read_buf(&mut buf) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return None,
        }
        match parse(&buf) {
            Parsed::Incomplete => {}
            Parsed::Invalid(_) => return None,
            Parsed::Header { len, source } => return Some((source, buf.split_off(len))),
        }
    }
}

#[cfg(test)]
mod tests;
