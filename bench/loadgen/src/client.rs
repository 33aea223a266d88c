//! A minimal WebSocket client (RFC 6455, client role, no extensions) built for low cost per message:
//! frames are masked straight into one write buffer per connection and written with one syscall per
//! flush; server frames are parsed in place from one read buffer, never copied unless fragmented.
//! Frame headers and masking come from the server core's codec (`native_ws::codec`, client role).

use base64::Engine;
use native_ws::codec::{self, Role};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Largest message accepted from a server (a guard, not a limit any workload approaches).
const MAX_MESSAGE: usize = 64 << 20;

pub const OP_CONT: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

pub fn err(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::Other, msg.into())
}

/// `ws://host:port/path`, resolved once.
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: String,
    pub path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("ws://")
            .ok_or_else(|| format!("url must start with ws:// (got {url:?})"))?;
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let hostport = if hostport.contains(':') { hostport.to_string() } else { format!("{hostport}:80") };
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {hostport}: {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve {hostport}"))?;
        Ok(Target { addr, host_header: hostport, path: path.to_string() })
    }
}

/// xorshift64*: mask keys and handshake keys. Not cryptographic; servers only unmask.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    #[inline]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Outbound bytes of one connection: whole masked frames, appended and written in one go.
pub struct Writer {
    pub buf: Vec<u8>,
    pos: usize,
    rng: Rng,
}

impl Writer {
    pub fn new(seed: u64) -> Writer {
        Writer { buf: Vec::with_capacity(512), pos: 0, rng: Rng::new(seed) }
    }

    pub fn pending(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// Append one masked frame whose payload is the concatenation of `parts` (the core's codec
    /// writes the header and masks).
    pub fn frame_parts(&mut self, opcode: u8, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let key = (self.rng.next() as u32).to_ne_bytes();
        codec::write_header(&mut self.buf, true, false, opcode, len, Some(key));
        let start = self.buf.len();
        for p in parts {
            self.buf.extend_from_slice(p);
        }
        codec::apply_mask(&mut self.buf[start..], key, 0);
    }

    pub fn frame(&mut self, opcode: u8, payload: &[u8]) {
        self.frame_parts(opcode, &[payload]);
    }

    pub fn text(&mut self, payload: &[u8]) {
        self.frame_parts(OP_TEXT, &[payload]);
    }

    /// Write what the kernel takes now, without waiting. Ok(true) when everything went out.
    pub fn try_flush(&mut self, s: &TcpStream) -> io::Result<bool> {
        while self.pos < self.buf.len() {
            match s.try_write(&self.buf[self.pos..]) {
                Ok(n) => self.pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.pos = 0;
        Ok(true)
    }

    pub async fn flush(&mut self, s: &TcpStream) -> io::Result<()> {
        loop {
            if self.try_flush(s)? {
                return Ok(());
            }
            s.writable().await?;
        }
    }

    fn ws_key(&mut self) -> String {
        let mut raw = [0u8; 16];
        raw[..8].copy_from_slice(&self.rng.next().to_ne_bytes());
        raw[8..].copy_from_slice(&self.rng.next().to_ne_bytes());
        base64::engine::general_purpose::STANDARD.encode(raw)
    }
}

/// Inbound bytes of one connection, parsed in place.
pub struct Reader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes (from `start`) the next frame needs before it can be parsed.
    need: usize,
    frag: Vec<u8>,
    frag_op: u8,
    in_frag: bool,
}

impl Reader {
    pub fn new(size: usize) -> Reader {
        Reader { buf: vec![0; size], start: 0, end: 0, need: 0, frag: Vec::new(), frag_op: 0, in_frag: false }
    }

    fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// One read from the socket (waits until at least one byte arrives). EOF is an error.
    pub async fn fill(&mut self, s: &mut TcpStream) -> io::Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        let want = self.need.max(16);
        if self.start > 0 && (self.buf.len() - self.end < 2048 || self.start + want > self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if want > self.buf.len() {
            self.buf.resize(want.next_power_of_two(), 0);
        }
        if self.end == self.buf.len() {
            let n = self.buf.len() * 2;
            self.buf.resize(n, 0);
        }
        // poll_read (unlike try_read) treats a short read as "drained" and clears the readiness,
        // which saves the extra read syscall that would only return EAGAIN.
        let n = s.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection"));
        }
        self.end += n;
        Ok(())
    }

    /// The next complete message or control frame: (opcode, payload). None: read more first.
    pub fn next_frame(&mut self) -> io::Result<Option<(u8, &[u8])>> {
        loop {
            let avail = self.available();
            if avail.len() < 2 {
                self.need = 2;
                return Ok(None);
            }
            let h = match codec::parse_header(avail, Role::Client, false) {
                Ok(Some(h)) => h,
                Ok(None) => {
                    self.need = avail.len() + 1;
                    return Ok(None);
                }
                Err(e) => return Err(err(format!("bad frame from server: {e}"))),
            };
            if h.payload_len > MAX_MESSAGE as u64 {
                return Err(err("frame too large"));
            }
            let (len, hl) = (h.payload_len as usize, h.header_len);
            if avail.len() < hl + len {
                self.need = hl + len;
                return Ok(None);
            }
            self.need = 0;
            let (op, fin) = (h.opcode, h.fin);
            let p0 = self.start + hl;
            let p1 = p0 + len;
            self.start = p1;
            match op {
                OP_CONT => {
                    if !self.in_frag {
                        return Err(err("continuation frame without a start"));
                    }
                    if self.frag.len() + len > MAX_MESSAGE {
                        return Err(err("message too large"));
                    }
                    self.frag.extend_from_slice(&self.buf[p0..p1]);
                    if fin {
                        self.in_frag = false;
                        return Ok(Some((self.frag_op, &self.frag[..])));
                    }
                }
                OP_TEXT | OP_BINARY => {
                    if self.in_frag {
                        return Err(err("new message inside a fragmented one"));
                    }
                    if fin {
                        return Ok(Some((op, &self.buf[p0..p1])));
                    }
                    self.frag.clear();
                    self.frag.extend_from_slice(&self.buf[p0..p1]);
                    self.frag_op = op;
                    self.in_frag = true;
                }
                OP_CLOSE | OP_PING | OP_PONG => return Ok(Some((op, &self.buf[p0..p1]))),
                _ => return Err(err(format!("unknown opcode {op}"))),
            }
        }
    }
}

pub struct Conn {
    pub stream: TcpStream,
    pub rd: Reader,
    pub wr: Writer,
}

impl Conn {
    /// TCP connect plus the HTTP/1.1 upgrade, done by hand.
    pub async fn open(t: &Target, seed: u64, read_buf: usize) -> io::Result<Conn> {
        let mut stream = TcpStream::connect(t.addr).await?;
        stream.set_nodelay(true)?;
        let mut wr = Writer::new(seed);
        let key = wr.ws_key();
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {}\r\nSec-WebSocket-Version: 13\r\n\r\n",
            t.path, t.host_header, key
        );
        wr.buf.extend_from_slice(req.as_bytes());
        wr.flush(&stream).await?;
        let mut rd = Reader::new(read_buf);
        loop {
            rd.fill(&mut stream).await?;
            let avail = rd.available();
            if let Some(pos) = memchr::memmem::find(avail, b"\r\n\r\n") {
                let head = &avail[..pos];
                if !(head.starts_with(b"HTTP/1.1 101") || head.starts_with(b"HTTP/1.0 101")) {
                    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
                    return Err(err(format!("upgrade refused: {}", String::from_utf8_lossy(&head[..line_end]))));
                }
                rd.start += pos + 4;
                break;
            }
            if avail.len() > 16384 {
                return Err(err("upgrade response head too large"));
            }
        }
        Ok(Conn { stream, rd, wr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_lengths() {
        let mut w = Writer::new(1);
        w.text(&[b'a'; 125]);
        assert_eq!(w.buf[1], 0x80 | 125);
        assert_eq!(w.buf.len(), 2 + 4 + 125);
        w.buf.clear();
        w.text(&[b'a'; 126]);
        assert_eq!(&w.buf[1..4], &[0x80 | 126, 0, 126]);
        w.buf.clear();
        w.text(&vec![b'a'; 70000]);
        assert_eq!(w.buf[1], 0x80 | 127);
    }

    #[test]
    fn reader_parses_split_and_fragmented_frames() {
        let mut r = Reader::new(64);
        let mut bytes = vec![0x81, 3, b'a', b'b', b'c'];
        bytes.extend_from_slice(&[0x01, 2, b'x', b'y', 0x89, 0, 0x80, 1, b'z']);
        r.buf[..bytes.len()].copy_from_slice(&bytes);
        r.end = 3;
        assert!(r.next_frame().unwrap().is_none());
        r.end = bytes.len();
        assert_eq!(r.next_frame().unwrap(), Some((OP_TEXT, &b"abc"[..])));
        assert_eq!(r.next_frame().unwrap(), Some((OP_PING, &b""[..])));
        assert_eq!(r.next_frame().unwrap(), Some((OP_TEXT, &b"xyz"[..])));
        assert!(r.next_frame().unwrap().is_none());
    }
}
