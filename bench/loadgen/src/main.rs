//! loadgen: the DDP-over-WebSocket load generator of the ddp-transport-native benchmark.
//!
//! One OS thread (tokio current-thread runtime), one task per connection, hand-written client
//! framing (client.rs) and byte-search DDP matching (ddp.rs), so that its own CPU per call stays
//! small next to the servers it measures. Every workload is bounded in count and time.

mod app;
mod client;
mod ddp;
mod storm;
mod util;
mod watch;

use client::{err, Conn, Target, OP_CLOSE, OP_TEXT};
use ddp::{answer_ping, kind, num_after, Call, ID_KEY};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};
use tokio::task::{spawn_local, JoinHandle, LocalSet};
use util::{cpu_seconds, mark, mean_us, ns32, pct_us, stdin_closed, Json, Opts};

pub(crate) const READ_BUF: usize = 8192;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match Opts::parse(&args) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("loadgen: {e}");
            }
            eprintln!("{}", util::USAGE);
            std::process::exit(2);
        }
    };
    let target = match Target::parse(&opts.url) {
        Ok(mut t) => {
            t.deflate = opts.deflate || opts.deflate_optional;
            t.deflate_optional = opts.deflate_optional;
            if opts.sources > 1 {
                t.sources = (1..=opts.sources).map(|i| std::net::IpAddr::from([127, 0, 0, i])).collect();
            }
            Rc::new(t)
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    };
    let nofile = util::raise_nofile(65536);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let local = LocalSet::new();
    let cmd = opts.cmd.clone();
    let res = local.block_on(&rt, async move {
        match cmd.as_str() {
            "burst" => burst(&opts, target).await,
            "rtt" => rtt(&opts, target).await,
            "throughput" => throughput(&opts, target).await,
            "idle" => idle(&opts, target, nofile).await,
            "fanout" => fanout(&opts, target).await,
            "app-rate" => app::app_rate(&opts, target).await,
            "storm" => storm::storm(&opts, target).await,
            "watch" => watch::watch(&opts, target, nofile).await,
            other => Err(format!("unknown workload {other:?}")),
        }
    });
    match res {
        Ok((ok, line)) => {
            println!("{line}");
            // Skip tearing down thousands of sockets and tasks one by one.
            std::process::exit(if ok { 0 } else { 1 });
        }
        Err(e) => {
            println!("{}", Json::new(&args[0]).bool("ok", false).str("error", &e).finish());
            std::process::exit(1);
        }
    }
}

pub(crate) fn dur(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Open `n` DDP connections, at most `concurrency` handshakes at once, each sending `extra` after
/// `connect` and waiting for `until`. Returns the connections (in order of completion), the time
/// each took, and the errors.
pub(crate) async fn open_many(
    t: &Rc<Target>,
    n: usize,
    concurrency: usize,
    extra: Rc<Vec<Vec<u8>>>,
    until: &'static [u8],
    timeout: Duration,
    seed0: u64,
) -> (Vec<Conn>, Vec<u32>, Vec<String>) {
    let sem = Rc::new(Semaphore::new(concurrency.min(Semaphore::MAX_PERMITS)));
    let t0 = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let handles: Vec<JoinHandle<io::Result<(Conn, Duration)>>> = (0..n)
        .map(|i| {
            let (t, sem, extra) = (t.clone(), sem.clone(), extra.clone());
            spawn_local(async move {
                let _permit = sem.acquire().await.map_err(|_| err("semaphore closed"))?;
                let parts: Vec<&[u8]> = extra.iter().map(|v| v.as_slice()).collect();
                let c = ddp::open(&t, seed0 + i as u64, READ_BUF, &parts, until).await?;
                Ok((c, t0.elapsed()))
            })
        })
        .collect();
    let mut conns = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(n);
    let mut errors = Vec::new();
    for h in handles {
        let abort = h.abort_handle();
        match tokio::time::timeout_at(deadline, h).await {
            Ok(Ok(Ok((c, d)))) => {
                conns.push(c);
                times.push(ns32(d));
            }
            Ok(Ok(Err(e))) => errors.push(e.to_string()),
            Ok(Err(e)) => errors.push(format!("task failed: {e}")),
            Err(_) => {
                abort.abort();
                errors.push("timed out connecting".into());
            }
        }
    }
    (conns, times, errors)
}

pub(crate) fn first_errors(errors: &[String]) -> String {
    let mut uniq: Vec<&String> = Vec::new();
    for e in errors {
        if !uniq.contains(&e) {
            uniq.push(e);
        }
        if uniq.len() == 3 {
            break;
        }
    }
    uniq.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
}

// ------------------------------------------------------------------------------------------------
// burst: N connections at once, time until every one is DDP-connected.

async fn burst(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(100);
    mark("start", o.sync);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let (conns, mut times, errors) = open_many(&t, n, n, Rc::new(vec![]), b"connected", dur(o.timeout), 1).await;
    let total = t0.elapsed();
    let cpu = cpu_seconds() - cpu0;
    mark("end", o.sync);
    times.sort_unstable();
    let ok = errors.is_empty() && conns.len() == n;
    let line = Json::new("burst")
        .bool("ok", ok)
        .int("clients", n as u64)
        .int("connected", conns.len() as u64)
        .num("total_ms", total.as_secs_f64() * 1e3)
        .num("connect_p50_ms", pct_us(&times, 50.0) / 1e3)
        .num("connect_p99_ms", pct_us(&times, 99.0) / 1e3)
        .num("loadgen_cpu_s", cpu)
        .int("errors", errors.len() as u64)
        .str("error", &first_errors(&errors))
        .finish();
    drop(conns);
    Ok((ok, line))
}

// ------------------------------------------------------------------------------------------------
// rtt: one client, sequential echo calls.

async fn rtt(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let mut c = tokio::time::timeout(dur(o.timeout), ddp::open(&t, 7, READ_BUF, &[], b"connected"))
        .await
        .map_err(|_| "timed out connecting".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let call = Call::new("echo", &format!("\"{}\"", "x".repeat(o.payload)));
    let warm = (o.calls / 10).min(50) as u64;
    let total = warm + o.calls as u64;
    let mut lat: Vec<u32> = Vec::with_capacity(o.calls);
    let mut cpu0 = 0.0;
    let mut t_start = Instant::now();
    let r = tokio::time::timeout(dur(o.timeout), async {
        for id in 1..=total {
            if id == warm + 1 {
                mark("start", o.sync);
                cpu0 = cpu_seconds();
                t_start = Instant::now();
            }
            let t0 = Instant::now();
            call.push(&mut c.wr, id);
            c.wr.flush(&c.stream).await?;
            ddp::recv_until(&mut c, |p| {
                if kind(p) == b"result" && num_after(p, ID_KEY) == Some(id) {
                    Some(Ok(()))
                } else {
                    None
                }
            })
            .await?;
            if id > warm {
                lat.push(ns32(t0.elapsed()));
            }
        }
        Ok::<(), io::Error>(())
    })
    .await;
    let elapsed = t_start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    mark("end", o.sync);
    let error = match r {
        Err(_) => "timed out".to_string(),
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(())) => String::new(),
    };
    let done = lat.len();
    let ok = error.is_empty() && done == o.calls;
    let mean = mean_us(&lat);
    lat.sort_unstable();
    let line = Json::new("rtt")
        .bool("ok", ok)
        .int("calls", done as u64)
        .num("seconds", elapsed.as_secs_f64())
        .num("p50_us", pct_us(&lat, 50.0))
        .num("p90_us", pct_us(&lat, 90.0))
        .num("p99_us", pct_us(&lat, 99.0))
        .num("mean_us", mean)
        .num("loadgen_cpu_s", cpu)
        .num("loadgen_cpu_us_per_call", if done > 0 { cpu * 1e6 / done as f64 } else { 0.0 })
        .str("error", &error)
        .finish();
    Ok((ok, line))
}

// ------------------------------------------------------------------------------------------------
// throughput: N clients × K calls in flight for S seconds.

struct EchoOut {
    lat: Vec<u32>,
    done: u64,
    /// `added` messages received (the app workload: one per call)
    added: u64,
    error: Option<String>,
    /// the connection, kept open until the measured window has ended (a server's work at close,
    /// e.g. a DDP session's teardown, is not the window's)
    conn: Option<Conn>,
}

/// `app`: the calls are the tasks app's `addTask` (a `result` carrying a method error fails the run).
async fn echo_loop(
    mut c: Conn,
    call: Rc<Call>,
    inflight: usize,
    coalesce: bool,
    app: bool,
    deadline: Instant,
    drain: Duration,
) -> EchoOut {
    let mut out = EchoOut { lat: Vec::with_capacity(1 << 14), done: 0, added: 0, error: None, conn: None };
    let mut pending: Vec<(u64, Instant)> = Vec::with_capacity(inflight);
    let mut next_id = 1u64;
    let r: io::Result<()> = async {
        let now = Instant::now();
        for _ in 0..inflight {
            call.push(&mut c.wr, next_id);
            pending.push((next_id, now));
            next_id += 1;
            if !coalesce {
                c.wr.try_flush(&c.stream)?;
            }
        }
        c.wr.flush(&c.stream).await?;
        let drain_deadline = tokio::time::Instant::from_std(deadline + drain);
        let mut stopping = false;
        loop {
            if stopping {
                if pending.is_empty() {
                    return Ok(());
                }
                tokio::time::timeout_at(drain_deadline, c.rd.fill(&mut c.stream))
                    .await
                    .map_err(|_| err("replies still missing after the drain period"))??;
            } else {
                c.rd.fill(&mut c.stream).await?;
            }
            let now = Instant::now();
            let in_window = now < deadline;
            stopping = !in_window;
            while let Some((op, p)) = c.rd.next_frame()? {
                if op == OP_TEXT && kind(p) == b"result" {
                    let t0 = app::take_result(p, &mut pending, app)?;
                    out.lat.push(ns32(now - t0));
                    if in_window {
                        out.done += 1;
                        call.push(&mut c.wr, next_id);
                        pending.push((next_id, now));
                        next_id += 1;
                        if !coalesce {
                            c.wr.try_flush(&c.stream)?;
                        }
                    }
                } else {
                    app::other_frame(&mut c.wr, op, p, &mut out.added)?;
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

async fn throughput(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(50);
    // --app: the tasks app's clients (subscribed to `tasks`, calling `addTask`)
    let (extra, until): (Vec<Vec<u8>>, &'static [u8]) =
        if o.app { (vec![app::SUB_TASKS.to_vec()], b"ready") } else { (vec![], b"connected") };
    let (conns, _, cerrs) = open_many(&t, n, o.concurrency, Rc::new(extra), until, dur(o.timeout), 100).await;
    if !cerrs.is_empty() {
        return Err(format!("{} of {} connects failed: {}", cerrs.len(), n, first_errors(&cerrs)));
    }
    let call = Rc::new(if o.app {
        app::app_call(o)
    } else if o.doc > 0 {
        Call::new("doc", &o.doc.to_string())
    } else {
        Call::new("echo", &format!("\"{}\"", "x".repeat(o.payload)))
    });
    mark("start", o.sync);
    let cpu0 = cpu_seconds();
    let wire0 = client::wire_in();
    let t0 = Instant::now();
    let deadline = t0 + dur(o.seconds);
    let drain = Duration::from_secs(5);
    let handles: Vec<_> = conns
        .into_iter()
        .map(|c| spawn_local(echo_loop(c, call.clone(), o.inflight, o.coalesce, o.app, deadline, drain)))
        .collect();
    let mut lat: Vec<u32> = Vec::new();
    let mut done = 0u64;
    let mut added = 0u64;
    let mut errors = Vec::new();
    let mut held = Vec::with_capacity(n);
    let guard = tokio::time::Instant::from_std(deadline + drain + Duration::from_secs(5));
    for h in handles {
        let abort = h.abort_handle();
        match tokio::time::timeout_at(guard, h).await {
            Ok(Ok(r)) => {
                held.extend(r.conn);
                done += r.done;
                added += r.added;
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
    let cpu = cpu_seconds() - cpu0;
    let wire = client::wire_in() - wire0;
    let window = deadline.min(Instant::now()).duration_since(t0).as_secs_f64();
    mark("end", o.sync);
    drop(held);
    let mean = mean_us(&lat);
    lat.sort_unstable();
    let ok = errors.is_empty() && done > 0;
    let line = Json::new(if o.coalesce { "throughput-coalesced" } else { "throughput" })
        .bool("ok", ok)
        .int("clients", n as u64)
        .int("inflight", o.inflight as u64)
        .bool("coalesce", o.coalesce)
        .bool("app", o.app)
        .int("added", added)
        .num("seconds", window)
        .int("calls", done)
        .num("wire_bytes_per_call", if done > 0 { wire as f64 / done as f64 } else { 0.0 })
        .num("calls_per_s", done as f64 / window)
        .num("lat_p50_us", pct_us(&lat, 50.0))
        .num("lat_p90_us", pct_us(&lat, 90.0))
        .num("lat_p95_us", pct_us(&lat, 95.0))
        .num("lat_p99_us", pct_us(&lat, 99.0))
        .num("lat_mean_us", mean)
        .num("loadgen_cpu_s", cpu)
        .num("loadgen_cores", cpu / window)
        .num("loadgen_cpu_us_per_call", if done > 0 { cpu * 1e6 / done as f64 } else { 0.0 })
        .int("errors", errors.len() as u64)
        .str("error", &first_errors(&errors))
        .finish();
    Ok((ok, line))
}

// ------------------------------------------------------------------------------------------------
// idle: hold N DDP-connected clients until stdin closes (or --hold-seconds).

async fn hold(mut c: Conn) -> io::Result<()> {
    loop {
        while let Some((op, p)) = c.rd.next_frame()? {
            if op == OP_CLOSE {
                return Err(err("server closed the connection"));
            }
            answer_ping(&mut c.wr, op, p);
        }
        if c.wr.pending() {
            c.wr.flush(&c.stream).await?;
        }
        c.rd.fill(&mut c.stream).await?;
    }
}

async fn idle(o: &Opts, t: Rc<Target>, nofile: u64) -> Result<(bool, String), String> {
    let n = o.clients.unwrap_or(5000);
    let t0 = Instant::now();
    let (conns, mut times, errors) = open_many(&t, n, o.concurrency, Rc::new(vec![]), b"connected", dur(o.timeout), 1000).await;
    let connect_s = t0.elapsed().as_secs_f64();
    let connected = conns.len();
    // With --deflate: how many messages went each way compressed while connecting (every client's
    // `connect` is sent compressed; the server's `connected` is compressed only above its threshold).
    let deflate_sent: u64 = conns.iter().map(|c| c.wr.compressed_msgs as u64).sum();
    let deflate_received: u64 = conns.iter().map(|c| c.rd.compressed_msgs as u64).sum();
    let answer = conns.first().and_then(|c| c.extensions.clone()).unwrap_or_default();
    println!("HELD {connected}");
    let holders: Vec<JoinHandle<io::Result<()>>> = conns.into_iter().map(|c| spawn_local(hold(c))).collect();
    let h0 = Instant::now();
    let _ = tokio::time::timeout(dur(o.hold_seconds), stdin_closed()).await;
    let held_s = h0.elapsed().as_secs_f64();
    let dropped = holders.iter().filter(|h| h.is_finished()).count();
    for h in &holders {
        h.abort();
    }
    times.sort_unstable();
    let ok = errors.is_empty() && connected == n && dropped == 0;
    let line = Json::new("idle")
        .bool("ok", ok)
        .bool("deflate", o.deflate)
        .int("clients", n as u64)
        .int("connected", connected as u64)
        .int("deflate_msgs_sent", deflate_sent)
        .int("deflate_msgs_received", deflate_received)
        .str("extensions", &answer)
        .int("dropped_during_hold", dropped as u64)
        .num("connect_s", connect_s)
        .num("connect_p99_ms", pct_us(&times, 99.0) / 1e3)
        .num("held_s", held_s)
        .int("nofile", nofile)
        .int("errors", errors.len() as u64)
        .str("error", &first_errors(&errors))
        .finish();
    Ok((ok, line))
}

// ------------------------------------------------------------------------------------------------
// fanout: M subscribers of `fanout`, one writer publishing sequentially; latency from the publish
// call's send to the last subscriber's receipt of that `added`.

struct Fan {
    n: u32,
    count: RefCell<Vec<u32>>,
    first: RefCell<Vec<Option<Instant>>>,
    last: RefCell<Vec<Option<Instant>>>,
    complete: Notify,
}

const FSEQ_KEY: &[u8] = br#""fseq":"#;

/// Read `c` until it fails, answering pings, and call `on(k, now)` for each `added` that carries
/// `"fseq":k`, where `now` is `clock()` read once per read (when its frames arrived). A close frame
/// ends it with an error. The frame loop of `fanout`'s subscribers and of `watch`.
pub(crate) async fn fseq_frames<T: Copy>(mut c: Conn, clock: impl Fn() -> T, mut on: impl FnMut(usize, T)) -> io::Result<()> {
    let mut now = clock();
    loop {
        while let Some((op, p)) = c.rd.next_frame()? {
            if op == OP_TEXT && kind(p) == b"added" {
                if let Some(k) = num_after(p, FSEQ_KEY) {
                    on(k as usize, now);
                }
                continue;
            }
            if op == OP_CLOSE {
                return Err(err("server closed the connection"));
            }
            answer_ping(&mut c.wr, op, p);
        }
        if c.wr.pending() {
            c.wr.flush(&c.stream).await?;
        }
        c.rd.fill(&mut c.stream).await?;
        now = clock();
    }
}

async fn subscriber(c: Conn, fan: Rc<Fan>) -> io::Result<()> {
    fseq_frames(c, Instant::now, |k, now| {
        let mut count = fan.count.borrow_mut();
        if k < count.len() {
            if count[k] == 0 {
                fan.first.borrow_mut()[k] = Some(now);
            }
            count[k] += 1;
            fan.last.borrow_mut()[k] = Some(now);
            if count[k] == fan.n {
                fan.complete.notify_one();
            }
        }
    })
    .await
}

async fn fanout(o: &Opts, t: Rc<Target>) -> Result<(bool, String), String> {
    let m = o.subscribers;
    let sub = br#"{"msg":"sub","id":"s1","name":"fanout","params":[]}"#.to_vec();
    let (conns, _, cerrs) = open_many(&t, m, o.concurrency, Rc::new(vec![sub]), b"ready", dur(o.timeout), 5000).await;
    if !cerrs.is_empty() {
        return Err(format!("{} of {} subscribers failed: {}", cerrs.len(), m, first_errors(&cerrs)));
    }
    let mut w = tokio::time::timeout(dur(o.timeout), ddp::open(&t, 4999, READ_BUF, &[], b"connected"))
        .await
        .map_err(|_| "writer: timed out connecting".to_string())?
        .map_err(|e| format!("writer: {e}"))?;
    let fan = Rc::new(Fan {
        n: m as u32,
        count: RefCell::new(vec![0; o.writes]),
        first: RefCell::new(vec![None; o.writes]),
        last: RefCell::new(vec![None; o.writes]),
        complete: Notify::new(),
    });
    let subs: Vec<JoinHandle<io::Result<()>>> = conns.into_iter().map(|c| spawn_local(subscriber(c, fan.clone()))).collect();
    mark("start", o.sync);
    let cpu0 = cpu_seconds();
    let wire0 = client::wire_in();
    let t_start = Instant::now();
    let mut lat_first: Vec<u32> = Vec::with_capacity(o.writes);
    let per_write = Duration::from_secs(10).min(dur(o.timeout));
    let mut lat: Vec<u32> = Vec::with_capacity(o.writes);
    let mut missing = 0u64;
    let mut bad_count = 0u64;
    let mut error = String::new();
    let overall = tokio::time::Instant::now() + dur(o.timeout);
    for k in 0..o.writes {
        if tokio::time::Instant::now() >= overall {
            error = format!("stopped after {k} writes: --timeout reached");
            break;
        }
        if o.write_rate > 0.0 {
            // --write-rate: write k goes out at k / rate seconds after the start (not earlier).
            tokio::time::sleep_until(tokio::time::Instant::from_std(t_start + Duration::from_secs_f64(k as f64 / o.write_rate))).await;
        }
        let id = k as u64 + 1;
        let msg = if o.doc > 0 {
            format!(r#"{{"msg":"method","id":"{id}","method":"publishDoc","params":[{k},{}]}}"#, o.doc)
        } else {
            format!(
                r#"{{"msg":"method","id":"{id}","method":"publish","params":[{{"_id":"f{k}","fseq":{k},"text":"fanout benchmark document {k}"}}]}}"#
            )
        };
        let t0 = Instant::now();
        w.wr.text(msg.as_bytes());
        let res = tokio::time::timeout(per_write, async {
            w.wr.flush(&w.stream).await?;
            ddp::recv_until(&mut w, |p| {
                if kind(p) == b"result" && num_after(p, ID_KEY) == Some(id) {
                    Some(Ok(num_after(p, br#""result":"#)))
                } else {
                    None
                }
            })
            .await
        })
        .await;
        match res {
            Ok(Ok(count)) => {
                if count != Some(m as u64) {
                    bad_count += 1;
                }
            }
            Ok(Err(e)) => {
                error = format!("writer: {e}");
                break;
            }
            Err(_) => {
                error = format!("writer: no result for publish {k}");
                break;
            }
        }
        let wait_until = tokio::time::Instant::now() + per_write;
        loop {
            let got = fan.count.borrow()[k];
            if got >= fan.n {
                break;
            }
            if tokio::time::timeout_at(wait_until, fan.complete.notified()).await.is_err() {
                missing += (fan.n - fan.count.borrow()[k]) as u64;
                break;
            }
        }
        if let Some(last) = fan.last.borrow()[k] {
            if fan.count.borrow()[k] >= fan.n {
                lat.push(ns32(last.saturating_duration_since(t0)));
                if let Some(first) = fan.first.borrow()[k] {
                    lat_first.push(ns32(first.saturating_duration_since(t0)));
                }
            }
        }
    }
    let elapsed = t_start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let wire = client::wire_in() - wire0;
    mark("end", o.sync);
    let dead = subs.iter().filter(|h| h.is_finished()).count();
    for h in &subs {
        h.abort();
    }
    let writes_done = lat.len();
    let mean = mean_us(&lat);
    lat.sort_unstable();
    lat_first.sort_unstable();
    let deliveries = writes_done as u64 * m as u64;
    let ok = error.is_empty() && missing == 0 && bad_count == 0 && dead == 0 && writes_done == o.writes;
    if error.is_empty() && !ok {
        error = format!("{missing} deliveries missing, {bad_count} publish counts wrong, {dead} subscribers dropped");
    }
    let line = Json::new("fanout")
        .bool("ok", ok)
        .int("subscribers", m as u64)
        .int("writes", writes_done as u64)
        .num("seconds", elapsed)
        .num("p50_ms", pct_us(&lat, 50.0) / 1e3)
        .num("p90_ms", pct_us(&lat, 90.0) / 1e3)
        .num("p95_ms", pct_us(&lat, 95.0) / 1e3)
        .num("p99_ms", pct_us(&lat, 99.0) / 1e3)
        .num("mean_ms", mean / 1e3)
        .num("first_p50_ms", pct_us(&lat_first, 50.0) / 1e3)
        .num("first_p99_ms", pct_us(&lat_first, 99.0) / 1e3)
        .int("deliveries", deliveries)
        .num("wire_bytes_per_delivery", if deliveries > 0 { wire as f64 / deliveries as f64 } else { 0.0 })
        .int("missing", missing)
        .num("loadgen_cpu_s", cpu)
        .str("error", &error)
        .finish();
    Ok((ok, line))
}
