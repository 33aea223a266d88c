'use strict';
// Hostile peers II (issue 15): ping floods and non-reading writers cannot grow server memory,
// a client closed for backpressure is told why (1013), absolute-form targets, HTTP/1.0 and
// malformed request targets refused alike on every entry point, memory given back after a burst. Servers that are measured run
// in a child process (helpers/hostile-server.js), on their own listener and attached.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const WebSocket = require('ws');
const { scope, waitFor, sleep } = require('./helpers/common');
const { OP, connectRaw, pingFrame, textFrame, rawHttp, upgradeRequestText } = require('./helpers/raw');
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
  test(`ping flood (${mode}): 1,000,000 pings of 125 bytes from a client that never reads: RSS bounded, buffered within the limit, pongs bounded, the latest ping answered`, { timeout: 120000 }, async (t) => {
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
    // 2 KiB of pongs pending, plus at most as much taken by the I/O task and not yet written.
    assert.ok(st.buffered[0] <= 2 * 2048, `at most 2 × 2 KiB of pongs queued, got ${st.buffered[0]} bytes`);
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

for (const mode of MODES) {
  test(`backpressure close (${mode}): a slow \`ws\` client gets whole frames, then close 1013 "backpressure limit"; a client that never reads is closed within the close wait`, { timeout: 60000 }, async (t) => {
    const s = scope(t);
    const { child, port } = await startChild(s, { mode });
    // Slow reader: reads nothing while the server fills its queue, then everything.
    const ws = new WebSocket(`ws://127.0.0.1:${port}/big`);
    t.after(() => ws.terminate());
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    let bytes = 0;
    ws.on('message', (d) => { bytes += d.length; });
    const closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    const errors = [];
    ws.on('error', (e) => errors.push(e.message));
    ws.pause();
    ws.send('go');
    await child.waitMessage((m) => m.type === 'big-sent', 10000, 'server flood');
    await sleep(300);
    ws.resume();
    const serverClose = await child.waitMessage((m) => m.type === 'close' && m.route === 'big', 10000, 'server close');
    assert.equal(serverClose.code, 1013);
    assert.equal(serverClose.reason, 'backpressure limit');
    const got = await closed;
    t.diagnostic(`client read ${(bytes / MiB).toFixed(2)} MiB of whole messages, then close ${got.code} "${got.reason}"`);
    assert.deepEqual(errors, []);
    assert.equal(got.code, 1013);
    assert.equal(got.reason, 'backpressure limit');
    assert.equal(bytes % (64 * 1024), 0, 'only whole messages');

    // A client that never reads at all: the server still closes within a bounded time.
    const r = await connectRaw(port, { path: '/big' });
    r.reader.pause();
    r.socket.write(textFrame('go'));
    const t0 = Date.now();
    const second = await child.waitMessage((m) => m.type === 'close' && m.route === 'big' && m !== serverClose, 10000, 'second close');
    assert.equal(second.code, 1013);
    assert.ok(Date.now() - t0 < 6000, `closed after ${Date.now() - t0} ms`);
    // It gets what fitted in the kernel's buffers, then FIN (the close frame could not be sent).
    r.reader.resume();
    assert.ok(await r.reader.waitEnd(10000));
    r.reader.destroy();
  });
}

for (const mode of MODES) {
  test(`absolute-form request target (${mode}): routed and answered as its origin form; getUrl() gives path + query`, { timeout: 30000 }, async (t) => {
    const s = scope(t);
    const { child, port } = await startChild(s, { mode });
    const r = await connectRaw(port, { path: `http://127.0.0.1:${port}/echo?x=1` });
    const opened = await child.waitMessage((m) => m.type === 'open', 5000, 'open');
    assert.equal(opened.route, 'echo');
    assert.equal(opened.url, '/echo?x=1');
    r.socket.write(textFrame('hi'));
    const f = await r.reader.next();
    assert.equal(f.payload.toString(), 'hi');
    r.reader.destroy();
    // The exact route that only the path matches (not the raw target).
    const d = await connectRaw(port, { path: `http://127.0.0.1:${port}/deflate` });
    assert.equal((await child.waitMessage((m) => m.type === 'open' && m.route === 'deflate', 5000, 'open deflate')).url, '/deflate');
    d.reader.destroy();
  });
}

test('HTTP/1.0 upgrade: 400 "HTTP/1.1 required" on both entry points (RFC 6455 §4.1)', { timeout: 30000 }, async (t) => {
  const s = scope(t);
  const answers = {};
  for (const mode of MODES) {
    const { child, port } = await startChild(s, { mode });
    const text = upgradeRequestText({ path: '/echo', key: 'dGhlIHNhbXBsZSBub25jZQ==' }).replace(' HTTP/1.1\r\n', ' HTTP/1.0\r\n');
    const res = await rawHttp(port, text);
    answers[mode] = { status: res.status, body: res.body };
    const st = await child.request({ cmd: 'stats' });
    assert.equal(st.stats.upgradesAccepted, 0, `${mode}: no upgrade`);
  }
  assert.deepEqual(answers.own, { status: 400, body: 'HTTP/1.1 required' });
  assert.deepEqual(answers.attach, answers.own);
});

test('malformed request targets: 400 "Invalid request target" alike on the own listener, attach() and the Meteor adapter; the process survives', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  // Meteor's uws transport throws on the first (new URL('http://%')) and takes the process down.
  const targets = ['http://%', 'http://%/echo', '*', '/echo%zz', '/echo%', '/echo?x=%zz', 'http://h:99999/echo', '/echo#f'];
  const http = require('node:http');
  const { createNativeTransport } = require('../meteor');
  const server = http.createServer((req, res) => res.end('app'));
  createNativeTransport({ settings: {} }).setup(server, '', { websocketExtensions: () => [] });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => { server.closeAllConnections(); server.close(); });
  const ports = { meteor: server.address().port };
  const children = {};
  for (const mode of MODES) {
    const { child, port } = await startChild(s, { mode });
    ports[mode] = port;
    children[mode] = child;
  }
  for (const target of targets) {
    for (const [where, port] of Object.entries(ports)) {
      const text = upgradeRequestText({ path: target, key: 'dGhlIHNhbXBsZSBub25jZQ==' });
      const res = await rawHttp(port, text);
      assert.deepEqual({ status: res.status, body: String(res.body) }, { status: 400, body: 'Invalid request target' }, `${where} ${target}`);
    }
  }
  // A valid origin-form path that URL parsers take for an authority is routed as a path.
  const own = await rawHttp(ports.own, upgradeRequestText({ path: '//invalid:99999', key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
  assert.equal(own.status, 404);
  for (const mode of MODES) {
    const st = await children[mode].request({ cmd: 'stats' });
    assert.equal(st.stats.upgradesAccepted, 0, `${mode}: no upgrade`);
  }
  // Still serving.
  const c = new WebSocket(`ws://127.0.0.1:${ports.attach}/echo`);
  await new Promise((resolve, reject) => { c.on('open', resolve); c.on('error', reject); });
  c.close();
});

test('a second setup() of the Meteor adapter on one server path, or a second attach() of one app, throws naming the path', async (t) => {
  const http = require('node:http');
  const { App } = require('..');
  const { createNativeTransport } = require('../meteor');
  const server = http.createServer();
  const app = App();
  t.after(() => { app.close(); server.close(); });
  app.ws('/websocket', {});
  app.attach(server);
  assert.throws(() => app.attach(server), /already attached.*\/websocket/);
  const meteorServer = http.createServer();
  t.after(() => meteorServer.close());
  createNativeTransport({ settings: {} }).setup(meteorServer, '/prefix', {});
  assert.throws(() => createNativeTransport({ settings: {} }).setup(meteorServer, '/prefix', {}), /already set up.*"\/prefix\/websocket"/);
  // Another prefix on the same server is fine.
  createNativeTransport({ settings: {} }).setup(meteorServer, '/other', {});
  meteorServer.emit('close');
});
