//! watch: one of several load processes of a run spread over processes (scripts/many-connections.js):
//! hold N connections subscribed to `fanout` and report when each broadcast document (`fseq` k,
//! k < --writes) has reached all of them, as `GOT k <first> <last>`: the first and the last receipt
//! in wall-clock microseconds since the Unix epoch, comparable across the processes of one box
//! (the broadcast is started by the server, not by this process). Holds until stdin closes (or
//! --hold-seconds), then prints one JSON line and exits, which closes every connection at once.

use crate::client::{Conn, Target};
use crate::util::{pct_us, stdin_closed, Json, Opts};
use crate::{dur, first_errors, fseq_frames, open_many};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::task::{spawn_local, JoinHandle};

struct Seen {
    n: u32,
    count: Vec<u32>,
    first: Vec<u64>,
    last: Vec<u64>,
}

fn epoch_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

async fn watcher(c: Conn, seen: Rc<RefCell<Seen>>) -> io::Result<()> {
    fseq_frames(c, epoch_us, |k, now| {
        let mut s = seen.borrow_mut();
        if k < s.count.len() {
            if s.count[k] == 0 {
                s.first[k] = now;
            }
            s.count[k] += 1;
            s.last[k] = now;
            if s.count[k] == s.n {
                println!("GOT {k} {} {}", s.first[k], s.last[k]);
            }
        }
    })
    .await
}

pub(crate) async fn watch(o: &Opts, t: Rc<Target>, nofile: u64) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(5000);
    let sub = br#"{"msg":"sub","id":"s1","name":"fanout","params":[]}"#.to_vec();
    let t0 = Instant::now();
    let (conns, mut times, errors) = open_many(&t, n, o.concurrency, Rc::new(vec![sub]), b"ready", dur(o.timeout), 1000).await;
    let connect_s = t0.elapsed().as_secs_f64();
    let connected = conns.len();
    println!("HELD {connected} {connect_s:.3}");
    let seen = Rc::new(RefCell::new(Seen {
        n: connected as u32,
        count: vec![0; o.writes],
        first: vec![0; o.writes],
        last: vec![0; o.writes],
    }));
    let watchers: Vec<JoinHandle<io::Result<()>>> = conns.into_iter().map(|c| spawn_local(watcher(c, seen.clone()))).collect();
    let _ = tokio::time::timeout(dur(o.hold_seconds), stdin_closed()).await;
    let dropped = watchers.iter().filter(|h| h.is_finished()).count();
    let complete = seen.borrow().count.iter().filter(|&&c| c == connected as u32).count();
    times.sort_unstable();
    let ok = errors.is_empty() && connected == n && dropped == 0;
    let line = Json::new("watch")
        .bool("ok", ok)
        .bool("deflate", o.deflate)
        .int("clients", n as u64)
        .int("connected", connected as u64)
        .int("dropped_during_hold", dropped as u64)
        .int("broadcasts_complete", complete as u64)
        .num("connect_s", connect_s)
        .num("connect_p99_ms", pct_us(&times, 99.0) / 1e3)
        .int("nofile", nofile)
        .int("errors", errors.len() as u64)
        .str("error", &first_errors(&errors))
        .finish();
    Ok((ok, line))
}
