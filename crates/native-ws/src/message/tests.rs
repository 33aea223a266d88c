use super::*;
use crate::deflate::Deflater;
use crate::extensions::{negotiate, DeflateConfig};

const KEY: [u8; 4] = [1, 2, 3, 4];

fn frame(fin: bool, rsv1: bool, op: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    codec::write_header(&mut out, fin, rsv1, op, payload.len(), Some(KEY));
    let start = out.len();
    out.extend_from_slice(payload);
    codec::apply_mask(&mut out[start..], KEY, 0);
    out
}

fn run(r: &mut Reader, mut bytes: Vec<u8>) -> (Result<Progress, ProtocolError>, Vec<String>) {
    let mut got = Vec::new();
    let res = r.read(&mut bytes, &mut |m| {
        got.push(match m {
            Msg::Data { text, payload } => format!("{}:{}", if text { "t" } else { "b" }, String::from_utf8_lossy(payload)),
            Msg::Ping(p) => format!("ping:{}", String::from_utf8_lossy(p)),
            Msg::Pong(p) => format!("pong:{}", String::from_utf8_lossy(p)),
            Msg::Close(c, r) => format!("close:{c}:{r}"),
        })
    });
    (res, got)
}

#[test]
fn whole_and_fragmented_messages_with_interleaved_control() {
    let mut r = Reader::new(1024, 10, None);
    let mut bytes = frame(true, false, codec::OP_TEXT, b"hello");
    bytes.extend(frame(false, false, codec::OP_BINARY, b"ab"));
    bytes.extend(frame(true, false, codec::OP_PING, b"p"));
    bytes.extend(frame(true, false, codec::OP_CONTINUATION, b"cd"));
    let (res, got) = run(&mut r, bytes.clone());
    assert_eq!(res.unwrap(), Progress { consumed: bytes.len(), need: None, closed: false });
    assert_eq!(got, vec!["t:hello", "ping:p", "b:abcd"]);
}

#[test]
fn partial_frames_report_what_they_need() {
    let mut r = Reader::new(1024, 10, None);
    let bytes = frame(true, false, codec::OP_TEXT, b"hello");
    for cut in 0..bytes.len() {
        let (res, got) = run(&mut r, bytes[..cut].to_vec());
        let p = res.unwrap();
        assert_eq!(p.consumed, 0);
        assert!(got.is_empty());
        if cut >= 6 {
            assert_eq!(p.need, Some(bytes.len()));
        }
    }
}

#[test]
fn protocol_errors_have_their_codes() {
    let cases: Vec<(Vec<u8>, u16)> = vec![
        (frame(true, false, codec::OP_CONTINUATION, b"x"), 1002),
        ([frame(false, false, codec::OP_TEXT, b"x"), frame(true, false, codec::OP_TEXT, b"y")].concat(), 1002),
        (frame(true, false, codec::OP_TEXT, &[0xff]), 1007),
        ([frame(false, false, codec::OP_TEXT, &[0xce]), frame(true, false, codec::OP_CONTINUATION, &[0x41])].concat(), 1007),
        (frame(true, false, codec::OP_BINARY, &[0; 1025]), 1009),
        ([frame(false, false, codec::OP_BINARY, &[0; 600]), frame(true, false, codec::OP_CONTINUATION, &[0; 600])].concat(), 1009),
        (frame(true, true, codec::OP_TEXT, b"x"), 1002),
        (frame(true, false, codec::OP_CLOSE, &[0x03, 0xe7]), 1002),
    ];
    for (bytes, code) in cases {
        let mut r = Reader::new(1024, 10, None);
        let (res, _) = run(&mut r, bytes);
        assert_eq!(res.unwrap_err().code, code);
    }
}

#[test]
fn fragment_cap() {
    let mut r = Reader::new(1 << 20, 3, None);
    let mut bytes = frame(false, false, codec::OP_BINARY, b"a");
    for _ in 0..3 {
        bytes.extend(frame(false, false, codec::OP_CONTINUATION, b"a"));
    }
    assert_eq!(run(&mut r, bytes).0.unwrap_err().code, 1009);
}

#[test]
fn close_stops_reading() {
    let mut r = Reader::new(1024, 10, None);
    let mut bytes = frame(true, false, codec::OP_CLOSE, &[0x03, 0xe8, b'o', b'k']);
    bytes.extend(frame(true, false, codec::OP_TEXT, b"after"));
    let (res, got) = run(&mut r, bytes);
    assert!(res.unwrap().closed);
    assert_eq!(got, vec!["close:1000:ok"]);
}

fn deflate_session() -> (Negotiated, Deflater) {
    let n = negotiate("permessage-deflate; client_max_window_bits", &DeflateConfig::default()).unwrap();
    // a client-side compressor for the frames we feed the server
    (n, Deflater::new(6, 15, false))
}

#[test]
fn compressed_messages_whole_and_fragmented() {
    let (n, mut client) = deflate_session();
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let text = "compress me ".repeat(200);
    let mut z = Vec::new();
    client.compress(text.as_bytes(), &mut z);
    let mut bytes = frame(true, true, codec::OP_TEXT, &z);
    let mut z2 = Vec::new();
    client.compress(text.as_bytes(), &mut z2);
    let (a, b) = z2.split_at(z2.len() / 2);
    bytes.extend(frame(false, true, codec::OP_TEXT, a));
    bytes.extend(frame(true, false, codec::OP_CONTINUATION, b));
    bytes.extend(frame(true, false, codec::OP_TEXT, b"plain"));
    let (res, got) = run(&mut r, bytes);
    res.unwrap();
    assert_eq!(got, vec![format!("t:{text}"), format!("t:{text}"), "t:plain".to_string()]);
}

#[test]
fn an_empty_compressed_message_is_empty_and_leaves_the_context_alone() {
    // Context takeover: the message after the empty one still inflates against the window.
    let (n, mut client) = deflate_session();
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let text = "shared context ".repeat(50);
    let mut z1 = Vec::new();
    client.compress(text.as_bytes(), &mut z1);
    let mut z2 = Vec::new();
    client.compress(text.as_bytes(), &mut z2);
    let mut bytes = frame(true, true, codec::OP_TEXT, &z1);
    bytes.extend(frame(true, true, codec::OP_TEXT, b""));
    bytes.extend(frame(false, true, codec::OP_TEXT, b""));
    bytes.extend(frame(true, false, codec::OP_CONTINUATION, b""));
    bytes.extend(frame(true, true, codec::OP_TEXT, &z2));
    let (res, got) = run(&mut r, bytes);
    res.unwrap();
    assert_eq!(got, vec![format!("t:{text}"), "t:".to_string(), "t:".to_string(), format!("t:{text}")]);
}

#[test]
fn zip_bomb_closes_at_the_cap() {
    let (n, mut client) = deflate_session();
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let mut z = Vec::new();
    client.compress(&vec![0u8; 16 << 20], &mut z);
    assert!(z.len() < 1 << 20);
    let (res, got) = run(&mut r, frame(true, true, codec::OP_BINARY, &z));
    assert_eq!(res.unwrap_err().code, 1009);
    assert!(got.is_empty());
    assert!(r.msg.capacity() <= (1 << 20) + 64 * 1024);
}

#[test]
fn without_client_context_takeover_no_inflater_stays_with_the_connection() {
    let n = negotiate(
        "permessage-deflate; client_no_context_takeover",
        &DeflateConfig::default(),
    )
    .unwrap();
    assert!(n.client_no_context_takeover);
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    for i in 0..3 {
        let text = format!("message {i} ").repeat(50);
        let mut z = Vec::new();
        Deflater::new(6, 15, true).compress(text.as_bytes(), &mut z);
        let (res, got) = run(&mut r, frame(true, true, codec::OP_TEXT, &z));
        res.unwrap();
        assert_eq!(got, vec![format!("t:{text}")]);
        assert!(r.inflater.is_none(), "inflater returned to the thread's pool");
    }
    // With context takeover the window must stay with the connection.
    let (n, mut client) = deflate_session();
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let mut z = Vec::new();
    client.compress(b"hello hello hello", &mut z);
    run(&mut r, frame(true, true, codec::OP_TEXT, &z)).0.unwrap();
    assert!(r.inflater.is_some());
}

#[test]
fn rsv1_on_continuation_is_a_protocol_error() {
    let (n, _) = deflate_session();
    let mut r = Reader::new(1024, 10, Some(&n));
    let bytes = [frame(false, false, codec::OP_TEXT, b"a"), frame(true, true, codec::OP_CONTINUATION, b"b")].concat();
    assert_eq!(run(&mut r, bytes).0.unwrap_err().code, 1002);
}
