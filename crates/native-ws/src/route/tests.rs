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

#[test]
fn absolute_form_targets_give_their_origin_form() {
    for (target, want) in [
        ("/websocket", "/websocket"),
        ("/a?b=c", "/a?b=c"),
        ("http://host/websocket", "/websocket"),
        ("http://host:3000/sockjs/1/x/websocket?q=1", "/sockjs/1/x/websocket?q=1"),
        ("ws://[::1]:80/x", "/x"),
        ("HTTPS://example.com", "/"),
        ("http://example.com?x=1", "/?x=1"),
        ("*", "*"),
        ("websocket", "websocket"),
        ("://x/y", "://x/y"),
    ] {
        assert_eq!(origin_form(target), want, "{target}");
    }
}
