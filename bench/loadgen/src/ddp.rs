//! Just enough DDP: build the few client messages, and classify server messages by byte search
//! (`"msg":"` and `"id":"`) instead of parsing JSON.

use crate::client::{err, Conn, Target, Writer, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT};
use memchr::memmem;
use std::io;

pub const CONNECT: &[u8] = br#"{"msg":"connect","version":"1","support":["1"]}"#;
pub const PONG: &[u8] = br#"{"msg":"pong"}"#;

/// The value of the first `"msg":"…"` in a message ("" if none).
#[inline]
pub fn kind(p: &[u8]) -> &[u8] {
    const KEY: &[u8] = br#""msg":""#;
    // DDP servers put `msg` first; try that before searching.
    let at = if p.len() > 8 && &p[1..8] == KEY { Some(1) } else { memmem::find(p, KEY) };
    match at {
        Some(i) => {
            let v = &p[i + KEY.len()..];
            match memchr::memchr(b'"', v) {
                Some(e) => &v[..e],
                None => b"",
            }
        }
        None => b"",
    }
}

/// The unsigned integer inside the first `"<key>":"123"` (key given with its quotes, colon and
/// opening quote), or the bare number after `"<key>":` when `quoted` is false.
#[inline]
pub fn num_after(p: &[u8], key: &[u8]) -> Option<u64> {
    let i = memmem::find(p, key)? + key.len();
    let mut n: u64 = 0;
    let mut digits = 0;
    for &b in &p[i..] {
        if b.is_ascii_digit() {
            n = n.wrapping_mul(10).wrapping_add((b - b'0') as u64);
            digits += 1;
        } else {
            break;
        }
    }
    if digits == 0 {
        None
    } else {
        Some(n)
    }
}

pub const ID_KEY: &[u8] = br#""id":""#;

/// Decimal digits of `n` into `buf`, returns the used tail.
#[inline]
pub fn itoa(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// A method call template: prefix + id + suffix.
pub struct Call {
    prefix: Vec<u8>,
    suffix: Vec<u8>,
}

impl Call {
    /// `params_json` is the JSON of the params array's contents, e.g. `"abc"`.
    pub fn new(method: &str, params_json: &str) -> Call {
        Call {
            prefix: br#"{"msg":"method","id":""#.to_vec(),
            suffix: format!(r#"","method":"{method}","params":[{params_json}]}}"#).into_bytes(),
        }
    }

    #[inline]
    pub fn push(&self, wr: &mut Writer, id: u64) {
        let mut b = [0u8; 20];
        let id = itoa(id, &mut b);
        wr.frame_parts(OP_TEXT, &[&self.prefix, id, &self.suffix]);
    }
}

/// Answer a DDP ping or a WebSocket ping; true when the message was one.
#[inline]
pub fn answer_ping(c_wr: &mut Writer, op: u8, p: &[u8]) -> bool {
    if op == OP_PING {
        c_wr.frame(OP_PONG, p);
        return true;
    }
    if op == OP_TEXT && kind(p) == b"ping" {
        c_wr.text(PONG);
        return true;
    }
    false
}

/// Read until `f` accepts a text message (returns Some). Pings are answered on the way.
pub async fn recv_until<T>(c: &mut Conn, mut f: impl FnMut(&[u8]) -> Option<io::Result<T>>) -> io::Result<T> {
    loop {
        while let Some((op, p)) = c.rd.next_frame()? {
            if answer_ping(&mut c.wr, op, p) {
                continue;
            }
            match op {
                OP_TEXT => {
                    if let Some(r) = f(p) {
                        return r;
                    }
                }
                OP_CLOSE => return Err(err("server sent a close frame")),
                _ => {}
            }
        }
        if c.wr.pending() {
            c.wr.flush(&c.stream).await?;
        }
        c.rd.fill(&mut c.stream).await?;
    }
}

/// Open a connection, send DDP `connect` (plus `extra` messages in the same write) and wait for the
/// message kind `until` (`connected`, or `ready` after a `sub`).
pub async fn open(t: &Target, seed: u64, read_buf: usize, extra: &[&[u8]], until: &'static [u8]) -> io::Result<Conn> {
    let mut c = Conn::open(t, seed, read_buf).await?;
    c.wr.text(CONNECT);
    for m in extra {
        c.wr.text(m);
    }
    c.wr.flush(&c.stream).await?;
    recv_until(&mut c, |p| {
        let k = kind(p);
        if k == until {
            Some(Ok(()))
        } else if k == b"failed" || k == b"error" || k == b"nosub" {
            Some(Err(err(format!("DDP: {}", String::from_utf8_lossy(p)))))
        } else {
            None
        }
    })
    .await?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind(br#"{"msg":"result","id":"7","result":1}"#), b"result");
        assert_eq!(kind(br#"{"id":"7","msg":"updated"}"#), b"updated");
        assert_eq!(kind(br#"{"x":1}"#), b"");
    }

    #[test]
    fn numbers() {
        assert_eq!(num_after(br#"{"msg":"result","id":"17","result":"x"}"#, ID_KEY), Some(17));
        assert_eq!(num_after(br#"{"fields":{"fseq":42}}"#, br#""fseq":"#), Some(42));
        assert_eq!(num_after(br#"{"id":"abc"}"#, ID_KEY), None);
        let mut b = [0u8; 20];
        assert_eq!(itoa(0, &mut b), b"0");
        assert_eq!(itoa(1234567890123, &mut b), b"1234567890123");
    }
}
