'use strict';
// Reconnect-storm benchmark (issue #20, item 3): N existing DDP clients call `echo` steadily; after
// a calm phase M new clients connect at once from several loopback source addresses, each DDP
// `connect` costing the server BENCH_CONNECT_COST_MS of synchronous JS (a Meteor login +
// subscription stand-in). Refused upgrades (503) retry after Retry-After × 0.5–1.5.
// Per server: the existing clients' call p50/p99 calm and during the storm (and the ratio), the
// server's 10 ms timer lateness during the storm, the time until every new client is `connected`,
// refused / retried / failed counts and the server's peak RSS (VmHWM). Interleaved rounds, medians.
//
//   node bench/storm.js [--new 10000] [--existing 50] [--cost-ms 3] [--sources 8] [--rounds 3]
//                       [--only native-attach,native-attach-threads,native-attach-noadm,uws-proxied,ws,sockjs] [--timeout 120] [--out DIR]

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const ROOT = path.resolve(__dirname, '..');

const SERVERS = [
  { name: 'native-attach', label: 'native (Meteor adapter), admission on', file: 'native-attach.js', env: {} },
  { name: 'native-attach-threads', label: 'native (Meteor adapter), admission on, threaded I/O mode', file: 'native-attach.js', env: { DDP_TRANSPORT_NATIVE_IO: 'threads' } },
  { name: 'native-attach-noadm', label: 'native (Meteor adapter), admission off', file: 'native-attach.js', env: { BENCH_ADMISSION: '0' } },
  { name: 'native-attach-lag10', label: 'native (Meteor adapter), admission maxLagMs 10', file: 'native-attach.js', env: { BENCH_ADMISSION: '{"maxLagMs":10}' } },
  { name: 'native-attach-lag5', label: 'native (Meteor adapter), admission maxLagMs 5', file: 'native-attach.js', env: { BENCH_ADMISSION: '{"maxLagMs":5}' } },
  { name: 'native-listen', label: 'native (own listener), admission on', file: 'native-listen.js', env: {} },
  { name: 'uws-proxied', label: "uWS.js behind Meteor's proxy hop (Meteor's `uws`)", file: 'uws-proxied.js', env: {} },
  { name: 'uws-direct', label: 'uWS.js direct', file: 'uws-direct.js', env: {} },
  { name: 'ws', label: 'ws', file: 'ws.js', env: {} },
  { name: 'sockjs', label: 'sockjs (Meteor default)', file: 'sockjs.js', env: {} },
];

function args() {
  const o = { new: 10000, existing: 50, costMs: 3, sources: 8, rounds: 3, timeout: 120, calm: 3,
    only: ['native-attach', 'native-attach-threads', 'native-attach-noadm', 'uws-proxied', 'ws', 'sockjs'], out: null };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const v = () => a[++i];
    switch (a[i]) {
      case '--new': o.new = Number(v()); break;
      case '--existing': o.existing = Number(v()); break;
      case '--cost-ms': o.costMs = Number(v()); break;
      case '--sources': o.sources = Number(v()); break;
      case '--rounds': o.rounds = Number(v()); break;
      case '--timeout': o.timeout = Number(v()); break;
      case '--calm': o.calm = Number(v()); break;
      case '--only': o.only = v().split(','); break;
      case '--out': o.out = v(); break;
      case '--render': o.render = v(); break;
      default: throw new Error(`unknown argument ${a[i]}`);
    }
  }
  return o;
}

function lines(stream, onLine) {
  readline.createInterface({ input: stream }).on('line', onLine);
}

function vmHWM(pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch { return null; }
}

async function runOne(server, o, loadgen) {
  const env = { ...process.env, ...server.env, BENCH_EXIT_ON_STDIN_END: '1', BENCH_LATENESS: '1',
    BENCH_CONNECT_COST_MS: String(o.costMs), BENCH_COMPRESS: '0' };
  // thousands of sockets: raise the fd limit for the server (then exec: the pid stays the server's)
  const srv = spawn('bash', ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"', 'storm-server',
    process.execPath, path.join('bench', 'servers', server.file), '--port', '0'], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  srv.stderr.on('data', (d) => { if (stderr.length < 8192) stderr += d; });
  const kill = setTimeout(() => srv.kill('SIGKILL'), (o.timeout + o.calm + 60) * 1000);
  const waiters = [];
  lines(srv.stdout, (l) => { for (const w of waiters.splice(0)) w(l); });
  const nextLine = (pred, ms) => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server: timeout waiting (${stderr.slice(-500)})`)), ms);
    const w = (l) => { if (pred(l)) { clearTimeout(t); resolve(l); } else waiters.push(w); };
    waiters.push(w);
  });
  try {
    const port = Number((await nextLine((l) => l.startsWith('READY '), 20000)).split(' ')[1]);
    const lg = spawn(loadgen, ['storm', '--url', `ws://127.0.0.1:${port}/websocket`, '--clients', String(o.existing),
      '--new', String(o.new), '--sources', String(o.sources), '--calm-seconds', String(o.calm),
      '--timeout', String(o.timeout), '--sync'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let lgErr = '';
    lg.stderr.on('data', (d) => { if (lgErr.length < 4096) lgErr += d; });
    let result = null;
    let lateness = null;
    const done = new Promise((resolve) => lg.on('exit', resolve));
    lines(lg.stdout, async (l) => {
      if (l === 'MARK start') {
        srv.stdin.write('lateness\n'); // reset the probe at the storm's start
        await nextLine((x) => x.startsWith('LATENESS '), 30000);
        lg.stdin.write('go\n');
      } else if (l === 'MARK end') {
        srv.stdin.write('lateness\n');
        lateness = JSON.parse((await nextLine((x) => x.startsWith('LATENESS '), 30000)).slice(9));
        lg.stdin.write('go\n');
      } else if (l.startsWith('{')) {
        result = JSON.parse(l);
      }
    });
    await done;
    const rss = vmHWM(srv.pid);
    if (!result) throw new Error(`loadgen gave no result: ${lgErr.slice(-500)}`);
    return { ...result, lateness, peak_rss_mib: rss };
  } finally {
    clearTimeout(kill);
    srv.stdin.end();
    srv.kill('SIGTERM');
  }
}

function median(xs) {
  const s = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
}

/** The markdown table of `runs` (name → results of each round). */
function render(o, servers, runs) {
  const f = (x, d = 1) => (x === null || x === undefined ? 'n/a' : x.toFixed(d));
  const out = [];
  out.push(`Storm: ${o.existing} existing clients calling echo (one at a time, 20 ms apart), then ${o.new} new clients at once from ${o.sources} loopback addresses; each DDP connect costs ${o.costMs} ms of JS; ${o.timeout} s timeout; medians of ${o.rounds} interleaved rounds.`);
  out.push('');
  out.push('| server | existing p50 / p99 calm ms | p50 / p99 during the storm ms | storm p99 / calm p99 | timer lateness p99 / max ms | connected within the timeout | time until all connected s | refused / retried | peak RSS MiB |');
  out.push('|---|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const s of servers) {
    const rs = runs[s.name] || [];
    const m = (k) => median(rs.map((x) => x[k]));
    const ml = (k) => median(rs.map((x) => x.lateness && x.lateness[k]));
    const ratio = median(rs.map((x) => (x.calm_p99_ms > 0 ? x.storm_p99_ms / x.calm_p99_ms : null)));
    const complete = rs.filter((x) => x.all_connected_s >= 0).map((x) => x.all_connected_s);
    const allConn = complete.length === rs.length ? f(median(complete), 1)
      : `${complete.length ? complete.map((x) => f(x, 1)).join(', ') : 'none'} (${complete.length}/${rs.length} runs complete)`;
    out.push(`| ${s.label} | ${f(m('calm_p50_ms'), 2)} / ${f(m('calm_p99_ms'), 2)} | ${f(m('storm_p50_ms'))} / ${f(m('storm_p99_ms'))} | ${f(ratio)}× | ` +
      `${f(ml('p99_ms'))} / ${f(ml('max_ms'))} | ${f(m('connected'), 0)} / ${o.new} | ${allConn} | ${f(m('refused'), 0)} / ${f(m('retried'), 0)} | ${f(m('peak_rss_mib'))} |`);
  }
  return out.join('\n');
}

async function main() {
  const o = args();
  if (o.render) {
    // re-render a storm.json: node bench/storm.js --render DIR/storm.json
    const j = JSON.parse(fs.readFileSync(o.render, 'utf8'));
    console.log(render(j.options, SERVERS.filter((s) => j.options.only.includes(s.name)), j.runs));
    return;
  }
  const loadgen = path.join(ROOT, 'target', 'release', 'loadgen');
  if (!fs.existsSync(loadgen)) throw new Error('build the load generator first: cargo build --release --manifest-path bench/loadgen/Cargo.toml');
  const servers = SERVERS.filter((s) => o.only.includes(s.name));
  const runs = {};
  for (let r = 1; r <= o.rounds; r++) {
    for (const s of servers) {
      let res;
      try {
        res = await runOne(s, o, loadgen);
      } catch (e) {
        res = { ok: false, error: e.message };
      }
      (runs[s.name] ||= []).push(res);
      process.stderr.write(`storm: [${r}/${o.rounds}] ${s.name.padEnd(20)} ${JSON.stringify(res)}\n`);
    }
  }
  const text = render(o, servers, runs);
  console.log(text);
  if (o.out) {
    fs.mkdirSync(o.out, { recursive: true });
    fs.writeFileSync(path.join(o.out, 'storm.md'), text + '\n');
    fs.writeFileSync(path.join(o.out, 'storm.json'), JSON.stringify({ options: o, runs }, null, 2) + '\n');
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
