//! The benchmark's limit row: a DDP responder written against the core's `Handler` trait, with
//! no JS at all. It answers connect, method (echo / publish), ping and sub like the shared DDP
//! session module does, so the load generator cannot tell it apart.
//!
//! Usage: rust-echo [--port P] [--threads N] [--compress]  → prints `READY <port>`.

use native_ws::{codec, Behavior, Conn, DeflateConfig, Handler, OpenInfo, Server};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Ddp {
    subscribers: Mutex<HashMap<u32, Arc<Conn>>>,
    next_doc: AtomicU64,
}

thread_local! {
    /// Sockets with replies queued during the current read; flushed once in `Handler::flush`.
    static DIRTY: std::cell::RefCell<Vec<Arc<Conn>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn send(conn: &Arc<Conn>, text: &str) {
    let (_, newly_dirty) = conn.send(codec::OP_TEXT, text.len(), true, |out| out.extend_from_slice(text.as_bytes()));
    if newly_dirty {
        DIRTY.with(|d| d.borrow_mut().push(conn.clone()));
    }
}

impl Ddp {
    fn method(&self, name: &str, params: &Value) -> Value {
        match name {
            "echo" => params.get(0).cloned().unwrap_or(Value::Null),
            "publish" => {
                let id = self.next_doc.fetch_add(1, Relaxed);
                let doc = json!({"msg": "added", "collection": "fanout", "id": id.to_string(),
                    "fields": params.get(0).cloned().unwrap_or(Value::Null)})
                .to_string();
                let subs: Vec<_> = self.subscribers.lock().unwrap().values().cloned().collect();
                for s in &subs {
                    send(s, &doc);
                }
                json!(subs.len())
            }
            _ => Value::Null,
        }
    }
}

impl Handler for Ddp {
    fn open(&self, _conn: &Arc<Conn>, _info: OpenInfo) {}

    fn message(&self, conn: &Arc<Conn>, data: &[u8], binary: bool) {
        if binary {
            return;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(data) else {
            send(conn, r#"{"msg":"error","reason":"Parse error"}"#);
            return;
        };
        match msg.get("msg").and_then(Value::as_str) {
            Some("connect") => send(conn, &json!({"msg": "connected", "session": conn.id.to_string()}).to_string()),
            Some("method") => {
                let id = msg.get("id").cloned().unwrap_or(Value::Null);
                let name = msg.get("method").and_then(Value::as_str).unwrap_or("");
                let result = self.method(name, msg.get("params").unwrap_or(&Value::Null));
                send(conn, &json!({"msg": "result", "id": id, "result": result}).to_string());
                send(conn, &json!({"msg": "updated", "methods": [id]}).to_string());
            }
            Some("ping") => match msg.get("id") {
                Some(id) => send(conn, &json!({"msg": "pong", "id": id}).to_string()),
                None => send(conn, r#"{"msg":"pong"}"#),
            },
            Some("sub") => {
                self.subscribers.lock().unwrap().insert(conn.id, conn.clone());
                let id = msg.get("id").cloned().unwrap_or(Value::Null);
                send(conn, &json!({"msg": "ready", "subs": [id]}).to_string());
            }
            _ => send(conn, r#"{"msg":"error","reason":"Bad request"}"#),
        }
    }

    /// End of one read: every socket that got replies is written once (one syscall each).
    fn flush(&self) {
        DIRTY.with(|d| {
            for conn in d.borrow_mut().drain(..) {
                conn.flush();
            }
        });
    }

    fn close(&self, conn: &Arc<Conn>, _code: u16, _reason: &str) {
        self.subscribers.lock().unwrap().remove(&conn.id);
    }
}

fn main() {
    let mut port = 0u16;
    let mut threads = 1usize;
    let mut compress = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|v| v.parse().ok()).expect("--port N"),
            "--threads" => threads = args.next().and_then(|v| v.parse().ok()).expect("--threads N"),
            "--compress" => compress = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let server = Server::new(threads, Arc::new(Ddp::default())).expect("runtime");
    let behavior = Behavior {
        idle_timeout_ms: 0,
        compression: compress.then(DeflateConfig::default),
        ..Behavior::default()
    };
    server.add_route("/*", behavior);
    let addr = server.listen("127.0.0.1", port, false).expect("listen");
    println!("READY {}", addr.port());
    // Serve until killed (the runner sends SIGTERM).
    loop {
        std::thread::park();
    }
}
