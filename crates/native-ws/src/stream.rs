//! A connection's socket: TCP (accepted by a listener of ours, or adopted from Node), or a unix
//! stream socket adopted from a Node server listening on a path (Meteor's `UNIX_SOCKET_PATH`,
//! common behind nginx or Passenger). The connection code sees one type. Both are stream
//! sockets, so reads, writes and shutdown are the same syscalls on the same fd.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpStream, UnixStream};

pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
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

    /// Send small frames at once (TCP only; a unix socket has no Nagle).
    pub(crate) fn set_nodelay(&self) {
        if let Stream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    pub(crate) async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    pub(crate) async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Run one non-blocking syscall on the fd; a WouldBlock from `f` clears the readiness.
    pub(crate) fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        match self {
            Stream::Tcp(s) => s.try_io(interest, f),
            Stream::Unix(s) => s.try_io(interest, f),
        }
    }

    pub(crate) fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read_buf(buf),
            Stream::Unix(s) => s.try_read_buf(buf),
        }
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(bytes).await,
            Stream::Unix(s) => s.write_all(bytes).await,
        }
    }

    /// Shut down our sending side (FIN).
    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown().await,
            Stream::Unix(s) => s.shutdown().await,
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}
