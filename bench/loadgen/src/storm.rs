//! storm: a reconnect storm against a server that is serving existing clients. N existing DDP
//! clients call `echo` steadily (one call at a time each, `--pause-ms` between calls); after
//! `--calm-seconds`, M new clients (`--new`) connect at once, from `--sources` loopback
//! addresses. A refused upgrade (503) is retried after the server's `Retry-After` times a random
//! 0.5–1.5 (as Meteor's client backs off), any other failure after 1 s likewise, until `--timeout`.
//! Reports the existing clients' call latency in the calm phase and during the storm (calls
//! started between the storm's start and the last new client's `connected`), the time until
//! every new client is `connected`, and the refused / retried / failed counts.

use crate::client::{Conn, Rng, Target, RETRY_AFTER};
use crate::ddp::{self, kind, num_after, Call, ID_KEY};
use crate::util::{mark, Json, Opts};
use crate::{first_errors, open_many, READ_BUF};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::spawn_local;

#[derive(Default)]
struct Tally {
    /// (call start since t0, latency), in ns
    calls: Vec<(u64, u64)>,
    /// seconds after the storm's start at which each new client was `connected`
    connected: Vec<f64>,
    refused: u64,
    retried: u64,
    failed: u64,
    existing_failed: u64,
    errors: Vec<String>,
}

fn pct_ms(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    sorted_ns[rank.clamp(1, sorted_ns.len()) - 1] as f64 / 1e6
}

pub async fn storm(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(50);
    let m = o.new_clients;
    let timeout = Duration::from_secs_f64(o.timeout);
    let (conns, _, errors) = open_many(&t, n, 64, Rc::new(Vec::new()), b"connected", timeout, 1).await;
    if conns.len() < n {
        return Err(format!("existing clients: {} of {n} connected: {}", conns.len(), first_errors(&errors)));
    }
    let tally = Rc::new(RefCell::new(Tally::default()));
    let stop = Rc::new(Cell::new(false));
    let t0 = Instant::now();
    let pause = Duration::from_millis(o.pause_ms);
    let payload = format!("\"{}\"", "x".repeat(o.payload));
    let mut existing = Vec::new();
    for mut c in conns {
        let (tally, stop, payload) = (tally.clone(), stop.clone(), payload.clone());
        existing.push(spawn_local(async move {
            let call = Call::new("echo", &payload);
            let mut id = 0u64;
            while !stop.get() {
                id += 1;
                let s = Instant::now();
                call.push(&mut c.wr, id);
                let r = tokio::time::timeout(timeout, async {
                    c.wr.flush(&c.stream).await?;
                    ddp::recv_until(&mut c, |p| {
                        (kind(p) == b"result" && num_after(p, ID_KEY) == Some(id)).then_some(Ok(()))
                    })
                    .await
                })
                .await;
                match r {
                    Ok(Ok(())) => tally.borrow_mut().calls.push(((s - t0).as_nanos() as u64, s.elapsed().as_nanos() as u64)),
                    _ => {
                        tally.borrow_mut().existing_failed += 1;
                        return;
                    }
                }
                tokio::time::sleep(pause).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(o.calm_seconds)).await;
    mark("start", o.sync);
    let storm_start = Instant::now();
    let deadline = storm_start + timeout;
    let handles: Vec<_> = (0..m)
        .map(|i| {
            let (t, tally) = (t.clone(), tally.clone());
            spawn_local(async move {
                let seed = 1_000_000 + i as u64;
                let mut rng = Rng::new(seed);
                loop {
                    let r = tokio::time::timeout_at(deadline.into(), ddp::open(&t, seed, READ_BUF, &[], b"connected")).await;
                    let msg = match r {
                        Ok(Ok(c)) => {
                            tally.borrow_mut().connected.push(storm_start.elapsed().as_secs_f64());
                            return Some::<Conn>(c);
                        }
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => {
                            tally.borrow_mut().failed += 1;
                            return None;
                        }
                    };
                    let wait = {
                        let mut tl = tally.borrow_mut();
                        let base = match msg.find(RETRY_AFTER) {
                            Some(at) => {
                                tl.refused += 1;
                                msg[at + RETRY_AFTER.len()..].trim().parse::<f64>().unwrap_or(1.0).max(0.1)
                            }
                            None => {
                                if tl.errors.len() < 100 {
                                    tl.errors.push(msg);
                                }
                                1.0
                            }
                        };
                        let jitter = 0.5 + (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                        let wait = Duration::from_secs_f64(base * jitter);
                        if Instant::now() + wait >= deadline {
                            tl.failed += 1;
                            return None;
                        }
                        tl.retried += 1;
                        wait
                    };
                    tokio::time::sleep(wait).await;
                }
            })
        })
        .collect();
    let mut held = Vec::with_capacity(m);
    for h in handles {
        if let Ok(Some(c)) = h.await {
            held.push(c);
        }
    }
    let storm_end = Instant::now();
    // a last second of steady calls after the storm, then stop
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.set(true);
    mark("end", o.sync);
    let tl = tally.borrow();
    let s0 = (storm_start - t0).as_nanos() as u64;
    let s1 = (storm_end - t0).as_nanos() as u64;
    let mut calm: Vec<u64> = tl.calls.iter().filter(|(s, _)| *s < s0).map(|(_, l)| *l).collect();
    let mut during: Vec<u64> = tl.calls.iter().filter(|(s, _)| *s >= s0 && *s <= s1).map(|(_, l)| *l).collect();
    calm.sort_unstable();
    during.sort_unstable();
    let all_connected = tl.connected.iter().cloned().fold(0.0, f64::max);
    let ok = held.len() == m && tl.existing_failed == 0;
    let line = Json::new("storm")
        .bool("ok", ok)
        .int("existing", n as u64)
        .int("new", m as u64)
        .int("connected", held.len() as u64)
        .num("all_connected_s", if held.len() == m { all_connected } else { -1.0 })
        .num("storm_s", (storm_end - storm_start).as_secs_f64())
        .int("refused", tl.refused)
        .int("retried", tl.retried)
        .int("failed", tl.failed)
        .int("existing_failed", tl.existing_failed)
        .int("calm_calls", calm.len() as u64)
        .num("calm_p50_ms", pct_ms(&calm, 50.0))
        .num("calm_p99_ms", pct_ms(&calm, 99.0))
        .int("storm_calls", during.len() as u64)
        .num("storm_p50_ms", pct_ms(&during, 50.0))
        .num("storm_p99_ms", pct_ms(&during, 99.0))
        .num("storm_max_ms", pct_ms(&during, 100.0))
        .str("error", &first_errors(&tl.errors))
        .finish();
    drop(tl);
    drop(existing);
    Ok((ok, line))
}
