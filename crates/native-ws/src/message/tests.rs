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

/// Chromium's offer under the default settings, and a client-side compressor (with the window
/// the server asked for) for the frames we feed the server.
fn deflate_session() -> (Negotiated, Deflater) {
    let n = negotiate("permessage-deflate; client_max_window_bits", &DeflateConfig::default()).unwrap();
    let client = Deflater::new(6, n.client_window_bits, false);
    (n, client)
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
    // With context takeover and a 15-bit window (the client was not asked for less) the
    // connection keeps its inflater.
    let cfg = DeflateConfig { request_max_window_bits: Some(15), ..DeflateConfig::default() };
    let n = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
    assert_eq!((n.client_window_bits, n.client_no_context_takeover), (15, false));
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let mut z = Vec::new();
    Deflater::new(6, 15, false).compress(b"hello hello hello", &mut z);
    run(&mut r, frame(true, true, codec::OP_TEXT, &z)).0.unwrap();
    assert!(r.inflater.is_some());
}

/// A DDP-like client message; `i` varies ids and sizes around the 1 KiB window.
fn ddp_call(rng: &mut crate::testutil::Rng, i: usize) -> String {
    let pad = "x".repeat(rng.below(3) * rng.below(900));
    format!(
        r#"{{"msg":"method","id":"{i}","method":"tasks.update","params":[{{"taskId":"{:016x}","text":"{pad}"}}],"randomSeed":"{:016x}"}}"#,
        rng.next_u64(),
        rng.next_u64()
    )
}

#[test]
fn a_small_client_window_is_parked_between_messages() {
    let (n, mut client) = deflate_session();
    assert_eq!((n.client_window_bits, n.client_no_context_takeover), (10, false));
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let mut rng = crate::testutil::Rng(0x9e37_79b9_7f4a_7c15);
    let (mut raw, mut wire, mut history) = (0, 0, Vec::new());
    for i in 0..300 {
        let text = ddp_call(&mut rng, i);
        let mut z = Vec::new();
        client.compress(text.as_bytes(), &mut z);
        raw += text.len();
        wire += z.len();
        // Every third message in three fragments (the lent inflater is held across them).
        let bytes = if i % 3 == 0 && z.len() >= 3 {
            let (a, b) = (z.len() / 3, 2 * z.len() / 3);
            [
                frame(false, true, codec::OP_TEXT, &z[..a]),
                frame(false, false, codec::OP_CONTINUATION, &z[a..b]),
                frame(true, false, codec::OP_CONTINUATION, &z[b..]),
            ]
            .concat()
        } else {
            frame(true, true, codec::OP_TEXT, &z)
        };
        let (res, got) = run(&mut r, bytes);
        res.unwrap();
        assert_eq!(got, vec![format!("t:{text}")], "message {i}");
        // Between messages: no inflater, no message buffer, at most the 1 KiB window.
        assert!(r.inflater.is_none(), "message {i}: inflater back in the pool");
        assert_eq!(r.msg.capacity(), 0, "message {i}: message buffer back in the pool");
        history.extend_from_slice(text.as_bytes());
        assert_eq!(r.window.bytes(), &history[history.len().saturating_sub(1024)..], "message {i}: the last 1 KiB");
    }
    // The context carried across messages: far better than compressing each message alone.
    let alone: usize = {
        let mut rng = crate::testutil::Rng(0x9e37_79b9_7f4a_7c15);
        (0..300)
            .map(|i| {
                let mut z = Vec::new();
                Deflater::new(6, 10, true).compress(ddp_call(&mut rng, i).as_bytes(), &mut z);
                z.len()
            })
            .sum()
    };
    assert!(wire * 10 < alone * 8, "context takeover {wire} vs per message {alone} bytes (raw {raw})");
}

#[test]
fn a_client_ending_its_stream_starts_a_fresh_window() {
    use flate2::{Compress, Compression, FlushCompress};
    let (n, _) = deflate_session();
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let text = "final block ".repeat(20);
    for round in 0..3 {
        // RFC 7692 §7.2.3.5: a message may end with a final block; the next starts a new stream.
        let mut c = Compress::new_with_window_bits(Compression::new(6), false, 10);
        let mut z = Vec::with_capacity(1024);
        c.compress_vec(text.as_bytes(), &mut z, FlushCompress::Finish).unwrap();
        let (res, got) = run(&mut r, frame(true, true, codec::OP_TEXT, &z));
        res.unwrap();
        assert_eq!(got, vec![format!("t:{text}")], "round {round}");
        assert!(r.window.bytes().is_empty(), "the ended stream's window is dropped");
        assert!(r.inflater.is_none());
    }
}

#[test]
fn rsv1_on_continuation_is_a_protocol_error() {
    let (n, _) = deflate_session();
    let mut r = Reader::new(1024, 10, Some(&n));
    let bytes = [frame(false, false, codec::OP_TEXT, b"a"), frame(true, true, codec::OP_CONTINUATION, b"b")].concat();
    assert_eq!(run(&mut r, bytes).0.unwrap_err().code, 1002);
}

#[test]
fn a_client_reaching_past_the_negotiated_window_is_closed_1007_and_other_streams_go_on() {
    let (n, mut honest) = deflate_session();
    assert_eq!(n.client_window_bits, 10);
    // This client was told 10 bits but deflates with 15: its second message refers 2 KiB back,
    // past the 1 KiB the server kept.
    let mut liar = Deflater::new(6, 15, false);
    let mut r = Reader::new(1 << 20, 100, Some(&n));
    let mut other = Reader::new(1 << 20, 100, Some(&n));
    let mut rng = crate::testutil::Rng(7);
    let text: String = (0..2048).map(|_| (b'a' + rng.below(26) as u8) as char).collect();
    for round in 0..2 {
        let mut z = Vec::new();
        liar.compress(text.as_bytes(), &mut z);
        let (res, got) = run(&mut r, frame(true, true, codec::OP_TEXT, &z));
        if round == 0 {
            assert_eq!(got, vec![format!("t:{text}")]);
        } else {
            assert_eq!(res.unwrap_err().code, codec::CLOSE_INVALID_DATA, "1007: corrupt deflate data");
        }
        // Another connection on the same thread, sharing the inflater pool, is unaffected.
        let msg = format!("honest {round} {}", "h".repeat(100));
        let mut z = Vec::new();
        honest.compress(msg.as_bytes(), &mut z);
        let (res, got) = run(&mut other, frame(true, true, codec::OP_TEXT, &z));
        res.unwrap();
        assert_eq!(got, vec![format!("t:{msg}")]);
    }
}
