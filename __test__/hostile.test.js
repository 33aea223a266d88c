'use strict';
// Hostile peers II (issue 15): ping floods and non-reading writers cannot grow server memory,
// a client closed for backpressure is told why (1013), absolute-form targets, HTTP/1.0 refused
// alike on both entry points, memory given back after a burst. Servers that are measured run
// in a child process (helpers/hostile-server.js), on their own listener and attached.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { scope, waitFor, sleep } = require('./helpers/common');
const { OP, connectRaw, pingFrame, textFrame } = require('./helpers/raw');
const { runNode, procStats } = require('./helpers/proc');

const MiB = 1024 * 1024;
const FIXTURE = path.join(__dirname, 'helpers', 'hostile-server.js');
const MODES = ['own', 'attach'];

/** Start the hostile child server; resolves {child, port}. */
async function startChild(s, { mode = 'own', env = {}, args = [], timeoutMs = 120000 } = {}) {
  const child = s.trackChild(runNode(`require(${JSON.stringify(FIXTURE)})`, { env: { MODE: mode, ...env }, args, timeoutMs }));
  const ready = await child.waitMessage((m) => m.type === 'listening', 15000, 'child listening');
  assert.ok(ready.port > 0, `child failed to listen: ${JSON.stringify(ready)}`);
  return { child, port: ready.port };
}

/** Write `total` copies of `frame` (batched), honouring the socket's own backpressure. */
async function writeMany(socket, frame, total, batch = 8192) {
  const chunk = Buffer.concat(Array(batch).fill(frame));
  for (let sent = 0; sent < total; sent += batch) {
    if (socket.destroyed) return sent;
    const n = Math.min(batch, total - sent);
    const ok = socket.write(n === batch ? chunk : chunk.subarray(0, n * frame.length));
    if (!ok) {
      await new Promise((resolve) => {
        const done = () => { socket.off('drain', done); socket.off('close', done); resolve(); };
        socket.on('drain', done);
        socket.on('close', done);
      });
    }
  }
  return total;
}

for (const mode of MODES) {
  test(`ping flood (${mode}): 1,000,000 pings of 125 bytes from a client that never reads: RSS bounded, buffered within the limit, one pong per ping burst (the latest)`, { timeout: 120000 }, async (t) => {
    const s = scope(t);
    const { child, port } = await startChild(s, { mode });
    const r = await connectRaw(port, { path: '/echo' });
    r.reader.pause();
    const base = procStats(child.pid).rss;
    let peak = base;
    const timer = setInterval(() => { try { peak = Math.max(peak, procStats(child.pid).rss); } catch { /* gone */ } }, 25);
    t.after(() => clearInterval(timer));
    const flood = pingFrame(Buffer.alloc(125, 0x70));
    await writeMany(r.socket, flood, 1000000);
    const last = Buffer.alloc(125, 0x71);
    r.socket.write(pingFrame(last));
    // Every ping is read (the queue holds one pong at most), so the server keeps up.
    await waitFor(async () => {
      const st = await child.request({ cmd: 'stats' });
      return st.stats.wireBytesIn >= 1000001 * flood.length;
    }, { timeout: 60000, interval: 200, label: 'server reads the whole flood' });
    const st = await child.request({ cmd: 'stats' });
    clearInterval(timer);
    peak = Math.max(peak, procStats(child.pid).rss);
    t.diagnostic(`RSS ${(base / MiB).toFixed(1)} → peak ${(peak / MiB).toFixed(1)} MiB; buffered ${JSON.stringify(st.buffered)}`);
    assert.ok(peak - base < 40 * MiB, `RSS grew ${((peak - base) / MiB).toFixed(1)} MiB`);
    assert.equal(st.buffered.length, 1);
    assert.ok(st.buffered[0] <= 127, `at most one pong queued, got ${st.buffered[0]} bytes`);
    // Reading now: pongs arrive, the last one answers the last ping.
    r.reader.resume();
    const frames = await r.reader.readUntil((f) => f.opcode === OP.PONG && f.payload.equals(last), 30000, 2e6);
    assert.ok(frames.every((f) => f.opcode === OP.PONG));
    t.diagnostic(`${frames.length} pongs for 1,000,001 pings`);
    r.reader.destroy();
  });
}

test('a client that writes and never reads: the server stops reading once the socket is over maxBackpressure (bounded bytes in, bounded RSS)', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s, { env: { CLOSE_ON_LIMIT: '0' } });
  const r = await connectRaw(port, { path: '/limited' });
  r.reader.pause();
  const base = procStats(child.pid).rss;
  const msg = textFrame('x'.repeat(1000));
  // 100 MB of echo requests; the writes stall once the server stops reading.
  const writing = writeMany(r.socket, msg, 100000, 256);
  await sleep(3000);
  const st = await child.request({ cmd: 'stats' });
  const rss = procStats(child.pid).rss;
  t.diagnostic(`server read ${(st.stats.wireBytesIn / MiB).toFixed(1)} MiB, dropped ${st.stats.dropped}, buffered ${JSON.stringify(st.buffered)}, RSS +${((rss - base) / MiB).toFixed(1)} MiB`);
  assert.ok(st.stats.wireBytesIn < 30 * MiB, `the server kept reading: ${st.stats.wireBytesIn} bytes`);
  assert.ok(rss - base < 40 * MiB);
  r.reader.destroy();
  await writing;
});
