//! The app-level workloads: DDP clients of the benchmark's tasks app (bench/servers/common.js).
//! Each client connects, subscribes to `tasks` and waits for `ready`, then calls
//! `addTask(text)`; the server answers each call with `added` (on the `tasks` subscription),
//! `result` and `updated`.
//!
//! `app-rate` (this module): a fixed aggregate rate. N clients share `--rate` calls/s: each calls
//! every N / rate seconds on its own schedule, starting at a random phase within its first period
//! (so the calls are spread, not sent all at once). The schedule is open-loop: a call goes out at
//! its time whether or not earlier ones were answered, so a slow server does not lower the offered
//! rate. Latency is from the call's write to its `result`. Bounded: calls are scheduled only within
//! `--seconds` (at most seconds × rate / N + 1 per client), replies are awaited at most 5 s after
//! that, and every client stops by itself.
//!
//! `app-saturated` is `throughput --app` (main.rs): the same clients, K calls in flight each.

use crate::client::{err, Conn, Rng, Target, Writer, OP_CLOSE, OP_TEXT};
use crate::ddp::{answer_ping, kind, num_after, Call, ID_KEY};
use crate::util::{cpu_seconds, mark, mean_us, ns32, pct_us, Json, Opts};
use crate::{first_errors, open_many};
use memchr::memmem;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::spawn_local;

/// What every app client sends after `connect` (and waits for its `ready`).
pub const SUB_TASKS: &[u8] = br#"{"msg":"sub","id":"tasks","name":"tasks","params":[]}"#;

/// The method call of the app workloads (a task's text as a browser would send it).
pub fn add_task() -> Call {
    Call::new("addTask", r#""Pick up the groceries on the way home""#)
}

/// The task text of `--method` calls, as Meteor's performance harness sends it: `NAME({description})`.
const DESCRIPTION: &str = r#"{"description":"Pick up the groceries on the way home"}"#;

/// The app workloads' call: `addTask(text)`, or `--method NAME`'s `NAME({description})`.
pub fn app_call(o: &Opts) -> Call {
    match &o.method {
        Some(m) => Call::new(m, DESCRIPTION),
        None => add_task(),
    }
}

/// The string `result` of a `result` message (`"result":"…"`), e.g. an inserted task's id.
fn string_result(p: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = br#""result":""#;
    let i = memmem::find(p, KEY)? + KEY.len();
    let e = memchr::memchr(b'"', &p[i..])?;
    Some(&p[i..i + e])
}

/// Whether a `result` message carries a method error instead of a result.
#[inline]
pub fn is_error_result(p: &[u8]) -> bool {
    memmem::find(p, br#""error":"#).is_some()
}

/// A method's `result` frame: the id's call leaves `pending` and its start time is returned; an
/// error result (when `check_error`), no numeric id or an id not in flight is an error.
pub fn take_result(p: &[u8], pending: &mut Vec<(u64, Instant)>, check_error: bool) -> io::Result<Instant> {
    if check_error && is_error_result(p) {
        return Err(err(format!("method error: {}", String::from_utf8_lossy(p))));
    }
    let id = num_after(p, ID_KEY).ok_or_else(|| err("result without a numeric id"))?;
    let idx = pending
        .iter()
        .position(|&(i, _)| i == id)
        .ok_or_else(|| err(format!("result for an id not in flight: {id}")))?;
    Ok(pending.swap_remove(idx).1)
}

/// Any frame but a `result`: `added` is counted, a DDP `error` or a close frame is an error, a
/// ping is answered, the rest (`updated`, ...) is ignored.
pub fn other_frame(wr: &mut Writer, op: u8, p: &[u8], added: &mut u64) -> io::Result<()> {
    if op == OP_TEXT {
        match kind(p) {
            b"added" => *added += 1,
            b"error" => return Err(err(format!("DDP error: {}", String::from_utf8_lossy(p)))),
            _ => {}
        }
        return Ok(());
    }
    if op == OP_CLOSE {
        return Err(err("server sent a close frame"));
    }
    answer_ping(wr, op, p);
    Ok(())
}

/// How long after the last scheduled call the replies are awaited.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(Default)]
struct ClientOut {
    /// call → result latencies (ns)
    lat: Vec<u32>,
    sent: u64,
    added: u64,
    /// how late the latest-sent call left, against its schedule
    max_lag: Duration,
    error: Option<String>,
    /// --remove: the latencies of the removeTask calls (the others are in `lat_insert`)
    lat_remove: Vec<u32>,
    lat_insert: Vec<u32>,
    removes: u64,
    removed: u64,
    /// the connection, kept open until the measured window has ended (a server's work at close,
    /// e.g. a DDP session's teardown, is not the window's)
    conn: Option<Conn>,
}

/// One client: calls at `first`, `first + period`, … while before `deadline`; then waits for the
/// outstanding results (at most DRAIN).
/// With `remove`, every call after an answered one removes the task that call inserted
/// (`removeTask({taskId})`), so the calls alternate insert, remove, insert, …
async fn client(mut c: Conn, call: Rc<Call>, first: Instant, period: Duration, deadline: Instant, remove: bool) -> ClientOut {
    let mut out = ClientOut { lat: Vec::with_capacity(64), ..Default::default() };
    let mut pending: Vec<(u64, Instant)> = Vec::with_capacity(4);
    // --remove: ids of the removeTask calls in flight, and the task id to remove next
    let mut remove_ids: Vec<u64> = Vec::new();
    let mut to_remove: Option<Vec<u8>> = None;
    let mut next = first;
    let mut id = 0u64;
    let drain_deadline = tokio::time::Instant::from_std(deadline + DRAIN);
    let r: io::Result<()> = async {
        loop {
            // Every call whose time has come (one, unless this task woke late), each its own write.
            while next < deadline && next <= Instant::now() {
                id += 1;
                let t0 = Instant::now();
                out.max_lag = out.max_lag.max(t0 - next);
                if let Some(task) = to_remove.take() {
                    let params = format!(r#"{{"taskId":"{}"}}"#, String::from_utf8_lossy(&task));
                    Call::new("removeTask", &params).push(&mut c.wr, id);
                    remove_ids.push(id);
                    out.removes += 1;
                } else {
                    call.push(&mut c.wr, id);
                }
                c.wr.flush(&c.stream).await?;
                pending.push((id, t0));
                out.sent += 1;
                next += period;
            }
            let sending = next < deadline;
            if !sending && pending.is_empty() {
                return Ok(());
            }
            let wake = if sending { tokio::time::Instant::from_std(next) } else { drain_deadline };
            // `fill` is one read: dropping it at the timeout loses nothing.
            match tokio::time::timeout_at(wake, c.rd.fill(&mut c.stream)).await {
                Ok(r) => r?,
                Err(_) if sending => continue,
                Err(_) => return Err(err(format!("{} results still missing after the drain period", pending.len()))),
            }
            let now = Instant::now();
            while let Some((op, p)) = c.rd.next_frame()? {
                if op == OP_TEXT && kind(p) == b"result" {
                    let t0 = take_result(p, &mut pending, true)?;
                    out.lat.push(ns32(now - t0));
                    if remove {
                        let id = num_after(p, ID_KEY).unwrap_or(0);
                        if let Some(i) = remove_ids.iter().position(|&r| r == id) {
                            remove_ids.swap_remove(i);
                            out.lat_remove.push(ns32(now - t0));
                        } else {
                            out.lat_insert.push(ns32(now - t0));
                            let task = string_result(p).ok_or_else(|| err(format!("no task id in {}", String::from_utf8_lossy(p))))?;
                            to_remove = Some(task.to_vec());
                        }
                    }
                } else {
                    if op == OP_TEXT && kind(p) == b"removed" {
                        out.removed += 1;
                    }
                    other_frame(&mut c.wr, op, p, &mut out.added)?;
                }
            }
            if c.wr.pending() {
                c.wr.flush(&c.stream).await?;
            }
        }
    }
    .await;
    if let Err(e) = r {
        out.error = Some(e.to_string());
    }
    out.conn = Some(c);
    out
}

pub async fn app_rate(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(150);
    if n == 0 || o.rate.is_nan() || o.rate <= 0.0 {
        return Err("app-rate needs --clients > 0 and --rate > 0".into());
    }
    let timeout = Duration::from_secs_f64(o.timeout);
    let sub = Rc::new(vec![SUB_TASKS.to_vec()]);
    let (conns, _, cerrs) = open_many(&t, n, o.concurrency, sub, b"ready", timeout, 300).await;
    if !cerrs.is_empty() {
        return Err(format!("{} of {} clients failed to connect and subscribe: {}", cerrs.len(), n, first_errors(&cerrs)));
    }
    if o.remove && o.method.is_none() {
        return Err("--remove needs --method (the insert method whose result is the task id)".into());
    }
    let call = Rc::new(app_call(o));
    let period = Duration::from_secs_f64(n as f64 / o.rate);
    let mut rng = Rng::new(0x5EED_0311);
    mark("start", o.sync);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(o.seconds);
    let handles: Vec<_> = conns
        .into_iter()
        .map(|c| {
            let phase = period.mul_f64((rng.next() >> 11) as f64 / (1u64 << 53) as f64);
            spawn_local(client(c, call.clone(), t0 + phase, period, deadline, o.remove))
        })
        .collect();
    let guard = tokio::time::Instant::from_std(deadline + DRAIN + Duration::from_secs(5));
    let mut lat: Vec<u32> = Vec::new();
    let (mut sent, mut added) = (0u64, 0u64);
    let (mut removes, mut removed) = (0u64, 0u64);
    let (mut lat_insert, mut lat_remove): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut max_lag = Duration::ZERO;
    let mut held = Vec::with_capacity(n);
    let mut errors = Vec::new();
    for h in handles {
        let abort = h.abort_handle();
        match tokio::time::timeout_at(guard, h).await {
            Ok(Ok(r)) => {
                held.extend(r.conn);
                sent += r.sent;
                added += r.added;
                removes += r.removes;
                removed += r.removed;
                lat_insert.extend_from_slice(&r.lat_insert);
                lat_remove.extend_from_slice(&r.lat_remove);
                max_lag = max_lag.max(r.max_lag);
                lat.extend_from_slice(&r.lat);
                if let Some(e) = r.error {
                    errors.push(e);
                }
            }
            Ok(Err(e)) => errors.push(format!("task failed: {e}")),
            Err(_) => {
                abort.abort();
                errors.push("client stuck past the deadline".into());
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    mark("end", o.sync);
    drop(held);
    let done = lat.len() as u64;
    let mean = mean_us(&lat);
    lat.sort_unstable();
    lat_insert.sort_unstable();
    lat_remove.sort_unstable();
    let ok = errors.is_empty() && done > 0 && done == sent;
    let line = Json::new("app-rate")
        .bool("ok", ok)
        .int("clients", n as u64)
        .num("rate", o.rate)
        .num("seconds", o.seconds)
        .num("elapsed_s", elapsed)
        .int("sent", sent)
        .int("calls", done)
        .num("calls_per_s", done as f64 / o.seconds)
        .int("added", added)
        .num("lat_p50_us", pct_us(&lat, 50.0))
        .num("lat_p90_us", pct_us(&lat, 90.0))
        .num("lat_p95_us", pct_us(&lat, 95.0))
        .num("lat_p99_us", pct_us(&lat, 99.0))
        .num("lat_max_us", pct_us(&lat, 100.0))
        .num("lat_mean_us", mean)
        .num("max_send_lag_ms", max_lag.as_secs_f64() * 1e3)
        .str("method", o.method.as_deref().unwrap_or("addTask"))
        .int("removes", removes)
        .int("removed", removed)
        .num("insert_p50_us", pct_us(&lat_insert, 50.0))
        .num("insert_p95_us", pct_us(&lat_insert, 95.0))
        .num("remove_p50_us", pct_us(&lat_remove, 50.0))
        .num("remove_p95_us", pct_us(&lat_remove, 95.0))
        .num("loadgen_cpu_s", cpu)
        .num("loadgen_cpu_us_per_call", if done > 0 { cpu * 1e6 / done as f64 } else { 0.0 })
        .int("errors", errors.len() as u64)
        .str("error", &first_errors(&errors))
        .finish();
    Ok((ok, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_results() {
        assert!(!is_error_result(br#"{"msg":"result","id":"1","result":"abc"}"#));
        assert!(is_error_result(br#"{"msg":"result","id":"1","error":{"error":400}}"#));
    }
}
