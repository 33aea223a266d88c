'use strict';
// Plain HTTP on an attached server, side by side with the same server without attach() (and
// attached without the first look at new connections): does attach() slow Node's own HTTP?
//
//   node bench/http.js [--rounds N] [--seconds S] [--clients C] [--out DIR]
//
// Servers: bench/servers/http-plain.js (`plain`: an http.Server alone; `attached`: the Meteor
// adapter attached to it, the core looking first at each new connection; `attached-upgrade`: the
// same with DDP_TRANSPORT_NATIVE_SAME_PORT=upgrade). Two loads, each S seconds per server per
// round, C requests in flight, from one client process (Node's http, GET /):
//   - new connections: each request on a connection of its own (Connection: close);
//   - keep-alive: C connections, requests one after another on each.
// Figures per server and load: requests/s, latency p50 (ms) and the server process's CPU µs per
// request (utime+stime, /proc). Rounds are interleaved (each round runs every server once, in a
// rotated order); medians with min-max; ratios of medians against `plain`. Bounded: every run
// ends after its S seconds, the whole bench after rounds × servers × loads × (S + 2) seconds.
// Writes <out>/latest.{json,md} (default bench/results/http).

const { spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');

const ROOT = path.join(__dirname, '..');
const SERVERS = [
  { name: 'plain', args: [] },
  { name: 'attached', args: ['--attach'] },
  { name: 'attached-upgrade', args: ['--attach', '--upgrade'] },
];
const LOADS = ['new-connections', 'keep-alive'];

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

/** The client: runs in a child process (`--client port load seconds clients`), prints JSON. */
async function client(port, load, seconds, clients) {
  const agent = load === 'keep-alive' ? new http.Agent({ keepAlive: true, maxSockets: clients }) : false;
  const lat = [];
  const end = Date.now() + seconds * 1000;
  let errors = 0;
  const one = () => new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent, headers: agent ? {} : { Connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => {
        lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
        resolve();
      });
    });
    req.on('error', () => { errors++; resolve(); });
  });
  await Promise.all(Array.from({ length: clients }, async () => {
    while (Date.now() < end) await one();
  }));
  if (agent) agent.destroy();
  lat.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({ requests: lat.length, errors, p50: lat[Math.floor(lat.length / 2)] || null }));
}

function cpuUs(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 1e4; // utime + stime in 10 ms ticks
}

function startServer(s) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(__dirname, 'servers', 'http-plain.js'), ...s.args], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = /READY (\d+)/.exec(out);
      if (m) resolve({ proc: p, port: Number(m[1]) });
    });
    p.on('exit', (code) => reject(new Error(`${s.name} exited (${code})`)));
  });
}

function runClient(port, load, seconds, clients) {
  return new Promise((resolve, reject) => {
    const c = fork(__filename, ['--client', String(port), load, String(seconds), String(clients)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    const timer = setTimeout(() => c.kill('SIGKILL'), (seconds + 30) * 1000);
    c.stdout.on('data', (d) => { out += d; });
    c.on('exit', () => {
      clearTimeout(timer);
      try { resolve(JSON.parse(out)); } catch (e) { reject(new Error(`client output: ${out}`)); }
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const rounds = Number(arg('--rounds', 3));
  const seconds = Number(arg('--seconds', 5));
  const clients = Number(arg('--clients', 20));
  const outDir = path.resolve(arg('--out', path.join(ROOT, 'bench', 'results', 'http')));
  const runs = {}; // server → load → [{ rps, p50, cpuPerReq }]
  for (let r = 0; r < rounds; r++) {
    const order = SERVERS.map((_, i) => SERVERS[(i + r) % SERVERS.length]);
    for (const s of order) {
      const { proc, port } = await startServer(s);
      try {
        for (const load of LOADS) {
          await runClient(port, load, 0.5, clients); // warm-up
          const c0 = cpuUs(proc.pid);
          const t0 = Date.now();
          const res = await runClient(port, load, seconds, clients);
          const wall = (Date.now() - t0) / 1000;
          const cpu = cpuUs(proc.pid) - c0;
          const row = { rps: res.requests / seconds, p50: res.p50, cpuPerReq: cpu / Math.max(1, res.requests), errors: res.errors, wall };
          ((runs[s.name] ||= {})[load] ||= []).push(row);
          process.stdout.write(`round ${r + 1} ${s.name} ${load}: ${Math.round(row.rps)} req/s, p50 ${row.p50.toFixed(3)} ms, ${row.cpuPerReq.toFixed(1)} µs CPU/request, ${row.errors} errors\n`);
        }
      } finally {
        proc.kill('SIGTERM');
        await new Promise((resolve) => proc.once('exit', resolve));
      }
    }
  }
  const metrics = [['rps', 'requests/s ↑'], ['p50', 'latency p50, ms ↓'], ['cpuPerReq', 'server CPU µs per request ↓']];
  const summary = {};
  for (const s of SERVERS) {
    for (const load of LOADS) {
      for (const [k] of metrics) {
        const xs = runs[s.name][load].map((x) => x[k]);
        ((summary[s.name] ||= {})[load] ||= {})[k] = { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
      }
    }
  }
  const fmt = (v) => (v >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(v >= 10 ? 1 : 3));
  const lines = [`# Plain HTTP on an attached server (${new Date().toISOString()})`, '',
    `node bench/http.js --rounds ${rounds} --seconds ${seconds} --clients ${clients}: medians of ${rounds} interleaved rounds (min–max); ratios of medians ÷ plain.`, ''];
  for (const load of LOADS) {
    lines.push(`## ${load}`, '', '| metric | plain | attached | attached-upgrade | attached ÷ plain | attached-upgrade ÷ plain |', '|---|--:|--:|--:|--:|--:|');
    for (const [k, label] of metrics) {
      const cell = (n) => { const m = summary[n][load][k]; return `${fmt(m.median)} (${fmt(m.min)}–${fmt(m.max)})`; };
      const ratio = (n) => (summary[n][load][k].median / summary.plain[load][k].median).toFixed(2);
      lines.push(`| ${label} | ${cell('plain')} | ${cell('attached')} | ${cell('attached-upgrade')} | ${ratio('attached')} | ${ratio('attached-upgrade')} |`);
    }
    lines.push('');
  }
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'latest.json'), `${JSON.stringify({ rounds, seconds, clients, runs, summary }, null, 2)}\n`);
  fs.writeFileSync(path.join(outDir, 'latest.md'), `${lines.join('\n')}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv[2] === '--client') {
  client(Number(process.argv[3]), process.argv[4], Number(process.argv[5]), Number(process.argv[6]));
} else {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
