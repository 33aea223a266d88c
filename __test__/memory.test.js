'use strict';
// Memory given back after load (issue 15): a burst of 5,000 connections, plain and then with
// permessage-deflate (offered as Chromium does, one compressed message each way, so every
// connection held an inflater and a deflater: ~1 GB of zlib state at the peak), all closed; 5 s
// later the server's RSS is back near its baseline. The server is a child process
// (helpers/hostile-server.js, own listener). Measured on the 2-core dev box (MB): baseline 46.5;
// plain held 70.5 → 55.4 after 5 s; deflate held 1101 → 54.0. Without the trim
// (DDP_TRANSPORT_NATIVE_TRIM=0) the same run ends at 67.8 and 188.7.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { scope, sleep } = require('./helpers/common');
const { runNode, procStats } = require('./helpers/proc');
const { openBurst, closeBurst } = require('./helpers/burst');

const MiB = 1024 * 1024;
const FIXTURE = path.join(__dirname, 'helpers', 'hostile-server.js');
/** RSS 5 s after the burst closed may exceed the baseline by at most this (trim: +8..9 MB; none: +21, +142). */
const BOUND = 15 * MiB;

/** 5,000, or fewer when this process's descriptor limit is lower (each client holds one fd). */
function burstSize() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  const soft = m ? Number(m[1]) : 1024;
  return Math.max(200, Math.min(5000, soft - 300));
}

test('RSS back near baseline 5 s after a burst of connections, plain and deflate', { timeout: 90000 }, async (t) => {
  const s = scope(t);
  const child = s.trackChild(runNode(`require(${JSON.stringify(FIXTURE)})`, {
    env: { QUIET: '1', MODE: 'own' }, args: ['--expose-gc'], timeoutMs: 85000,
  }));
  const { port } = await child.waitMessage((m) => m.type === 'listening', 15000, 'child listening');
  const measure = async () => {
    const { mem, stats } = await child.request({ cmd: 'stats', gc: true });
    return { rss: procStats(child.pid).rss, heap: mem.heapTotal, open: stats.connections };
  };
  await sleep(500);
  const base = await measure();
  const n = burstSize();
  const mb = (b) => `${(b / MiB).toFixed(1)} MB`;
  for (const deflate of [false, true]) {
    const kind = deflate ? 'deflate' : 'plain';
    const { clients, errors } = await openBurst(port, { n, path: deflate ? '/deflate' : '/echo', deflate });
    assert.deepEqual(errors, [], `${kind} burst connects`);
    const held = await measure();
    assert.equal(held.open, n);
    await closeBurst(clients);
    await sleep(5000);
    const after = await measure();
    t.diagnostic(`${kind} ×${n}: RSS ${mb(base.rss)} → held ${mb(held.rss)} → 5 s after ${mb(after.rss)} (V8 heap ${mb(after.heap)})`);
    assert.equal(after.open, 0, `${kind}: every connection closed`);
    assert.ok(after.rss <= base.rss + BOUND,
      `${kind}: RSS 5 s after the burst ${mb(after.rss)} > baseline ${mb(base.rss)} + ${mb(BOUND)}`);
  }
});
