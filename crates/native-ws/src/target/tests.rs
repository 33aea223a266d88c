use super::*;

#[test]
fn accepted_targets_give_their_origin_form() {
    for (target, want) in [
        ("/websocket", "/websocket"),
        ("/a?b=c", "/a?b=c"),
        ("/a%20b?c=%2F", "/a%20b?c=%2F"),
        ("//invalid:99999", "//invalid:99999"), // an origin-form path with an empty first segment
        ("/a|b{c}^", "/a|b{c}^"),
        ("http://host/websocket", "/websocket"),
        ("http://host:3000/sockjs/1/x/websocket?q=1", "/sockjs/1/x/websocket?q=1"),
        ("ws://[::1]:80/x", "/x"),
        ("HTTPS://example.com", "/"),
        ("http://example.com?x=1", "/?x=1"),
        ("http://user:pw@h:65535/p", "/p"),
        ("http://h:/p", "/p"),
        ("http://127.0.0.1/", "/"),
        ("http://ex%41mple.com/", "/"),
    ] {
        assert_eq!(origin_form(target).as_deref(), Some(want), "{target}");
    }
}

#[test]
fn malformed_targets_are_refused() {
    for target in [
        "*",
        "websocket",
        "",
        "://x/y",
        "1http://h/",
        "http://%",
        "http://%/x",
        "http://",
        "http:///x",
        "http://h:99999/",
        "http://h:123456/",
        "http://h:8a/",
        "http://[::1/x",
        "http://[zz]/x",
        "http://[::1]x/",
        "http://a b/",
        "/websocket%zz",
        "/websocket%",
        "/websocket%4",
        "/websocket?%zz",
        "/a#frag",
        "host:80",
    ] {
        assert_eq!(origin_form(target), None, "{target:?} must be refused");
    }
}
