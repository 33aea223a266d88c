//! A minimal WebSocket client (RFC 6455, client role) built for low cost per message: frames are
//! masked straight into one write buffer per connection and written with one syscall per flush;
//! server frames are parsed in place from one read buffer, never copied unless fragmented.
//! Frame headers and masking come from the server core's codec (`native_ws::codec`, client role).
//!
//! One optional extension: permessage-deflate offered the way Chromium offers it
//! (`permessage-deflate; client_max_window_bits`, `Target::deflate`). When the server accepts it,
//! the client behaves like Chromium: every text/binary message it sends is compressed (RSV1, level
//! 6 = zlib's default, window and context takeover as the server's answer allows: 15 bits and
//! takeover unless told otherwise), and compressed server messages are inflated before they are
//! handed out. Without the offer, RSV1 from the server stays a protocol error.

use base64::Engine;
use native_ws::codec::{self, Role};
use native_ws::deflate::{Deflater, Inflater};
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

thread_local! {
    static WIRE_IN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes read from every connection so far (frames as on the wire, before inflating).
pub fn wire_in() -> u64 {
    WIRE_IN.get()
}

pub fn err(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

/// `ws://host:port/path`, resolved once, and whether to offer permessage-deflate.
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: String,
    pub path: String,
    pub deflate: bool,
    /// with `deflate`: a server that declines the offer is served uncompressed (as a browser
    /// does) instead of failing the connect
    pub deflate_optional: bool,
    /// local addresses to connect from, picked by seed (`--sources K`: 127.0.0.1..K); empty =
    /// the kernel's choice. Several loopback sources multiply the ephemeral ports available.
    pub sources: Vec<std::net::IpAddr>,
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
        Ok(Target { addr, host_header: hostport, path: path.to_string(), deflate: false, deflate_optional: false, sources: Vec::new() })
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

/// Chromium's deflater level (`Z_DEFAULT_COMPRESSION`).
pub const CHROMIUM_DEFLATE_LEVEL: u32 = 6;

/// The sending half of a negotiated permessage-deflate.
struct WriteDeflate {
    deflater: Deflater,
    /// The message's parts joined (the deflater takes one whole message).
    input: Vec<u8>,
    /// The compressed payload, before it is framed and masked into `Writer::buf`.
    output: Vec<u8>,
}

/// Outbound bytes of one connection: whole masked frames, appended and written in one go.
pub struct Writer {
    pub buf: Vec<u8>,
    pos: usize,
    rng: Rng,
    deflate: Option<Box<WriteDeflate>>,
    /// Messages sent compressed (RSV1).
    pub compressed_msgs: u32,
}

impl Writer {
    pub fn new(seed: u64) -> Writer {
        Writer { buf: Vec::with_capacity(512), pos: 0, rng: Rng::new(seed), deflate: None, compressed_msgs: 0 }
    }

    /// Compress every text/binary message from now on (permessage-deflate was negotiated).
    pub fn enable_deflate(&mut self, window_bits: u8, no_context_takeover: bool) {
        self.deflate = Some(Box::new(WriteDeflate {
            deflater: Deflater::new(CHROMIUM_DEFLATE_LEVEL, window_bits, no_context_takeover),
            input: Vec::new(),
            output: Vec::new(),
        }));
    }

    pub fn pending(&self) -> bool {
        self.pos < self.buf.len()
    }

    /// Append one masked frame whose payload is the concatenation of `parts` (the core's codec
    /// writes the header and masks).
    pub fn frame_parts(&mut self, opcode: u8, parts: &[&[u8]]) {
        if let Some(z) = self.deflate.as_mut() {
            if opcode == OP_TEXT || opcode == OP_BINARY {
                z.input.clear();
                for p in parts {
                    z.input.extend_from_slice(p);
                }
                z.output.clear();
                z.deflater.compress(&z.input, &mut z.output);
                let key = (self.rng.next() as u32).to_ne_bytes();
                codec::write_header(&mut self.buf, true, true, opcode, z.output.len(), Some(key));
                let start = self.buf.len();
                self.buf.extend_from_slice(&z.output);
                codec::apply_mask(&mut self.buf[start..], key, 0);
                self.compressed_msgs += 1;
                return;
            }
        }
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

/// The receiving half of a negotiated permessage-deflate. The inflater is created on the first
/// compressed message (servers below their threshold may never send one).
struct ReadInflate {
    window_bits: u8,
    no_context_takeover: bool,
    inflater: Option<Inflater>,
    out: Vec<u8>,
}

impl ReadInflate {
    fn inflate(&mut self, payload: &[u8]) -> io::Result<&[u8]> {
        let (bits, nct) = (self.window_bits, self.no_context_takeover);
        let inf = self.inflater.get_or_insert_with(|| Inflater::new(bits, nct));
        self.out.clear();
        inf.feed(payload, &mut self.out, MAX_MESSAGE)
            .and_then(|_| inf.finish(&mut self.out, MAX_MESSAGE))
            .map_err(|e| err(format!("cannot inflate a server message: {e:?}")))?;
        Ok(&self.out[..])
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
    /// The fragmented message in `frag` is compressed (RSV1 on its first frame).
    frag_rsv1: bool,
    inflate: Option<Box<ReadInflate>>,
    /// Messages received compressed (RSV1).
    pub compressed_msgs: u32,
}

impl Reader {
    pub fn new(size: usize) -> Reader {
        Reader {
            buf: vec![0; size],
            start: 0,
            end: 0,
            need: 0,
            frag: Vec::new(),
            frag_op: 0,
            in_frag: false,
            frag_rsv1: false,
            inflate: None,
            compressed_msgs: 0,
        }
    }

    /// Accept RSV1 (compressed messages) from now on and inflate them (permessage-deflate was
    /// negotiated; `window_bits` is the server's, 15 unless it answered `server_max_window_bits`).
    pub fn enable_inflate(&mut self, window_bits: u8, no_context_takeover: bool) {
        self.inflate = Some(Box::new(ReadInflate { window_bits, no_context_takeover, inflater: None, out: Vec::new() }));
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
        WIRE_IN.set(WIRE_IN.get() + n as u64);
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
            let h = match codec::parse_header(avail, Role::Client, self.inflate.is_some()) {
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
            let (op, fin, rsv1) = (h.opcode, h.fin, h.rsv1);
            let p0 = self.start + hl;
            let p1 = p0 + len;
            self.start = p1;
            match op {
                OP_CONT => {
                    if !self.in_frag {
                        return Err(err("continuation frame without a start"));
                    }
                    if rsv1 {
                        return Err(err("RSV1 set on a continuation frame"));
                    }
                    if self.frag.len() + len > MAX_MESSAGE {
                        return Err(err("message too large"));
                    }
                    self.frag.extend_from_slice(&self.buf[p0..p1]);
                    if fin {
                        self.in_frag = false;
                        if self.frag_rsv1 {
                            self.compressed_msgs += 1;
                            let z = self.inflate.as_mut().expect("RSV1 is only accepted with deflate on");
                            return Ok(Some((self.frag_op, z.inflate(&self.frag)?)));
                        }
                        return Ok(Some((self.frag_op, &self.frag[..])));
                    }
                }
                OP_TEXT | OP_BINARY => {
                    if self.in_frag {
                        return Err(err("new message inside a fragmented one"));
                    }
                    if fin {
                        if rsv1 {
                            self.compressed_msgs += 1;
                            let z = self.inflate.as_mut().expect("RSV1 is only accepted with deflate on");
                            return Ok(Some((op, z.inflate(&self.buf[p0..p1])?)));
                        }
                        return Ok(Some((op, &self.buf[p0..p1])));
                    }
                    self.frag.clear();
                    self.frag.extend_from_slice(&self.buf[p0..p1]);
                    self.frag_op = op;
                    self.frag_rsv1 = rsv1;
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
    /// The server's `Sec-WebSocket-Extensions` answer (only with `Target::deflate`).
    pub extensions: Option<String>,
}

/// Chromium's permessage-deflate offer, byte for byte.
pub const CHROMIUM_DEFLATE_OFFER: &str = "permessage-deflate; client_max_window_bits";

/// A server's permessage-deflate answer (to `CHROMIUM_DEFLATE_OFFER`), validated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeflateAnswer {
    pub server_no_context_takeover: bool,
    pub client_no_context_takeover: bool,
    pub server_max_window_bits: Option<u8>,
    pub client_max_window_bits: Option<u8>,
}

/// Validate a `Sec-WebSocket-Extensions` response value the way a browser must before using it:
/// exactly one extension, `permessage-deflate`, with known parameters, none repeated, the two
/// `*_no_context_takeover` without a value, the two window sizes with a decimal value 8..=15
/// (quoted or not). `client_max_window_bits` is allowed because the offer contained it.
pub fn parse_deflate_answer(value: &str) -> Result<DeflateAnswer, String> {
    let bad = |why: &str| format!("bad permessage-deflate answer {value:?}: {why}");
    if value.contains(',') {
        return Err(bad("more than one extension"));
    }
    let mut items = value.split(';').map(str::trim);
    let name = items.next().unwrap_or("");
    if !name.eq_ignore_ascii_case("permessage-deflate") {
        return Err(bad("not permessage-deflate"));
    }
    let mut a = DeflateAnswer::default();
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), Some(v.trim())),
            None => (item.to_ascii_lowercase(), None),
        };
        if seen.contains(&k) {
            return Err(bad(&format!("{k} repeated")));
        }
        seen.push(k.clone());
        let bits = |v: Option<&str>| -> Result<u8, String> {
            let v = v.ok_or_else(|| bad(&format!("{k} without a value")))?;
            let v = v.strip_prefix('"').and_then(|x| x.strip_suffix('"')).unwrap_or(v);
            let ok = !v.is_empty() && v.len() <= 2 && v.bytes().all(|b| b.is_ascii_digit()) && !v.starts_with('0');
            match v.parse::<u8>() {
                Ok(n) if ok && (8..=15).contains(&n) => Ok(n),
                _ => Err(bad(&format!("{k}={v} is not 8..15"))),
            }
        };
        match k.as_str() {
            "server_no_context_takeover" | "client_no_context_takeover" => {
                if v.is_some() {
                    return Err(bad(&format!("{k} with a value")));
                }
                if k.starts_with("server") {
                    a.server_no_context_takeover = true;
                } else {
                    a.client_no_context_takeover = true;
                }
            }
            "server_max_window_bits" => a.server_max_window_bits = Some(bits(v)?),
            "client_max_window_bits" => a.client_max_window_bits = Some(bits(v)?),
            "" => return Err(bad("empty parameter")),
            _ => return Err(bad(&format!("unknown parameter {k}"))),
        }
    }
    Ok(a)
}

/// All values of header `name` in a response head (status line first), joined with ", ".
fn header_values(head: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    let vals: Vec<&str> = text
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect();
    if vals.is_empty() {
        None
    } else {
        Some(vals.join(", "))
    }
}

/// In the error of a refused upgrade: the `Retry-After` the server answered (seconds).
pub const RETRY_AFTER: &str = "retry-after=";

impl Conn {
    /// TCP connect plus the HTTP/1.1 upgrade, done by hand. With `t.deflate` the upgrade offers
    /// permessage-deflate as Chromium does, and fails unless the server accepts it validly.
    pub async fn open(t: &Target, seed: u64, read_buf: usize) -> io::Result<Conn> {
        let mut stream = if t.sources.is_empty() {
            TcpStream::connect(t.addr).await?
        } else {
            let sock = if t.addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
            sock.bind(SocketAddr::new(t.sources[(seed % t.sources.len() as u64) as usize], 0))?;
            sock.connect(t.addr).await?
        };
        stream.set_nodelay(true)?;
        let mut wr = Writer::new(seed);
        let key = wr.ws_key();
        let ext = if t.deflate { format!("Sec-WebSocket-Extensions: {CHROMIUM_DEFLATE_OFFER}\r\n") } else { String::new() };
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {}\r\nSec-WebSocket-Version: 13\r\n{}\r\n",
            t.path, t.host_header, key, ext
        );
        wr.buf.extend_from_slice(req.as_bytes());
        wr.flush(&stream).await?;
        let mut rd = Reader::new(read_buf);
        let answer = loop {
            rd.fill(&mut stream).await?;
            let avail = rd.available();
            if let Some(pos) = memchr::memmem::find(avail, b"\r\n\r\n") {
                let head = &avail[..pos];
                if !(head.starts_with(b"HTTP/1.1 101") || head.starts_with(b"HTTP/1.0 101")) {
                    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
                    let retry = header_values(head, "retry-after").map(|v| format!("; {RETRY_AFTER}{v}")).unwrap_or_default();
                    return Err(err(format!("upgrade refused: {}{retry}", String::from_utf8_lossy(&head[..line_end]))));
                }
                let answer = header_values(head, "sec-websocket-extensions");
                rd.start += pos + 4;
                break answer;
            }
            if avail.len() > 16384 {
                return Err(err("upgrade response head too large"));
            }
        };
        match (t.deflate, &answer) {
            (false, None) => {}
            (false, Some(v)) => return Err(err(format!("server answered an extension that was not offered: {v:?}"))),
            (true, None) if t.deflate_optional => {}
            (true, None) => return Err(err("server did not accept permessage-deflate")),
            (true, Some(v)) => {
                let a = parse_deflate_answer(v).map_err(err)?;
                // Chromium: its deflater takes the client window the server allows (15 if none)
                // and resets per message only when told `client_no_context_takeover`.
                wr.enable_deflate(a.client_max_window_bits.unwrap_or(15), a.client_no_context_takeover);
                rd.enable_inflate(a.server_max_window_bits.unwrap_or(15), a.server_no_context_takeover);
            }
        }
        Ok(Conn { stream, rd, wr, extensions: answer })
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

    #[test]
    fn deflate_answers() {
        let a = parse_deflate_answer("permessage-deflate; server_no_context_takeover; server_max_window_bits=8").unwrap();
        assert_eq!(
            a,
            DeflateAnswer { server_no_context_takeover: true, server_max_window_bits: Some(8), ..Default::default() }
        );
        let a = parse_deflate_answer("permessage-deflate; client_no_context_takeover; client_max_window_bits=\"10\"").unwrap();
        assert!(a.client_no_context_takeover);
        assert_eq!(a.client_max_window_bits, Some(10));
        assert_eq!(parse_deflate_answer("permessage-deflate").unwrap(), DeflateAnswer::default());
        for bad in [
            "x-webkit-deflate-frame",
            "permessage-deflate, permessage-deflate",
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits=09",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; foo",
        ] {
            assert!(parse_deflate_answer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn deflate_round_trip_and_rsv1_rules() {
        // A compressed text message from "the server" (unmasked, RSV1), then a plain one.
        let mut d = Deflater::new(1, 9, true);
        let mut payload = Vec::new();
        d.compress(br#"{"msg":"connected","session":"abc"}"#, &mut payload);
        let mut bytes = Vec::new();
        codec::write_header(&mut bytes, true, true, OP_TEXT, payload.len(), None);
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&[0x81, 2, b'h', b'i']);
        let mut r = Reader::new(256);
        r.buf[..bytes.len()].copy_from_slice(&bytes);
        r.end = bytes.len();
        assert!(r.next_frame().is_err(), "RSV1 without deflate negotiated must be rejected");
        let mut r = Reader::new(256);
        r.enable_inflate(15, false);
        r.buf[..bytes.len()].copy_from_slice(&bytes);
        r.end = bytes.len();
        assert_eq!(r.next_frame().unwrap(), Some((OP_TEXT, &br#"{"msg":"connected","session":"abc"}"#[..])));
        assert_eq!(r.next_frame().unwrap(), Some((OP_TEXT, &b"hi"[..])));
        assert_eq!(r.compressed_msgs, 1);

        // The client side: RSV1 set, masked, and the payload inflates back.
        let mut w = Writer::new(3);
        w.enable_deflate(15, false);
        w.text(b"hello hello hello");
        w.frame(OP_PONG, b"");
        let h = codec::parse_header(&w.buf, Role::Server, true).unwrap().unwrap();
        assert!(h.rsv1 && h.fin && h.opcode == OP_TEXT);
        let mut p = w.buf[h.header_len..h.header_len + h.payload_len as usize].to_vec();
        codec::apply_mask(&mut p, h.mask.unwrap(), 0);
        let mut inf = Inflater::new(15, false);
        let mut out = Vec::new();
        inf.feed(&p, &mut out, 1 << 20).unwrap();
        inf.finish(&mut out, 1 << 20).unwrap();
        assert_eq!(out, b"hello hello hello");
        let rest = &w.buf[h.header_len + h.payload_len as usize..];
        let h2 = codec::parse_header(rest, Role::Server, true).unwrap().unwrap();
        assert!(!h2.rsv1 && h2.opcode == OP_PONG, "control frames are never compressed");
    }
}
