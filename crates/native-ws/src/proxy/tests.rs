use super::*;
use crate::testutil::Rng;

const SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
const HTTP: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/// A v2 header built by hand: version/command byte, family/protocol byte, then the rest.
fn v2(ver_cmd: u8, fam: u8, rest: &[u8]) -> Vec<u8> {
    let mut h = SIG.to_vec();
    h.extend_from_slice(&[ver_cmd, fam]);
    h.extend_from_slice(&(rest.len() as u16).to_be_bytes());
    h.extend_from_slice(rest);
    h
}

fn v2_ipv4(src: [u8; 4], sport: u16) -> Vec<u8> {
    let mut rest = src.to_vec();
    rest.extend_from_slice(&[127, 0, 0, 1]);
    rest.extend_from_slice(&sport.to_be_bytes());
    rest.extend_from_slice(&9001u16.to_be_bytes());
    v2(0x21, 0x11, &rest)
}

fn v2_ipv6(src: std::net::Ipv6Addr, sport: u16) -> Vec<u8> {
    let mut rest = src.octets().to_vec();
    rest.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    rest.extend_from_slice(&sport.to_be_bytes());
    rest.extend_from_slice(&9001u16.to_be_bytes());
    v2(0x21, 0x21, &rest)
}

fn header(len: usize, source: Option<&str>) -> Parsed {
    Parsed::Header { len, source: source.map(|s| s.parse().unwrap()) }
}

/// Every proper prefix is Incomplete, the whole header (and the header followed by an HTTP
/// request) gives `want`: a header split across reads at any byte boundary is reassembled.
fn check_every_split(bytes: &[u8], want: &Parsed) {
    for cut in 0..bytes.len() {
        assert_eq!(parse(&bytes[..cut]), Parsed::Incomplete, "prefix of {cut} bytes of {bytes:?}");
    }
    assert_eq!(&parse(bytes), want);
    let mut with_request = bytes.to_vec();
    with_request.extend_from_slice(HTTP);
    assert_eq!(&parse(&with_request), want, "followed by the request");
}

#[test]
fn v1_tcp4_tcp6_unknown() {
    let cases: &[(&str, Option<&str>)] = &[
        ("PROXY TCP4 192.0.2.7 127.0.0.1 56324 443\r\n", Some("192.0.2.7:56324")),
        ("PROXY TCP6 2001:db8::1 ::1 4000 80\r\n", Some("[2001:db8::1]:4000")),
        ("PROXY TCP6 ::ffff:192.0.2.7 ::1 1 2\r\n", Some("[::ffff:192.0.2.7]:1")),
        ("PROXY UNKNOWN\r\n", None),
        ("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n", None),
    ];
    for (h, source) in cases {
        check_every_split(h.as_bytes(), &header(h.len(), *source));
    }
}

#[test]
fn v1_longest_header_is_accepted() {
    let h = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(h.len(), 104);
    check_every_split(h.as_bytes(), &header(h.len(), Some("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")));
}

#[test]
fn v2_ipv4_ipv6() {
    let h = v2_ipv4([203, 0, 113, 9], 50000);
    assert_eq!(h.len(), 28);
    check_every_split(&h, &header(28, Some("203.0.113.9:50000")));
    let h = v2_ipv6("2001:db8::42".parse().unwrap(), 443);
    assert_eq!(h.len(), 52);
    check_every_split(&h, &header(52, Some("[2001:db8::42]:443")));
}

#[test]
fn v2_local_unspec_unix_name_no_client() {
    // LOCAL (the proxy's health check), with or without addresses: the peer itself.
    check_every_split(&v2(0x20, 0x00, &[]), &header(16, None));
    let mut local = v2_ipv4([10, 0, 0, 1], 1);
    local[12] = 0x20;
    check_every_split(&local, &header(28, None));
    // PROXY with UNSPEC family, or unix addresses: no IP to report.
    check_every_split(&v2(0x21, 0x00, &[]), &header(16, None));
    check_every_split(&v2(0x21, 0x31, &[0; 216]), &header(232, None));
}

#[test]
fn v2_tlvs_are_skipped() {
    let mut rest = vec![198, 51, 100, 1, 127, 0, 0, 1, 0x12, 0x34, 0x23, 0x29];
    rest.extend_from_slice(&[0x04, 0x00, 0x03, b'a', b'b', b'c']); // PP2_TYPE_NOOP, 3 bytes
    rest.extend_from_slice(&[0x05, 0x00, 0x04, 1, 2, 3, 4]); // PP2_TYPE_UNIQUE_ID
    let h = v2(0x21, 0x11, &rest);
    check_every_split(&h, &header(h.len(), Some("198.51.100.1:4660")));
}

#[test]
fn v2_largest_accepted_and_one_more_refused() {
    let mut rest = vec![0u8; 12];
    rest.extend_from_slice(&[0x04]);
    let tlv = MAX_V2_BYTES - 16 - 12 - 3;
    rest.extend_from_slice(&(tlv as u16).to_be_bytes());
    rest.extend(std::iter::repeat_n(b'x', tlv));
    let h = v2(0x21, 0x11, &rest);
    assert_eq!(h.len(), MAX_V2_BYTES);
    check_every_split(&h, &header(MAX_V2_BYTES, Some("0.0.0.0:0")));
    // One byte more: refused as soon as the length is known (16 bytes), not after waiting.
    let mut long = rest.clone();
    long.push(0);
    let h = v2(0x21, 0x11, &long);
    for cut in 0..16 {
        assert_eq!(parse(&h[..cut]), Parsed::Incomplete);
    }
    for cut in 16..=h.len() {
        assert!(matches!(parse(&h[..cut]), Parsed::Invalid(_)), "cut {cut}");
    }
    // The largest length field.
    let mut huge = SIG.to_vec();
    huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
    assert!(matches!(parse(&huge), Parsed::Invalid(_)));
}

#[test]
fn v1_too_long_is_refused() {
    // No CRLF within 107 bytes.
    let mut h = b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2".to_vec();
    h.extend(std::iter::repeat_n(b' ', MAX_V1_BYTES));
    assert!(matches!(parse(&h), Parsed::Invalid(_)));
    // A CRLF past 107 bytes.
    let mut h = b"PROXY UNKNOWN ".to_vec();
    h.extend(std::iter::repeat_n(b'x', 100));
    h.extend_from_slice(b"\r\n");
    assert!(matches!(parse(&h), Parsed::Invalid(_)));
}

#[test]
fn garbage_and_malformed_are_refused() {
    let bad: Vec<Vec<u8>> = vec![
        HTTP.to_vec(),                                       // no header at all
        b"GET".to_vec(),
        b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n".to_vec(),     // unknown protocol
        b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n".to_vec(),   // bad address
        b"PROXY TCP4 2001:db8::1 ::1 1 2\r\n".to_vec(),     // IPv6 under TCP4
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n".to_vec(), // port out of range
        b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n".to_vec(),    // leading zero
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n".to_vec(),   // extra field
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX".to_vec(),      // CR without LF
        b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n".to_vec(),     // lower case
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 \xff\r\n".to_vec(),  // not ASCII
        b"PROXY UNKNOWN a\nb\r\n".to_vec(),                 // LF inside the line
        b"PROXY UNKNOWN a \n\r\r\n".to_vec(),              // LF then CRs (found by fuzzing)
        b"PROXY UNKNOWN a\r\r\n".to_vec(),                  // CR CR LF
        b"PROXY TCP4 1.2.3.4\r\n".to_vec(),                  // fields missing
        b"PROXY \r\n".to_vec(),
        b"PROXY\r\n".to_vec(),
        v2(0x11, 0x11, &[0; 12]),                            // version 1 in a v2 header
        v2(0x22, 0x11, &[0; 12]),                            // command 2
        v2(0x21, 0x41, &[0; 12]),                            // family 4
        v2(0x21, 0x13, &[0; 12]),                            // protocol 3
        v2(0x21, 0x12, &[0; 12]),                            // UDP over IPv4
        v2(0x21, 0x11, &[0; 11]),                            // too short for IPv4 addresses
        v2(0x21, 0x21, &[0; 12]),                            // too short for IPv6 addresses
    ];
    for b in bad {
        assert!(matches!(parse(&b), Parsed::Invalid(_)), "{:?} gave {:?}", String::from_utf8_lossy(&b), parse(&b));
    }
}

/// Random input never panics, and never waits for more past the caps.
#[test]
fn random_input_is_bounded() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..20_000 {
        let mut b = match i % 3 {
            0 => SIG.to_vec(),
            1 => b"PROXY ".to_vec(),
            _ => Vec::new(),
        };
        let n = rng.below(MAX_V2_BYTES + 64);
        b.extend(rng.bytes(n));
        if let Parsed::Incomplete = parse(&b) {
            assert!(b.len() < MAX_V2_BYTES, "waits for more after {} bytes", b.len());
        }
        if let Parsed::Header { len, .. } = parse(&b) {
            assert!(len <= b.len() && len <= MAX_V2_BYTES);
        }
    }
}

/// The fuzz target `proxy` found it: `ppp` took a 38-byte prefix of this UNKNOWN line as a whole
/// header and the 39 bytes as another. Both are refused now.
#[test]
fn fuzz_unknown_line_with_stray_lf_and_crs() {
    let input: &[u8] = b"PROXY UNKNOWN 2.0..\x11\0\0 TCP4 1.eTCP4 \n\r\r\n\0 2.0.0.0 3 >443\r\n\r\0\0\0\0k\n";
    for cut in 0..=input.len() {
        if let Parsed::Header { len, .. } = parse(&input[..cut]) {
            panic!("a prefix of {cut} bytes gave a {len}-byte header");
        }
    }
}
