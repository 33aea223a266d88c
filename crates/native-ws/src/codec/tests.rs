use super::*;
use crate::testutil::Rng;

// ---------------------------------------------------------------- helpers

fn naive_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= key[(offset + i) % 4];
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert_eq!(s.len() % 2, 0, "odd hex string {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn err(reason_contains: &str, r: Result<Option<FrameHeader>, ProtocolError>) -> ProtocolError {
    match r {
        Err(e) => e,
        other => panic!("expected error ({reason_contains}), got {other:?}"),
    }
}

// ---------------------------------------------------------------- headers

fn test_lengths() -> Vec<usize> {
    let mut v = vec![
        0,
        1,
        2,
        100,
        124,
        125,
        126,
        127,
        128,
        200,
        1000,
        65534,
        65535,
        65536,
        65537,
        1 << 20,
    ];
    if usize::BITS >= 64 {
        v.push((u32::MAX as usize).wrapping_add(5));
        v.push((1usize << 62) + 12345);
        v.push((1usize << 63) - 1);
    }
    v
}

#[test]
fn header_round_trip_all_length_forms_both_roles() {
    let key = [0x12, 0x34, 0x56, 0x78];
    let mut count = 0;
    for len in test_lengths() {
        for opcode in [
            OP_CONTINUATION,
            OP_TEXT,
            OP_BINARY,
            OP_CLOSE,
            OP_PING,
            OP_PONG,
        ] {
            let control = opcode >= 8;
            if control && len > 125 {
                continue;
            }
            for fin in [false, true] {
                if control && !fin {
                    continue;
                }
                for rsv1 in [false, true] {
                    if control && rsv1 {
                        continue;
                    }
                    for role in [Role::Server, Role::Client] {
                        let mask = match role {
                            Role::Server => Some(key),
                            Role::Client => None,
                        };
                        let mut out = vec![];
                        write_header(&mut out, fin, rsv1, opcode, len, mask);
                        assert_eq!(out.len(), header_size(len, mask.is_some()));
                        let expected_base = if len < 126 {
                            2
                        } else if len < 65536 {
                            4
                        } else {
                            10
                        };
                        assert_eq!(
                            out.len(),
                            expected_base + if mask.is_some() { 4 } else { 0 }
                        );
                        // Trailing payload bytes must not disturb parsing.
                        let hlen = out.len();
                        out.extend_from_slice(&[0xAA; 7]);
                        let h = parse_header(&out, role, true).unwrap().unwrap();
                        assert_eq!(
                            h,
                            FrameHeader {
                                fin,
                                rsv1,
                                opcode,
                                mask,
                                payload_len: len as u64,
                                header_len: hlen,
                            }
                        );
                        assert!((2..=14).contains(&h.header_len));
                        // Partial headers: Ok(None) at every split point.
                        for k in 0..hlen {
                            assert_eq!(
                                parse_header(&out[..k], role, true),
                                Ok(None),
                                "len {len} split {k}"
                            );
                        }
                        // Without RSV1 permission the same header is valid iff rsv1 unset.
                        let r = parse_header(&out, role, false);
                        if rsv1 {
                            assert_eq!(err("rsv1", r).code, CLOSE_PROTOCOL_ERROR);
                        } else {
                            assert_eq!(r.unwrap().unwrap(), h);
                        }
                        count += 1;
                    }
                }
            }
        }
    }
    assert!(count > 300);
}

#[test]
fn header_size_values() {
    assert_eq!(header_size(0, false), 2);
    assert_eq!(header_size(125, false), 2);
    assert_eq!(header_size(126, false), 4);
    assert_eq!(header_size(65535, false), 4);
    assert_eq!(header_size(65536, false), 10);
    assert_eq!(header_size(0, true), 6);
    assert_eq!(header_size(125, true), 6);
    assert_eq!(header_size(126, true), 8);
    assert_eq!(header_size(65535, true), 8);
    assert_eq!(header_size(65536, true), 14);
}

#[test]
fn write_header_exact_bytes() {
    let mut out = vec![];
    write_header(&mut out, true, false, OP_TEXT, 5, None);
    assert_eq!(out, [0x81, 0x05]);
    out.clear();
    write_header(&mut out, true, true, OP_BINARY, 256, None);
    assert_eq!(out, [0xC2, 0x7E, 0x01, 0x00]);
    out.clear();
    write_header(
        &mut out,
        false,
        false,
        OP_CONTINUATION,
        65536,
        Some([1, 2, 3, 4]),
    );
    assert_eq!(out, [0x00, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4]);
}

/// Builds a raw header: b0, then a length field exactly as given, then optional key.
fn raw(b0: u8, masked: bool, len_field: &[u8]) -> Vec<u8> {
    let mut v = vec![b0];
    let (first, rest) = len_field.split_first().unwrap();
    v.push(if masked { 0x80 | first } else { *first });
    v.extend_from_slice(rest);
    if masked {
        v.extend_from_slice(&[9, 8, 7, 6]);
    }
    v
}

#[test]
fn header_errors() {
    let s = Role::Server;
    let p = |buf: &[u8], allow: bool| parse_header(buf, s, allow);
    let code = |r: Result<Option<FrameHeader>, ProtocolError>| err("", r).code;

    // RSV2, RSV3 (even when RSV1 is allowed), on data and control frames.
    for b0 in [0xA1, 0x91, 0xB1, 0xE1, 0xA9, 0x99] {
        assert_eq!(code(p(&raw(b0, true, &[0]), true)), 1002, "{b0:#x}");
        assert_eq!(code(p(&raw(b0, true, &[0]), false)), 1002, "{b0:#x}");
    }
    // RSV1 without permission, on every data opcode.
    for op in [OP_CONTINUATION, OP_TEXT, OP_BINARY] {
        assert_eq!(code(p(&raw(0xC0 | op, true, &[0]), false)), 1002);
        assert_eq!(code(p(&raw(0x40 | op, true, &[0]), false)), 1002);
    }
    // RSV1 allowed: reported, including on continuation frames.
    for op in [OP_CONTINUATION, OP_TEXT, OP_BINARY] {
        let h = p(&raw(0xC0 | op, true, &[3]), true).unwrap().unwrap();
        assert!(h.rsv1 && h.fin);
        assert_eq!(h.opcode, op);
        assert_eq!(h.payload_len, 3);
    }
    // RSV1 on a control frame: always an error.
    for op in [OP_CLOSE, OP_PING, OP_PONG] {
        assert_eq!(code(p(&raw(0xC0 | op, true, &[0]), true)), 1002);
        assert_eq!(code(p(&raw(0xC0 | op, true, &[0]), false)), 1002);
    }
    // Reserved opcodes.
    for op in (3..=7).chain(0xB..=0xF) {
        for fin in [0x00, 0x80] {
            assert_eq!(code(p(&raw(fin | op, true, &[0]), true)), 1002, "{op}");
        }
    }
    // Control frame with FIN=0.
    for op in [OP_CLOSE, OP_PING, OP_PONG] {
        assert_eq!(code(p(&raw(op, true, &[0]), true)), 1002);
    }
    // Control frame longer than 125, in all encodings; 125 is fine in all encodings.
    for op in [OP_CLOSE, OP_PING, OP_PONG] {
        let b0 = 0x80 | op;
        assert_eq!(code(p(&raw(b0, true, &[126, 0, 126]), true)), 1002);
        assert_eq!(code(p(&raw(b0, true, &[126, 0xFF, 0xFF]), true)), 1002);
        assert_eq!(
            code(p(&raw(b0, true, &[127, 0, 0, 0, 0, 0, 0, 0, 126]), true)),
            1002
        );
        assert_eq!(
            code(p(&raw(b0, true, &[127, 0, 0, 0, 1, 0, 0, 0, 0]), true)),
            1002
        );
        for field in [&[125][..], &[126, 0, 125], &[127, 0, 0, 0, 0, 0, 0, 0, 125]] {
            let h = p(&raw(b0, true, field), true).unwrap().unwrap();
            assert_eq!(h.payload_len, 125);
            assert_eq!(h.header_len, field.len() + 5);
        }
    }
    // 64-bit length with the most significant bit set.
    let msb = [127, 0x80, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(code(p(&raw(0x82, true, &msb), true)), 1002);
    let all = [127, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    assert_eq!(code(p(&raw(0x82, true, &all), true)), 1002);
    assert_eq!(
        parse_header(&raw(0x82, false, &all), Role::Client, false).map_err(|e| e.code),
        Err(1002)
    );
    let max = [127, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    let h = p(&raw(0x82, true, &max), true).unwrap().unwrap();
    assert_eq!(h.payload_len, (1u64 << 63) - 1);
    assert_eq!(h.header_len, 14);

    // Masking rules per role.
    assert_eq!(
        code(parse_header(&raw(0x81, false, &[0]), Role::Server, true)),
        1002
    );
    assert_eq!(
        code(parse_header(&raw(0x81, true, &[0]), Role::Client, true)),
        1002
    );
    assert_eq!(
        code(parse_header(&raw(0x89, false, &[0]), Role::Server, true)),
        1002
    );
    assert_eq!(
        code(parse_header(&raw(0x8A, true, &[0]), Role::Client, true)),
        1002
    );
}

#[test]
fn header_errors_detected_early() {
    // First-byte problems are reported with only one byte available.
    for b0 in [0xA1u8, 0x91, 0x83, 0x8B, 0x09, 0xC9] {
        assert_eq!(
            parse_header(&[b0], Role::Server, true).map_err(|e| e.code),
            Err(1002)
        );
    }
    assert_eq!(
        parse_header(&[0xC1], Role::Server, false).map_err(|e| e.code),
        Err(1002)
    );
    assert_eq!(parse_header(&[0xC1], Role::Server, true), Ok(None));
    // Masking problems with two bytes, before the extended length / key arrive.
    assert_eq!(
        parse_header(&[0x82, 0x7F], Role::Server, true).map_err(|e| e.code),
        Err(1002)
    );
    assert_eq!(
        parse_header(&[0x82, 0xFE], Role::Client, true).map_err(|e| e.code),
        Err(1002)
    );
    assert_eq!(parse_header(&[], Role::Server, true), Ok(None));
    assert_eq!(parse_header(&[], Role::Client, false), Ok(None));
}

#[test]
fn non_minimal_lengths_accepted() {
    for role in [Role::Server, Role::Client] {
        let masked = role == Role::Server;
        let h = parse_header(&raw(0x82, masked, &[126, 0, 5]), role, false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.payload_len, h.header_len),
            (5, 4 + if masked { 4 } else { 0 })
        );
        let h = parse_header(
            &raw(0x82, masked, &[127, 0, 0, 0, 0, 0, 0, 0, 5]),
            role,
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (h.payload_len, h.header_len),
            (5, 10 + if masked { 4 } else { 0 })
        );
        let h = parse_header(
            &raw(0x82, masked, &[127, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]),
            role,
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.payload_len, 65535);
    }
}

#[test]
fn parsed_key_is_returned() {
    let buf = [0x81, 0x83, 0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3];
    let h = parse_header(&buf, Role::Server, false).unwrap().unwrap();
    assert_eq!(h.mask, Some([0xDE, 0xAD, 0xBE, 0xEF]));
    assert_eq!(h.header_len, 6);
    assert_eq!(h.payload_len, 3);
}

// ---------------------------------------------------------------- masking

#[test]
fn apply_mask_matches_naive() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for len in 0..200 {
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        for offset in 0..8 {
            for key in [
                [0x01, 0x02, 0x03, 0x04],
                [0xFF, 0x00, 0xA5, 0x5A],
                [0, 0, 0, 0],
            ] {
                let mut fast = data.clone();
                let mut slow = data.clone();
                apply_mask(&mut fast, key, offset);
                naive_mask(&mut slow, key, offset);
                assert_eq!(fast, slow, "len {len} offset {offset}");
                // Involution.
                apply_mask(&mut fast, key, offset);
                assert_eq!(fast, data);
            }
        }
    }
    // Large offsets only matter modulo 4.
    let mut a = vec![7u8; 37];
    let mut b = a.clone();
    apply_mask(&mut a, [1, 2, 3, 4], 1_000_003);
    naive_mask(&mut b, [1, 2, 3, 4], 3);
    assert_eq!(a, b);
}

#[test]
fn apply_mask_piecewise_equals_one_shot() {
    let mut rng = Rng(12345);
    let key = [0x37, 0xFA, 0x21, 0x3D];
    for len in [0usize, 1, 3, 4, 5, 15, 16, 17, 31, 33, 64, 100, 150] {
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let mut whole = data.clone();
        apply_mask(&mut whole, key, 0);
        for a in 0..=len {
            for b in a..=len {
                let mut pieces = data.clone();
                apply_mask(&mut pieces[..a], key, 0);
                apply_mask(&mut pieces[a..b], key, a);
                apply_mask(&mut pieces[b..], key, b);
                assert_eq!(pieces, whole, "len {len} split {a}/{b}");
            }
        }
    }
}

// ---------------------------------------------------------------- whole frames

#[test]
fn write_frame_round_trip() {
    let mut rng = Rng(777);
    for len in [0usize, 1, 125, 126, 1000, 65535, 65536, 70000] {
        let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();

        let mut out = vec![1, 2, 3]; // appends, does not clobber
        write_frame(&mut out, true, true, OP_BINARY, &payload);
        assert_eq!(&out[..3], &[1, 2, 3]);
        let h = parse_header(&out[3..], Role::Client, true)
            .unwrap()
            .unwrap();
        assert!(h.fin && h.rsv1 && h.mask.is_none());
        assert_eq!(h.opcode, OP_BINARY);
        assert_eq!(h.payload_len, len as u64);
        assert_eq!(&out[3 + h.header_len..], &payload[..]);

        let key = [rng.next_u64() as u8, 0x5A, rng.next_u64() as u8, 0xC3];
        let mut out = vec![];
        write_masked_frame(&mut out, false, OP_TEXT, &payload, key);
        let h = parse_header(&out, Role::Server, false).unwrap().unwrap();
        assert!(!h.fin && !h.rsv1);
        assert_eq!(h.opcode, OP_TEXT);
        assert_eq!(h.mask, Some(key));
        assert_eq!(h.payload_len, len as u64);
        assert_eq!(out.len(), h.header_len + len);
        let body = &mut out[h.header_len..];
        apply_mask(body, key, 0);
        assert_eq!(body, &payload[..]);
    }
}

// ---------------------------------------------------------------- close frames

fn close_payload(frame: &[u8]) -> &[u8] {
    let h = parse_header(frame, Role::Client, false).unwrap().unwrap();
    assert!(h.fin);
    assert_eq!(h.opcode, OP_CLOSE);
    assert_eq!(frame.len(), h.header_len + h.payload_len as usize);
    &frame[h.header_len..]
}

#[test]
fn write_close_basic() {
    let mut out = vec![];
    write_close(&mut out, CLOSE_NORMAL, "");
    assert_eq!(out, [0x88, 0x02, 0x03, 0xE8]);

    let mut out = vec![];
    write_close(&mut out, CLOSE_TOO_BIG, "message too big");
    assert_eq!(
        parse_close_payload(close_payload(&out)),
        Ok((1009, "message too big"))
    );

    for code in [CLOSE_NO_STATUS, CLOSE_ABNORMAL, 1015] {
        let mut out = vec![];
        write_close(&mut out, code, "never sent");
        assert_eq!(out, [0x88, 0x00]);
        assert_eq!(parse_close_payload(close_payload(&out)), Ok((1005, "")));
    }
}

#[test]
fn write_close_truncates_on_char_boundary() {
    let reasons = [
        "a".repeat(200),
        "a".repeat(123),
        "a".repeat(124),
        "é".repeat(100), // 2-byte chars
        format!("a{}", "é".repeat(100)),
        "€".repeat(60), // 3-byte chars
        format!("ab{}", "€".repeat(60)),
        "😀".repeat(40), // 4-byte chars
        format!("x{}", "😀".repeat(40)),
        format!("xy{}", "😀".repeat(40)),
        format!("xyz{}", "😀".repeat(40)),
    ];
    for reason in &reasons {
        let mut out = vec![];
        write_close(&mut out, CLOSE_POLICY, reason);
        let payload = close_payload(&out);
        assert!(payload.len() <= 125, "{}", payload.len());
        let (code, got) = parse_close_payload(payload).expect("valid UTF-8 after truncation");
        assert_eq!(code, CLOSE_POLICY);
        assert!(reason.starts_with(got));
        // Maximal: the next char would not have fit.
        if got.len() < reason.len() {
            let next = reason[got.len()..].chars().next().unwrap();
            assert!(got.len() + next.len_utf8() > 123);
        }
    }
    let mut out = vec![];
    write_close(&mut out, CLOSE_POLICY, &"€".repeat(60));
    assert_eq!(close_payload(&out).len(), 2 + 123); // 41 × 3 bytes
    let mut out = vec![];
    write_close(&mut out, CLOSE_POLICY, &"😀".repeat(40));
    assert_eq!(close_payload(&out).len(), 2 + 120); // 30 × 4 bytes
}

#[test]
fn close_code_table() {
    for code in 0u16..5100 {
        let expected = (1000..=1003).contains(&code)
            || (1007..=1014).contains(&code)
            || (3000..=4999).contains(&code);
        assert_eq!(is_valid_close_code(code), expected, "{code}");
    }
    for code in [
        0u16,
        999,
        1004,
        1005,
        1006,
        1015,
        1016,
        2999,
        5000,
        u16::MAX,
    ] {
        assert!(!is_valid_close_code(code), "{code}");
    }
    for code in [1000u16, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999] {
        assert!(is_valid_close_code(code), "{code}");
    }
}

#[test]
fn parse_close_payload_cases() {
    assert_eq!(parse_close_payload(&[]), Ok((1005, "")));
    assert_eq!(parse_close_payload(&[0x03]).map_err(|e| e.code), Err(1002));
    assert_eq!(parse_close_payload(&[0x03, 0xE8]), Ok((1000, "")));
    assert_eq!(
        parse_close_payload(&[0x03, 0xE9, b'b', b'y', b'e']),
        Ok((1001, "bye"))
    );
    assert_eq!(parse_close_payload(&[0x0F, 0xA0]), Ok((4000, "")));
    let mut p = vec![0x0B, 0xB8];
    p.extend_from_slice("κόσμε".as_bytes());
    assert_eq!(parse_close_payload(&p), Ok((3000, "κόσμε")));
    for code in [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535,
    ] {
        let b = code.to_be_bytes();
        assert_eq!(
            parse_close_payload(&[b[0], b[1], b'x']).map_err(|e| e.code),
            Err(1002),
            "{code}"
        );
        assert_eq!(
            parse_close_payload(&b).map_err(|e| e.code),
            Err(1002),
            "{code}"
        );
    }
    // Invalid UTF-8 reasons → 1007 (bad byte, surrogate, truncated sequence).
    for bad in [
        &[0xFF][..],
        &[0xED, 0xA0, 0x80],
        &[b'o', b'k', 0xE2, 0x82],
        &[0xC0, 0x80],
    ] {
        let mut p = vec![0x03, 0xE8];
        p.extend_from_slice(bad);
        assert_eq!(
            parse_close_payload(&p).map_err(|e| e.code),
            Err(1007),
            "{bad:x?}"
        );
    }
    // Invalid code wins over invalid reason.
    assert_eq!(
        parse_close_payload(&[0x03, 0xED, 0xFF]).map_err(|e| e.code),
        Err(1002)
    );
}

// ---------------------------------------------------------------- UTF-8

/// Independent reference straight from Unicode Table 3-7 (well-formed byte sequences).
/// Returns the index of the first byte that makes `s` not a prefix of valid UTF-8, if any,
/// and whether `s` ends on a sequence boundary.
fn reference_utf8(s: &[u8]) -> (Option<usize>, bool) {
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        let ranges: &[(u8, u8)] = match b {
            0x00..=0x7F => &[],
            0xC2..=0xDF => &[(0x80, 0xBF)],
            0xE0 => &[(0xA0, 0xBF), (0x80, 0xBF)],
            0xE1..=0xEC | 0xEE..=0xEF => &[(0x80, 0xBF), (0x80, 0xBF)],
            0xED => &[(0x80, 0x9F), (0x80, 0xBF)],
            0xF0 => &[(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
            0xF1..=0xF3 => &[(0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
            0xF4 => &[(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
            _ => return (Some(i), false),
        };
        for (k, &(lo, hi)) in ranges.iter().enumerate() {
            let j = i + 1 + k;
            match s.get(j) {
                None => return (None, false),
                Some(&c) if c < lo || c > hi => return (Some(j), false),
                Some(_) => {}
            }
        }
        i += 1 + ranges.len();
    }
    (None, true)
}

/// Feeds `s` split at `cuts` (sorted, may repeat, within 0..=len) and checks each piece's
/// result: true until the piece holding the first bad byte (or, for a merely truncated
/// input, the final fin piece), which must return false.
fn check_split(s: &[u8], cuts: &[usize]) {
    let whole_valid = std::str::from_utf8(s).is_ok();
    let (first_bad, complete) = reference_utf8(s);
    assert_eq!(
        whole_valid,
        first_bad.is_none() && complete,
        "reference disagrees: {s:x?}"
    );

    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(s.len());
    let npieces = bounds.len() - 1;

    let mut v = Utf8Validator::new();
    let mut overall = true;
    for p in 0..npieces {
        let (a, b) = (bounds[p], bounds[p + 1]);
        let last = p + 1 == npieces;
        let got = v.feed(&s[a..b], last);
        let bad_here = match first_bad {
            Some(i) => i >= a && i < b,
            None => false,
        };
        let expect_false = bad_here || (last && !whole_valid);
        assert_eq!(
            got, !expect_false,
            "input {s:x?} cuts {cuts:?}: piece {p} ({a}..{b}) returned {got}"
        );
        if !got {
            overall = false;
            break;
        }
    }
    assert_eq!(overall, whole_valid, "input {s:x?} cuts {cuts:?}");
}

fn check_all_splits(s: &[u8]) {
    check_split(s, &[]);
    for i in 0..=s.len() {
        check_split(s, &[i]);
        for j in i..=s.len() {
            check_split(s, &[i, j]);
        }
    }
}

/// Autobahn 6.x style byte strings (hex), valid and invalid.
#[rustfmt::skip]
fn autobahn_cases() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        // 6.1-6.3 basic
        "",
        "48656c6c6f2dc2b540c39fc3b6c3a4c3bcc3a0c3a12d5554462d382121",
        "cebae1bdb9cf83cebcb5",
        "cebae1bdb9cf83cebcb5eda080656469746564",
        // 6.4 fail fast
        "cebae1bdb9cf83cebcb5f4908080656469746564",
        "cebae1bdb9cf83cebcb5f490",
        // 6.5-6.7 first possible sequence of each length
        "00", "c280", "e0a080", "f0908080",
        // 6.8 five/six byte forms
        "f888808080", "fc8480808080",
        // 6.9 last possible of each length
        "7f", "dfbf", "efbfbf", "f48fbfbf",
        // 6.10 beyond
        "f7bfbfbf", "fbbfbfbfbf", "fdbfbfbfbfbf",
        // 6.11 other boundary conditions
        "ed9fbf", "ee8080", "efbfbd", "f48fbfbf", "f4908080",
        // 6.12 unexpected continuation bytes
        "80", "bf", "80bf", "80bf80", "80bf80bf", "80bf80bf80", "80bf80bf80bf",
        "80bf80bf80bf80",
        // 6.14 sequences with last continuation byte missing
        "c0", "e080", "f08080", "f8808080", "fc80808080", "df", "efbf", "f7bfbf",
        "fbbfbfbf", "fdbfbfbfbf", "c2", "e0a0", "f090", "f09080", "f48f", "f48fbf",
        // 6.15 concatenation of incomplete sequences
        "c0e080f08080f8808080fc80808080dfefbff7bfbffbbfbfbffdbfbfbfbf",
        // 6.16 impossible bytes
        "fe", "ff", "fefeffff",
        // 6.17 overlong ASCII
        "c0af", "e080af", "f08080af", "f8808080af", "fc80808080af",
        // 6.18 maximum overlong
        "c1bf", "e09fbf", "f08fbfbf", "f887bfbfbf", "fc83bfbfbfbf",
        // 6.19 overlong NUL
        "c080", "e08080", "f0808080", "f880808080", "fc8080808080",
        // 6.20 single UTF-16 surrogates
        "eda080", "edadbf", "edae80", "edafbf", "edb080", "edbe80", "edbfbf",
        // 6.21 paired UTF-16 surrogates
        "eda080edb080", "eda080edbfbf", "edadbfedb080", "edadbfedbfbf", "edae80edb080",
        "edae80edbfbf", "edafbfedb080", "edafbfedbfbf",
        // 6.22 noncharacters (valid)
        "efbfbe", "efbfbf", "f09fbfbe", "f09fbfbf", "f48fbfbe", "f48fbfbf", "efb790",
        "efb7af",
        // 6.23 replacement char
        "efbfbd",
        // straddle fail-fast cases from the brief
        "f4908080", "e080", "f5", "c0", "c1", "ed a0", "f490",
    ]
    .iter()
    .map(|h| hex(h))
    .collect();
    // 6.13 lonely start characters, each followed by a space.
    for start in [0xC0u8, 0xE0, 0xF0, 0xF8, 0xFC] {
        let end = match start {
            0xC0 => 0xDF,
            0xE0 => 0xEF,
            0xF0 => 0xF7,
            0xF8 => 0xFB,
            _ => 0xFD,
        };
        let mut s = vec![];
        for b in start..=end {
            s.push(b);
            s.push(0x20);
        }
        v.push(s);
    }
    // 6.12.8: all continuation bytes.
    v.push((0x80u8..=0xBF).collect());
    v
}

#[test]
fn utf8_autobahn_cases_all_splits() {
    let cases = autobahn_cases();
    let mut n_valid = 0;
    for case in &cases {
        if std::str::from_utf8(case).is_ok() {
            n_valid += 1;
        }
        check_all_splits(case);
        // Same bytes embedded between valid text.
        let mut wrapped = "aé€".as_bytes().to_vec();
        wrapped.extend_from_slice(case);
        wrapped.extend_from_slice("😀z".as_bytes());
        check_all_splits(&wrapped);
    }
    assert!(
        n_valid >= 20 && n_valid < cases.len() - 50,
        "{n_valid}/{}",
        cases.len()
    );
}

#[test]
fn utf8_brief_straddle_cases() {
    let mut v = Utf8Validator::new();
    assert!(v.feed(&[0xF4], false));
    assert!(!v.feed(&[0x90, 0x80, 0x80], false));

    let mut v = Utf8Validator::new();
    assert!(v.feed(&[0xE0], false));
    assert!(!v.feed(&[0x80], false));

    let mut v = Utf8Validator::new();
    assert!(v.feed(&[0xED], false));
    assert!(!v.feed(&[0xA0], false));

    let mut v = Utf8Validator::new();
    assert!(!v.feed(&[b'a', 0xF5], false));

    let mut v = Utf8Validator::new();
    assert!(!v.feed(&[0xC0], false));

    let mut v = Utf8Validator::new();
    assert!(!v.feed(&[0xF4, 0x90], false));

    // A 4-byte char dribbled one byte per piece, then finished.
    let mut v = Utf8Validator::new();
    for b in "😀".bytes() {
        assert!(v.feed(&[b], false));
    }
    assert!(v.feed(&[], true));

    // Truncated at fin.
    let mut v = Utf8Validator::new();
    assert!(v.feed(&[0xF0, 0x9F], false));
    assert!(v.feed(&[0x98], false));
    assert!(!v.feed(&[], true));
}

#[test]
fn utf8_state_and_reuse() {
    // Sticky failure within a message.
    let mut v = Utf8Validator::new();
    assert!(!v.feed(&[0xFF], false));
    assert!(!v.feed(b"fine", false));
    assert!(!v.feed(b"fine", true));
    // fin starts a fresh message.
    assert!(v.feed(b"next message", true));
    // reset drops carried bytes and failure.
    assert!(v.feed(&[0xE2, 0x82], false));
    v.reset();
    assert!(!v.feed(&[0xAC], false)); // a lone continuation byte, no longer completing anything
    v.reset();
    assert!(v.feed(b"ok", true));
    // Successful fin clears carried state for the next message.
    let mut v = Utf8Validator::new();
    assert!(v.feed("€".as_bytes(), true));
    assert!(v.feed(&[0xE2], false));
    assert!(!v.feed(&[], true));
    assert!(v.feed(&[], true));
    // Clone carries the pending bytes.
    let mut v = Utf8Validator::new();
    assert!(v.feed(&[0xE2, 0x82], false));
    let mut w = v.clone();
    assert!(w.feed(&[0xAC], true));
    assert!(!v.feed(&[0x20], true));
}

#[test]
fn utf8_exhaustive_short_strings() {
    for a in 0..=255u8 {
        check_all_splits(&[a]);
        for b in 0..=255u8 {
            check_all_splits(&[a, b]);
        }
    }
    // All 3-byte strings whose first byte is a multi-byte lead, cut into 1, 2 and 3 pieces
    // (including empty pieces is covered elsewhere).
    for a in 0xC0..=0xFFu8 {
        for b in 0..=255u8 {
            for c in [
                0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF0,
                0xF4, 0xF5, 0xFF,
            ] {
                let s = [a, b, c];
                check_split(&s, &[]);
                check_split(&s, &[1]);
                check_split(&s, &[2]);
                check_split(&s, &[1, 2]);
            }
        }
    }
}

#[test]
fn utf8_random_strings() {
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    // Bytes biased toward the interesting regions.
    const POOL: &[u8] = &[
        0x00, 0x20, 0x41, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F, 0xA0, 0xAF, 0xBF, 0xC0, 0xC1, 0xC2,
        0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFE, 0xFF,
    ];
    let valid_chars = [
        'a',
        'é',
        '€',
        '😀',
        '\u{10FFFF}',
        '\u{FFFD}',
        '\u{D7FF}',
        '\u{E000}',
    ];
    for _ in 0..40_000 {
        let len = 1 + rng.below(14);
        let mut s = Vec::with_capacity(len * 4);
        for _ in 0..len {
            if rng.below(3) == 0 {
                s.push(POOL[rng.below(POOL.len())]);
            } else {
                let ch = valid_chars[rng.below(valid_chars.len())];
                let mut buf = [0u8; 4];
                s.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
        }
        // Drop a random tail byte sometimes to create truncations.
        if rng.below(4) == 0 {
            s.pop();
        }
        let mut cuts: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(s.len() + 1)).collect();
        cuts.sort_unstable();
        check_split(&s, &cuts);
    }
    // Long valid text in random pieces (exercises the bulk path).
    let text = "Hello κόσμε – ⚡ 😀 €€€ \u{10FFFF} ".repeat(50);
    let bytes = text.as_bytes();
    for _ in 0..500 {
        let mut cuts: Vec<usize> = (0..1 + rng.below(8))
            .map(|_| rng.below(bytes.len() + 1))
            .collect();
        cuts.sort_unstable();
        check_split(bytes, &cuts);
        // Corrupt one byte and check again.
        let mut bad = bytes.to_vec();
        let at = rng.below(bad.len());
        bad[at] = POOL[rng.below(POOL.len())];
        check_split(&bad, &cuts);
    }
}

#[test]
fn frame_boundary_finds_the_end_of_the_frame_in_flight() {
    let mut buf = Vec::new();
    write_frame(&mut buf, true, false, OP_TEXT, b"hello"); // 7 bytes
    write_frame(&mut buf, true, false, OP_BINARY, &[0u8; 300]); // 4 + 300
    write_frame(&mut buf, true, false, OP_BINARY, &vec![1u8; 70_000]); // 10 + 70000
    let ends = [7, 311, 70_321];
    assert_eq!(frame_boundary(&buf, 0, 0), 0);
    assert_eq!(frame_boundary(&buf, 0, 1), 7);
    assert_eq!(frame_boundary(&buf, 0, 7), 7);
    assert_eq!(frame_boundary(&buf, 0, 8), ends[1]);
    assert_eq!(frame_boundary(&buf, 0, 312), ends[2]);
    assert_eq!(frame_boundary(&buf, 0, ends[2]), ends[2]);
    // The walk may start after the rest of a frame begun elsewhere.
    assert_eq!(frame_boundary(&buf[3..], 4, 2), 4);
    assert_eq!(frame_boundary(&buf[3..], 4, 5), ends[1] - 3);
}
