use super::*;

#[test]
fn path_matches_table() {
    let table: &[(&str, &str, bool)] = &[
        ("/*", "/", true),
        ("/*", "/anything/at/all", true),
        ("*", "/", true),
        ("*", "/x", true),
        ("/chat/*", "/chat", true),
        ("/chat/*", "/chat/", true),
        ("/chat/*", "/chat/room", true),
        ("/chat/*", "/chat/room/42", true),
        ("/chat/*", "/chatroom", false),
        ("/chat/*", "/cha", false),
        ("/chat/*", "/", false),
        ("/chat/*", "/other/chat", false),
        ("/a/b/*", "/a/b/c", true),
        ("/a/b/*", "/a/bc", false),
        ("/a/b/*", "/a", false),
        ("/ws", "/ws", true),
        ("/ws", "/ws/", true),
        ("/ws", "/ws//", false),
        ("/ws", "/wss", false),
        ("/ws", "/ws/x", false),
        ("/ws", "/", false),
        ("/ws", "/WS", false),
        ("/", "/", true),
        ("/", "//", false),
        ("/", "/x", false),
        ("/ws/", "/ws/", true),
        ("/ws/", "/ws", false),
        ("/a*", "/a*", true),
        ("/a*", "/ab", false),
    ];
    for &(pattern, path, expected) in table {
        assert_eq!(
            path_matches(pattern, path),
            expected,
            "path_matches({pattern:?}, {path:?})"
        );
    }
}

/// pattern, path, and the parameters it matches with (`None`: no match)
type Case<'a> = (&'a str, &'a str, Option<&'a [(&'a str, &'a str)]>);

#[test]
fn parameters_and_uws_rules() {
    // uWS's own results (probed on uws-pack 20.0.8): strict segments, "/x/*" needs the slash.
    let table: &[Case] = &[
        ("uws:/a/:id", "/a/1", Some(&[("id", "1")])),
        ("uws:/a/:id", "/a/1/", None),
        ("uws:/a/:id", "/a/", None),
        ("uws:/a/:id", "/a", None),
        ("uws:/a/:id", "/a/1/2", None),
        ("uws:/a/:id", "/a/%20x", Some(&[("id", "%20x")])),
        ("uws:/b/*", "/b", None),
        ("uws:/b/*", "/b/", Some(&[])),
        ("uws:/b/*", "/b/x/y", Some(&[])),
        ("uws:/b/*", "/bx", None),
        ("uws:/c/:x/d", "/c/9/d", Some(&[("x", "9")])),
        ("uws:/c/:x/d", "/c/9/d/", None),
        ("uws:/e/:y/*", "/e/1", None),
        ("uws:/e/:y/*", "/e/1/", Some(&[("y", "1")])),
        ("uws:/e/:y/*", "/e/1/z/w", Some(&[("y", "1")])),
        ("uws:/f", "/f", Some(&[])),
        ("uws:/f", "/f/", None),
        ("uws:/*", "/", Some(&[])),
        ("uws:/r/:a/:b", "/r/1/2", Some(&[("a", "1"), ("b", "2")])),
        // the main API's tolerant rules, with parameters
        ("/room/:id", "/room/7", Some(&[("id", "7")])),
        ("/room/:id", "/room/7/", Some(&[("id", "7")])),
        ("/room/:id", "/room/", None),
        ("/room/:id/*", "/room/7", Some(&[("id", "7")])),
        ("/chat/*", "/chat", Some(&[])),
        ("/ws", "/ws/", Some(&[])),
        ("/ws", "/x", None),
    ];
    for &(pattern, path, want) in table {
        let got = route_params(pattern, path);
        assert_eq!(got.as_deref(), want, "route_params({pattern:?}, {path:?})");
        assert_eq!(path_matches(pattern, path), want.is_some(), "path_matches({pattern:?}, {path:?})");
    }
}

#[test]
fn uws_priority_static_then_parameter_then_wildcard_whatever_the_order() {
    // What uws-pack 20.0.8 answered for these routes added in this order: /a/*, /a/:p, /a/static, /*.
    let routes = ["uws:/a/*", "uws:/a/:p", "uws:/a/static", "uws:/*"];
    for (path, want) in [("/a/static", 2), ("/a/x", 1), ("/a/x/y", 0), ("/b", 3), ("/a/", 0), ("//invalid:99999", 3)] {
        assert_eq!(select(routes, path), Some(want), "{path}");
    }
    // deeper static beats a shallower wildcard; equal shapes go to the first added
    assert_eq!(select(["uws:/a/*", "uws:/a/b/*"], "/a/b/c"), Some(1));
    assert_eq!(select(["uws:/a/:x", "uws:/a/:y"], "/a/1"), Some(0));
    assert_eq!(select(["uws:/a/:x"], "/b/1"), None);
}

#[test]
fn plain_patterns_go_in_the_order_added() {
    assert_eq!(select(["/*", "/a"], "/a"), Some(0));
    assert_eq!(select(["/a", "/*"], "/a"), Some(0));
    assert_eq!(select(["/b", "/*"], "/a"), Some(1));
    assert_eq!(select(["/b"], "/a"), None);
}
