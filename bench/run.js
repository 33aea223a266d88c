#!/usr/bin/env node
'use strict';
// The side-by-side benchmark runner (`npm run bench`). See bench/README.md for the method.
//
//   node bench/run.js [--smoke] [--rounds N] [--only a,b] [--workloads x,y] [--seconds N] [--out DIR]
//
// For each round, for each workload, every transport runs once (interleaved: A B C … A B C …), each
// run on a fresh server process. The runner samples the server's CPU (utime+stime of the whole
// process, /proc/<pid>/stat), the load generator's, its own and the machine's (/proc/stat) at the
// load generator's `MARK start`/`MARK end` lines, and redoes a run whose "other processes" CPU was
// above OTHER_CPU_LIMIT cores (at most MAX_REDOS times). Results: <out>/latest.{json,md,svg} (one
// copy; the run's date is inside, and git keeps the history).

const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { renderMarkdown, renderSvg } = require('./report');
const W = require('./workloads');

const ROOT = path.resolve(__dirname, '..');
const OTHER_CPU_LIMIT = 0.15; // cores used by other processes during a measured window
const MAX_REDOS = 2;
const MIN_WINDOW_FOR_REDO_S = 1; // windows shorter than this are too coarse for /proc's 10 ms ticks

// ------------------------------------------------------------------------------------------------
// Options

function parseArgs(argv) {
  const o = { smoke: false, rounds: null, only: null, workloads: null, seconds: null, out: path.join(__dirname, 'results') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--smoke': o.smoke = true; break;
      case '--rounds': o.rounds = posInt(a, val()); break;
      case '--only': o.only = val().split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--workloads': o.workloads = val().split(',').map((s) => s.trim()).filter(Boolean); break;
      case '--seconds': o.seconds = Number(val()); if (!(o.seconds > 0)) throw new Error('--seconds must be > 0'); break;
      case '--out': o.out = path.resolve(val()); break;
      case '--render': o.render = path.resolve(val()); break;
      case '--storm': o.storm = true; break;
      case '-h': case '--help':
        process.stdout.write('usage: node bench/run.js [--smoke] [--rounds N] [--only a,b] [--workloads x,y] [--seconds N] [--out DIR] [--storm]\n' +
          '  --storm: then the reconnect-storm benchmark (bench/storm.js: 10,000 new clients, native with/without admission control, ws, sockjs; DIR/storm.md)\n' +
          '       node bench/run.js --render bench/results/latest.json   # rewrite its .md and .svg\n' +
          `  transports: ${W.TRANSPORTS.map((t) => t.name).join(', ')}\n  workloads: ${W.WORKLOADS.map((w) => w.name).join(', ')}\n`);
        process.exit(0);
        break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  for (const [list, all, what] of [[o.only, W.TRANSPORTS, 'transport'], [o.workloads, W.WORKLOADS, 'workload']]) {
    for (const n of list || []) {
      if (!all.some((x) => x.name === n)) throw new Error(`unknown ${what} ${n}; known: ${all.map((x) => x.name).join(', ')}`);
    }
  }
  if (o.rounds === null) o.rounds = o.smoke ? 1 : 3;
  return o;
}

function posInt(name, v) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}

// ------------------------------------------------------------------------------------------------
// Children: every one in its own process group, all killed when the runner exits.

const live = new Set();

function track(child) {
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

function killGroup(child, signal) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  try { process.kill(-child.pid, signal); } catch (e) {
    try { child.kill(signal); } catch (e2) { /* gone */ }
  }
}

function killAll() {
  for (const c of live) killGroup(c, 'SIGKILL');
}

process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`\nbench: ${sig}, stopping children\n`);
    killAll();
    process.exit(130);
  });
}

function exitPromise(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', resolve));
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), ms); })])
    .finally(() => clearTimeout(timer));
}

function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: ROOT, maxBuffer: 64 << 20, ...opts }, (err, stdout, stderr) => {
      resolve({ ok: !err, code: err ? err.code : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

// ------------------------------------------------------------------------------------------------
// /proc sampling

const CLK_TCK = 100; // USER_HZ: 100 on every Linux ABI Node runs on

function procCpuUs(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * (1e6 / CLK_TCK); // utime + stime, every thread
  } catch (e) {
    return null;
  }
}

function procRssKiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch (e) {
    return null;
  }
}

function machineCpuUs() {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = line;
  return { busy: (user + nice + system + irq + softirq) * (1e6 / CLK_TCK), steal: (steal || 0) * (1e6 / CLK_TCK) };
}

function sample(serverPid, lgPid) {
  const self = process.cpuUsage();
  return {
    t: performance.now(),
    server: procCpuUs(serverPid),
    loadgen: procCpuUs(lgPid),
    machine: machineCpuUs(),
    self: self.user + self.system,
  };
}

// ------------------------------------------------------------------------------------------------
// Machine line, loadgen build

async function machineInfo() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const model = (/^model name\s*:\s*(.+)$/m.exec(cpuinfo) || [])[1] || os.cpus()[0]?.model || 'unknown';
  const rustc = await run('rustc', ['-V']);
  const uwsPkg = readJson(path.join(ROOT, 'node_modules', 'uws-pack', 'package.json'));
  return {
    cores: os.cpus().length,
    cpu: model.trim(),
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    rustc: rustc.ok ? rustc.stdout.trim() : 'unavailable',
    uwsPack: uwsPkg ? uwsPkg.version : null,
  };
}

function readJson(p) {
  try { return JSON.parse(fs.readFileSync(p, 'utf8')); } catch (e) { return null; }
}

async function buildLoadgen() {
  const manifest = path.join(__dirname, 'loadgen', 'Cargo.toml');
  process.stderr.write('bench: building the load generator (cargo build --release)…\n');
  const b = await run('cargo', ['build', '--release', '--quiet', '--manifest-path', manifest]);
  const meta = await run('cargo', ['metadata', '--no-deps', '--format-version', '1', '--manifest-path', manifest]);
  let bin = null;
  if (meta.ok) {
    try { bin = path.join(JSON.parse(meta.stdout).target_directory, 'release', 'loadgen'); } catch (e) { bin = null; }
  }
  const candidates = [bin, path.join(__dirname, 'loadgen', 'target', 'release', 'loadgen'), path.join(ROOT, 'target', 'release', 'loadgen')];
  const found = candidates.find((p) => p && fs.existsSync(p));
  if (!b.ok) {
    process.stderr.write(b.stderr);
    if (!found) throw new Error('could not build bench/loadgen');
    process.stderr.write(`bench: cargo build failed; using the existing ${found}\n`);
  }
  if (!found) throw new Error('loadgen binary not found after the build');
  return found;
}

// ------------------------------------------------------------------------------------------------
// Servers

// `cpus` (a taskset list such as '0') pins the process and every thread it starts.
const pinned = (cpus, argv) => (cpus && TASKSET ? ['taskset', '-c', cpus, ...argv] : argv);
const TASKSET = os.cpus().length >= 2 && ['/usr/bin/taskset', '/bin/taskset'].some((p) => fs.existsSync(p));

async function startServer(t, compress, smoke, cpus) {
  const env = { ...process.env, ...t.env, BENCH_EXIT_ON_STDIN_END: '1', BENCH_COMPRESS: compress ? '1' : '0' };
  const [cmd, ...args] = pinned(cpus, [...t.command(ROOT), ...(compress && t.compressArgs ? t.compressArgs : [])]);
  // Raise the fd limit for thousands of idle sockets, then exec: the pid stays the server's.
  const child = track(spawn('bash', ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"', 'bench-server', cmd, ...args, '--port', '0'], {
    cwd: ROOT, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'],
  }));
  let stderr = '';
  child.stderr.on('data', (d) => { if (stderr.length < 8192) stderr += d; });
  child.stdin.on('error', () => {});
  let gcDone = null;
  const eluWaiters = [];
  const port = await new Promise((resolve) => {
    const rl = readline.createInterface({ input: child.stdout });
    const timer = setTimeout(() => resolve(null), smoke ? 30000 : 20000);
    rl.on('line', (line) => {
      const m = /^READY (\d+)$/.exec(line.trim());
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      const g = /^GC done (\d+)(?: (\d+))?$/.exec(line.trim());
      if (g && gcDone) gcDone({ heapTotal: Number(g[1]), heapUsed: g[2] === undefined ? null : Number(g[2]) });
      if (line.startsWith('ELU ') && eluWaiters.length) {
        let v = null;
        try { v = JSON.parse(line.slice(4)); } catch (e) { /* null */ }
        eluWaiters.shift()(v);
      }
    });
    child.on('exit', () => { clearTimeout(timer); resolve(null); });
  });
  child.stdout.resume();
  /** One full GC in the server (`gc` on its stdin) → V8's { heapTotal, heapUsed } after it
   *  (bytes), or null if the server did not answer within 5 s. */
  const gc = async () => {
    const answered = new Promise((resolve) => { gcDone = resolve; });
    child.stdin.write('gc\n');
    const r = await withTimeout(answered, 5000);
    gcDone = null;
    if (r === null || typeof r !== 'object') return null;
    await sleep(500); // let the allocator and V8's background threads give pages back
    return r;
  };
  /** The server's event-loop utilization since its previous `elu` (`elu` on its stdin):
   *  { utilization, active_ms, idle_ms }, or null if it did not answer within 5 s. */
  const elu = () => {
    const answered = new Promise((resolve) => eluWaiters.push(resolve));
    child.stdin.write('elu\n');
    return withTimeout(answered, 5000).then((r) => (r === 'timeout' ? null : r));
  };
  if (!port) {
    killGroup(child, 'SIGKILL');
    await exitPromise(child);
    throw new Error(`server ${t.name} did not start: ${stderr.trim().split('\n').slice(-3).join(' | ') || 'no READY line'}`);
  }
  return { child, port, gc, elu, stderr: () => stderr };
}

async function stopServer(s) {
  killGroup(s.child, 'SIGTERM');
  if (await withTimeout(exitPromise(s.child), 3000) === 'timeout') {
    killGroup(s.child, 'SIGKILL');
    await withTimeout(exitPromise(s.child), 3000);
  }
}

// ------------------------------------------------------------------------------------------------
// One run: fresh server, one workload, samples at the marks.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function runOnce(t, w, cfg) {
  const rec = { transport: t.name, workload: w.name, ok: false };
  let server;
  try {
    server = await startServer(t, w.compress, cfg.smoke, w.pin && w.pin.server);
  } catch (e) {
    rec.error = e.message;
    return rec;
  }
  try {
    await sleep(cfg.smoke ? 100 : 300);
    // Memory workloads: V8's heap in use before any client (after one full GC), to tell V8's
    // share of a connection from the rest.
    const heapBefore = w.rss ? await server.gc() : null;
    const rssBefore = procRssKiB(server.child.pid);
    const url = `ws://127.0.0.1:${server.port}/websocket`;
    const [cmd, ...args] = pinned(w.pin && w.pin.loadgen, w.command(cfg, url).flat());
    const lg = track(spawn(cmd, [...args, '--sync'], { cwd: ROOT, detached: true, stdio: ['pipe', 'pipe', 'pipe'] }));
    lg.stdin.on('error', () => {});
    let lgErr = '';
    lg.stderr.on('data', (d) => { if (lgErr.length < 8192) lgErr += d; });
    const marks = {};
    const elus = {};
    let rssEnd = null;
    let result = null;
    let rssHeld = null;
    let rssHeldGc = null;
    let heapHeldGc = null;
    const rl = readline.createInterface({ input: lg.stdout });
    const rlClosed = new Promise((r) => rl.once('close', r));
    rl.on('line', (line) => {
      if (line.startsWith('MARK ')) {
        const name = line.slice(5).trim();
        marks[name] = sample(server.child.pid, lg.pid);
        if (w.elu) elus[name] = server.elu();
        if (w.rssEnd && name === 'end') rssEnd = procRssKiB(server.child.pid);
        lg.stdin.write('\n');
      } else if (line.startsWith('HELD')) {
        marks.held = sample(server.child.pid, lg.pid);
        setTimeout(async () => {
          rssHeld = procRssKiB(server.child.pid);
          marks.released = sample(server.child.pid, lg.pid);
          if (w.rss) {
            // Still held, after one full GC: what the connections keep, without the garbage their
            // set-up left (Node's per-upgrade objects in an attached server, for one).
            const heap = await server.gc();
            if (heap !== null) {
              rssHeldGc = procRssKiB(server.child.pid);
              heapHeldGc = { used: Math.round(heap.heapUsed / 1024), total: Math.round(heap.heapTotal / 1024) };
            }
          }
          lg.stdin.end();
        }, cfg.smoke ? 200 : 1000);
      } else if (line.startsWith('{')) {
        try { result = JSON.parse(line); } catch (e) { /* keep looking */ }
      }
    });
    const limit = w.timeoutS(cfg) * 1000;
    const finished = await withTimeout(exitPromise(lg), limit);
    if (finished === 'timeout') {
      killGroup(lg, 'SIGKILL');
      await exitPromise(lg);
      rec.error = `load generator still running after ${limit / 1000} s (killed)`;
    }
    await withTimeout(rlClosed, 5000);
    const serverAlive = server.child.exitCode === null && server.child.signalCode === null;
    rec.loadgen = result;
    if (!result) {
      rec.error = rec.error || `no result line from the load generator (exit ${lg.exitCode}) ${lgErr.trim().slice(-300)}`;
    } else if (!result.ok) {
      rec.error = result.error || 'workload failed';
    } else if (!serverAlive) {
      rec.error = `server exited during the run: ${server.stderr().trim().slice(-300)}`;
    } else {
      rec.ok = true;
    }
    const a = marks.start || marks.held;
    const b = marks.end || marks.released;
    if (a && b && a.server !== null && b.server !== null) {
      const wall = (b.t - a.t) / 1000;
      const serverUs = b.server - a.server;
      const lgUs = a.loadgen !== null && b.loadgen !== null ? b.loadgen - a.loadgen : 0;
      const otherUs = (b.machine.busy - a.machine.busy) - serverUs - lgUs - (b.self - a.self);
      rec.window = {
        wall_s: round(wall, 4),
        server_cpu_s: round(serverUs / 1e6, 4),
        server_cores: round(serverUs / 1e6 / wall, 3),
        loadgen_cpu_s: round(lgUs / 1e6, 4),
        loadgen_cores: round(lgUs / 1e6 / wall, 3),
        other_cores: round(Math.max(0, otherUs) / 1e6 / wall, 3),
        steal_cores: round((b.machine.steal - a.machine.steal) / 1e6 / wall, 3),
      };
    }
    if (w.elu && elus.start && elus.end) {
      // The answer to the `elu` sent at MARK end covers MARK start → MARK end.
      await elus.start;
      rec.elu = await elus.end;
    }
    if (w.rssEnd) rec.rss_end_kib = rssEnd;
    if (w.rss) {
      rec.rss = { before_kib: rssBefore, held_kib: rssHeld, held_gc_kib: rssHeldGc, v8_used_held_gc_kib: heapHeldGc && heapHeldGc.used,
        v8_total_held_gc_kib: heapHeldGc && heapHeldGc.total,
        v8_used_before_kib: heapBefore === null ? null : Math.round(heapBefore.heapUsed / 1024),
        v8_total_before_kib: heapBefore === null ? null : Math.round(heapBefore.heapTotal / 1024) };
      if (w.rssAfter && serverAlive) {
        // The load generator exited: its connections are closed. What does the server give back?
        await sleep(cfg.rssAfterS * 1000);
        rec.rss.after_kib = procRssKiB(server.child.pid);
        // An idle process never collects its JS garbage: one full GC, then what is left is what
        // the process (its allocator, its native side) keeps.
        const heap = await server.gc();
        if (heap !== null) {
          rec.rss.after_gc_kib = procRssKiB(server.child.pid);
          rec.rss.v8_heap_after_gc_kib = Math.round(heap.heapTotal / 1024);
        }
      }
    }
    if (rec.ok) rec.metrics = w.metrics(rec);
  } catch (e) {
    rec.ok = false;
    rec.error = e.message;
  } finally {
    await stopServer(server);
  }
  return rec;
}

function round(x, d) {
  const f = 10 ** d;
  return Math.round(x * f) / f;
}

// ------------------------------------------------------------------------------------------------
// Medians

function median(xs) {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

function summarize(transports, workloads, runs, availability) {
  const out = {};
  for (const t of transports) {
    out[t.name] = {};
    for (const w of workloads) {
      const na = availability[t.name] || w.notApplicable(t);
      if (na) {
        out[t.name][w.name] = { status: 'n/a', reason: na };
        continue;
      }
      const mine = runs.filter((r) => r.transport === t.name && r.workload === w.name && r.final);
      const good = mine.filter((r) => r.ok);
      const cell = { status: good.length === mine.length && mine.length > 0 ? 'ok' : 'failed', runs: mine.length, ok: good.length };
      if (good.length < mine.length) cell.errors = [...new Set(mine.filter((r) => !r.ok).map((r) => r.error))];
      if (good.length) {
        cell.metrics = {};
        cell.spread = {}; // [min, max] over rounds
        for (const k of Object.keys(good[0].metrics)) {
          const vs = good.map((r) => r.metrics[k]).filter((x) => typeof x === 'number' && Number.isFinite(x));
          cell.metrics[k] = median(vs);
          if (vs.length) cell.spread[k] = [Math.min(...vs), Math.max(...vs)];
        }
      }
      out[t.name][w.name] = cell;
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------------

/** --render X.json: rewrite X.md and X.svg from a saved report (after a report.js change). */
function rerender(file) {
  const report = JSON.parse(fs.readFileSync(file, 'utf8'));
  const base = file.replace(/\.json$/, '');
  const name = path.basename(base);
  fs.writeFileSync(`${base}.md`, renderMarkdown(report, W, `${name}.svg`));
  fs.writeFileSync(`${base}.svg`, renderSvg(report, W));
  process.stdout.write(renderMarkdown(report, W, null));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.render) return rerender(opts.render);
  const cfg = W.config(opts);
  const transports = W.TRANSPORTS.filter((t) => !opts.only || opts.only.includes(t.name));
  const workloads = W.WORKLOADS.filter((w) => !opts.workloads || opts.workloads.includes(w.name));
  const machine = await machineInfo();
  process.stderr.write(`bench: ${machine.cores} cores, ${machine.cpu}, Node ${machine.node}, ${machine.rustc}\n`);
  cfg.loadgen = await buildLoadgen();

  const availability = {};
  for (const t of transports) availability[t.name] = t.unavailable(ROOT);
  for (const [n, why] of Object.entries(availability)) if (why) process.stderr.write(`bench: ${n}: n/a (${why})\n`);

  const runs = [];
  const started = new Date();
  for (let round = 1; round <= opts.rounds; round++) {
    for (const w of workloads) {
      for (const t of transports) {
        if (availability[t.name] || w.notApplicable(t)) continue;
        let best = null;
        for (let attempt = 0; attempt <= MAX_REDOS; attempt++) {
          const rec = await runOnce(t, w, cfg);
          rec.round = round;
          rec.attempt = attempt;
          runs.push(rec);
          const other = rec.window ? rec.window.other_cores : 0;
          const noisy = !opts.smoke && w.cpuSensitive !== false && rec.ok && rec.window && rec.window.wall_s >= MIN_WINDOW_FOR_REDO_S && other > OTHER_CPU_LIMIT;
          process.stderr.write(`bench: [${round}/${opts.rounds}] ${w.name.padEnd(20)} ${t.name.padEnd(13)} ` +
            `${rec.ok ? w.brief(rec.metrics) : 'FAILED: ' + rec.error}` +
            `${rec.window ? `  (other ${rec.window.other_cores} cores)` : ''}${noisy ? ' → redo' : ''}\n`);
          if (!best || (rec.ok && (!best.ok || (rec.window && best.window && rec.window.other_cores < best.window.other_cores)))) best = rec;
          if (!noisy) break;
        }
        best.final = true;
      }
    }
  }

  const medians = summarize(transports, workloads, runs, availability);
  const date = started.toISOString().slice(0, 10);
  const report = {
    date,
    started: started.toISOString(),
    finished: new Date().toISOString(),
    machine,
    config: { ...cfg, loadgen: path.relative(ROOT, cfg.loadgen), rounds: opts.rounds, smoke: opts.smoke,
      otherCpuLimitCores: OTHER_CPU_LIMIT, maxRedos: MAX_REDOS },
    transports: transports.map((t) => ({ name: t.name, description: t.description, unavailable: availability[t.name] || null })),
    workloads: workloads.map((w) => ({ name: w.name, description: w.description })),
    medians,
    runs,
  };
  const svg = renderSvg(report, W);
  fs.mkdirSync(opts.out, { recursive: true });
  const json = JSON.stringify(report, null, 2) + '\n';
  const base = path.join(opts.out, 'latest');
  fs.writeFileSync(`${base}.json`, json);
  fs.writeFileSync(`${base}.md`, renderMarkdown(report, W, 'latest.svg'));
  fs.writeFileSync(`${base}.svg`, svg);
  const md = renderMarkdown(report, W, null);
  process.stdout.write(md);
  process.stderr.write(`bench: wrote ${base}.{json,md,svg}\n`);
  const failed = Object.values(medians).some((row) => Object.values(row).some((c) => c.status === 'failed'));
  process.exitCode = failed ? 1 : 0;
  if (opts.storm) {
    const stormArgs = ['--rounds', String(opts.rounds), '--out', opts.out, ...(opts.smoke ? ['--new', '500', '--calm', '1'] : [])];
    process.stderr.write(`bench: reconnect storm (bench/storm.js ${stormArgs.join(' ')})\n`);
    const code = await new Promise((resolve) => {
      spawn(process.execPath, [path.join(__dirname, 'storm.js'), ...stormArgs], { stdio: 'inherit' }).on('exit', resolve);
    });
    if (code !== 0) process.exitCode = 1;
  }
}

main().catch((e) => {
  process.stderr.write(`bench: ${e && e.stack || e}\n`);
  killAll();
  process.exit(2);
});
