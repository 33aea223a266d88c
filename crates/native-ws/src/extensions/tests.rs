use super::*;
use crate::testutil::Rng;

// ---- helpers ---------------------------------------------------------

/// faye's plain settings: context takeover both ways, 15 bits, nothing asked of the client.
fn cfg() -> DeflateConfig {
    DeflateConfig {
        no_context_takeover: false,
        max_window_bits: 15,
        request_max_window_bits: None,
        ..DeflateConfig::default()
    }
}

fn neg(offers: &str, cfg: &DeflateConfig) -> Option<(String, u8, u8, bool, bool)> {
    negotiate(offers, cfg).map(|n| {
        (
            n.response,
            n.server_window_bits,
            n.client_window_bits,
            n.server_no_context_takeover,
            n.client_no_context_takeover,
        )
    })
}

fn resp(offers: &str, cfg: &DeflateConfig) -> Option<String> {
    negotiate(offers, cfg).map(|n| n.response)
}

// ---- negotiation -----------------------------------------------------

#[test]
fn default_config_is_meteors_plus_a_client_window() {
    let d = DeflateConfig::default();
    assert_eq!(
        d,
        DeflateConfig {
            threshold: 1024,
            level: 1,
            mem_level: 1,
            strategy: 0,
            no_context_takeover: true,
            max_window_bits: 8,
            request_no_context_takeover: false,
            request_max_window_bits: Some(DEFAULT_CLIENT_WINDOW_BITS),
        }
    );
}

#[test]
fn browsers_and_libraries_with_meteor_defaults() {
    let d = DeflateConfig::default();
    // faye's response plus a 10-bit client window (parked between messages); our deflater uses
    // 15 bits (the client did not constrain it). Chrome, faye permessage-deflate2 and ws
    // (default) offer the same.
    assert_eq!(
        neg("permessage-deflate; client_max_window_bits", &d),
        Some((
            "permessage-deflate; server_no_context_takeover; client_max_window_bits=10".to_string(),
            15,
            10,
            true,
            false,
        ))
    );
    // Firefox's window cannot be bounded: it is bounded to one message instead.
    assert_eq!(
        neg("permessage-deflate", &d),
        Some((
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover".to_string(),
            15,
            15,
            true,
            true,
        ))
    );
    // Meteor's exact answers: requestMaxWindowBits 15.
    let meteor = DeflateConfig { request_max_window_bits: Some(15), ..d };
    assert_eq!(
        resp("permessage-deflate; client_max_window_bits", &meteor).unwrap(),
        "permessage-deflate; server_no_context_takeover; client_max_window_bits=15"
    );
    assert_eq!(resp("permessage-deflate", &meteor).unwrap(), "permessage-deflate; server_no_context_takeover");
    // A client resetting its context is not asked for a window (it needs no bound).
    assert_eq!(
        resp("permessage-deflate; client_no_context_takeover; client_max_window_bits", &DeflateConfig::default()).unwrap(),
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
    );
}

#[test]
fn browsers_with_plain_config() {
    let c = cfg();
    let expected = Some(("permessage-deflate".to_string(), 15, 15, false, false));
    assert_eq!(
        neg("permessage-deflate; client_max_window_bits", &c),
        expected
    );
    assert_eq!(neg("permessage-deflate", &c), expected);
    // Chrome with our request for a client window.
    let c10 = DeflateConfig {
        request_max_window_bits: Some(10),
        ..cfg()
    };
    assert_eq!(
        neg("permessage-deflate; client_max_window_bits", &c10),
        Some((
            "permessage-deflate; client_max_window_bits=10".to_string(),
            15,
            10,
            false,
            false
        ))
    );
    // Firefox did not offer client_max_window_bits: we may not ask for a window, so we ask for
    // a per-message context (as uWS does for a dedicated decompressor).
    assert_eq!(
        neg("permessage-deflate", &c10),
        Some(("permessage-deflate; client_no_context_takeover".to_string(), 15, 15, false, true))
    );
    // 15 bits is no bound: nothing asked.
    let c15 = DeflateConfig { request_max_window_bits: Some(15), ..cfg() };
    assert_eq!(neg("permessage-deflate", &c15), Some(("permessage-deflate".to_string(), 15, 15, false, false)));
}

#[test]
fn server_max_window_bits_offered() {
    for offered in 8u8..=15 {
        let offer = format!("permessage-deflate; server_max_window_bits={offered}");
        // cfg max 8: answer 8, deflate with 9.
        let c8 = DeflateConfig {
            max_window_bits: 8,
            ..cfg()
        };
        assert_eq!(
            neg(&offer, &c8),
            Some((
                "permessage-deflate; server_max_window_bits=8".to_string(),
                9,
                15,
                false,
                false
            )),
            "{offer}"
        );
        // cfg max 15: answer the offered value.
        assert_eq!(
            neg(&offer, &cfg()),
            Some((
                format!("permessage-deflate; server_max_window_bits={offered}"),
                offered.max(9),
                15,
                false,
                false
            )),
            "{offer}"
        );
        // cfg max 11: min of both.
        let c11 = DeflateConfig {
            max_window_bits: 11,
            ..cfg()
        };
        let n = negotiate(&offer, &c11).unwrap();
        let answered = offered.min(11);
        assert_eq!(
            n.response,
            format!("permessage-deflate; server_max_window_bits={answered}")
        );
        assert_eq!(n.server_window_bits, answered.max(9));
    }
    // Not offered: smaller window used silently.
    let c12 = DeflateConfig {
        max_window_bits: 12,
        ..cfg()
    };
    assert_eq!(
        neg("permessage-deflate", &c12),
        Some(("permessage-deflate".to_string(), 12, 15, false, false))
    );
}

#[test]
fn client_max_window_bits_offered() {
    let c10 = DeflateConfig {
        request_max_window_bits: Some(10),
        ..cfg()
    };
    let c8 = DeflateConfig {
        request_max_window_bits: Some(8),
        ..cfg()
    };
    for offered in 8u8..=15 {
        let offer = format!("permessage-deflate; client_max_window_bits={offered}");
        let answered = offered.min(10);
        assert_eq!(
            neg(&offer, &c10),
            Some((
                format!("permessage-deflate; client_max_window_bits={answered}"),
                15,
                answered.max(9),
                false,
                false
            )),
            "{offer}"
        );
        assert_eq!(
            neg(&offer, &cfg()),
            Some(("permessage-deflate".to_string(), 15, 15, false, false)),
            "{offer}"
        );
        assert_eq!(
            neg(&offer, &c8),
            Some((
                "permessage-deflate; client_max_window_bits=8".to_string(),
                15,
                9,
                false,
                false
            )),
            "{offer}"
        );
    }
}

#[test]
fn no_context_takeover_flags() {
    let c = cfg();
    assert_eq!(
        neg(
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            &c
        ),
        Some((
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                .to_string(),
            15,
            15,
            true,
            true
        ))
    );
    assert_eq!(
        resp("permessage-deflate; client_no_context_takeover", &c).unwrap(),
        "permessage-deflate; client_no_context_takeover"
    );
    // Unilaterally added by config.
    let both = DeflateConfig {
        no_context_takeover: true,
        request_no_context_takeover: true,
        ..cfg()
    };
    assert_eq!(
        neg("permessage-deflate", &both),
        Some((
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                .to_string(),
            15,
            15,
            true,
            true
        ))
    );
    let client_only = DeflateConfig {
        request_no_context_takeover: true,
        ..cfg()
    };
    assert_eq!(
        resp("permessage-deflate; client_max_window_bits", &client_only).unwrap(),
        "permessage-deflate; client_no_context_takeover"
    );
}

#[test]
fn everything_at_once() {
    let c = DeflateConfig {
        max_window_bits: 10,
        request_max_window_bits: Some(12),
        no_context_takeover: true,
        request_no_context_takeover: true,
        ..cfg()
    };
    assert_eq!(
        neg(
            "permessage-deflate; client_max_window_bits=11; server_max_window_bits=14",
            &c
        ),
        Some((
            // client_no_context_takeover: the client's window needs no bound
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
             server_max_window_bits=10"
                .to_string(),
            10,
            15,
            true,
            true
        ))
    );
}

#[test]
fn bad_first_offer_good_second() {
    let c = cfg();
    let bad = [
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
        "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=abc",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; server_max_window_bits=",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=\"abc\"",
        "permessage-deflate; client_max_window_bits=-9",
        "permessage-deflate; client_max_window_bits=9.0",
        "permessage-deflate; foo",
        "permessage-deflate; foo=1",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=true",
        "permessage-deflate; client_no_context_takeover=\"\"",
        "permessage-deflate;",
        "permessage-deflate; ; server_no_context_takeover",
        "permessage-deflate; server max_window_bits=10",
        "permessage-deflate; server_max_window_bits=1 0",
    ];
    for b in bad {
        assert_eq!(resp(b, &c), None, "{b}");
        let two = format!("{b}, permessage-deflate; client_max_window_bits");
        assert_eq!(
            neg(&two, &c),
            Some(("permessage-deflate".to_string(), 15, 15, false, false)),
            "{two}"
        );
        let two = format!("{b}, permessage-deflate; server_no_context_takeover");
        assert_eq!(
            resp(&two, &c).as_deref(),
            Some("permessage-deflate; server_no_context_takeover"),
            "{two}"
        );
    }
}

#[test]
fn first_acceptable_offer_wins() {
    let c = cfg();
    assert_eq!(
        resp(
            "permessage-deflate; server_max_window_bits=10, permessage-deflate",
            &c
        )
        .unwrap(),
        "permessage-deflate; server_max_window_bits=10"
    );
    assert_eq!(
        resp(
            "permessage-deflate, permessage-deflate; server_max_window_bits=10",
            &c
        )
        .unwrap(),
        "permessage-deflate"
    );
}

#[test]
fn other_extensions_are_skipped() {
    let c = cfg();
    assert_eq!(
        resp("x-webkit-deflate-frame, permessage-deflate", &c).unwrap(),
        "permessage-deflate"
    );
    assert_eq!(
        resp(
            "x-webkit-deflate-frame; no_context_takeover, foo; bar=\"a, b; c\", \
             permessage-deflate; server_no_context_takeover",
            &c
        )
        .unwrap(),
        "permessage-deflate; server_no_context_takeover"
    );
    assert_eq!(resp("x-webkit-deflate-frame", &c), None);
    assert_eq!(resp("deflate-frame, perMessage-deflate2", &c), None);
    // Unknown-extension syntax errors do not hide a later good offer.
    assert_eq!(
        resp("foo bar, permessage-deflate", &c).unwrap(),
        "permessage-deflate"
    );
}

#[test]
fn quoted_values() {
    let c = DeflateConfig {
        request_max_window_bits: Some(15),
        ..cfg()
    };
    assert_eq!(
        neg(
            "permessage-deflate; server_max_window_bits=\"10\"; client_max_window_bits=\"12\"",
            &c
        ),
        Some((
            "permessage-deflate; server_max_window_bits=10; client_max_window_bits=12".to_string(),
            10,
            12,
            false,
            false
        ))
    );
    assert_eq!(
        resp("permessage-deflate; server_max_window_bits=\"1\\1\"", &c).unwrap(),
        "permessage-deflate; server_max_window_bits=11"
    );
    assert_eq!(
        resp("permessage-deflate; server_max_window_bits=\"10\"x", &c),
        None
    );
    assert_eq!(
        resp("permessage-deflate; server_max_window_bits=\"\"", &c),
        None
    );
    assert_eq!(
        resp("permessage-deflate; server_max_window_bits=\"", &c),
        None
    );
}

#[test]
fn whitespace_variations() {
    let c = cfg();
    let expected = "permessage-deflate; server_no_context_takeover; server_max_window_bits=10";
    for offer in [
        "permessage-deflate;server_no_context_takeover;server_max_window_bits=10",
        "  permessage-deflate ;  server_no_context_takeover ; server_max_window_bits = 10  ",
        "\tpermessage-deflate\t;\tserver_no_context_takeover\t;\tserver_max_window_bits=10\t",
        " , ,permessage-deflate; server_no_context_takeover; server_max_window_bits=\"10\" ,",
        "PERMESSAGE-DEFLATE; Server_No_Context_Takeover; SERVER_MAX_WINDOW_BITS=10",
    ] {
        assert_eq!(resp(offer, &c).as_deref(), Some(expected), "{offer:?}");
    }
}

#[test]
fn garbage_and_empty() {
    let c = cfg();
    for g in [
        "",
        " ",
        ",",
        ", ,",
        ";",
        "permessage",
        "permessage-deflate=1",
        "\"permessage-deflate\"",
        "permessage-deflate\"",
        "permessage-deflate; \"",
        "=; ;=",
        "\u{fffd}\u{0}\u{7f}",
        "permessage-deflate; server_max_window_bits=\u{0661}\u{0660}",
        "permessage-deflate; server_max_window_bits=99999999999999999999999",
        "permessage-deflate; client_max_window_bits=1\u{fffd}",
        "\"permessage-deflate, permessage-deflate\"",
    ] {
        assert_eq!(negotiate(g, &c), None, "{g:?}");
    }
    // Random strings over a nasty alphabet must never panic.
    let alphabet = "permssage-deflt_xwindowbits0123456789=;,\" \\\t\u{e9}";
    let chars: Vec<char> = alphabet.chars().collect();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..5000 {
        let n = rng.below(60);
        let s: String = (0..n).map(|_| chars[rng.below(chars.len())]).collect();
        let _ = negotiate(&s, &c);
        let _ = negotiate(&format!("permessage-deflate; {s}"), &c);
    }
}

#[test]
fn out_of_range_config_is_clamped() {
    let c = DeflateConfig {
        max_window_bits: 200,
        request_max_window_bits: Some(3),
        level: 99,
        ..cfg()
    };
    assert_eq!(
        neg(
            "permessage-deflate; server_max_window_bits=12; client_max_window_bits",
            &c
        ),
        Some((
            "permessage-deflate; server_max_window_bits=12; client_max_window_bits=8".to_string(),
            12,
            9,
            false,
            false
        ))
    );
}

#[test]
fn meteor_defaults_window_is_ours_unless_the_client_constrains_it() {
    let d = DeflateConfig::default();
    // Chrome and Firefox: faye's server side; our deflater uses 15 bits.
    for offer in ["permessage-deflate; client_max_window_bits", "permessage-deflate"] {
        let n = negotiate(offer, &d).unwrap();
        assert!(n.response.starts_with("permessage-deflate; server_no_context_takeover"), "{offer}");
        assert!(!n.response.contains("server_max_window_bits"), "{offer}");
        assert_eq!(n.server_window_bits, 15, "{offer}");
    }
    // A client that asks for a window gets Meteor's 8 (served by 9 bits).
    let n = negotiate("permessage-deflate; server_max_window_bits=12; client_max_window_bits", &d).unwrap();
    assert_eq!(
        n.response,
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=8; client_max_window_bits=10"
    );
    assert_eq!(n.server_window_bits, 9);
    // With context takeover the window stays the configured one (it lives per connection).
    let takeover = DeflateConfig {
        no_context_takeover: false,
        ..DeflateConfig::default()
    };
    assert_eq!(negotiate("permessage-deflate", &takeover).unwrap().server_window_bits, 9);
}
