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
    let res = inf.finish(&mut out, cap);
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
