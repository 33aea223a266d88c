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

// What an idle Meteor socket keeps in the JS heap (the adapter's socket object, 1,000 idle
// connections with browser-sized heads): its `id` is made only if read (Meteor's ddp-server never
// reads it; a UUID is a rope of ~20 pieces), and the header values it keeps are strings of their
// own (a value cut from the whole head keeps all of the head alive). Measured per socket (the
// adapter's socket and the core's WebSocket object): 1.69 KiB before either, 0.83 KiB after.
test('an idle Meteor socket keeps only what it exposes in the JS heap', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const source = `
    const http = require('node:http');
    const path = require('node:path');
    const { out, onCommand } = require(${JSON.stringify(path.join(__dirname, 'helpers', 'child-lib.js'))});
    process.env.SERVER_WEBSOCKET_COMPRESSION = 'false';
    const { createNativeTransport } = require(path.join(process.env.DTN_PKG, 'meteor'));
    const server = http.createServer((q, r) => r.end());
    const kept = [];
    createNativeTransport({ settings: {} }).setup(server, '', { websocketExtensions: () => [] })
      .on('connection', (socket) => kept.push(socket));
    onCommand((m) => {
      if (m.cmd === 'heap') { global.gc(); out({ id: m.id, used: process.memoryUsage().heapUsed, sockets: kept.length }); }
      if (m.cmd === 'read') out({ id: m.id, ids: kept.slice(0, 2).map((k) => [k.id, k.id]), host: kept[0].headers.host });
    });
    server.listen(0, '127.0.0.1', () => out({ type: 'listening', port: server.address().port }));
  `;
  const child = s.trackChild(runNode(source, { args: ['--expose-gc'], timeoutMs: 55000 }));
  const { port } = await child.waitMessage((m) => m.type === 'listening', 15000, 'child listening');
  const WebSocket = require('ws');
  const headers = {
    'User-Agent': `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36`,
    'Accept-Language': 'en-US,en;q=0.9',
    Origin: `http://127.0.0.1:${port}`,
    'Cache-Control': 'no-cache',
    Pragma: 'no-cache',
  };
  const clients = [];
  const open = (n) => Promise.all(Array.from({ length: n }, () => new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/websocket`, { headers, perMessageDeflate: false });
    ws.on('open', () => { clients.push(ws); resolve(); });
    ws.on('error', reject);
  })));
  try {
    await open(100); // warm
    await sleep(300);
    const before = await child.request({ cmd: 'heap' });
    const N = 1000;
    for (let i = 0; i < N; i += 100) await open(100);
    let after;
    for (let i = 0; i < 50; i++) {
      after = await child.request({ cmd: 'heap' });
      if (after.sockets === N + 100) break;
      await sleep(100);
    }
    assert.equal(after.sockets, N + 100, 'every connection reached the app');
    const perSocket = (after.used - before.used) / N / 1024;
    t.diagnostic(`JS heap per idle Meteor socket: ${perSocket.toFixed(2)} KiB`);
    assert.ok(perSocket < 1.2, `${perSocket.toFixed(2)} KiB per socket`);
    // The contract still holds: an id (the same at each read, one per socket), the whitelist.
    const r = await child.request({ cmd: 'read' });
    assert.equal(r.ids[0][0], r.ids[0][1]);
    assert.notEqual(r.ids[0][0], r.ids[1][0]);
    assert.match(r.ids[0][0], /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(r.host, `127.0.0.1:${port}`);
  } finally {
    for (const ws of clients) ws.terminate();
  }
});
