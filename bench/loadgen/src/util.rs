//! Options, CPU accounting, percentiles, the stdout protocol with the runner.

use std::io::{BufRead, Write};

pub const USAGE: &str = "\
usage: loadgen <burst|rtt|throughput|idle|fanout|storm|app-rate|watch> [options]
  --url ws://127.0.0.1:P/websocket   server endpoint (default ws://127.0.0.1:3000/websocket)
  --clients N        burst: 100, throughput: 50, idle and watch: 5000
  --calls N          rtt: sequential echo calls (default 1000)
  --inflight N       throughput: calls in flight per client (default 4)
  --seconds S        throughput: measured seconds (default 10)
  --coalesce         throughput: write each connection's queued calls with one write
  --app              throughput: clients of the bench tasks app (subscribe to `tasks`, call `addTask`)
  --method NAME      app-rate, throughput --app: call NAME({description}) instead of addTask(text)
                     (Meteor's performance harness's insertTask shape; the Meteor-app benchmark)
  --remove           app-rate with --method: every client alternates NAME and removeTask({taskId})
                     of the id its last NAME returned; latencies reported per method
  --write-rate R     fanout: pace the writer at R publish calls/s (default 0: back to back)
  --rate R           app-rate: calls/s of all --clients together (default 311; clients default 150),
                     each client on its own fixed schedule (random phase), for --seconds
  --payload N        echo string length in bytes (default 16)
  --subscribers N    fanout: subscribed clients (default 500)
  --writes N         fanout: sequential publish calls (default 200); watch: broadcasts (fseq 0..N-1) to report
                     (watch: --clients subscribed to `fanout`, `GOT k first_us last_us` when broadcast k
                     reached all of them, in wall-clock µs since the epoch; for runs over several processes)
  --hold-seconds S   idle, watch: hold at most this long after HELD (default 600; stdin EOF ends earlier)
  --deflate          offer permessage-deflate as Chromium does (`permessage-deflate;
                     client_max_window_bits`), fail unless the server accepts it, then compress
                     every message sent and inflate compressed replies
  --deflate-optional the same offer, but where the server declines it the client goes on
                     uncompressed, as a browser does
  --doc N            throughput: call `doc(N)` (returns an N-byte realistic document, bench/ddp-doc.js)
                     instead of echo; fanout: publish one via `publishDoc` instead of a small one
  --concurrency N    connects in flight at once (default 128; burst opens all at once)
  --timeout S        bound on every waiting phase (default 60)
  --new M            storm: new clients connecting at once after the calm phase (default 10000)
  --calm-seconds S   storm: seconds of steady calls by the existing --clients before the storm (default 3)
  --pause-ms N       storm: pause of each existing client between its sequential calls (default 20)
  --sources K        connect from 127.0.0.1 .. 127.0.0.K (default 1)
  --sync             after each `MARK x` line wait for a line on stdin (the runner samples CPU then)
Prints `MARK start`/`MARK end` around the measured phase, `HELD n` (idle; watch: `HELD n seconds`), then one JSON line.";

pub struct Opts {
    pub cmd: String,
    pub url: String,
    pub clients: Option<usize>,
    pub calls: usize,
    pub inflight: usize,
    pub seconds: f64,
    pub coalesce: bool,
    /// throughput --app: the tasks app's clients and method
    pub app: bool,
    /// app-rate: aggregate calls/s
    pub rate: f64,
    pub payload: usize,
    pub subscribers: usize,
    pub writes: usize,
    pub hold_seconds: f64,
    pub concurrency: usize,
    pub timeout: f64,
    pub sync: bool,
    pub deflate: bool,
    pub deflate_optional: bool,
    /// `--doc N`: calls return (throughput) / publish (fanout) an N-byte realistic document
    pub doc: usize,
    pub new_clients: usize,
    pub calm_seconds: f64,
    pub pause_ms: u64,
    pub sources: u8,
    /// `--method NAME`: the app workloads call NAME({description}) instead of addTask(text)
    pub method: Option<String>,
    /// app-rate `--remove`: alternate the method with removeTask({taskId})
    pub remove: bool,
    /// fanout `--write-rate R`: publish calls per second (0: sequential, back to back)
    pub write_rate: f64,
}

impl Opts {
    pub fn parse(args: &[String]) -> Result<Opts, String> {
        let mut o = Opts {
            cmd: String::new(),
            url: "ws://127.0.0.1:3000/websocket".into(),
            clients: None,
            calls: 1000,
            inflight: 4,
            seconds: 10.0,
            coalesce: false,
            app: false,
            rate: 311.0,
            payload: 16,
            subscribers: 500,
            writes: 200,
            hold_seconds: 600.0,
            concurrency: 128,
            timeout: 60.0,
            sync: false,
            deflate: false,
            deflate_optional: false,
            doc: 0,
            new_clients: 10_000,
            calm_seconds: 3.0,
            pause_ms: 20,
            sources: 1,
            method: None,
            remove: false,
            write_rate: 0.0,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = |name: &str| -> Result<String, String> {
                it.next().cloned().ok_or_else(|| format!("{name} needs a value"))
            };
            fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
                v.parse().map_err(|_| format!("{name}: not a number: {v:?}"))
            }
            match a.as_str() {
                "--url" => o.url = val(a)?,
                "--clients" => o.clients = Some(num(a, val(a)?)?),
                "--calls" => o.calls = num(a, val(a)?)?,
                "--inflight" => o.inflight = num(a, val(a)?)?,
                "--seconds" => o.seconds = num(a, val(a)?)?,
                "--coalesce" => o.coalesce = true,
                "--app" => o.app = true,
                "--rate" => o.rate = num(a, val(a)?)?,
                "--payload" => o.payload = num(a, val(a)?)?,
                "--subscribers" => o.subscribers = num(a, val(a)?)?,
                "--writes" => o.writes = num(a, val(a)?)?,
                "--hold-seconds" => o.hold_seconds = num(a, val(a)?)?,
                "--concurrency" => o.concurrency = num(a, val(a)?)?,
                "--timeout" => o.timeout = num(a, val(a)?)?,
                "--sync" => o.sync = true,
                "--deflate" => o.deflate = true,
                "--deflate-optional" => o.deflate_optional = true,
                "--doc" => o.doc = num(a, val(a)?)?,
                "--new" => o.new_clients = num(a, val(a)?)?,
                "--calm-seconds" => o.calm_seconds = num(a, val(a)?)?,
                "--pause-ms" => o.pause_ms = num(a, val(a)?)?,
                "--sources" => o.sources = num(a, val(a)?)?,
                "--method" => o.method = Some(val(a)?),
                "--remove" => o.remove = true,
                "--write-rate" => o.write_rate = num(a, val(a)?)?,
                "-h" | "--help" => return Err(String::new()),
                s if !s.starts_with('-') && o.cmd.is_empty() => o.cmd = s.to_string(),
                s => return Err(format!("unknown argument {s:?}")),
            }
        }
        if o.cmd.is_empty() {
            return Err("missing workload".into());
        }
        if o.inflight == 0 || o.concurrency == 0 || o.seconds.is_nan() || o.seconds <= 0.0 || o.timeout.is_nan() || o.timeout <= 0.0 {
            return Err("--inflight, --concurrency, --seconds and --timeout must be > 0".into());
        }
        Ok(o)
    }
}

/// This process's user+system CPU seconds so far (every thread).
pub fn cpu_seconds() -> f64 {
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// Raise RLIMIT_NOFILE's soft limit to the hard limit (and the hard one too when allowed).
pub fn raise_nofile(want: u64) -> u64 {
    unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        if (rl.rlim_cur as u64) < want {
            let mut up = rl;
            up.rlim_cur = want as libc::rlim_t;
            if (up.rlim_max as u64) < want {
                up.rlim_max = want as libc::rlim_t;
            }
            if libc::setrlimit(libc::RLIMIT_NOFILE, &up) != 0 {
                // Not allowed to raise the hard limit: take what it gives.
                up.rlim_max = rl.rlim_max;
                up.rlim_cur = rl.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &up);
            }
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        }
        rl.rlim_cur as u64
    }
}

/// Resolves when stdin reaches its end (the runner closed it or exited): read on a thread of its own.
pub async fn stdin_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut sink = [0u8; 256];
        let mut stdin = std::io::stdin().lock();
        while let Ok(n) = stdin.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        let _ = tx.send(());
    });
    let _ = rx.await;
}

/// Print `MARK name`; with --sync wait for the runner's acknowledgement line on stdin.
pub fn mark(name: &str, sync: bool) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "MARK {name}");
    let _ = out.flush();
    drop(out);
    if sync {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
}

/// Nearest-rank percentile of sorted nanosecond samples, in microseconds.
pub fn pct_us(sorted_ns: &[u32], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    sorted_ns[rank.clamp(1, sorted_ns.len()) - 1] as f64 / 1000.0
}

pub fn mean_us(ns: &[u32]) -> f64 {
    if ns.is_empty() {
        return 0.0;
    }
    ns.iter().map(|&v| v as f64).sum::<f64>() / ns.len() as f64 / 1000.0
}

#[inline]
pub fn ns32(d: std::time::Duration) -> u32 {
    d.as_nanos().min(u32::MAX as u128) as u32
}

pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON object built field by field (numbers rounded to 3 decimals).
pub struct Json(String);

impl Json {
    pub fn new(workload: &str) -> Json {
        Json(format!("{{\"workload\":{}", json_str(workload)))
    }
    pub fn num(mut self, k: &str, v: f64) -> Json {
        let v = if v.is_finite() { (v * 1000.0).round() / 1000.0 } else { 0.0 };
        self.0.push_str(&format!(",{}:{}", json_str(k), v));
        self
    }
    pub fn int(mut self, k: &str, v: u64) -> Json {
        self.0.push_str(&format!(",{}:{}", json_str(k), v));
        self
    }
    pub fn bool(mut self, k: &str, v: bool) -> Json {
        self.0.push_str(&format!(",{}:{}", json_str(k), v));
        self
    }
    pub fn str(mut self, k: &str, v: &str) -> Json {
        self.0.push_str(&format!(",{}:{}", json_str(k), json_str(v)));
        self
    }
    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(pct_us(&v, 50.0), 50.0);
        assert_eq!(pct_us(&v, 99.0), 99.0);
        assert_eq!(pct_us(&v, 100.0), 100.0);
        assert_eq!(pct_us(&[], 50.0), 0.0);
    }

    #[test]
    fn json() {
        let s = Json::new("x").int("a", 1).num("b", 1.23456).bool("c", true).str("d", "q\"").finish();
        assert_eq!(s, r#"{"workload":"x","a":1,"b":1.235,"c":true,"d":"q\""}"#);
    }
}
