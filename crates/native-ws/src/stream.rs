//! A connection's socket: TCP (accepted by a listener of ours, or adopted from Node), or a unix
//! stream socket adopted from a Node server listening on a path (Meteor's `UNIX_SOCKET_PATH`,
//! common behind nginx or Passenger). The connection code sees one type. Both are stream
//! sockets, so reads, writes and shutdown are the same syscalls on the same fd.
//!
//! On Windows there is no adoption (Node does not hand out a socket's handle there: attach() pipes
//! to the internal listener) and no unix variant: a stream is a TCP socket we accepted, and the
//! raw handle the connection code writes to is a `SOCKET` instead of an fd ([`RawSock`]).

use std::io;
use std::mem::ManuallyDrop;
#[cfg(unix)]
use std::net::SocketAddr;
#[cfg(unix)]
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
#[cfg(windows)]
use std::os::windows::io::{AsRawSocket, FromRawSocket};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;

/// A connected socket as the OS names it: an fd, or a Windows `SOCKET`.
#[cfg(unix)]
pub(crate) type RawSock = std::os::fd::RawFd;
#[cfg(windows)]
pub(crate) type RawSock = std::os::windows::io::RawSocket;

pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

/// std's TcpStream over a socket owned elsewhere, for one call (never closed by this value). It
/// only issues send/recv/shutdown, the same calls on a unix stream socket.
///
/// # Safety
/// `raw` must be an open socket for as long as the returned value is used.
pub(crate) unsafe fn borrowed(raw: RawSock) -> ManuallyDrop<std::net::TcpStream> {
    #[cfg(unix)]
    // SAFETY: the caller keeps `raw` open; ManuallyDrop never closes it.
    return ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(raw) });
    #[cfg(windows)]
    // SAFETY: as above.
    return ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_socket(raw) });
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Self {
        Stream::Tcp(s)
    }
}

impl Stream {
    /// Take over a connected socket someone else accepted (must run inside the runtime). Returns
    /// the stream and the peer's address: `None` for a unix socket, whose peer has none (Node
    /// reports `remoteAddress` undefined there too). Fails for a peer already gone (ENOTCONN).
    #[cfg(unix)]
    pub(crate) fn adopt(fd: OwnedFd) -> io::Result<(Stream, Option<SocketAddr>)> {
        // getsockname tells the family: only an AF_UNIX socket has a unix local address.
        let unix = std::os::unix::net::UnixStream::from(fd);
        if unix.local_addr().is_ok() {
            unix.set_nonblocking(true)?;
            return Ok((Stream::Unix(UnixStream::from_std(unix)?), None));
        }
        let tcp = std::net::TcpStream::from(OwnedFd::from(unix));
        let remote = tcp.peer_addr()?;
        tcp.set_nonblocking(true)?;
        Ok((Stream::Tcp(TcpStream::from_std(tcp)?), Some(remote)))
    }

    /// The socket, out of tokio's poller (still non-blocking), for the inline driver.
    #[cfg(target_os = "linux")]
    pub(crate) fn into_fd(self) -> io::Result<OwnedFd> {
        match self {
            Stream::Tcp(s) => s.into_std().map(OwnedFd::from),
            Stream::Unix(s) => s.into_std().map(OwnedFd::from),
        }
    }

    /// Send small frames at once (TCP only; a unix socket has no Nagle).
    pub(crate) fn set_nodelay(&self) {
        #[allow(irrefutable_let_patterns)] // Windows: TCP only
        if let Stream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            #[cfg(unix)]
            Stream::Unix(s) => s.readable().await,
        }
    }

    /// Readable, or the peer shut down its side (`is_read_closed`: data may still be queued).
    pub(crate) async fn read_ready(&self) -> io::Result<tokio::io::Ready> {
        let interest = tokio::io::Interest::READABLE;
        match self {
            Stream::Tcp(s) => s.ready(interest).await,
            #[cfg(unix)]
            Stream::Unix(s) => s.ready(interest).await,
        }
    }

    pub(crate) async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            #[cfg(unix)]
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Run one non-blocking syscall on the fd; a WouldBlock from `f` clears the readiness.
    pub(crate) fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Stream::Tcp(s) => s.try_io(interest, f),
            #[cfg(unix)]
            Stream::Unix(s) => s.try_io(interest, f),
        }
    }

    pub(crate) fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read_buf(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.try_read_buf(buf),
        }
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes).await,
            #[cfg(unix)]
            Stream::Unix(s) => s.write_all(bytes).await,
        }
    }

    /// Shut down our sending side (FIN).
    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown().await,
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown().await,
        }
    }

    /// The socket's raw handle (valid while this stream lives).
    pub(crate) fn raw(&self) -> RawSock {
        match self {
            #[cfg(unix)]
            Stream::Tcp(s) => s.as_raw_fd(),
            #[cfg(windows)]
            Stream::Tcp(s) => s.as_raw_socket(),
            #[cfg(unix)]
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}
