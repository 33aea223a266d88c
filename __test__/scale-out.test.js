'use strict';
// Scale-out for real: nginx (the config of docs/scaling.md, "N hosts", taken from that page) in front of
// two instances of the demo app (http.Server + Meteor adapter + DDP session, drainOnSigterm),
// Meteor-style reconnecting DDP clients bound to different loopback /24s so ip_hash spreads them.
// One instance gets SIGTERM: its clients are closed in batches, reconnect through nginx to the
// other instance, and every method call is answered; new upgrades to the draining instance get
// 503, which nginx retries on the other one (proxy_next_upstream http_503).
// Skipped only when nginx is not installed (.ci/run installs it).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { runNode } = require('./helpers/proc');
const { delay, withTimeout, waitFor, rawUpgrade } = require('./helpers/meteor-util');
const { RetryingDdpClient } = require('./helpers/ddp-retry-client');
const { findExecutable, freePort } = require('./helpers/common');

const ROOT = path.resolve(__dirname, '..');
const BACKEND = path.join(__dirname, 'helpers', 'scale-backend.js');
const CLIENTS = 20;
const LOOPS_PER_CLIENT = 2; // calls in flight per client
const PAUSE_MS = 20; // between one loop's calls
const GRACE_S = 3; // METEOR_SIGTERM_GRACE_PERIOD_SECONDS: the drain spreads closes over 90% of it

const NGINX = findExecutable('nginx', ['/usr/sbin', '/usr/local/sbin', '/usr/local/nginx/sbin']);

/** The ```nginx block of docs/scaling.md's "N hosts" section. */
function docsNginxConfig() {
  const page = fs.readFileSync(path.join(ROOT, 'docs', 'scaling.md'), 'utf8');
  const at = page.indexOf('\n## N hosts\n');
  assert.ok(at !== -1, 'docs/scaling.md has a "N hosts" section');
  const m = /```nginx\n([\s\S]*?)```/.exec(page.slice(at));
  assert.ok(m, 'docs/scaling.md "N hosts" has an nginx block');
  return m[1];
}

/** docs/scaling.md's block with our two instances and a loopback listener, in a full nginx.conf. */
function nginxConf(dir, listenPort, backendPorts) {
  const block = docsNginxConfig();
  for (const needed of ['ip_hash;', 'proxy_next_upstream error timeout http_503;', 'proxy_next_upstream_tries 2;',
    'proxy_set_header Upgrade $http_upgrade;']) {
    assert.ok(block.includes(needed), `docs/scaling.md nginx config has ${needed}`);
  }
  let n = 0;
  const servers = block.replace(/^(\s*)server \d+\.\d+\.\d+\.\d+:\d+;.*$/gm, (all, indent) => {
    const port = backendPorts[n++];
    return port === undefined ? '' : `${indent}server 127.0.0.1:${port};`;
  });
  assert.equal(n, backendPorts.length, 'docs/scaling.md upstream lists two servers');
  const http = servers.replace(/^(\s*)listen 80;$/m, `$1listen 127.0.0.1:${listenPort};`);
  assert.ok(http.includes(`listen 127.0.0.1:${listenPort};`), 'docs/scaling.md server block listens on 80');
  const p = (name) => path.join(dir, name);
  return [
    // As root the master would start its worker as `nobody`; keep it root (temp files are ours).
    process.getuid && process.getuid() === 0 ? 'user root;' : '',
    'worker_processes 1;',
    `pid ${p('nginx.pid')};`,
    `error_log ${p('error.log')} info;`,
    'events { worker_connections 1024; }',
    'http {',
    `  log_format upstreams '$remote_addr $status "$upstream_addr" "$upstream_status"';`,
    `  access_log ${p('access.log')} upstreams;`,
    `  client_body_temp_path ${p('body')}; proxy_temp_path ${p('proxy')}; fastcgi_temp_path ${p('fastcgi')};`,
    `  uwsgi_temp_path ${p('uwsgi')}; scgi_temp_path ${p('scgi')};`,
    http.replace(/^/gm, '  '),
    '}',
    '',
  ].join('\n');
}


function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/** Pids whose parent is `pid` (nginx's workers), from /proc. */
function childrenOf(pid) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch { /* gone */ }
  }
  return out;
}

/** Start nginx in the foreground as our child; resolves { proc, port, dir, stop() }. */
async function startNginx(t, backendPorts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-nginx-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const conf = path.join(dir, 'nginx.conf');
    fs.writeFileSync(conf, nginxConf(dir, port, backendPorts));
    const proc = spawn(NGINX, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', conf, '-g', 'daemon off;'],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    let workers = [];
    const stop = async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGQUIT'); // graceful: the master stops its workers
        const r = await withTimeout(exited, 5000, 'nginx exit').catch(() => null);
        if (!r) proc.kill('SIGKILL');
      }
      // A worker outliving a killed master: end it (our own child's child, by pid).
      for (const w of workers) {
        try {
          if (fs.readFileSync(`/proc/${w}/cmdline`, 'utf8').startsWith('nginx')) process.kill(w, 'SIGKILL');
        } catch { /* gone */ }
      }
    };
    t.after(stop);
    let up = false;
    for (let i = 0; i < 100 && !up && proc.exitCode === null && proc.signalCode === null; i++) {
      up = await canConnect(port);
      if (!up) await delay(50);
    }
    if (up) {
      workers = childrenOf(proc.pid);
      return { proc, port, dir, stop, exited, workers };
    }
    await stop();
    const log = fs.existsSync(path.join(dir, 'error.log')) ? fs.readFileSync(path.join(dir, 'error.log'), 'utf8') : '';
    if (attempt >= 3 || !/Address already in use/.test(log + stderr)) {
      throw new Error(`nginx did not start: ${stderr}\n${log.slice(-2000)}`);
    }
  }
}

/** One backend (demo app) as a child process; resolves { child, port, name }. */
async function startBackend(name) {
  const child = runNode(`require(${JSON.stringify(BACKEND)})`, {
    env: { INSTANCE: name, METEOR_SIGTERM_GRACE_PERIOD_SECONDS: String(GRACE_S), SERVER_WEBSOCKET_COMPRESSION: '' },
    timeoutMs: 90000,
  });
  const m = await child.waitMessage((x) => x.type === 'text' && /^(READY|ERROR)/.test(x.line), 20000, `backend ${name} READY`);
  assert.match(m.line, /^READY \d+$/, `backend ${name}: ${m.line}\n${child.stderr()}`);
  return { child, port: Number(m.line.split(' ')[1]), name };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

test('nginx (docs/scaling.md config) in front of two instances: SIGTERM one, its clients move in batches, no method call lost, 503s retried', {
  skip: NGINX ? false : 'nginx not installed: apt-get install -y nginx (.ci/run installs it)',
  timeout: 60000,
}, async (t) => {
  const started = performance.now();
  const [A, B] = await Promise.all([startBackend('A'), startBackend('B')]);
  t.after(() => Promise.all([A.child.kill(), B.child.kill()]));
  const backends = { A, B };
  const nginx = await startNginx(t, [A.port, B.port]);
  const url = `ws://127.0.0.1:${nginx.port}/websocket`;

  // Clients from 127.0.<i>.1: ip_hash keys IPv4 clients by their first three octets.
  const clients = [];
  t.after(() => Promise.all(clients.map((c) => c.stop())));
  for (let i = 0; i < CLIENTS; i++) clients.push(new RetryingDdpClient(url, { localAddress: `127.0.${i + 1}.1` }));
  await Promise.all(clients.map((c) => c.start()));
  const whereIs = async () => Promise.all(clients.map((c) => withTimeout(c.call('whoami'), 10000, 'whoami')));
  const initial = await whereIs();
  const onA = initial.filter((x) => x === 'A').length;
  t.diagnostic(`initial spread over the instances by ip_hash: A=${onA} B=${CLIENTS - onA}`);
  assert.ok(onA > 0 && onA < CLIENTS, `both instances get clients (A=${onA} of ${CLIENTS})`);
  const victim = onA >= CLIENTS - onA ? 'A' : 'B';
  const survivor = victim === 'A' ? 'B' : 'A';
  const moving = clients.filter((c, i) => initial[i] === victim);
  const staying = clients.filter((c, i) => initial[i] !== victim);

  // Load: every client keeps LOOPS_PER_CLIENT echo calls going; each returns its argument.
  const tally = { sent: 0, answered: 0, wrong: 0, errors: [] };
  let stopping = false;
  const loops = [];
  clients.forEach((c, ci) => {
    for (let l = 0; l < LOOPS_PER_CLIENT; l++) {
      loops.push((async () => {
        for (let k = 0; !stopping && k < 100000; k++) {
          const arg = `${ci}.${l}.${k}`;
          tally.sent++;
          try {
            const r = await c.call('echo', arg);
            if (r === arg) tally.answered++; else tally.wrong++;
          } catch (e) {
            tally.errors.push(e.message);
            return;
          }
          await delay(PAUSE_MS);
        }
      })());
    }
  });
  await delay(500);
  const beforeSigterm = tally.answered;
  assert.ok(beforeSigterm > 0, 'calls answered before the SIGTERM');

  // SIGTERM the instance with more clients.
  const sigtermAt = performance.now();
  backends[victim].child.child.kill('SIGTERM');

  // The draining instance answers a new upgrade with 503 (asked directly, not through nginx).
  let direct = null;
  for (let i = 0; i < 40 && !(direct && direct.startsWith('HTTP/1.1 503')); i++) {
    const r = await rawUpgrade(backends[victim].port, '/websocket').catch((e) => ({ head: `error ${e.message}` }));
    if (r.sock) r.sock.destroy();
    direct = r.head.split('\r\n')[0];
    if (!direct.startsWith('HTTP/1.1 503')) await delay(10);
  }
  assert.equal(direct, 'HTTP/1.1 503 Service Unavailable', 'a new upgrade to the draining instance');
  // Through nginx, a new client from an address that ip_hash sends to the victim lands on the survivor.
  const probe = new RetryingDdpClient(url, { localAddress: moving[0].localAddress });
  clients.push(probe);
  await probe.start();
  assert.equal(await withTimeout(probe.call('whoami'), 10000, 'probe whoami'), survivor, 'new client through nginx during the drain');
  await probe.stop();

  // The victim closes every client (in batches), then ends (the adapter re-raises SIGTERM).
  const exit = await withTimeout(backends[victim].child.exited, 20000, 'draining instance exit');
  const drainMs = performance.now() - sigtermAt;
  assert.ok(exit.signal === 'SIGTERM' || exit.code === 0, `victim exit ${JSON.stringify(exit)}`);
  await waitFor(() => moving.every((c) => c.connected && c.closes.length >= 1), 15000, 'moved clients reconnected');
  await delay(300); // some traffic on the survivor alone
  stopping = true;
  await withTimeout(Promise.all(loops), 15000, 'every outstanding call answered');
  const final = await Promise.all(clients.filter((c) => c !== probe).map((c) => withTimeout(c.call('whoami'), 10000, 'whoami after')));

  // Every call answered with its own argument, none lost, none failed.
  assert.deepEqual(tally.errors, []);
  assert.equal(tally.wrong, 0, 'results equal their arguments');
  assert.equal(tally.answered, tally.sent, `calls sent ${tally.sent}, answered ${tally.answered}`);
  assert.equal(clients.reduce((n, c) => n + c.duplicates, 0), 0, 'no result twice');
  // The victim's clients, and only they, were closed (1001, the drain's code) and moved.
  assert.ok(final.every((x) => x === survivor), `all on ${survivor} after: ${final.join('')}`);
  assert.ok(staying.every((c) => c.closes.length === 0), 'clients of the other instance were not disturbed');
  const closes = moving.map((c) => c.closes[0]);
  assert.ok(closes.every((c) => c.code === 1001), `close codes: ${closes.map((c) => c.code).join(',')}`);
  // In batches: the closes are spread over the drain, not all at once.
  const at = closes.map((c) => c.at - sigtermAt).sort((a, b) => a - b);
  const groups = at.reduce((g, x, i) => (i === 0 || x - at[i - 1] > 30 ? g + 1 : g), 0);
  const spread = at[at.length - 1] - at[0];
  assert.ok(groups >= Math.min(3, moving.length), `closes in ${groups} batches over ${spread.toFixed(0)} ms`);
  assert.ok(spread >= 200, `closes spread over ${spread.toFixed(0)} ms`);

  // nginx's own record: upgrades answered 503 by the draining instance and retried on the other.
  await Promise.all(clients.map((c) => c.stop()));
  await delay(200);
  const log = fs.readFileSync(path.join(nginx.dir, 'access.log'), 'utf8');
  const retried = log.split('\n').filter((l) => /"503, 101"$/.test(l)).length;
  assert.ok(retried >= 1, `nginx retried at least one upgrade after a 503:\n${log.slice(-2000)}`);

  const rec = moving.flatMap((c) => c.reconnectMs).sort((a, b) => a - b);
  const v = spawnSync(NGINX, ['-v'], { encoding: 'utf8', timeout: 5000 });
  const version = `${v.stderr || v.stdout || ''}`.trim() || 'nginx (version unknown)';
  t.diagnostic(`${version}; instance ${victim} got SIGTERM with ${moving.length} of ${CLIENTS} clients (METEOR_SIGTERM_GRACE_PERIOD_SECONDS=${GRACE_S}); ` +
    `drained and exited in ${drainMs.toFixed(0)} ms`);
  t.diagnostic(`closes: ${moving.length} clients closed with 1001 in ${groups} batches over ${spread.toFixed(0)} ms; ` +
    `all ${moving.length} reconnected through nginx to ${survivor}`);
  t.diagnostic(`reconnect (close -> DDP connected): p50 ${percentile(rec, 50).toFixed(1)} ms, max ${rec[rec.length - 1].toFixed(1)} ms (n=${rec.length})`);
  t.diagnostic(`method calls: sent ${tally.sent}, answered ${tally.answered} (each with its argument), ` +
    `sent again after a reconnect ${clients.reduce((n, c) => n + c.resent, 0)}, lost 0`);
  t.diagnostic(`new upgrades during the drain: direct to ${victim} -> ${direct}; through nginx -> ${survivor}; ` +
    `nginx log lines with upstream status "503, 101": ${retried}; test time ${((performance.now() - started) / 1000).toFixed(1)} s`);
});
