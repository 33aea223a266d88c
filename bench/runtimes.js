#!/usr/bin/env node
'use strict';
// Same port under Bun and Deno: what the pipe path costs there, next to Node's two paths
// (docs/runtimes.md). One server, bench/servers/runtime-attach.js (App().attach(http.Server), the
// demo's DDP echo), run as
//   node-fd    Node, the upgrade's fd adopted by the core (Linux's and macOS's default)
//   node-pipe  Node with DDP_TRANSPORT_NATIVE_SAME_PORT=pipe (Windows' path, TLS's path)
//   bun        Bun, which can only pipe (its node:http sockets expose no fd)
//   deno       Deno, the same
// and driven by bench/loadgen (Rust) over loopback, no compression:
//   rtt         one client, sequential echo calls: round-trip p50 (server pinned to CPU 0, the
//               load generator to CPU 1, as bench/run.js's rtt)
//   throughput  50 clients × 4 calls in flight for --seconds: calls/s (a call is one WebSocket
//               message each way) and the server's CPU per call (every thread, /proc)
// Rounds are interleaved (node-fd node-pipe bun deno, node-fd …), a fresh server per run; a run
// during which other processes used over 0.15 cores is redone, at most twice (as bench/run.js).
// --own adds node-own, bun-own and deno-own: the same app on its own listener
// (App().listen(), no same-port path), to tell the runtime's share from the pipe's.
//
//   node bench/runtimes.js [--rounds 3] [--seconds 5] [--calls 5000] [--own] [--only node-fd,bun]
//                          [--out bench/results/runtimes]
// Bun and Deno come from npm (__test__/helpers/runtime-install.js, cached in .cache/runtimes).
// Writes <out>/latest.json and <out>/latest.md; prints the table.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { runtimes } = require('../__test__/helpers/runtime-install');

const ROOT = path.resolve(__dirname, '..');
const SERVER = path.join(__dirname, 'servers', 'runtime-attach.js');
const CLK_TCK = 100;
const OTHER_CPU_LIMIT = 0.15; // cores used by other processes during a measured window
const MAX_REDOS = 2;

function parseArgs(argv) {
  const o = { rounds: 3, seconds: 5, calls: 5000, only: null, own: false, out: path.join(__dirname, 'results', 'runtimes') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--rounds') o.rounds = Number(v());
    else if (a === '--seconds') o.seconds = Number(v());
    else if (a === '--calls') o.calls = Number(v());
    else if (a === '--only') o.only = v().split(',');
    else if (a === '--own') o.own = true;
    else if (a === '--out') o.out = path.resolve(v());
    else throw new Error(`unknown argument ${a}; usage: node bench/runtimes.js [--rounds N] [--seconds S] [--calls N] [--own] [--only a,b] [--out DIR]`);
  }
  for (const k of ['rounds', 'seconds', 'calls']) if (!(o[k] > 0)) throw new Error(`--${k} must be > 0`);
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TASKSET = os.cpus().length >= 2 && ['/usr/bin/taskset', '/bin/taskset'].find((p) => fs.existsSync(p));
const pinned = (cpu, argv) => (cpu !== undefined && TASKSET ? [TASKSET, '-c', cpu, ...argv] : argv);

function procCpuUs(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * (1e6 / CLK_TCK);
  } catch {
    return null;
  }
}

function machineBusyUs() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6]) * (1e6 / CLK_TCK);
}

const children = new Set();
function track(child) {
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}
process.on('exit', () => { for (const c of children) { try { c.kill('SIGKILL'); } catch { /* gone */ } } });

function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', r));
}

function within(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((r) => { timer = setTimeout(() => r('timeout'), ms); })]).finally(() => clearTimeout(timer));
}

async function startServer(variant, cpu) {
  const [file, args, env] = variant.command(SERVER);
  const [cmd, ...rest] = pinned(cpu, [file, ...args]);
  const childEnv = { ...process.env, ...env };
  delete childEnv.DDP_TRANSPORT_NATIVE_SAME_PORT;
  Object.assign(childEnv, variant.env || {});
  const child = track(spawn(cmd, rest, { cwd: ROOT, env: childEnv, stdio: ['pipe', 'pipe', 'pipe'] }));
  let stderr = '';
  child.stderr.on('data', (d) => { if (stderr.length < 8192) stderr += d; });
  child.stdin.on('error', () => {});
  const lines = [];
  const rl = readline.createInterface({ input: child.stdout });
  rl.on('line', (l) => lines.push(l.trim()));
  const t0 = Date.now();
  while (!lines.some((l) => l.startsWith('READY ')) && child.exitCode === null && Date.now() - t0 < 20000) await sleep(20);
  const ready = lines.find((l) => l.startsWith('READY '));
  if (!ready) {
    child.kill('SIGKILL');
    throw new Error(`${variant.name} did not start: ${stderr.trim().split('\n').slice(-3).join(' | ')}`);
  }
  return { child, port: Number(ready.slice(6)), lines, stderr: () => stderr };
}

async function stopServer(s) {
  s.child.stdin.end();
  if (await within(exited(s.child), 3000) === 'timeout') {
    s.child.kill('SIGKILL');
    await within(exited(s.child), 3000);
  }
}

/** One run: a fresh server, one workload; the load generator's JSON plus the server's CPU and the
 *  other processes' CPU between its MARK start and MARK end. */
async function runOnce(variant, workload, cfg) {
  const rec = { variant: variant.name, workload, ok: false };
  const serverCpu = workload === 'rtt' ? '0' : undefined;
  let server;
  try {
    server = await startServer(variant, serverCpu);
  } catch (e) {
    rec.error = e.message;
    return rec;
  }
  try {
    await sleep(300);
    const url = `ws://127.0.0.1:${server.port}/websocket`;
    const lgArgs = workload === 'rtt'
      ? ['rtt', '--url', url, '--calls', String(cfg.calls)]
      : ['throughput', '--url', url, '--clients', '50', '--inflight', '4', '--seconds', String(cfg.seconds)];
    const [cmd, ...args] = pinned(workload === 'rtt' ? '1' : undefined, [cfg.loadgen, ...lgArgs, '--sync']);
    const lg = track(spawn(cmd, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] }));
    lg.stdin.on('error', () => {});
    let lgErr = '';
    lg.stderr.on('data', (d) => { if (lgErr.length < 8192) lgErr += d; });
    const marks = {};
    let result = null;
    const rl = readline.createInterface({ input: lg.stdout });
    rl.on('line', (line) => {
      if (line.startsWith('MARK ')) {
        marks[line.slice(5).trim()] = { t: performance.now(), server: procCpuUs(server.child.pid), lg: procCpuUs(lg.pid),
          machine: machineBusyUs(), self: process.cpuUsage() };
        lg.stdin.write('\n');
      } else if (line.startsWith('{')) {
        try { result = JSON.parse(line); } catch { /* keep looking */ }
      }
    });
    if (await within(exited(lg), (cfg.seconds + 60) * 1000) === 'timeout') {
      lg.kill('SIGKILL');
      rec.error = 'load generator timed out';
    }
    if (!result || !result.ok) {
      rec.error = rec.error || (result && result.error) || `no result (exit ${lg.exitCode}) ${lgErr.trim().slice(-300)}`;
      return rec;
    }
    const { start: a, end: b } = marks;
    const wall = (b.t - a.t) / 1000;
    const serverUs = b.server - a.server;
    const lgUs = b.lg - a.lg;
    const selfUs = (b.self.user + b.self.system) - (a.self.user + a.self.system);
    rec.path = (server.lines.find((l) => l.startsWith('PATH ')) || 'PATH ?').slice(5);
    rec.other_cores = Math.max(0, (b.machine - a.machine) - serverUs - lgUs - selfUs) / 1e6 / wall;
    if (workload === 'rtt') {
      rec.p50_us = result.p50_us;
      rec.p99_us = result.p99_us;
    } else {
      rec.calls_per_s = result.calls_per_s;
      rec.server_cpu_us_per_call = serverUs / result.calls;
      rec.server_cores = serverUs / 1e6 / wall;
    }
    rec.ok = true;
  } catch (e) {
    rec.error = e.message;
  } finally {
    await stopServer(server);
  }
  return rec;
}

function median(xs) {
  const v = xs.filter(Number.isFinite).sort((p, q) => p - q);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

function spread(xs) {
  const v = xs.filter(Number.isFinite);
  return v.length ? { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length } : null;
}

const METRICS = [
  { workload: 'rtt', key: 'p50_us', label: 'rtt: round trip p50', unit: 'µs', digits: 0 },
  { workload: 'throughput', key: 'calls_per_s', label: 'throughput: echo calls/s (50 × 4 in flight)', unit: '/s', digits: 0 },
  { workload: 'throughput', key: 'server_cpu_us_per_call', label: 'throughput: server CPU per call', unit: 'µs', digits: 1 },
];

function fmt(x, d) {
  if (x === null || x === undefined) return 'n/a';
  return d === 0 ? Math.round(x).toLocaleString('en-US') : x.toFixed(d);
}

function report(runs, variants, cfg, meta) {
  const out = { ...meta, config: cfg, metrics: {}, ratios: {} };
  const names = variants.map((v) => v.name);
  for (const m of METRICS) {
    out.metrics[m.key] = {};
    for (const n of names) {
      out.metrics[m.key][n] = spread(runs.filter((r) => r.ok && r.variant === n && r.workload === m.workload).map((r) => r[m.key]));
    }
    // Per-round ratios to a base, then their median and range.
    for (const base of ['node-pipe', 'node-fd']) {
      if (!names.includes(base)) continue;
      out.ratios[`${m.key}/${base}`] = {};
      for (const n of names) {
        const per = [];
        for (let round = 1; round <= cfg.rounds; round++) {
          const pick = (v) => runs.find((r) => r.ok && r.round === round && r.variant === v && r.workload === m.workload);
          const x = pick(n);
          const y = pick(base);
          if (x && y && y[m.key] > 0) per.push(x[m.key] / y[m.key]);
        }
        out.ratios[`${m.key}/${base}`][n] = spread(per);
      }
    }
  }
  const lines = [];
  lines.push(`# Same port under Bun and Deno (bench/runtimes.js)`, '');
  lines.push(`${meta.started} – ${meta.finished}; ${cfg.rounds} interleaved rounds; rtt ${cfg.calls} calls, throughput ${cfg.seconds} s windows; ` +
    `${meta.machine.cores} cores (${meta.machine.cpu}); ${meta.versions}.`, '');
  lines.push('Each cell: median of the rounds (min–max). Ratios: per round, then the median (min–max).', '');
  lines.push(`| metric | ${names.join(' | ')} |`, `| :-- | ${names.map(() => '--:').join(' | ')} |`);
  for (const m of METRICS) {
    const cells = names.map((n) => {
      const s = out.metrics[m.key][n];
      return s ? `${fmt(s.median, m.digits)} ${m.unit} (${fmt(s.min, m.digits)}–${fmt(s.max, m.digits)})` : 'n/a';
    });
    lines.push(`| ${m.label} | ${cells.join(' | ')} |`);
  }
  for (const base of ['node-pipe', 'node-fd']) {
    if (!names.includes(base)) continue;
    for (const m of METRICS) {
      const cells = names.map((n) => {
        const s = out.ratios[`${m.key}/${base}`][n];
        return s ? `${s.median.toFixed(2)}× (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : 'n/a';
      });
      lines.push(`| ${m.label} ÷ ${base} | ${cells.join(' | ')} |`);
    }
  }
  const other = spread(runs.filter((r) => r.ok).map((r) => r.other_cores));
  const paths = names.map((n) => `${n}: ${[...new Set(runs.filter((r) => r.variant === n && r.ok).map((r) => r.path))].join('/') || 'n/a'}`);
  lines.push('', `Same-port path each server reported: ${paths.join(', ')}.`);
  const redone = runs.filter((r) => r.redos > 0).length;
  if (other) lines.push(`Other processes during the measured windows: median ${other.median.toFixed(2)} cores (max ${other.max.toFixed(2)}); ${redone} of ${runs.length} runs redone for going over ${OTHER_CPU_LIMIT} cores (at most ${MAX_REDOS} times each, the last kept).`);
  const failed = runs.filter((r) => !r.ok);
  for (const r of failed) lines.push(`- failed: ${r.variant} ${r.workload} round ${r.round}: ${r.error}`);
  out.markdown = `${lines.join('\n')}\n`;
  return out;
}

async function loadgenBinary() {
  const candidates = [path.join(ROOT, 'target', 'release', 'loadgen'), path.join(__dirname, 'loadgen', 'target', 'release', 'loadgen')];
  let found = candidates.find((p) => fs.existsSync(p));
  if (found) return found;
  process.stderr.write('bench: building the load generator (cargo build --release)…\n');
  const b = spawn('cargo', ['build', '--release', '--quiet', '--manifest-path', path.join(__dirname, 'loadgen', 'Cargo.toml')], { cwd: ROOT, stdio: 'inherit' });
  await exited(b);
  found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw new Error('bench/loadgen did not build');
  return found;
}

async function main() {
  const cfg = parseArgs(process.argv.slice(2));
  cfg.loadgen = await loadgenBinary();
  const rt = await runtimes();
  const node = (file, args = []) => [process.execPath, [file, ...args], {}];
  let variants = [
    { name: 'node-fd', command: node },
    { name: 'node-pipe', command: node, env: { DDP_TRANSPORT_NATIVE_SAME_PORT: 'pipe' } },
  ];
  for (const name of ['bun', 'deno']) {
    if (rt[name].skip) process.stderr.write(`bench: ${name} left out: ${rt[name].skip}\n`);
    else variants.push({ name, command: rt[name].command, version: rt[name].version });
  }
  if (cfg.own) {
    const own = (v) => ({ ...v, name: `${v.name === 'node-fd' ? 'node' : v.name}-own`, command: (file) => v.command(file, ['--own']) });
    variants = [...variants, ...variants.filter((v) => v.name !== 'node-pipe').map(own)];
  }
  if (cfg.only) variants = variants.filter((v) => cfg.only.includes(v.name));
  const started = new Date().toISOString();
  const runs = [];
  for (let round = 1; round <= cfg.rounds; round++) {
    for (const workload of ['rtt', 'throughput']) {
      for (const v of variants) {
        // As bench/run.js: a run during which other processes used more than OTHER_CPU_LIMIT
        // cores is redone (at most MAX_REDOS times; the last one is kept).
        let rec;
        for (let attempt = 0; attempt <= MAX_REDOS; attempt++) {
          rec = await runOnce(v, workload, cfg);
          rec.redos = attempt;
          if (!rec.ok || !(rec.other_cores > OTHER_CPU_LIMIT)) break;
        }
        rec.round = round;
        runs.push(rec);
        const fig = rec.ok ? (workload === 'rtt' ? `p50 ${rec.p50_us.toFixed(0)} µs` : `${Math.round(rec.calls_per_s)} calls/s, ${rec.server_cpu_us_per_call.toFixed(1)} µs CPU/call`) : `FAILED ${rec.error}`;
        process.stderr.write(`bench: round ${round} ${workload} ${v.name} (${rec.path || '?'}): ${fig}, other ${(rec.other_cores || 0).toFixed(2)} cores\n`);
      }
    }
  }
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const meta = {
    started,
    finished: new Date().toISOString(),
    machine: { cores: os.cpus().length, cpu: ((/^model name\s*:\s*(.+)$/m.exec(cpuinfo) || [])[1] || 'unknown').trim(), kernel: os.release() },
    versions: [`Node ${process.versions.node}`, ...['bun', 'deno'].filter((n) => !rt[n].skip).map((n) => `${n === 'bun' ? 'Bun' : 'Deno'} ${rt[n].version}`)].join(', '),
  };
  const rep = report(runs, variants, { ...cfg, loadgen: path.relative(ROOT, cfg.loadgen) }, meta);
  fs.mkdirSync(cfg.out, { recursive: true });
  const { markdown, ...json } = rep;
  fs.writeFileSync(path.join(cfg.out, 'latest.json'), `${JSON.stringify({ ...json, runs }, null, 2)}\n`);
  fs.writeFileSync(path.join(cfg.out, 'latest.md'), markdown);
  process.stdout.write(markdown);
  process.exitCode = runs.some((r) => !r.ok) ? 1 : 0;
}

main().catch((e) => {
  process.stderr.write(`bench: ${e && e.stack || e}\n`);
  process.exit(2);
});
