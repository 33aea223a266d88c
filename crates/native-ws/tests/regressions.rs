//! Inputs found by fuzzing (fuzz/, see docs/conformance.md), kept as regression tests.

use native_ws::deflate::{InflateError, Inflater};

/// Inflate one message given as `pieces` (the compressed payloads of its fragments) with `cap`.
fn inflate(pieces: &[&[u8]], window_bits: u8, no_context_takeover: bool, cap: usize) -> (Result<(), InflateError>, Vec<u8>) {
    let mut inf = Inflater::new(window_bits, no_context_takeover);
    let mut out = Vec::new();
    for piece in pieces {
        let res = inf.feed(piece, &mut out, cap);
        assert!(out.len() <= cap && out.capacity() <= cap);
        if let Err(e) = res {
            return (Err(e), out);
        }
    }
    let res = inf.finish(&mut out, cap).map(|_| ());
    assert!(out.len() <= cap);
    (res, out)
}

/// fuzz target `inflate`, crash-4669c719fc79c75b64c59f68a1b68ea6da9c9261, minimised to the
/// 7-byte input `c9 00 b5 2a 3a 00 ff`: window 12 bits, no context takeover, cap 0, one message
/// whose compressed payload is `3a 00 ff`.
///
/// `3a 00` is the start of a fixed-Huffman block and decodes to one literal byte; `ff` then is an
/// invalid code. So the message is both over the cap (0) and corrupt. Every way of feeding it
/// must fail without writing past the cap — that holds, and is what this test pins down.
#[test]
fn inflate_corrupt_and_over_cap_message_fails_for_every_split() {
    let payload: &[u8] = &[0x3a, 0x00, 0xff];
    for cap in [0, 1, 2, 100] {
        for k in 0..=payload.len() {
            let (res, out) = inflate(&[&payload[..k], &payload[k..]], 12, true, cap);
            assert!(res.is_err(), "cap {cap}, split at {k}: accepted");
            assert!(out.len() <= cap);
        }
    }
}

/// The same input once made the error depend on where the message was cut into fragments: fed
/// whole, `Inflater` reported `Corrupt` (close 1007); fed as `3a 00` + `ff`, `TooBig` (1009),
/// because the decode error was checked before the bytes produced past the cap. Now whatever
/// comes first in the stream wins (TooBig here), for every split.
#[test]
fn inflate_error_kind_does_not_depend_on_fragment_boundaries() {
    let payload: &[u8] = &[0x3a, 0x00, 0xff];
    let (whole, _) = inflate(&[payload], 12, true, 0);
    for k in 1..payload.len() {
        let (split, _) = inflate(&[&payload[..k], &payload[k..]], 12, true, 0);
        assert_eq!(whole, split, "split at {k}");
    }
}

/// fuzz target `frames_deflate`, crash-d537b534f0050709984df403d6f7c651607d55a2 (2026-11-30,
/// after message.rs started pooling inflaters per thread): the same bytes gave different results
/// depending on whether the Reader got a pooled inflater or a fresh one.
///
/// Cause: `spare_inflater(bits)` (message.rs) picks a pooled inflater by window bits only. Only
/// readers with `client_no_context_takeover` return inflaters to the pool, and those inflaters
/// were built with `no_context_takeover = true`, so they reset their window after every message.
/// A later reader on the same thread whose client KEEPS its context (the default of Chrome,
/// Firefox and ws) takes one, and from its second compressed message on the client's
/// back-references into the previous message fail: 1007 "corrupt deflate data". End to end (one
/// I/O thread): a ws client with `clientNoContextTakeover: true` sends one message, then a default
/// ws client's connection is closed with 1007 after its first echo.
#[test]
fn pooled_inflater_does_not_drop_the_context_of_a_context_takeover_connection() {
    use native_ws::codec::{self, OP_TEXT};
    use native_ws::deflate::Deflater;
    use native_ws::extensions::{negotiate, DeflateConfig};
    use native_ws::message::{Msg, Reader};

    fn compressed_frame(client: &mut Deflater, text: &[u8]) -> Vec<u8> {
        let mut z = Vec::new();
        client.compress(text, &mut z);
        let key = [1, 2, 3, 4];
        let mut out = Vec::new();
        codec::write_header(&mut out, true, true, OP_TEXT, z.len(), Some(key));
        let start = out.len();
        out.extend_from_slice(&z);
        codec::apply_mask(&mut out[start..], key, 0);
        out
    }
    fn read_all(reader: &mut Reader, mut bytes: Vec<u8>) -> Result<Vec<Vec<u8>>, u16> {
        let mut got = Vec::new();
        reader
            .read(&mut bytes, &mut |m| {
                if let Msg::Data { payload, .. } = m {
                    got.push(payload.to_vec());
                }
            })
            .map_err(|e| e.code)?;
        Ok(got)
    }

    // 15-bit client windows: the context-takeover connection keeps its own inflater.
    let cfg = DeflateConfig { request_max_window_bits: Some(15), ..DeflateConfig::default() };
    let text = b"hello hello context takeover ".repeat(20);

    // Connection A: its client resets its context; A's inflater goes back to the thread's pool.
    let a_neg = negotiate("permessage-deflate; client_no_context_takeover", &cfg).unwrap();
    assert!(a_neg.client_no_context_takeover);
    let mut a = Reader::new(1 << 20, 100, Some(&a_neg));
    let mut a_client = Deflater::new(6, a_neg.client_window_bits, true);
    assert_eq!(read_all(&mut a, compressed_frame(&mut a_client, &text)), Ok(vec![text.clone()]));

    // Connection B, same thread, same window bits: its client keeps its context.
    let b_neg = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
    assert!(!b_neg.client_no_context_takeover);
    assert_eq!(b_neg.client_window_bits, a_neg.client_window_bits);
    let mut b = Reader::new(1 << 20, 100, Some(&b_neg));
    let mut b_client = Deflater::new(6, b_neg.client_window_bits, false);
    for i in 0..3 {
        let res = read_all(&mut b, compressed_frame(&mut b_client, &text));
        let res = res.map(|msgs| msgs.iter().map(|m| m == &text).collect::<Vec<_>>());
        assert_eq!(res, Ok(vec![true]), "message {i} of the context-takeover connection");
        assert_eq!(read_all(&mut a, compressed_frame(&mut a_client, &text)), Ok(vec![text.clone()]));
    }

    // The default settings: 10-bit client windows, parked between messages. Two such
    // connections on one thread take turns with the same pooled inflater; each resumes its own
    // context (texts that differ, so a swapped window would decode wrong or fail).
    let cfg = DeflateConfig::default();
    let mut peers: Vec<(Reader, Deflater, Vec<u8>)> = (0..2u8)
        .map(|p| {
            let n = negotiate("permessage-deflate; client_max_window_bits", &cfg).unwrap();
            assert_eq!((n.client_window_bits, n.client_no_context_takeover), (10, false));
            let text = format!("peer {p} says {} ", "abcdefghij".repeat(1 + p as usize)).into_bytes().repeat(8);
            (Reader::new(1 << 20, 100, Some(&n)), Deflater::new(6, n.client_window_bits, false), text)
        })
        .collect();
    for i in 0..6 {
        for (p, (reader, client, text)) in peers.iter_mut().enumerate() {
            let msg = [text.as_slice(), format!("#{i}").as_bytes()].concat();
            let got = read_all(reader, compressed_frame(client, &msg));
            assert_eq!(got, Ok(vec![msg]), "message {i} of parked peer {p}");
        }
        assert_eq!(read_all(&mut a, compressed_frame(&mut a_client, &text)), Ok(vec![text.clone()]));
    }
}
