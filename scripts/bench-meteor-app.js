'use strict';
// The Meteor-app benchmark (issue #38): a real tasks app made with `meteor create`, built with
// `meteor build --directory` and run as a production bundle (`node main.js`, one fresh process per
// run), on Meteor's default transport (sockjs: the app without the package) and on native (the
// same app with `import 'ddp-transport-native/meteor/auto';` at the top of server/main.js),
// driven by the project's Rust load generator (bench/loadgen) in a separate process. Not in CI.
//
//   npm run bench:meteor-app -- --meteor <meteor/meteor git dir> [options]
//
//   --meteor DIR       a clone of meteor/meteor (bare or not); without it: what is
//                      needed is printed and nothing runs (exit 0)
//   --repos DIR        where the other clones are (default: two levels above --meteor)
//   --refs A,B         Meteor commits (default release/METEOR@3.0.4)
//   --rounds N         interleaved rounds (default 3)
//   --modes LIST       on,off: clients offer permessage-deflate as Chromium does (on: Meteor's
//                      server default answers it) or not (off) (default on,off)
//   --workloads LIST   some of methods-light, fanout-light, saturation, burst, rtt, throughput-1,
//                      throughput-10, throughput-50 (default all)
//   --seconds S        methods-light window (default 30); fanout-light writes 5/s for S*2/3 s
//                      (default 20 s), saturation S/3 (10 s), throughput S/6 (5 s)
//   --transports LIST  sockjs,native,native-threads,uws (default sockjs,native; with --meteor35-src
//                      also uws). native runs the inline I/O mode (the default on Linux),
//                      native-threads the same app with DDP_TRANSPORT_NATIVE_IO=threads
//                      (the inline I/O mode; native runs the default, threads)
//   --meteor35-src DIR Meteor 3.5's packages/ddp-server (as for test:meteor-app's overlay35 step):
//                      every app of every --refs line gets it in packages/ddp-server, and Meteor's
//                      own uws transport runs too (the sockjs app with DISABLE_SOCKJS=1 and
//                      DDP_TRANSPORT=uws; uWebSockets.js is uws-pack's binaries, overlay35.js)
//   --work DIR         the real-app suite's cache (default .cache/meteor-app-e2e: dev bundles per
//                      commit; the apps go to <commit12>/bench-apps, rebuilt when their sources change)
//   --out DIR          results (default bench/results/meteor-app): <stamp>.json, <stamp>.md, latest.*
//   --rebuild          make the apps again
//   --report FILE      print the tables of a saved run (<stamp>.json) again; runs nothing
//
// Shares the real-app suite's dev bundle (devbundle.js prepareMeteor), local registry (the
// dist/ tarballs, scripts/lib/local-registry.js) and app making (meteor-app.js createApp,
// buildApp, installBundle, startBundle). The app's server module is
// scripts/meteor-app-e2e/bench-app/server.js (what differs from Meteor's performance harness's
// tasks-3.x app is written at its top). Meteor's `uws` transport exists only from Meteor 3.5:
// with --meteor35-src the apps carry 3.5's ddp-server and uws is compared too; without it, not.
//
// Per run: the loadgen prints MARK start / MARK end around its measured phase (--sync); at each
// mark this script samples the app's CPU (/proc/<pid>/stat: every thread; /proc/<pid>/task/<pid>/stat:
// the JS thread), the machine's busy time (/proc/stat), the loadgen's CPU and its own, and reads
// the app's /bench-stats (GC pauses, event-loop delay; reset at start). Other-CPU % = machine busy
// − app − loadgen − this script, over the window, in % of one core.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const crypto = require('node:crypto');
const { spawn, spawnSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..');
const pkg = require('../package.json');
const APP_MODULE = path.join(__dirname, 'meteor-app-e2e', 'bench-app', 'server.js');

const TRANSPORTS = ['sockjs', 'native', 'native-threads', 'uws'];
/** The I/O mode each native transport's startup line must name. */
const NATIVE_IO = { native: 'inline', 'native-threads': 'threads' };
const ALL_WORKLOADS = ['methods-light', 'fanout-light', 'saturation', 'burst', 'rtt', 'throughput-1', 'throughput-10', 'throughput-50'];
const { DIST_TARGETS } = require('./meteor-app-e2e/dist-registry');

const NEEDS = `bench:meteor-app needs a clone of meteor/meteor (its git dir; and clones of
meteor/node-source-map-support, meteor/fstream and meteor/node-kexec beside it, as test:meteor-app
lays them out, for a dev bundle not yet cached), the dist/ tarballs (npm run dist --
--targets ${DIST_TARGETS.join(',')}), Rust (the load generator), 2+ cores and ~35 min for 3 rounds
in both compression modes. Run:
  npm run bench:meteor-app -- --meteor <dir of meteor/meteor>
Nothing was run.`;

function parseArgs(argv) {
  const o = { meteor: null, repos: null, refs: ['release/METEOR@3.0.4'], rounds: 3, modes: ['on', 'off'], workloads: ALL_WORKLOADS,
    seconds: 30, transports: null, meteor35Src: null, work: path.join(ROOT, '.cache', 'meteor-app-e2e'),
    out: path.join(ROOT, 'bench', 'results', 'meteor-app'), rebuild: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const list = () => next().split(',').filter(Boolean);
    if (a === '--meteor') o.meteor = path.resolve(next());
    else if (a === '--repos') o.repos = path.resolve(next());
    else if (a === '--refs') o.refs = list();
    else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--modes') o.modes = list();
    else if (a === '--workloads') o.workloads = list();
    else if (a === '--seconds') o.seconds = Number(next());
    else if (a === '--transports') o.transports = list();
    else if (a === '--work') o.work = path.resolve(next());
    else if (a === '--out') o.out = path.resolve(next());
    else if (a === '--rebuild') o.rebuild = true;
    else if (a === '--meteor35-src') o.meteor35Src = path.resolve(next());
    else if (a === '--report') o.report = path.resolve(next());
    else throw new Error(`unknown option ${a} (see the top of ${path.relative(process.cwd(), __filename)})`);
  }
  for (const w of o.workloads) if (!ALL_WORKLOADS.includes(w)) throw new Error(`--workloads: ${w} is not one of ${ALL_WORKLOADS.join(', ')}`);
  for (const m of o.modes) if (!['on', 'off'].includes(m)) throw new Error(`--modes: ${m}`);
  if (!o.transports) o.transports = o.meteor35Src ? ['sockjs', 'native', 'uws'] : ['sockjs', 'native'];
  for (const t of o.transports) if (!TRANSPORTS.includes(t)) throw new Error(`--transports: ${t} is not one of ${TRANSPORTS.join(', ')}`);
  if (o.transports.includes('uws') && !o.meteor35Src) throw new Error('--transports uws needs --meteor35-src DIR (Meteor 3.5\'s packages/ddp-server)');
  if (!o.transports.includes('native')) throw new Error('--transports must include native (every ratio is native ÷ another transport)');
  if (!(o.rounds >= 1) || !(o.seconds > 0)) throw new Error('--rounds and --seconds must be > 0');
  return o;
}

// ------------------------------------------------------------------------------------------------
// Workloads: the loadgen's arguments (without --url, --sync, --deflate).

function workloadArgs(name, o) {
  const s = (x) => String(Math.max(1, Math.round(x)));
  switch (name) {
    // 150 clients subscribed to `tasks`, 311 calls/s in all (open loop), alternating
    // insertTask({description}) and removeTask({taskId}).
    case 'methods-light': return ['app-rate', '--clients', '150', '--rate', '311', '--seconds', String(o.seconds), '--method', 'insertTask', '--remove'];
    // 50 subscribers of `fanout`; one writer calls publish(doc) 5 times a second.
    case 'fanout-light': return ['fanout', '--subscribers', '50', '--writes', s((o.seconds * 2 / 3) * 5), '--write-rate', '5'];
    // 50 clients subscribed to `tasks` × 4 insertTask calls in flight.
    case 'saturation': return ['throughput', '--app', '--method', 'insertTask', '--clients', '50', '--inflight', '4', '--seconds', s(o.seconds / 3)];
    case 'burst': return ['burst', '--clients', '100'];
    case 'rtt': return ['rtt', '--calls', '1000'];
    default: {
      const n = /^throughput-(\d+)$/.exec(name)[1];
      return ['throughput', '--clients', n, '--inflight', '4', '--seconds', s(o.seconds / 6)];
    }
  }
}

// ------------------------------------------------------------------------------------------------
// /proc sampling

const CLK_TCK = 100;
function statCpuUs(file) {
  try {
    const s = fs.readFileSync(file, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * (1e6 / CLK_TCK);
  } catch (e) {
    return null;
  }
}
function statusKiB(pid, key) {
  try {
    const m = new RegExp(`${key}:\\s+(\\d+)\\s+kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch (e) {
    return null;
  }
}
function machineBusyUs() {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = f;
  return { busy: (user + nice + system + irq + softirq) * (1e6 / CLK_TCK), steal: (steal || 0) * (1e6 / CLK_TCK) };
}
function sample(appPid, lgPid) {
  const self = process.cpuUsage();
  return {
    t: performance.now(),
    app: statCpuUs(`/proc/${appPid}/stat`),
    js: statCpuUs(`/proc/${appPid}/task/${appPid}/stat`),
    threads: (() => { try { return fs.readdirSync(`/proc/${appPid}/task`).length; } catch (e) { return null; } })(),
    loadgen: statCpuUs(`/proc/${lgPid}/stat`),
    machine: machineBusyUs(),
    self: self.user + self.system,
    rssKiB: statusKiB(appPid, 'VmRSS'),
  };
}

function getJson(port, p, ms = 10_000) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, timeout: ms }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => { try { resolve(JSON.parse(body)); } catch (e) { resolve({ error: `bad JSON: ${body.slice(0, 200)}` }); } });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ error: e.message }));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, d = 3) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** d) / 10 ** d);

// ------------------------------------------------------------------------------------------------
// One run: a fresh `node main.js`, one loadgen process.

async function runOnce({ line, bundle, transport, mode, workload, o, loadgen, logDir, round: r }) {
  const { startBundle } = require('./meteor-app-e2e/meteor-app');
  const { freePort } = require('./meteor-app-e2e/sh');
  const { handshake } = require('./meteor-app-e2e/overlay35');
  const rec = { ref: line.ref, round: r, mode, workload, transport, ok: false, checks: [] };
  const port = await freePort();
  const logFile = path.join(logDir, `r${r}-${mode}-${workload}-${transport}.log`);
  let server;
  try {
    // Meteor's uws transport: 3.5's ddp-server on its second, internal port (packages.ddp-server.uws.port).
    const env = transport === 'uws' ? { DISABLE_SOCKJS: '1', DDP_TRANSPORT: 'uws',
      METEOR_SETTINGS: JSON.stringify({ packages: { 'ddp-server': { uws: { port: await freePort() } } } }) }
      : transport in NATIVE_IO ? { DDP_TRANSPORT_NATIVE_IO: NATIVE_IO[transport] } : {};
    server = await startBundle(line, bundle, { port, env, logFile });
  } catch (e) {
    rec.error = `start: ${e.message.split('\n')[0]}`;
    return rec;
  }
  try {
    // Which transport answers /websocket: native prints its startup line; uWS's 101 has its header.
    const startup = /ddp-transport-native: native serves \/websocket.*? io (\w+)/.exec(server.output());
    const native = Boolean(startup);
    const h = await handshake(port);
    const uws = Boolean(h.headers.uwebsockets);
    rec.extensions = h.headers['sec-websocket-extensions'] || '';
    rec.checks.push({ name: 'transport',
      ok: h.status === 101 && native === (transport in NATIVE_IO) && uws === (transport === 'uws') && (!native || startup[1] === NATIVE_IO[transport]),
      detail: `${native ? `native startup line, io ${startup[1]}` : 'no native startup line'}; /websocket ${h.status}${uws ? `, uWebSockets: ${h.headers.uwebsockets}` : ''}` });
    await sleep(500);
    const pid = server.child.pid;
    rec.rss_before_kib = statusKiB(pid, 'VmRSS');
    const args = [...workloadArgs(workload, o), '--url', `ws://127.0.0.1:${port}/websocket`, '--timeout', '60', '--sync',
      // Meteor's uws never negotiates permessage-deflate: its clients go on uncompressed, as browsers do.
      ...(mode === 'on' ? [transport === 'uws' ? '--deflate-optional' : '--deflate'] : [])];
    rec.loadgen_args = args.join(' ');
    const lg = spawn(loadgen, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    lg.stdin.on('error', () => {});
    let stderr = '';
    lg.stderr.on('data', (c) => { stderr += c; });
    const marks = {};
    let result = null;
    let buf = '';
    const done = new Promise((resolve) => lg.once('exit', (code) => resolve(code)));
    const onLine = async (l) => {
      const m = /^MARK (\w+)/.exec(l);
      if (m) {
        const s = sample(pid, lg.pid);
        const stats = await getJson(port, m[1] === 'start' ? '/bench-stats?reset=1' : '/bench-stats');
        marks[m[1]] = { ...s, stats };
        lg.stdin.write('\n');
      } else if (l.startsWith('{')) {
        try { result = JSON.parse(l); } catch (e) { /* not the result */ }
      }
    };
    lg.stdout.setEncoding('utf8');
    lg.stdout.on('data', (c) => {
      buf += c;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const l = buf.slice(0, i);
        buf = buf.slice(i + 1);
        onLine(l);
      }
    });
    const killer = setTimeout(() => lg.kill('SIGKILL'), 180_000);
    const code = await done;
    clearTimeout(killer);
    rec.loadgen = result;
    rec.loadgen_exit = code;
    if (stderr.trim()) rec.loadgen_stderr = stderr.trim().slice(-500);
    const a = marks.start;
    const b = marks.end;
    if (!a || !b) throw new Error(`loadgen exited ${code} without both marks: ${JSON.stringify(result)} ${stderr.slice(-300)}`);
    const wall = (b.t - a.t) / 1e3;
    const appUs = b.app - a.app;
    const jsUs = b.js - a.js;
    const lgUs = b.loadgen !== null && a.loadgen !== null ? b.loadgen - a.loadgen : 0;
    const otherUs = (b.machine.busy - a.machine.busy) - appUs - lgUs - (b.self - a.self);
    const calls = result && (result.calls || (result.workload === 'fanout' ? result.writes : result.workload === 'burst' ? result.connected : 0));
    const st = b.stats || {};
    rec.window_s = round(wall);
    rec.app_threads = b.threads;
    rec.m = {
      app_cpu_s: round(appUs / 1e6, 4),
      app_cores: round(appUs / 1e6 / wall),
      js_cpu_s: round(jsUs / 1e6, 4),
      js_cores: round(jsUs / 1e6 / wall),
      app_cpu_us_per_call: calls ? round(appUs / calls, 1) : null,
      js_cpu_us_per_call: calls ? round(jsUs / calls, 1) : null,
      elu: st.elu_active_ms !== undefined && a.stats.elu_active_ms !== undefined
        ? round((st.elu_active_ms - a.stats.elu_active_ms) / ((st.elu_active_ms - a.stats.elu_active_ms) + (st.elu_idle_ms - a.stats.elu_idle_ms))) : null,
      rss_mib: round(b.rssKiB / 1024, 1),
      // The app before any client (0.5 s after it listened), and what the run added to it.
      rss_idle_mib: round(rec.rss_before_kib / 1024, 1),
      rss_growth_mib: round((b.rssKiB - rec.rss_before_kib) / 1024, 1),
      rss_hwm_mib: round(statusKiB(pid, 'VmHWM') / 1024, 1),
      heap_used_mib: st.memory ? round(st.memory.heapUsed / 2 ** 20, 1) : null,
      gc_ms: round(st.gc_ms, 1),
      gc_count: st.gc_count ?? null,
      gc_max_ms: round(st.gc_max_ms, 2),
      eld_p99_ms: round(st.eld_p99_ms, 2),
      eld_max_ms: round(st.eld_max_ms, 2),
      loadgen_cores: round(lgUs / 1e6 / wall),
      other_cpu_pct: round((otherUs / 1e6 / wall) * 100, 1),
      steal_pct: round(((b.machine.steal - a.machine.steal) / 1e6 / wall) * 100, 1),
    };
    if (result) {
      const R = result;
      const ms = (us) => round(us / 1e3, 3);
      if (workload === 'methods-light') {
        Object.assign(rec.m, { calls_per_s: R.calls_per_s, insert_p50_ms: ms(R.insert_p50_us), insert_p95_ms: ms(R.insert_p95_us),
          remove_p50_ms: ms(R.remove_p50_us), remove_p95_ms: ms(R.remove_p95_us), p99_ms: ms(R.lat_p99_us), max_send_lag_ms: R.max_send_lag_ms });
        const want = 311 * o.seconds;
        const inserts = R.sent - R.removes;
        rec.checks.push({ name: 'every call answered, none failed', ok: R.ok && R.calls === R.sent && R.errors === 0, detail: `${R.calls}/${R.sent}, errors ${R.errors} ${R.error || ''}` });
        rec.checks.push({ name: 'one added per insert, one removed per remove', ok: R.added === inserts && R.removed === R.removes, detail: `added ${R.added}/${inserts}, removed ${R.removed}/${R.removes}` });
        rec.checks.push({ name: 'arrival rate held (sent ≥ 97 % of 311/s × window, send lag ≤ 100 ms)', ok: R.sent >= 0.97 * want && R.max_send_lag_ms <= 100, detail: `${R.sent} sent (${round(R.sent / o.seconds, 1)}/s), max lag ${R.max_send_lag_ms} ms` });
      } else if (workload === 'fanout-light') {
        Object.assign(rec.m, { fanout_p50_ms: R.p50_ms, fanout_p95_ms: R.p95_ms, fanout_p99_ms: R.p99_ms, fanout_first_p50_ms: R.first_p50_ms });
        const writes = Number(workloadArgs(workload, o)[4]);
        rec.checks.push({ name: 'every subscriber got every added', ok: R.ok && R.writes === writes && R.missing === 0, detail: `${R.writes}/${writes} writes, ${R.missing} missing ${R.error || ''}` });
        rec.checks.push({ name: 'write rate held (5/s)', ok: R.seconds <= writes / 5 + 1, detail: `${R.writes} writes in ${R.seconds} s` });
      } else if (workload === 'burst') {
        Object.assign(rec.m, { burst_total_ms: R.total_ms, burst_p50_ms: R.connect_p50_ms, burst_p99_ms: R.connect_p99_ms });
        rec.checks.push({ name: 'all clients connected', ok: R.ok && R.connected === R.clients, detail: `${R.connected}/${R.clients} ${R.error || ''}` });
      } else if (workload === 'rtt') {
        Object.assign(rec.m, { rtt_p50_us: R.p50_us, rtt_p99_us: R.p99_us });
        rec.checks.push({ name: 'every call answered', ok: R.ok, detail: `${R.calls} calls ${R.error || ''}` });
      } else {
        Object.assign(rec.m, { calls_per_s: R.calls_per_s, p50_ms: ms(R.lat_p50_us), p95_ms: ms(R.lat_p95_us), p99_ms: ms(R.lat_p99_us) });
        rec.checks.push({ name: 'no lost or failed call', ok: R.ok && R.errors === 0 && (!R.app || R.added >= R.calls), detail: `${R.calls} calls${R.app ? `, ${R.added} added` : ''}, errors ${R.errors} ${R.error || ''}` });
      }
    } else {
      rec.checks.push({ name: 'loadgen result', ok: false, detail: stderr.slice(-300) });
    }
    rec.ok = rec.checks.every((c) => c.ok);
  } catch (e) {
    rec.error = e.message;
  } finally {
    await server.stop();
  }
  return rec;
}

// ------------------------------------------------------------------------------------------------
// Summary: medians over rounds (min–max), native ÷ sockjs of the medians (per-round min–max).

const SHOWN = {
  'methods-light': ['app_cpu_us_per_call', 'js_cpu_us_per_call', 'app_cores', 'rss_mib', 'rss_idle_mib', 'rss_growth_mib', 'rss_hwm_mib', 'gc_ms', 'insert_p50_ms', 'insert_p95_ms', 'remove_p50_ms', 'remove_p95_ms', 'eld_p99_ms', 'eld_max_ms', 'calls_per_s'],
  'fanout-light': ['fanout_p50_ms', 'fanout_p95_ms', 'app_cores', 'js_cores', 'rss_mib', 'gc_ms', 'eld_p99_ms'],
  saturation: ['calls_per_s', 'p50_ms', 'p95_ms', 'app_cpu_us_per_call', 'js_cpu_us_per_call', 'rss_mib', 'gc_ms', 'eld_p99_ms', 'eld_max_ms'],
  burst: ['burst_total_ms', 'burst_p50_ms', 'app_cpu_s', 'rss_mib'],
  rtt: ['rtt_p50_us', 'rtt_p99_us', 'app_cpu_us_per_call'],
  'throughput-1': ['calls_per_s', 'p50_ms', 'app_cpu_us_per_call', 'js_cpu_us_per_call'],
  'throughput-10': ['calls_per_s', 'p50_ms', 'app_cpu_us_per_call', 'js_cpu_us_per_call'],
  'throughput-50': ['calls_per_s', 'p50_ms', 'app_cpu_us_per_call', 'js_cpu_us_per_call'],
};

function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const h = v.length >> 1;
  return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}
const fmt = (x) => (x === null || x === undefined ? 'n/a' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
const spread = (xs) => { const v = xs.filter(Number.isFinite); return v.length ? `${fmt(Math.min(...v))}–${fmt(Math.max(...v))}` : 'n/a'; };

/** Rows: per line, mode, workload and metric, each transport's median (min–max over rounds) and
 *  native ÷ each other transport (the ratio of the medians; per-round ratios' min–max). */
function summarize(runs) {
  const rows = [];
  const keys = [...new Set(runs.map((r) => `${r.ref}|${r.mode}|${r.workload}`))];
  for (const k of keys) {
    const [ref, mode, workload] = k.split('|');
    const by = {};
    for (const t of TRANSPORTS) {
      const rs = runs.filter((r) => r.ref === ref && r.mode === mode && r.workload === workload && r.transport === t && r.m);
      if (rs.length) by[t] = rs;
    }
    if (!by.native) continue;
    const row = (metric) => {
      const values = {};
      for (const [t, rs] of Object.entries(by)) {
        const v = rs.map((r) => r.m[metric]);
        values[t] = { median: median(v), spread: spread(v) };
      }
      const ratios = {};
      for (const base of Object.keys(by).filter((t) => t !== 'native')) {
        const b = values[base].median;
        const n = values.native.median;
        const perRound = by.native.map((r) => {
          const p = by[base].find((x) => x.round === r.round);
          return p && p.m[metric] ? r.m[metric] / p.m[metric] : null;
        }).filter(Number.isFinite);
        ratios[base] = { ratio: b && n !== null ? n / b : null, spread: spread(perRound) };
      }
      return { ref, mode, workload, metric, values, ratios };
    };
    for (const metric of SHOWN[workload]) rows.push(row(metric));
    rows.push({ ...row('other_cpu_pct'), ratios: {}, other: spread(Object.values(by).flat().map((r) => r.m.other_cpu_pct)) });
  }
  return rows;
}

// [mode, workload, metric, native ÷ which transport ('native': native's own value), op, limit, label].
// The compression-off targets are against Meteor's uws; where it did not run, native ÷ sockjs is
// reported instead, with no target.
const TARGETS = [
  ['on', 'methods-light', 'app_cpu_us_per_call', 'sockjs', '≤', 0.70, 'process CPU per call'],
  ['on', 'methods-light', 'rss_mib', 'sockjs', '≤', 0.90, 'RSS'],
  ['on', 'methods-light', 'gc_ms', 'sockjs', '≤', 0.80, 'GC pause total'],
  ['on', 'methods-light', 'insert_p95_ms', 'sockjs', '≤', 0.90, 'insertTask p95'],
  ['on', 'fanout-light', 'fanout_p95_ms', 'sockjs', '≤', 0.90, 'fan-out last-subscriber p95'],
  ['off', 'methods-light', 'app_cpu_us_per_call', 'uws', '≤', 0.95, 'process CPU per call'],
  ['off', 'methods-light', 'insert_p50_ms', 'uws', '≤', 0.95, 'insertTask p50'],
  ['off', 'methods-light', 'insert_p95_ms', 'uws', '≤', 0.95, 'insertTask p95'],
  ['off', 'saturation', 'calls_per_s', 'uws', '≥', 1.2, 'saturation calls/s'],
  ['off', 'saturation', 'eld_max_ms', 'native', '≤', 50, 'saturation: timers late (event-loop delay max, ms)'],
  ['off', 'burst', 'burst_total_ms', 'uws', '≤', 0.5, 'connect burst of 100 (ms to all connected)'],
];

function targetRows(rows, label) {
  const out = [];
  for (const [mode, w, metric, want, op, limit, name] of TARGETS) {
    const r = rows.find((x) => x.ref === label && x.mode === mode && x.workload === w && x.metric === metric);
    if (!r) continue;
    if (want === 'native') {
      const v = r.values.native;
      out.push(`| ${mode} | ${w} | ${name} | native | ${op} ${limit} | — | ${fmt(v.median)} (${v.spread}) | — | — | ${v.median === null ? 'n/a' : v.median <= limit ? 'yes' : 'no'} |`);
      continue;
    }
    const base = r.ratios[want] ? want : 'sockjs';
    const q = r.ratios[base];
    if (!q) continue;
    const target = base === want ? `${op} ${limit}` : 'report';
    const met = base !== want ? '—' : q.ratio === null ? 'n/a' : (op === '≥' ? q.ratio >= limit : q.ratio <= limit) ? 'yes' : 'no';
    out.push(`| ${mode} | ${w} | ${name} | ${base} | ${target} | ${fmt(r.values[base].median)} | ${fmt(r.values.native.median)} | ${q.ratio === null ? 'n/a' : q.ratio.toFixed(2)} | ${q.spread} | ${met} |`);
  }
  return out;
}

function markdown({ meta, runs, rows }) {
  const transports = TRANSPORTS.filter((t) => runs.some((r) => r.transport === t));
  const others = transports.filter((t) => t !== 'native');
  const out = [`# Meteor-app benchmark ${meta.started}`, '',
    `- ${meta.command}`,
    ...meta.lines.map((l) => `- Meteor ${l.ref} = ${l.commit.slice(0, 12)} (meteor-tool ${l.tool}, Node ${l.node})${l.overlay ? `, with Meteor 3.5's packages/ddp-server from ${l.overlay} in the app's packages/ (uWebSockets.js: uws-pack's binaries)` : ''}; apps made with \`meteor create --minimal\`, built with \`meteor build --directory\`, run as \`node main.js\` (one fresh process per run)`),
    `- ${pkg.name} ${pkg.version} from dist/ through a local registry; sockjs = the same app without the package (Meteor's default transport)${transports.includes('uws')
      ? '; uws = that app with DISABLE_SOCKJS=1 DDP_TRANSPORT=uws (Meteor 3.5\'s uws transport on its internal port, /websocket piped to it)' : '; Meteor\'s `uws` (3.5) not compared (no --meteor35-src)'}` +
      `; native runs its default I/O mode (inline)${transports.includes('native-threads') ? ', native-threads the same app with DDP_TRANSPORT_NATIVE_IO=threads' : ''}`,
    `- machine: ${meta.machine.cores} cores, ${meta.machine.cpu}; ${meta.rounds} interleaved rounds (the transports' order reversed every other round); loadgen ${meta.loadgen}`,
    `- compression: "on" = every client offers permessage-deflate as Chromium does (sockjs and native accept it, as Meteor's server default does)${transports.includes('uws') ? '; Meteor\'s uws declines it, so its clients go on uncompressed, as browsers do' : ''}; "off" = not offered`,
    `- runs: ${runs.length}, failed checks: ${runs.filter((r) => !r.ok).length}`];
  for (const l of meta.lines) {
    out.push('', `## Targets, ${l.label} (native ÷ the named transport, ratio of medians; per-round min–max)`, '',
      '| mode | workload | metric | vs | target | vs value | native | ratio | per-round | met |', '|---|---|---|---|---|---|---|---|---|---|',
      ...targetRows(rows, l.label));
  }
  out.push('', '## All metrics (medians over rounds, min–max in parentheses)', '',
    `| Meteor | mode | workload | metric | ${transports.join(' | ')} | ${others.map((t) => `native ÷ ${t} (per-round)`).join(' | ')} |`,
    `|${'---|'.repeat(4 + transports.length + others.length)}`);
  for (const r of rows) {
    const vals = transports.map((t) => (r.values[t] ? `${fmt(r.values[t].median)} (${r.values[t].spread})` : '—'));
    const ratios = others.map((t) => (r.other !== undefined ? `all runs ${r.other}` : r.ratios[t] && r.ratios[t].ratio !== null ? `${r.ratios[t].ratio.toFixed(2)} (${r.ratios[t].spread})` : 'n/a'));
    const metric = r.metric === 'other_cpu_pct' ? 'other_cpu_pct (box, % of a core)' : r.metric;
    out.push(`| ${r.ref.replace(/^release\/METEOR@/, '')} | ${r.mode} | ${r.workload} | ${metric} | ${vals.join(' | ')} | ${ratios.join(' | ')} |`);
  }
  const failed = runs.filter((r) => !r.ok);
  out.push('', '## Checks', '', failed.length ? 'Failed:' : `Every run passed its checks (transport, all clients connected, no lost or failed call, one added/removed per call, arrival rate held): ${runs.length} runs.`);
  for (const r of failed) out.push(`- ${r.ref} r${r.round} ${r.mode} ${r.workload} ${r.transport}: ${r.error || r.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`).join('; ')}`);
  out.push('', '## What differs from Meteor\'s performance harness (tasks-3.x)', '',
    '- No MongoDB: tasks live in a Map; insertTask/removeTask do no database round trip, and there is no oplog or change-stream observer: the method calls `this.added`/`this.removed` of the subscriptions that see the task (through the session\'s mergebox) itself.',
    '- The `tasks` publication publishes the caller\'s own tasks (owner = the DDP connection): one `added` per insert and one `removed` per remove, to the caller; the harness\'s `fetchTasks` publishes every task to every subscriber. The fan-out to many subscribers is measured by fanout-light (a `fanout` publication, `publish(doc)` → `added` to every subscriber).',
    '- Clients are the Rust load generator (DDP over a raw WebSocket to /websocket, as Meteor\'s client connects when WebSockets work), not browsers through artillery/playwright; no accounts, no Blaze/React page.',
    '- methods-light alternates insertTask({description}) and removeTask({taskId}) of the task the client inserted, 311 calls/s over 150 clients (open loop).',
    '');
  return out.join('\n');
}

// ------------------------------------------------------------------------------------------------
// The apps

function appStamp(how, overlaySrc) {
  const h = crypto.createHash('sha256');
  h.update(fs.readFileSync(APP_MODULE));
  h.update(fs.readFileSync(path.join(__dirname, 'meteor-app-e2e', 'meteor-app.js')));
  h.update(`${how} ${pkg.version}`);
  if (overlaySrc) {
    // The overlaid ddp-server's sources (overlay35.js listFiles: every file under it, sorted).
    const { listFiles } = require('./meteor-app-e2e/overlay35');
    const dir = path.join(overlaySrc, 'packages', 'ddp-server');
    for (const f of listFiles(dir)) h.update(`${f}\0`).update(fs.readFileSync(path.join(dir, f)));
  }
  for (const t of DIST_TARGETS) {
    const f = path.join(ROOT, 'dist', `${pkg.name}-${t}-${pkg.version}.tgz`);
    if (fs.existsSync(f)) h.update(fs.readFileSync(f));
  }
  return h.digest('hex').slice(0, 16);
}

async function makeApps({ o, line, log, ensureRegistry }) {
  const { createApp, buildApp, installBundle } = require('./meteor-app-e2e/meteor-app');
  const { overlayDdpServer, uwsTarball } = require('./meteor-app-e2e/overlay35');
  const work = path.join(o.work, line.commit.slice(0, 12), 'bench-apps');
  fs.mkdirSync(work, { recursive: true });
  const bundles = {};
  // Two apps: with the import line (native) and without (sockjs, and uws by its environment).
  const appOf = (t) => (t in NATIVE_IO ? 'native' : 'sockjs');
  for (const app of [...new Set(o.transports.map(appOf))]) {
    const how = app === 'native' ? 'npm' : 'none';
    const name = `bench-${app}${o.meteor35Src ? '-ddp-server-3.5' : ''}`;
    const dir = path.join(work, name);
    const out = path.join(work, `${name}-out`);
    const stampFile = path.join(work, `${name}.stamp`);
    const stamp = appStamp(how, o.meteor35Src);
    const bundle = path.join(out, 'bundle');
    if (!o.rebuild && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8').trim() === stamp && fs.existsSync(path.join(bundle, 'main.js'))) {
      log(`${name}: built already (${bundle})`);
      bundles[app] = bundle;
      continue;
    }
    const registry = await ensureRegistry();
    const t = Date.now();
    fs.rmSync(stampFile, { force: true });
    createApp(line, { dir, how, registry: registry.url, projectRoot: ROOT, version: pkg.version });
    fs.copyFileSync(APP_MODULE, path.join(dir, 'server', 'bench.js'));
    if (o.meteor35Src) {
      const overlay = overlayDdpServer(o.meteor35Src, path.join(dir, 'packages', 'ddp-server'), uwsTarball(path.join(o.work, 'downloads')));
      for (const l of overlay.lines) log(`  ${name}: ${l}`);
    }
    // Below the import line (which stays the first line of server/main.js).
    fs.appendFileSync(path.join(dir, 'server', 'main.js'), "\nimport './bench.js';\n");
    const packagesFile = path.join(dir, '.meteor', 'packages');
    const listed = fs.readFileSync(packagesFile, 'utf8').split('\n').map((l) => l.replace(/#.*/, '').trim());
    if (!listed.includes('webapp')) fs.appendFileSync(packagesFile, 'webapp\n');
    const b = buildApp(line, { dir, out, registry: registry.url });
    installBundle(line, b, registry.url);
    fs.writeFileSync(stampFile, `${stamp}\n`);
    log(`${name}: meteor create + build + npm install in ${Math.round((Date.now() - t) / 1000)} s`);
    bundles[app] = b;
  }
  return Object.fromEntries(o.transports.map((t) => [t, bundles[appOf(t)]]));
}

function buildLoadgen() {
  const manifest = path.join(ROOT, 'bench', 'loadgen', 'Cargo.toml');
  const b = spawnSync('cargo', ['build', '--release', '--quiet', '--manifest-path', manifest], { encoding: 'utf8', stdio: ['ignore', 'inherit', 'inherit'] });
  const meta = spawnSync('cargo', ['metadata', '--no-deps', '--format-version', '1', '--manifest-path', manifest], { encoding: 'utf8' });
  const bin = path.join(JSON.parse(meta.stdout).target_directory, 'release', 'loadgen');
  if (b.status !== 0 || !fs.existsSync(bin)) throw new Error('could not build bench/loadgen');
  return bin;
}

// ------------------------------------------------------------------------------------------------

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.report) {
    const { meta, runs } = JSON.parse(fs.readFileSync(o.report, 'utf8'));
    for (const l of meta.lines) l.label = l.label || l.ref;
    console.log(markdown({ meta, runs, rows: summarize(runs) }));
    return 0;
  }
  if (!o.meteor) {
    console.log(NEEDS);
    return 0;
  }
  const { setLog } = require('./meteor-app-e2e/sh');
  const { prepareMeteor } = require('./meteor-app-e2e/devbundle');
  const { startDistRegistry } = require('./meteor-app-e2e/dist-registry');
  const started = new Date();
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const runDir = path.join(o.work, 'runs', `bench-${stamp}`);
  fs.mkdirSync(runDir, { recursive: true });
  setLog(path.join(runDir, 'commands.log'));
  const t0 = Date.now();
  const log = (l) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${l}`);
  log(`work dir ${runDir}`);
  const meteorGit = fs.existsSync(path.join(o.meteor, '.git')) ? path.join(o.meteor, '.git') : o.meteor;
  const repos = o.repos || path.resolve(o.meteor, '..', '..');
  const gitDirOf = (owner, repo) => path.join(repos, `${owner}+${repo}`, 'repo');

  let registry = null;
  const ensureRegistry = async () => {
    if (registry) return registry;
    registry = await startDistRegistry({ workDir: o.work, runDir });
    log(`local registry ${registry.url}`);
    return registry;
  };

  const loadgen = buildLoadgen();
  const lines = [];
  const runs = [];
  const outStamp = path.join(o.out, stamp);
  const machine = { cores: os.cpus().length, cpu: (os.cpus()[0] || {}).model, memGiB: Math.round(os.totalmem() / 2 ** 30), kernel: os.release() };
  // The command as a reader reruns it: the directories given become what they must hold.
  const PLACEHOLDERS = { '--meteor': '<clone of meteor/meteor>', '--meteor35-src': "<dir with Meteor 3.5's packages/ddp-server>",
    '--repos': '<dir of the companion clones>', '--work': '<work dir>', '--out': '<results dir>' };
  const argv = process.argv.slice(2).map((a, i, all) => PLACEHOLDERS[all[i - 1]] || a);
  const meta = { started: started.toISOString(), command: `npm run bench:meteor-app -- ${argv.join(' ')}`, machine,
    rounds: o.rounds, seconds: o.seconds, loadgen: path.relative(ROOT, loadgen), lines };
  const save = () => {
    fs.mkdirSync(o.out, { recursive: true });
    const rows = summarize(runs);
    const json = JSON.stringify({ meta, rows, runs }, null, 1);
    const md = markdown({ meta, runs, rows });
    fs.writeFileSync(`${outStamp}.json`, json);
    fs.writeFileSync(`${outStamp}.md`, md);
    fs.writeFileSync(path.join(o.out, 'latest.json'), json);
    fs.writeFileSync(path.join(o.out, 'latest.md'), md);
    return md;
  };
  try {
    for (const ref of o.refs) {
      const line = prepareMeteor({ gitDir: meteorGit, ref, cacheDir: o.work, gitDirOf, log });
      const label = o.meteor35Src ? `${ref} + 3.5 ddp-server` : ref;
      const lineInfo = { ref, label, commit: line.commit, tool: line.toolVersion, node: line.devBundle.nodeVersion, overlay: o.meteor35Src && PLACEHOLDERS['--meteor35-src'] };
      log(`Meteor ${ref} = ${line.commit.slice(0, 12)} (meteor-tool ${line.toolVersion}, Node ${line.devBundle.nodeVersion})`);
      const bundles = await makeApps({ o, line, log, ensureRegistry });
      if (registry) { registry.stop(); registry = null; }
      lines.push(lineInfo);
      const logDir = path.join(runDir, line.commit.slice(0, 12));
      fs.mkdirSync(logDir, { recursive: true });
      for (let r = 1; r <= o.rounds; r++) {
        for (const mode of o.modes) {
          for (const workload of o.workloads) {
            const order = r % 2 ? o.transports : [...o.transports].reverse();
            for (const transport of order) {
              const rec = await runOnce({ line: { ...line, ref: label }, bundle: bundles[transport], transport, mode, workload, o, loadgen, logDir, round: r });
              runs.push(rec);
              const m = rec.m || {};
              const head = { 'methods-light': `insert p50/p95 ${m.insert_p50_ms}/${m.insert_p95_ms} ms, ${m.app_cpu_us_per_call} µs/call`,
                'fanout-light': `last p50/p95 ${m.fanout_p50_ms}/${m.fanout_p95_ms} ms`, burst: `${m.burst_total_ms} ms`, rtt: `p50 ${m.rtt_p50_us} µs` }[workload]
                || `${m.calls_per_s} calls/s, ${m.app_cpu_us_per_call} µs/call`;
              log(`${rec.ok ? 'ok  ' : 'FAIL'} r${r} ${mode} ${workload} ${transport}: ${head}; CPU ${m.app_cores} cores (JS ${m.js_cores}), RSS ${m.rss_mib} MiB, GC ${m.gc_ms} ms, ELD p99 ${m.eld_p99_ms} ms, other ${m.other_cpu_pct} %${rec.ok ? '' : ` — ${rec.error || rec.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`).join('; ')}`}`);
            }
          }
          save();
        }
      }
    }
  } finally {
    if (registry) registry.stop();
  }
  const md = save();
  console.log(`\n${md}`);
  console.log(`results: ${path.relative(process.cwd(), outStamp)}.{json,md}`);
  const failed = runs.filter((r) => !r.ok).length;
  console.log(`${runs.length - failed} runs passed their checks, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`bench:meteor-app: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
