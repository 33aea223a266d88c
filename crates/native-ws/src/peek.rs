//! The first look at a connection an attached server accepted: it is examined before that
//! server's HTTP layer reads a byte of it. Its first bytes are peeked (`MSG_PEEK`:
//! nothing is consumed); when they are a WebSocket upgrade on one of the claimed paths, the core
//! takes the connection (it reads the request for real and answers it as on its own listener:
//! validation, admission, the upgrade hook, 101); anything else goes back to the HTTP server with
//! every byte still queued in the kernel.
//!
//! "An upgrade" is what Node's HTTP parser reports as one (an `Upgrade` header and the
//! `upgrade` token in `Connection`): so the requests the core claims are exactly those the
//! server's `upgrade` event would have brought to the core, and each other request (a plain GET
//! on the same path, an HTTP/1.0 or malformed head, a head over the size limit) gets the answer
//! the HTTP server gives it. With the PROXY protocol the header comes first, then the same test.
//!
//! Bounded: it looks at no more than a request head ([`crate::handshake::MAX_HEAD_BYTES`],
//! after a PROXY header), and waits at most [`WAIT`] for it; a connection still undecided then (a
//! client that sends nothing, or a head that never ends) or whose peer ended it goes to the HTTP
//! server, whose own timeouts and rules answer it.

use crate::handshake;
use crate::proxy;
use crate::route;
use crate::stream::Stream;
use std::io;
use std::time::Duration;
use tokio::io::Interest;

/// How long a connection may take to show whether it is an upgrade on the claimed paths. A
/// WebSocket client sends its request as soon as it is connected; a connection that has not
/// shown it by then is the HTTP server's (an upgrade on it still reaches the core through the
/// server's `upgrade` event), and the server's own timeouts run from then on (a PROXY header's
/// reader counts this wait as part of its handshake timeout: lib/proxy-header.js).
pub const WAIT: Duration = Duration::from_secs(2);
/// The first peek looks at this many bytes (a WebSocket upgrade request is ~300-600 bytes); a
/// head not decided within them is peeked again with room for the whole limit.
const FIRST_PEEK: usize = 2048;

/// The paths the core claims upgrades on for an attached server, and whether its connections start
/// with a PROXY protocol header.
#[derive(Debug, Clone)]
pub struct Claim {
    pub paths: Vec<String>,
    pub proxy_protocol: bool,
}

/// What the first bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not decided yet: more bytes may decide it.
    Wait,
    /// A WebSocket upgrade on one of the claimed paths: the core takes the connection.
    Mine,
    /// Anything else: the HTTP server's.
    Theirs,
}

impl Claim {
    /// The most bytes [`Claim::verdict`] may need to see.
    fn limit(&self) -> usize {
        handshake::MAX_HEAD_BYTES + if self.proxy_protocol { proxy::MAX_V2_BYTES } else { 0 }
    }

    /// Judge the bytes a connection has sent so far.
    #[must_use]
    pub fn verdict(&self, buf: &[u8]) -> Verdict {
        let mut rest = buf;
        if self.proxy_protocol {
            match proxy::parse(buf) {
                proxy::Parsed::Incomplete => return Verdict::Wait,
                // The HTTP server's PROXY reader refuses it, as it refuses every other.
                proxy::Parsed::Invalid(_) => return Verdict::Theirs,
                proxy::Parsed::Header { len, .. } => rest = &buf[len..],
            }
        }
        // Only a GET can be an upgrade on our paths: decide the rest from the first bytes.
        const GET: &[u8] = b"GET ";
        if rest.len() < GET.len() {
            return if GET.starts_with(rest) { Verdict::Wait } else { Verdict::Theirs };
        }
        if !rest.starts_with(GET) {
            return Verdict::Theirs;
        }
        // The request line's target, once the line is whole: a path not ours is decided now.
        if let Some(eol) = rest.iter().position(|&b| b == b'\n') {
            let line = &rest[GET.len()..eol];
            let target = line.split(|&b| b == b' ').next().unwrap_or_default();
            let Some(path) = std::str::from_utf8(target).ok().and_then(crate::target::origin_form) else {
                return Verdict::Theirs;
            };
            let path = path.split('?').next().unwrap_or_default();
            if !self.paths.iter().any(|p| route::path_matches(p, path)) {
                return Verdict::Theirs;
            }
        }
        match handshake::parse_request(rest) {
            Ok(None) => Verdict::Wait,
            Ok(Some((req, _))) if is_upgrade(&req) && !req.invalid_target => Verdict::Mine,
            // Not an upgrade; or a head the HTTP server answers its own way (malformed, HTTP/1.0,
            // too large).
            Ok(Some(_)) | Err(_) => Verdict::Theirs,
        }
    }
}

/// Whether Node's HTTP parser would report `req` as an upgrade: an `Upgrade` header and the
/// `upgrade` token in `Connection`.
fn is_upgrade(req: &handshake::Request) -> bool {
    req.header("upgrade").is_some()
        && req
            .header_joined("connection")
            .is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")))
}

/// Peek at `stream` until its first bytes decide the verdict (never [`Verdict::Wait`]): the
/// peer's end, an error or [`WAIT`] passing first make it the HTTP server's.
pub(crate) async fn examine(stream: &Stream, claim: &Claim) -> Verdict {
    tokio::time::timeout(WAIT, look_until_decided(stream, claim)).await.unwrap_or(Verdict::Theirs)
}

async fn look_until_decided(stream: &Stream, claim: &Claim) -> Verdict {
    loop {
        // The peer's FIN does not show in a peek while its data is queued: ask the poller.
        let Ok(ready) = stream.read_ready().await else { return Verdict::Theirs };
        let raw = stream.raw();
        // Not decided yet: wait for the next readiness (each new segment brings one).
        let looked = stream.try_io(Interest::READABLE, || match look(raw, claim, ready.is_read_closed()) {
            Verdict::Wait => Err(io::ErrorKind::WouldBlock.into()),
            decided => Ok(decided),
        });
        match looked {
            Ok(decided) => return decided,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(_) => return Verdict::Theirs,
        }
    }
}

/// One look, without waiting, at what `fd` holds now: [`Verdict::Wait`] when nothing has come
/// yet or what came does not decide yet (more may come). `ended`: the peer shut down its side
/// (what is queued is all there will be). On the consumer's thread as it accepts the
/// connection (a client's request has usually arrived by then), and wherever a connection waits
/// for its first bytes ([`examine`], the inline driver).
#[must_use]
pub fn look(fd: crate::stream::RawSock, claim: &Claim, ended: bool) -> Verdict {
    let mut first = [0u8; FIRST_PEEK];
    let verdict = match peek(fd, &mut first) {
        Ok(0) => return Verdict::Theirs, // ended already: the HTTP server sees to it
        Ok(n) if n < FIRST_PEEK => claim.verdict(&first[..n]),
        // A head longer than the first peek: look again with room for the whole limit.
        Ok(_) => match claim.verdict(&first) {
            Verdict::Wait => {
                let mut whole = vec![0u8; claim.limit()];
                match peek(fd, &mut whole) {
                    Ok(n) => match claim.verdict(&whole[..n]) {
                        Verdict::Wait if n == whole.len() => return Verdict::Theirs, // no end within the limit
                        v => v,
                    },
                    Err(_) => Verdict::Theirs,
                }
            }
            decided => decided,
        },
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Verdict::Wait,
        Err(_) => Verdict::Theirs,
    };
    match verdict {
        // Ended before a decision: the rest can never come.
        Verdict::Wait if ended => Verdict::Theirs,
        v => v,
    }
}

/// Copy the bytes queued on `fd` into `buf` without consuming them, never waiting.
fn peek(fd: crate::stream::RawSock, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes; `fd` is a socket of the caller's stream.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests;
