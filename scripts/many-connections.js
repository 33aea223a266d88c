'use strict';
// Many connections on one box (issue #20, item 4; a scripted run, not in CI): hold N idle DDP
// connections (default 50,000) on the own listener and on the Meteor adapter, with and without
// permessage-deflate, from several loopback source addresses, then broadcast to all of them.
// Per run: time until all are connected (DDP `sub` ready), the server's RSS before/after and per
// connection, and the first/last delivery of a broadcast (the DDP `publish` method sends an
// `added` to every subscriber; 3 broadcasts, medians). The fd limits are raised here (root may
// raise the hard limit; the load generator raises its own).
//
//   node scripts/many-connections.js [--clients 50000] [--sources 8] [--only native-listen,native-attach] [--deflate both|on|off]

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const ROOT = path.resolve(__dirname, '..');
const a = process.argv.slice(2);
const arg = (k, d) => (a.includes(k) ? a[a.indexOf(k) + 1] : d);
const CLIENTS = Number(arg('--clients', '50000'));
const SOURCES = Number(arg('--sources', '8'));
const ONLY = arg('--only', 'native-listen,native-attach').split(',');
const DEFLATE = arg('--deflate', 'both');
const FDS = CLIENTS + 1000;

/** The hard fd limit of this process's children (root without CAP_SYS_RESOURCE cannot raise it). */
function hardFdLimit() {
  const r = require('node:child_process').spawnSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' });
  const v = r.stdout.trim();
  return v === 'unlimited' ? Infinity : Number(v);
}

function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch { return null; }
}

async function run(server, deflate) {
  const env = { ...process.env, BENCH_EXIT_ON_STDIN_END: '1', BENCH_COMPRESS: deflate ? '1' : '0' };
  const srv = spawn('bash', ['-c', `ulimit -Hn ${FDS} 2>/dev/null; ulimit -n ${FDS} 2>/dev/null || exit 3; exec "$@"`, 'many-server',
    process.execPath, path.join('bench', 'servers', `${server}.js`), '--port', '0'], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  readline.createInterface({ input: srv.stdout }).on('line', (l) => { lines.push(l); for (const w of waiters.splice(0)) w(); });
  const waitLine = async (pred, ms) => {
    const end = Date.now() + ms;
    for (;;) {
      const hit = lines.find(pred);
      if (hit) return hit;
      if (Date.now() > end) throw new Error('server did not start');
      await new Promise((r) => { waiters.push(r); setTimeout(r, 200); });
    }
  };
  try {
    const port = Number((await waitLine((l) => l.startsWith('READY '), 20000)).split(' ')[1]);
    await new Promise((r) => setTimeout(r, 500));
    const rss0 = rssMiB(srv.pid);
    const args = ['fanout', '--url', `ws://127.0.0.1:${port}/websocket`, '--subscribers', String(CLIENTS), '--writes', '3',
      '--sources', String(SOURCES), '--concurrency', '1024', '--timeout', '600', '--sync', ...(deflate ? ['--deflate'] : [])];
    const t0 = process.hrtime.bigint();
    const lg = spawn(path.join(ROOT, 'target', 'release', 'loadgen'), args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
    let connectS = null;
    let rss1 = null;
    let result = null;
    readline.createInterface({ input: lg.stdout }).on('line', (l) => {
      if (l === 'MARK start') {
        connectS = Number(process.hrtime.bigint() - t0) / 1e9;
        rss1 = rssMiB(srv.pid);
        lg.stdin.write('go\n');
      } else if (l === 'MARK end') {
        lg.stdin.write('go\n');
      } else if (l.startsWith('{')) {
        result = JSON.parse(l);
      }
    });
    await new Promise((r) => lg.on('exit', r));
    return { server, deflate, clients: CLIENTS, connect_s: connectS, rss_before_mib: rss0, rss_held_mib: rss1,
      kib_per_conn: rss1 !== null && rss0 !== null ? ((rss1 - rss0) * 1024) / CLIENTS : null,
      first_p50_ms: result && result.first_p50_ms, last_p50_ms: result && result.p50_ms, ok: !!(result && result.ok),
      error: result ? result.error : 'no result' };
  } finally {
    srv.stdin.end();
    srv.kill('SIGTERM');
  }
}

async function main() {
  if (!fs.existsSync(path.join(ROOT, 'target', 'release', 'loadgen'))) {
    throw new Error('build the load generator first: cargo build --release --manifest-path bench/loadgen/Cargo.toml');
  }
  const hard = hardFdLimit();
  if (hard < FDS) {
    // Both the server and the load generator hold one fd per connection.
    const spawnOk = require('node:child_process').spawnSync('bash', ['-c', `ulimit -Hn ${FDS}`]).status === 0;
    if (!spawnOk) {
      throw new Error(`${CLIENTS} connections need ${FDS} fds per process, but the hard limit is ${hard} and cannot be ` +
        `raised here (no CAP_SYS_RESOURCE): raise it (e.g. ulimit -Hn ${FDS} as a privileged root, or LimitNOFILE) ` +
        `or run with --clients ${Math.max(0, hard - 1000)}`);
    }
  }
  const modes = DEFLATE === 'both' ? [false, true] : [DEFLATE === 'on'];
  const rows = [];
  for (const server of ONLY) {
    for (const deflate of modes) {
      const r = await run(server, deflate);
      process.stderr.write(JSON.stringify(r) + '\n');
      rows.push(r);
    }
  }
  const f = (x, d = 1) => (x === null || x === undefined ? 'n/a' : Number(x).toFixed(d));
  console.log(`| server | deflate | connections | time to connect all s | RSS before → held MiB | KiB per connection | broadcast first / last delivery ms (median of 3) | ok |`);
  console.log('|---|---|--:|--:|--:|--:|--:|---|');
  for (const r of rows) {
    console.log(`| ${r.server} | ${r.deflate ? 'on' : 'off'} | ${r.clients} | ${f(r.connect_s)} | ${f(r.rss_before_mib)} → ${f(r.rss_held_mib)} | ${f(r.kib_per_conn)} | ` +
      `${f(r.first_p50_ms)} / ${f(r.last_p50_ms)} | ${r.ok ? 'yes' : `no: ${r.error}`} |`);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
