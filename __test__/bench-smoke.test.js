'use strict';
// The benchmark's smoke run: every server starts and every workload completes (no timing
// thresholds). Runs `node bench/run.js --smoke --out <tmpdir>` as an async child process.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const TIMEOUT_MS = 240_000;
// Always measurable here (their packages are devDependencies); the native and pure-Rust rows are
// required whenever their binaries are built.
const ALWAYS = ['sockjs', 'ws', 'uws-direct', 'uws-raw', 'uws-publish', 'uws-proxied'];

test('the benchmark servers\' tasks app: addTask → added (on the tasks subscription), result, updated', () => {
  const { loadDdp } = require('../bench/servers/common');
  const ddp = loadDdp();
  const out = [];
  const s = ddp.open((str) => out.push(JSON.parse(str)), () => {});
  const m = (msg) => s.receive(JSON.stringify(msg));
  m({ msg: 'connect', version: '1', support: ['1'] });
  const session = out.shift().session;
  m({ msg: 'method', id: '0', method: 'addTask', params: ['before the sub'] }); // kept, not sent
  assert.deepEqual(out.splice(0).map((x) => x.msg), ['result', 'updated']);
  m({ msg: 'sub', id: 't', name: 'tasks' });
  const [first, ready] = out.splice(0);
  assert.equal(first.msg, 'added');
  assert.equal(first.fields.text, 'before the sub');
  assert.deepEqual(ready, { msg: 'ready', subs: ['t'] });
  m({ msg: 'method', id: '1', method: 'addTask', params: ['buy milk'] });
  const [added, result, updated] = out.splice(0);
  assert.equal(added.msg, 'added');
  assert.equal(added.collection, 'tasks');
  assert.match(added.id, /^[23456789A-HJ-NP-Za-km-z]{17}$/);
  assert.equal(added.fields.text, 'buy milk');
  assert.equal(added.fields.owner, session);
  assert.ok(Math.abs(added.fields.createdAt.$date - Date.now()) < 5000);
  assert.deepEqual(result, { msg: 'result', id: '1', result: added.id });
  assert.deepEqual(updated, { msg: 'updated', methods: ['1'] });
  assert.deepEqual(s.views.get('tasks').get(added.id), added.fields, 'the session keeps a copy of the fields sent');
  m({ msg: 'method', id: '2', method: 'addTask', params: [42] });
  assert.equal(out.shift().error.error, 400);
  out.length = 0;
  // Bounded: the last 100 tasks (and the session's copies of them).
  for (let i = 0; i < 150; i++) m({ msg: 'method', id: `b${i}`, method: 'addTask', params: [`t${i}`] });
  assert.equal(s.data.tasks.length, 100);
  assert.equal(s.views.get('tasks').size, 100);
  assert.equal(s.data.tasks[0].text, 't50');
});

test('bench --smoke: every server starts and every workload completes', { timeout: TIMEOUT_MS + 30_000 }, async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-'));
  t.after(() => fs.rmSync(out, { recursive: true, force: true }));

  const child = spawn(process.execPath, [path.join('bench', 'run.js'), '--smoke', '--out', out], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => {
      // The runner kills its own servers and load generators on SIGTERM.
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
    }, TIMEOUT_MS);
    child.on('exit', (c, sig) => { clearTimeout(timer); resolve(sig ? sig : c); });
  });
  const log = `exit ${code}\n--- stderr ---\n${stderr.slice(-6000)}\n--- stdout ---\n${stdout.slice(-4000)}`;

  const latest = path.join(out, 'latest.json');
  assert.ok(fs.existsSync(latest), `no latest.json written\n${log}`);
  const report = JSON.parse(fs.readFileSync(latest, 'utf8'));
  assert.deepEqual(fs.readdirSync(out).sort(), ['latest.json', 'latest.md', 'latest.svg'], 'one copy of the results');
  assert.match(fs.readFileSync(path.join(out, 'latest.svg'), 'utf8'), /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.match(stdout, /\| transport \|/, 'the markdown table is printed');

  const workloads = report.workloads.map((w) => w.name);
  assert.deepEqual(workloads, ['burst', 'rtt', 'throughput', 'throughput-coalesced', 'fanout', 'idle', 'idle_deflate', 'compressed',
    'compressed-methods', 'compressed-fan-out', 'fan-out-4k', 'app-rate', 'app-saturated']);
  const problems = [];
  for (const tr of report.transports) {
    if (tr.unavailable) {
      assert.ok(!ALWAYS.includes(tr.name), `${tr.name} unavailable: ${tr.unavailable}`);
      t.diagnostic(`${tr.name}: not measured (${tr.unavailable})`);
      continue;
    }
    for (const w of workloads) {
      const cell = report.medians[tr.name][w];
      if (cell.status === 'n/a' && cell.reason === 'no permessage-deflate') continue; // by design
      if (cell.status === 'n/a' && /^runs only /.test(cell.reason)) continue; // uws-publish: fan-outs only
      if (cell.status === 'n/a' && cell.reason === 'no publishDoc in rust-echo') continue; // JS documents
      if (cell.status === 'n/a' && cell.reason === 'no tasks app in rust-echo') continue; // the JS tasks app
      if (cell.status !== 'ok') problems.push(`${tr.name} / ${w}: ${cell.status} ${JSON.stringify(cell.errors || cell.reason)}`);
    }
  }
  assert.deepEqual(problems, [], `workloads that did not complete:\n${problems.join('\n')}\n${log}`);
  // The app workloads: every call got its `added`, and the runner got the server's event-loop
  // utilization (JS-thread time per call) and its RSS.
  for (const tr of report.transports.filter((x) => !x.unavailable)) {
    for (const w of ['app-rate', 'app-saturated']) {
      const cell = report.medians[tr.name][w];
      if (cell.status !== 'ok') continue;
      const m = cell.metrics;
      assert.ok(m.calls_per_s > 0 && m.server_cpu_us_per_call > 0, `${tr.name} / ${w}: ${JSON.stringify(m)}`);
      assert.ok(m.js_us_per_call > 0 && m.elu > 0 && m.elu <= 1, `${tr.name} / ${w}: no event-loop utilization ${JSON.stringify(m)}`);
      assert.ok(m.added_per_call >= 1, `${tr.name} / ${w}: a call without its added ${JSON.stringify(m)}`);
      assert.ok(m.rss_end_mib > 0, `${tr.name} / ${w}: no RSS`);
    }
  }
  assert.match(stdout, /native-attach ÷ uws-proxied/, 'the app table with the native ÷ uws ratios is printed');
  // The compressed workloads report what the lead's table needs.
  for (const tr of ['uws-direct', 'sockjs']) {
    const m = report.medians[tr]['compressed-methods'];
    assert.ok(m.metrics ? m.metrics.wire_bytes_per_call > 0 : true, `${tr} compressed-methods wire bytes`);
  }
  assert.equal(code, 0, log);
});
