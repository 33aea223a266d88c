'use strict';
// Fairness measurement (issue #20): a saturated echo server in a child process
// (fairness-server.js), `ws` load from another (fairness-load.js), and from this process a plain
// HTTP GET every PROBE_MS on the server's HTTP port. Returns the server's 10 ms interval lateness,
// the HTTP latencies and the messages the server handled per second over the measured window.
// Every wait is bounded; both children are killed whatever happens.

const { spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const readline = require('node:readline');

const HELPERS = __dirname;
const PROBE_MS = 50;

function stats(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0);
  return { n: s.length, p50: q(0.5), p95: q(0.95), p99: q(0.99), max: s.length ? s[s.length - 1] : 0 };
}

function child(args, env) {
  const ch = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const lines = [];
  const waiters = [];
  let stderr = '';
  ch.stderr.on('data', (d) => { stderr = (stderr + d).slice(-8000); });
  readline.createInterface({ input: ch.stdout }).on('line', (line) => {
    lines.push(line);
    for (const w of waiters.slice()) if (w.pred(line)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(line); }
  });
  ch.stdin.on('error', () => {});
  ch.on('exit', () => {
    for (const w of waiters.splice(0)) w.reject(new Error(`${path.basename(args[0])} exited; stderr: ${stderr}`));
  });
  const wait = (pred, ms, label) => new Promise((resolve, reject) => {
    const hit = lines.find(pred);
    if (hit !== undefined) return resolve(hit);
    const w = { pred, resolve, reject };
    waiters.push(w);
    setTimeout(() => {
      const i = waiters.indexOf(w);
      if (i >= 0) { waiters.splice(i, 1); reject(new Error(`timeout after ${ms} ms waiting for ${label}; stderr: ${stderr}`)); }
    }, ms).unref();
  });
  const kill = () => { try { ch.kill('SIGKILL'); } catch { /* gone */ } };
  return { ch, wait, kill, lines };
}

function get(port) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.get({ host: '127.0.0.1', port, path: '/probe', agent: false, timeout: 10000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ok: res.statusCode === 200, ms: performance.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ ok: false, ms: performance.now() - t0 }));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The machine's own scheduling noise: an idle `node` process running the same 10 ms interval.
 * On a box shared with other builds a runnable process may wait for a core for a long time; what
 * this control sees late is not the server's event loop's doing. `await probe.ready`, then
 * `await probe.report()` → { n, p50, p99, max } since ready (and the process ends).
 */
function controlProbe() {
  const src = `let late = [], last = performance.now();
    setInterval(() => { const now = performance.now(); late.push(Math.max(0, now - last - 10)); last = now; }, 10);
    process.stdout.write('READY\\n');
    process.stdin.on('data', () => { process.stdout.write(JSON.stringify(late) + '\\n'); process.exit(0); });`;
  const ch = child(['-e', src], {});
  return {
    ready: ch.wait((l) => l === 'READY', 15000, 'control probe READY'),
    async report() {
      const before = ch.lines.length;
      ch.ch.stdin.write('report\n');
      const line = await ch.wait((l) => l.startsWith('[') && ch.lines.indexOf(l) >= before, 15000, 'control probe report');
      ch.kill();
      return stats(JSON.parse(line));
    },
    kill: ch.kill,
  };
}

/**
 * @param {object} o
 * @param {'listen'|'meteor'} o.mode  own listener, or the Meteor adapter on an http.Server
 * @param {boolean} o.compress        permessage-deflate (Meteor's defaults) on both sides
 * @param {number} [o.workUs]         synchronous JS per message on the server (default 50 µs, 250 compressed)
 * @param {boolean} [o.deferred]      that work (and the echo) runs in a promise job, as Meteor 3's async methods
 * @param {number} [o.seconds]        measured window (after 1 s of warm-up)
 * @param {string} [o.pkg]            the package to measure (default: this checkout)
 */
async function measureFairness({ mode, compress, workUs, deferred = false, clients = 50, inflight = 4, size, seconds = 4, pkg } = {}) {
  const bytes = size ?? (compress ? 2048 : 256);
  // Enough JS per message that one load process offers more than the server's JS thread serves
  // (a compressed echo costs the load process more per message: it inflates every reply).
  workUs ??= compress ? 250 : 50;
  const env = pkg ? { DTN_PKG: pkg } : {};
  const server = child([path.join(HELPERS, 'fairness-server.js'), mode, compress ? '1' : '0', String(workUs), deferred ? '1' : '0'], env);
  let load;
  let control;
  try {
    const ready = await server.wait((l) => l.startsWith('READY '), 15000, 'server READY');
    const [, wsPort, httpPort] = ready.split(' ').map(Number);
    const url = `ws://127.0.0.1:${wsPort}${mode === 'meteor' ? '/websocket' : '/'}`;
    load = child([path.join(HELPERS, 'fairness-load.js'), url, String(clients), String(inflight), String(bytes),
      String(seconds + 3), compress ? '1' : '0'], {});
    await load.wait((l) => l.includes('"open"'), 15000, 'clients open');
    control = controlProbe();
    await control.ready;
    await sleep(1000); // warm-up (JIT, pools)
    server.ch.stdin.write('report\n'); // reset the probe
    await server.wait((l) => l.includes('"report"'), 15000, 'probe reset');
    const t0 = performance.now();
    const httpMs = [];
    let httpFailed = 0;
    while (performance.now() - t0 < seconds * 1000) {
      const r = await get(httpPort);
      if (r.ok) httpMs.push(r.ms);
      else httpFailed++;
      await sleep(PROBE_MS);
    }
    const window = (performance.now() - t0) / 1000;
    const before = server.lines.length;
    server.ch.stdin.write('report\n');
    const line = await server.wait((l, i) => l.includes('"report"') && server.lines.indexOf(l) >= before, 15000, 'probe report');
    const rep = JSON.parse(line);
    const machine = await control.report();
    return {
      mode,
      compress,
      deferred,
      lateness: rep.lateness,
      http: { ...stats(httpMs), failed: httpFailed },
      perSecond: Math.round(rep.handled / window),
      utilization: rep.utilization,
      machine,
    };
  } finally {
    if (load) load.kill();
    if (control) control.kill();
    server.kill();
  }
}

/**
 * A `setInterval(ms)` in this process that records how often it fired and the longest gap between
 * two firings (a starved event loop shows as a long gap). `reset()` starts a new window; `stop()`.
 */
function gapMeter(ms) {
  const m = { ticks: 0, maxGap: 0, last: performance.now() };
  const interval = setInterval(() => {
    const now = performance.now();
    m.maxGap = Math.max(m.maxGap, now - m.last);
    m.last = now;
    m.ticks++;
  }, ms);
  m.reset = () => { m.maxGap = 0; m.last = performance.now(); };
  m.stop = () => clearInterval(interval);
  return m;
}

module.exports = { measureFairness, controlProbe, stats, gapMeter };
