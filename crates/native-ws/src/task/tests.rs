/// Idle memory per connection is mostly this future: keep it from growing unnoticed.
#[tokio::test]
async fn connection_task_stays_small() {
    use crate::*;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = tokio::net::TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let conn = std::sync::Arc::new(crate::conn::Conn::new(1, 0, std::sync::Arc::new(Behavior::default()), None, Default::default()));
    struct H;
    impl Handler for H {
        fn open(&self, _: &std::sync::Arc<Conn>, _: OpenInfo) {}
        fn message(&self, _: &std::sync::Arc<Conn>, _: &[u8], _: bool) {}
        fn close(&self, _: &std::sync::Arc<Conn>, _: u16, _: &str) {}
    }
    let info = OpenInfo { route: 0, token: 0, url: String::new(), headers: vec![], remote: Some("1.1.1.1:1".parse().unwrap()), proxied: None, protocol: String::new(), extensions: String::new() };
    let fut = super::run(conn.clone(), a.into(), Vec::new(), Vec::new(), std::sync::Arc::new(H), info);
    let size = std::mem::size_of_val(&fut);
    eprintln!("connection task future: {size} bytes; Conn: {} bytes", std::mem::size_of::<Conn>());
    // 1,288 since the socket became a TCP-or-unix enum (+8 bytes for its tag).
    // 1296: +8 for Taken::partial (where whole frames start in the buffer being written, so a
    // backpressure close never cuts a frame).
    // 1320: +24 for the parked inflate window (a connection keeps ≤ 1 KiB of window instead of
    // an inflater's ~10 KiB of state and pages).
    // 1176: the open event is handed over before the future exists, which no longer keeps the
    // OpenInfo (url, headers, addresses; −144 bytes, with the PROXY protocol's client added to it).
    // 1128: the queue being written is one `outbox::Wire` (a cursor over owned and shared
    // frames) instead of a copy of it in a second buffer (−48 bytes).
    // 1080 (1096 in a debug build): the task is built before the future starts (Task::new, for
    // both drivers); the future no longer keeps the arguments it was built from.
    // 1024: the 101 response is written by the task (+4 for what is left of it), and the future
    // is an async block over the task built before it (it no longer keeps the task's parts too).
    assert!(size <= 1040, "connection task future grew to {size} bytes");
    // 264 since the pending pong got its own buffer (the ping-flood fix); 256 with the shared
    // frames (the queue's inserts and cursor, +24; no separate job list or partial count, −8).
    // 272 with the inline driver's wake handle (+8). 280: that handle is a `conn::Driver` trait
    // object (+8 for its vtable pointer), so the connection does not depend on the inline driver.
    assert!(std::mem::size_of::<Conn>() <= 280);
    drop(fut);
}
