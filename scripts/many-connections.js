'use strict';
// Many connections on one box (issue #30; a scripted run, not in CI): N idle DDP connections
// (default 50,000) on a node:cluster server (bench/servers/cluster.js: --workers processes, one
// port shared where the server can share it), loaded from several load-generator processes
// (`loadgen watch`, each from loopback source addresses 127.0.0.1..K), with and without
// permessage-deflate, for the own listener (native-listen), the Meteor adapter (native-attach,
// attach() on the http.Server), and beside them `ws` and uWS.js (uws-direct, uws-pack).
// Per run: time until every connection is DDP-connected and subscribed; the server's RSS and open
// fds summed over all its processes (primary + workers) before, held and after all closed; RSS per
// connection; --broadcasts broadcasts to all (each worker sends `added` to its subscribers; the first
// and the last delivery over all load processes, wall clock; medians); then every load process
// exits (all connections closed at once): the time until the server's fds are back, then RSS 5 s later.
//
// The hard fd limit is 20,000 per process here (root without CAP_SYS_RESOURCE): each process's
// soft limit is raised to its hard limit (the server through `ulimit -n` in the shell that starts
// it, the load generator itself), and the connections are spread so that no process holds more
// than its hard limit allows (the script refuses a split that would not fit). Every wait is
// bounded; each run stops by itself.
//
//   cargo build --release -p loadgen
//   node scripts/many-connections.js [--clients 50000] [--workers 4] [--loaders 4] [--sources 8]
//     [--only native-listen,native-attach,ws,uws-direct] [--deflate both|on|off] [--broadcasts 3]
//     [--concurrency 256] [--out results.json]

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const ROOT = path.resolve(__dirname, '..');
const LOADGEN = path.join(ROOT, 'target', 'release', 'loadgen');
const a = process.argv.slice(2);
const arg = (k, d) => (a.includes(k) ? a[a.indexOf(k) + 1] : d);
const CLIENTS = Number(arg('--clients', '50000'));
const WORKERS = Number(arg('--workers', '4'));
const LOADERS = Number(arg('--loaders', '4'));
const SOURCES = Number(arg('--sources', '8'));
const BROADCASTS = Number(arg('--broadcasts', '3'));
const CONCURRENCY = Number(arg('--concurrency', '256')); // handshakes in flight per load process
const ONLY = arg('--only', 'native-listen,native-attach,ws,uws-direct').split(',');
const DEFLATE = arg('--deflate', 'both');
const OUT = arg('--out', null);
const CONNECT_TIMEOUT_S = 600;
const FD_SLACK = 200; // fds a process holds besides its connections (listeners, pipes, epoll, libs)

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function hardFdLimit() {
  const v = spawnSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim();
  return v === 'unlimited' ? Infinity : Number(v);
}

function procStatus(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return { rssMiB: m ? Number(m[1]) / 1024 : 0, fds: fs.readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return { rssMiB: 0, fds: 0 };
  }
}

/** RSS (MiB) and open fds summed over `pids`. */
function sum(pids) {
  let rssMiB = 0;
  let fds = 0;
  for (const pid of pids) {
    const s = procStatus(pid);
    rssMiB += s.rssMiB;
    fds += s.fds;
  }
  return { rssMiB, fds };
}

/** A child whose stdout lines can be awaited (each wait bounded). */
function lines(child, name) {
  const seen = [];
  const waiters = [];
  readline.createInterface({ input: child.stdout }).on('line', (l) => {
    seen.push(l);
    for (const w of waiters.slice()) {
      if (w.pred(l)) {
        waiters.splice(waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.resolve(l);
      }
    }
  });
  child.on('exit', (code, signal) => {
    for (const w of waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new Error(`${name} exited (${code}, ${signal}) while waiting for ${w.what}`));
    }
  });
  return {
    seen,
    wait(pred, ms, what) {
      const hit = seen.find(pred);
      if (hit !== undefined) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve, reject, what };
        w.timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1);
          reject(new Error(`${name}: no ${what} within ${ms} ms`));
        }, ms);
        waiters.push(w);
      });
    },
  };
}

function exited(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(() => { child.kill('SIGKILL'); resolve(); }, ms);
    child.once('exit', () => { clearTimeout(t); resolve(); });
  });
}

async function run(server, deflate) {
  const env = { ...process.env, BENCH_COMPRESS: deflate ? '1' : '0' };
  delete env.BENCH_EXIT_ON_STDIN_END; // the primary ends its workers
  const srv = spawn('bash', ['-c', 'ulimit -n "$(ulimit -Hn)" || exit 3; exec "$@"', 'many-server', process.execPath,
    path.join(ROOT, 'bench', 'servers', 'cluster.js'), server, '--workers', String(WORKERS)],
  { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'inherit'] });
  const out = lines(srv, `${server} cluster`);
  const loaders = [];
  try {
    const ready = await out.wait((l) => l.startsWith('READY '), 30000, 'READY');
    const [, portList, pidList] = ready.split(' ');
    const ports = portList.split(',').map(Number);
    const pids = [srv.pid, ...pidList.split(',').map(Number)];
    await sleep(1000);
    const before = sum(pids);
    const t0 = performance.now();
    for (let i = 0; i < LOADERS; i++) {
      const n = Math.floor(CLIENTS / LOADERS) + (i < CLIENTS % LOADERS ? 1 : 0);
      const port = ports[i % ports.length];
      const lg = spawn(LOADGEN, ['watch', '--url', `ws://127.0.0.1:${port}/websocket`, '--clients', String(n),
        '--sources', String(SOURCES), '--concurrency', String(CONCURRENCY), '--timeout', String(CONNECT_TIMEOUT_S),
        '--writes', String(BROADCASTS), '--hold-seconds', '1800', ...(deflate ? ['--deflate'] : [])],
      { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
      loaders.push({ lg, n, out: lines(lg, `loadgen ${i}`) });
    }
    const held = await Promise.all(loaders.map((l) => l.out.wait((x) => x.startsWith('HELD '), (CONNECT_TIMEOUT_S + 60) * 1000, 'HELD')));
    const connectS = (performance.now() - t0) / 1000;
    const connected = held.reduce((s, l) => s + Number(l.split(' ')[1]), 0);
    await sleep(2000);
    const atHeld = sum(pids);
    const loadRssMiB = sum(loaders.map((l) => l.lg.pid)).rssMiB;
    const firsts = [];
    const lasts = [];
    const errors = [];
    for (let k = 0; k < BROADCASTS && connected === CLIENTS; k++) {
      srv.stdin.write(`broadcast ${k}\n`);
      let got;
      try {
        const start = Number((await out.wait((l) => l.startsWith(`BROADCAST ${k} `), 10000, `BROADCAST ${k}`)).split(' ')[2]);
        got = await Promise.all(loaders.map((l) => l.out.wait((x) => x.startsWith(`GOT ${k} `), 60000, `GOT ${k}`)));
        firsts.push((Math.min(...got.map((g) => Number(g.split(' ')[2]))) - start) / 1000);
        lasts.push((Math.max(...got.map((g) => Number(g.split(' ')[3]))) - start) / 1000);
      } catch (e) {
        errors.push(`broadcast ${k}: ${e.message}`); // the load processes' results say how many connections dropped
        break;
      }
      await sleep(500);
    }
    const sessions = out.seen.filter((l) => l.startsWith('SENT 0 ')).reduce((s, l) => s + Number(l.split(' ')[3]), 0);
    // all closed: every load process exits (its connections close at once)
    const tc = performance.now();
    for (const l of loaders) l.lg.stdin.end();
    const results = await Promise.all(loaders.map((l) => l.out.wait((x) => x.startsWith('{'), 60000, 'result').then(JSON.parse, (e) => ({ ok: false, error: e.message }))));
    await Promise.all(loaders.map((l) => exited(l.lg, 10000)));
    let fdsBackS = null;
    while (performance.now() - tc < 120000) {
      if (sum(pids).fds <= before.fds + 10) {
        fdsBackS = (performance.now() - tc) / 1000;
        break;
      }
      await sleep(100);
    }
    await sleep(5000);
    const after = sum(pids);
    const median = (xs) => (xs.length ? [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] : null);
    const ok = connected === CLIENTS && firsts.length === BROADCASTS && results.every((r) => r.ok) && fdsBackS !== null;
    return {
      server, deflate, clients: CLIENTS, connected, workers: WORKERS, ports: ports.length, loaders: LOADERS, sources: SOURCES,
      connect_s: connectS, sessions_broadcast: sessions,
      rss_before_mib: before.rssMiB, rss_held_mib: atHeld.rssMiB, rss_after_mib: after.rssMiB,
      kib_per_conn: ((atHeld.rssMiB - before.rssMiB) * 1024) / CLIENTS,
      fds_before: before.fds, fds_held: atHeld.fds, fds_after: after.fds, fds_back_s: fdsBackS,
      load_rss_mib: loadRssMiB, first_ms: firsts, last_ms: lasts, first_median_ms: median(firsts), last_median_ms: median(lasts),
      ok: ok && errors.length === 0,
      errors: errors.concat(results.filter((r) => !r.ok).map((r) => r.error || `${r.dropped_during_hold} connections dropped during the hold`)),
    };
  } finally {
    for (const l of loaders) l.lg.kill('SIGKILL');
    srv.stdin.end();
    await exited(srv, 10000);
  }
}

async function main() {
  if (!fs.existsSync(LOADGEN)) throw new Error('build the load generator first: cargo build --release -p loadgen');
  const hard = hardFdLimit();
  const perWorker = Math.ceil(CLIENTS / WORKERS) * 1.1 + FD_SLACK; // uneven spread: 10 % headroom
  const perLoader = Math.ceil(CLIENTS / LOADERS) + FD_SLACK;
  if (perWorker > hard || perLoader > hard) {
    throw new Error(`${CLIENTS} connections over ${WORKERS} workers and ${LOADERS} load processes need up to ` +
      `${Math.ceil(Math.max(perWorker, perLoader))} fds in one process, over the hard limit ${hard}: raise --workers / --loaders`);
  }
  const modes = DEFLATE === 'both' ? [false, true] : [DEFLATE === 'on'];
  const rows = [];
  for (const server of ONLY) {
    for (const deflate of modes) {
      let r;
      try {
        r = await run(server, deflate);
      } catch (e) {
        r = { server, deflate, clients: CLIENTS, ok: false, errors: [e.message] };
      }
      process.stderr.write(`${JSON.stringify(r)}\n`);
      rows.push(r);
      if (OUT) fs.writeFileSync(OUT, JSON.stringify(rows, null, 2));
    }
  }
  const f = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : Number(x).toFixed(d));
  console.log(`${CLIENTS} connections, ${WORKERS} workers, ${LOADERS} load processes from ${SOURCES} source addresses; hard fd limit ${hard} per process\n`);
  console.log('| server | deflate | connected | time to connect all s | server RSS before → held → after close MiB (all processes) | KiB per connection | broadcast first / last delivery ms (median of ' +
    `${BROADCASTS}) | server fds before → held → after (back in s) | ok |`);
  console.log('|---|---|--:|--:|--:|--:|--:|--:|---|');
  for (const r of rows) {
    console.log(`| ${r.server} | ${r.deflate ? 'on' : 'off'} | ${r.connected ?? 0} | ${f(r.connect_s)} | ` +
      `${f(r.rss_before_mib)} → ${f(r.rss_held_mib)} → ${f(r.rss_after_mib)} | ${f(r.kib_per_conn)} | ` +
      `${f(r.first_median_ms)} / ${f(r.last_median_ms)} | ${r.fds_before ?? 'n/a'} → ${r.fds_held ?? 'n/a'} → ${r.fds_after ?? 'n/a'} (${f(r.fds_back_s, 2)}) | ` +
      `${r.ok ? 'yes' : `no: ${(r.errors || []).join('; ')}`} |`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
