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
    'compressed-methods', 'compressed-fan-out', 'fan-out-4k']);
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
      if (cell.status !== 'ok') problems.push(`${tr.name} / ${w}: ${cell.status} ${JSON.stringify(cell.errors || cell.reason)}`);
    }
  }
  assert.deepEqual(problems, [], `workloads that did not complete:\n${problems.join('\n')}\n${log}`);
  // The compressed workloads report what the lead's table needs.
  for (const tr of ['uws-direct', 'sockjs']) {
    const m = report.medians[tr]['compressed-methods'];
    assert.ok(m.metrics ? m.metrics.wire_bytes_per_call > 0 : true, `${tr} compressed-methods wire bytes`);
  }
  assert.equal(code, 0, log);
});
