'use strict';
// Hostile input. Every case asserts the exact outcome for the hostile client AND that well-behaved
// `ws` clients on the same server exchange messages before, during and after it, losing nothing
// and seeing nothing reordered. Memory and fd bounds are measured on a child-process server.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const crypto = require('node:crypto');
const WebSocket = require('ws');
const { scope, waitFor, sleep, deadline, pool } = require('./helpers/common');
const {
  OP, connectRaw, connectSocket, upgradeRequestText, rawHttp, buildFrame, textFrame, binaryFrame,
  pingFrame, closeFrame,
} = require('./helpers/raw');
const { runNode, procStats } = require('./helpers/proc');

const MiB = 1024 * 1024;
const FIXTURE = path.join(__dirname, 'helpers', 'adversarial-server.js');

// ---- helpers --------------------------------------------------------------------------------

/** A well-behaved `ws` client that sends numbered texts and checks every echo, in order. */
class Good {
  static async open(t, s, url, name = 'good') {
    const g = new Good(await s.ws(url), name);
    t.after(() => { if (g.timer) clearInterval(g.timer); });
    await g.roundTrip(5); // before
    return g;
  }

  constructor(client, name) {
    this.c = client;
    this.name = name;
    this.sent = [];
    this.received = [];
    this.timer = null;
  }

  send(n) {
    for (let i = 0; i < n; i++) {
      const m = `${this.name}-${this.sent.length}`;
      this.sent.push(m);
      this.c.ws.send(m);
    }
  }

  async collect(timeout = 15000) {
    const missing = this.sent.length - this.received.length;
    let got;
    try {
      got = await this.c.take(missing, timeout);
    } catch (e) {
      throw new Error(`${this.name}: ${e.message}; sent ${this.sent.length}, echoed ${this.received.length + (this.c.queue.length)}`
        + `, readyState ${this.c.readyState}, close ${JSON.stringify(this.c.closeInfo)}`);
    }
    this.received.push(...got.map((m) => m.text));
    assert.deepEqual(this.received, this.sent, `${this.name}: echoes lost or reordered`);
    assert.equal(this.c.readyState, WebSocket.OPEN, `${this.name} must stay open`);
  }

  async roundTrip(n = 10) {
    this.send(n);
    await this.collect();
  }

  /** Send one message every `intervalMs` (at most `max`) until stopStream(). */
  startStream(intervalMs = 50, max = 2000) {
    let k = 0;
    this.timer = setInterval(() => {
      if (k++ >= max || this.c.readyState !== WebSocket.OPEN) {
        clearInterval(this.timer);
        return;
      }
      this.send(1);
    }, intervalMs);
  }

  async stopStream() {
    clearInterval(this.timer);
    this.timer = null;
    await this.collect();
    return this.sent.length;
  }
}

/** In-process echo app on "/*" recording every close handler call {url, code}. */
async function inProcess(t, extra = {}) {
  const s = scope(t);
  const closes = [];
  const opens = [];
  const { app, port } = await s.app({
    idleTimeout: 0,
    ...extra,
    open(ws) { opens.push(ws.getUrl()); },
    message(ws, data, isBinary) { ws.send(data, isBinary); },
    close(ws, code, reason) { closes.push({ url: ws.getUrl(), code, reason }); },
  });
  return { s, app, port, closes, opens };
}

/** Start the adversarial child server; resolves {child, port, baseline}. */
async function startChild(s, { env = {}, timeoutMs = 90000, args = [] } = {}) {
  const child = s.trackChild(runNode(`require(${JSON.stringify(FIXTURE)})`, { env, timeoutMs, args }));
  const ready = await child.waitMessage((m) => m.type === 'listening', 15000, 'child listening');
  assert.ok(ready.port > 0, `child failed to listen: ${JSON.stringify(ready)}`);
  return { child, port: ready.port };
}

/** Sample the child's RSS every 25 ms; `peak()` is the highest seen so far. */
function rssSampler(t, pid) {
  let peak = procStats(pid).rss;
  const timer = setInterval(() => {
    try { peak = Math.max(peak, procStats(pid).rss); } catch { /* exited */ }
  }, 25);
  t.after(() => clearInterval(timer));
  return {
    peak() {
      try { peak = Math.max(peak, procStats(pid).rss); } catch { /* exited */ }
      return peak;
    },
    stop() { clearInterval(timer); },
  };
}

/** Frames of one message split into fragments: first frame `opcode`, the rest continuations. */
function fragmentFrames(payload, fragmentSize, opcode) {
  const frames = [];
  const n = Math.ceil(payload.length / fragmentSize);
  for (let i = 0; i < n; i++) {
    frames.push(buildFrame({
      opcode: i === 0 ? opcode : OP.CONT,
      fin: i === n - 1,
      payload: payload.subarray(i * fragmentSize, (i + 1) * fragmentSize),
    }));
  }
  return { frames: Buffer.concat(frames), count: n };
}

const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

// ---- slowloris / HTTP head limits -----------------------------------------------------------

/**
 * A slowloris client: sends the request line, then the rest of an upgrade request one byte every
 * 500 ms (at most 40 bytes: 20 s), until the server closes. Resolves {elapsed, sentBytes, received}.
 */
async function slowloris(s, port) {
  const socket = s.trackSocket(await connectSocket(port));
  socket.on('error', () => {});
  const started = Date.now();
  let received = Buffer.alloc(0);
  socket.on('data', (d) => { received = Buffer.concat([received, d]); });
  let closed = false;
  const ended = new Promise((resolve) => {
    socket.once('close', () => { closed = true; resolve(Date.now() - started); });
  });
  const key = crypto.randomBytes(16).toString('base64');
  const text = upgradeRequestText({ path: '/slow', key, headers: { 'X-Slow': 'a'.repeat(200) } });
  const firstLine = text.indexOf('\r\n') + 2;
  socket.write(text.slice(0, firstLine));
  let sentBytes = firstLine;
  for (let i = 0; i < 40 && !closed; i++) {
    socket.write(text.slice(firstLine + i, firstLine + i + 1));
    sentBytes++;
    await Promise.race([sleep(500), ended]);
  }
  const elapsed = await deadline(ended, 5000, 'slowloris socket closed by the server');
  return { elapsed, sentBytes, requestBytes: text.length, received: received.toString('latin1') };
}

test('slowloris: 4 clients trickling an upgrade head (1 byte / 500 ms) are closed by the 10 s handshake timeout; a good client keeps working', { timeout: 45000 }, async (t) => {
  const { s, port, closes, opens } = await inProcess(t);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/good`);
  good.startStream(100, 400);
  const results = await Promise.all([0, 1, 2, 3].map(() => slowloris(s, port)));
  await good.stopStream();
  for (const [i, r] of results.entries()) {
    assert.ok(r.sentBytes < r.requestBytes, `slowloris ${i} must not have completed its head`);
    assert.ok(!/^HTTP\/1\.1 101/.test(r.received), `slowloris ${i} must not be upgraded; got ${JSON.stringify(r.received.slice(0, 80))}`);
    // The 10 s handshake timeout (plus scheduling slack); closes after ~11 s at most per the spec.
    assert.ok(r.elapsed < 16000, `slowloris ${i} closed after ${r.elapsed} ms (expected ~10-11 s)`);
  }
  t.diagnostic(`slowloris closed after ${results.map((r) => r.elapsed).join(', ')} ms`);
  assert.deepEqual(opens.filter((u) => u !== '/good'), [], 'no slowloris socket may be opened');
  assert.deepEqual(closes, [], 'no close handler for never-upgraded sockets, none for the good client');
  await good.roundTrip(10); // after
});

/** rawHttp, but a server that closes (FIN or RST) before/while answering yields {closed: true}. */
async function rawHttpOrClosed(port, text) {
  try {
    return await rawHttp(port, text, { timeout: 10000 });
  } catch (e) {
    if (/ended before HTTP head|ECONNRESET|EPIPE/.test(e.message) || e.code === 'ECONNRESET' || e.code === 'EPIPE') {
      return { closed: true, error: e.message };
    }
    throw e;
  }
}

test('header flood: 20 KiB of headers → 431 (or closed); 150 small headers → 431; a good client keeps working', { timeout: 30000 }, async (t) => {
  const { s, port, closes, opens } = await inProcess(t);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/good`);
  const key = () => crypto.randomBytes(16).toString('base64');
  const twentyHeaders = {};
  for (let i = 0; i < 20; i++) twentyHeaders[`X-Filler-${i}`] = 'a'.repeat(1024);
  const manySmall = {};
  for (let i = 0; i < 150; i++) manySmall[`X-H${i}`] = String(i);
  good.startStream(20, 500);
  const [big, oneHuge, many] = await Promise.all([
    rawHttpOrClosed(port, upgradeRequestText({ path: '/flood', key: key(), headers: twentyHeaders })),
    rawHttpOrClosed(port, upgradeRequestText({ path: '/flood', key: key(), headers: { 'X-Huge': 'b'.repeat(20 * 1024) } })),
    rawHttpOrClosed(port, upgradeRequestText({ path: '/flood', key: key(), headers: manySmall })),
  ]);
  await good.stopStream();
  for (const [name, r] of [['20 × 1 KiB headers', big], ['one 20 KiB header', oneHuge]]) {
    assert.ok(r.closed || r.status === 431, `${name}: expected 431 or a closed socket, got ${r.statusLine || JSON.stringify(r)}`);
  }
  assert.ok(!many.closed, `150 headers: expected a 431 response, the socket was closed (${many.error})`);
  assert.equal(many.status, 431, `150 headers: ${many.statusLine}`);
  assert.deepEqual(opens.filter((u) => u !== '/good'), []);
  assert.deepEqual(closes, []);
  await good.roundTrip(10);
});

// ---- fragments ------------------------------------------------------------------------------

test('100,001 one-byte fragments (start + 99,999 continuations + final) with maxFragments 100,001: one intact message, bounded RSS', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s, { env: { FRAG_CAP: '100001' } });
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  const base = procStats(child.pid).rss;
  const rss = rssSampler(t, child.pid);
  // Text whose UTF-8 is exactly 100,001 bytes, multi-byte characters split across 1-byte frames.
  const payload = Buffer.from(`${'aé€😀'.repeat(10000)}z`, 'utf8');
  assert.equal(payload.length, 100001);
  const { frames, count } = fragmentFrames(payload, 1, OP.TEXT);
  assert.equal(count, 100001);
  const raw = await connectRaw(port, { path: '/frag/big' });
  s.trackSocket(raw.socket);
  good.startStream(50, 600);
  assert.equal(await raw.reader.write(frames), true, 'write of the fragments');
  const got = await child.waitMessage((m) => m.type === 'frag-message' && m.route === 'frag-big', 30000, 'the fragmented message');
  await good.stopStream();
  assert.equal(got.isBinary, false);
  assert.equal(got.length, payload.length);
  assert.equal(got.sha256, sha256(payload), 'message content must be intact');
  // The connection is still usable: a second, small message arrives too.
  await raw.reader.write(textFrame('after'));
  await child.waitMessage((m) => m.type === 'frag-message' && m.route === 'frag-big' && m.length === 5, 10000, 'message after');
  assert.equal(raw.reader.ended, false, 'the fragmenting client must stay connected');
  const peak = rss.peak();
  rss.stop();
  assert.ok(peak - base < 150 * MiB, `RSS grew ${((peak - base) / MiB).toFixed(1)} MiB (base ${(base / MiB).toFixed(1)} MiB)`);
  assert.equal(child.messages.filter((m) => m.type === 'close').length, 0);
  await good.roundTrip(10);
});

test('140,000 fragments with the default maxFragments (131,072) → close 1009; bounded RSS; good client unaffected', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  const base = procStats(child.pid).rss;
  const rss = rssSampler(t, child.pid);
  const { frames, count } = fragmentFrames(Buffer.alloc(140000, 0x42), 1, OP.BINARY);
  assert.equal(count, 140000);
  const raw = await connectRaw(port, { path: '/frag/default' });
  s.trackSocket(raw.socket);
  good.startStream(50, 600);
  raw.socket.on('error', () => {});
  raw.socket.write(frames);
  const closeInfo = await raw.reader.waitClose(20000);
  assert.equal(closeInfo.code, 1009, `expected close 1009, got ${closeInfo.code} (${closeInfo.reason})`);
  assert.deepEqual(closeInfo.frames.filter((f) => f.opcode === OP.TEXT || f.opcode === OP.BINARY), []);
  const serverClose = await child.waitMessage((m) => m.type === 'close' && m.route === 'frag-default', 10000, 'server close handler');
  assert.equal(serverClose.code, 1009);
  await good.stopStream();
  assert.equal(child.messages.filter((m) => m.type === 'frag-message').length, 0, 'the over-cap message must not be delivered');
  const peak = rss.peak();
  rss.stop();
  assert.ok(peak - base < 150 * MiB, `RSS grew ${((peak - base) / MiB).toFixed(1)} MiB`);
  await good.roundTrip(10);
});

test('Autobahn 9.3.1 shape: 4 MiB text in 65,536 fragments of 64 bytes passes the default cap', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  const payload = Buffer.alloc(4 * MiB);
  for (let i = 0; i < payload.length; i++) payload[i] = 0x41 + (i % 26);
  const { frames, count } = fragmentFrames(payload, 64, OP.TEXT);
  assert.equal(count, 65536);
  const raw = await connectRaw(port, { path: '/frag/default' });
  s.trackSocket(raw.socket);
  good.startStream(50, 600);
  assert.equal(await raw.reader.write(frames), true);
  const got = await child.waitMessage((m) => m.type === 'frag-message' && m.route === 'frag-default', 30000, 'the 9.3.1 message');
  await good.stopStream();
  assert.equal(got.length, payload.length);
  assert.equal(got.sha256, sha256(payload));
  assert.equal(child.messages.filter((m) => m.type === 'close').length, 0);
  await good.roundTrip(10);
});

// ---- protocol violations, all at once ------------------------------------------------------

const VIOLATIONS = [
  ['unmasked frame', () => [textFrame('hello', { mask: false })], 1002],
  ['RSV2', () => [textFrame('hello', { rsv2: true })], 1002],
  ['RSV3', () => [binaryFrame(Buffer.from('hello'), { rsv3: true })], 1002],
  ['reserved data opcode 0x3', () => [buildFrame({ opcode: 0x3, payload: Buffer.from('x') })], 1002],
  ['reserved control opcode 0xB', () => [buildFrame({ opcode: 0xb, payload: Buffer.from('x') })], 1002],
  ['ping > 125 bytes', () => [pingFrame(Buffer.alloc(126, 0x70))], 1002],
  ['fragmented ping', () => [pingFrame(Buffer.from('ab'), { fin: false })], 1002],
  ['invalid UTF-8 split across fragments', () => [
    // "ok" + F0 9F (start of a 4-byte sequence) | 28 41: "(" is not a continuation byte.
    buildFrame({ opcode: OP.TEXT, fin: false, payload: Buffer.from([0x6f, 0x6b, 0xf0, 0x9f]) }),
    buildFrame({ opcode: OP.CONT, fin: true, payload: Buffer.from([0x28, 0x41]) }),
  ], 1007],
  ['close code 1004', () => [closeFrame(1004, 'x')], 1002],
  ['close code 1015', () => [closeFrame(1015, 'x')], 1002],
  ['close code 5000', () => [closeFrame(5000, 'x')], 1002],
];

test('protocol violations from 22 raw clients at once get their exact close codes while 4 good clients stream without loss or reordering', { timeout: 45000 }, async (t) => {
  const { s, port, closes } = await inProcess(t);
  const goods = [];
  for (let i = 0; i < 4; i++) goods.push(await Good.open(t, s, `ws://127.0.0.1:${port}/good/${i}`, `good${i}`));
  for (const g of goods) g.startStream(10, 3000);
  const cases = [];
  for (let copy = 0; copy < 2; copy++) {
    for (const [name, frames, code] of VIOLATIONS) cases.push({ name, frames: frames(), code, path: `/bad/${copy}/${cases.length}` });
  }
  const raws = await Promise.all(cases.map((c) => connectRaw(port, { path: c.path })));
  for (const r of raws) { s.trackSocket(r.socket); r.socket.on('error', () => {}); }
  // Every bad client sends in the same tick, between two bursts of good traffic.
  for (const g of goods) g.send(100);
  cases.forEach((c, i) => raws[i].socket.write(Buffer.concat(c.frames)));
  for (const g of goods) g.send(100);
  const results = await Promise.all(raws.map(async (r) => {
    const info = await r.reader.waitClose(15000);
    const ended = await r.reader.waitEnd(10000).catch((e) => e.message);
    return { ...info, tcp: ended };
  }));
  const wrong = [];
  cases.forEach((c, i) => {
    const got = results[i];
    if (got.code !== c.code) wrong.push(`${c.name} (${c.path}): expected ${c.code}, got ${got.code === null ? 'no close frame' : got.code}`);
    const data = got.frames.filter((f) => f.opcode === OP.TEXT || f.opcode === OP.BINARY);
    if (data.length) wrong.push(`${c.name}: unexpected data frames ${data.map((f) => f.payload.toString())}`);
    if (!['end', 'close', 'error'].includes(got.tcp)) wrong.push(`${c.name}: TCP not ended (${got.tcp})`);
  });
  assert.deepEqual(wrong, [], 'every bad client must get its exact close code');
  await waitFor(() => cases.every((c) => closes.some((x) => x.url === c.path)), {
    timeout: 10000, label: 'close handlers of every bad socket',
    describe: () => cases.filter((c) => !closes.some((x) => x.url === c.path)).map((c) => c.name).join(', '),
  });
  const counts = await Promise.all(goods.map((g) => g.stopStream()));
  for (const g of goods) await g.roundTrip(10);
  for (const c of cases) assert.equal(closes.filter((x) => x.url === c.path).length, 1, `${c.name}: close handler exactly once`);
  assert.deepEqual(closes.filter((x) => x.url.startsWith('/good')), [], 'no good client closed');
  t.diagnostic(`good clients streamed ${counts.join(', ')} messages each`);
});

// ---- abrupt reset ---------------------------------------------------------------------------

test('abrupt RST mid-frame: the close handler fires exactly once with 1006; the good client is unaffected', { timeout: 20000 }, async (t) => {
  assert.equal(typeof require('node:net').Socket.prototype.resetAndDestroy, 'function', 'Node must have socket.resetAndDestroy()');
  const { s, port, closes } = await inProcess(t);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/good`);
  const raw = await connectRaw(port, { path: '/rst' });
  raw.socket.on('error', () => {});
  await raw.reader.write(textFrame('hi'));
  const echo = await raw.reader.next(5000);
  assert.equal(echo.payload.toString(), 'hi', 'the raw client is open and echoing');
  good.startStream(20, 500);
  const frame = binaryFrame(Buffer.alloc(100, 7));
  assert.equal(await raw.reader.write(frame.subarray(0, 2 + 4 + 50)), true, 'half a frame written');
  raw.socket.resetAndDestroy();
  await waitFor(() => closes.some((c) => c.url === '/rst'), { timeout: 10000, label: 'close handler after RST' });
  await good.stopStream();
  await good.roundTrip(10); // at least one more dispatch batch went through
  const rst = closes.filter((c) => c.url === '/rst');
  assert.equal(rst.length, 1, `close handler calls: ${JSON.stringify(rst)}`);
  assert.equal(rst[0].code, 1006);
  assert.deepEqual(closes.filter((c) => c.url === '/good'), []);
});

// ---- a client that never reads --------------------------------------------------------------

test('non-reading clients vs 100 MiB of 64 KiB sends (maxBackpressure 1 MiB, closeOnBackpressureLimit): closed 1013 instead of dropping, bounded RSS, stats().dropped stays 0', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  const base = procStats(child.pid).rss;
  const rss = rssSampler(t, child.pid);
  good.startStream(50, 600);
  const raws = [];
  for (const mode of ['sync', 'async']) {
    const r = await connectRaw(port, { path: `/flood/${mode}` });
    r.reader.pause(); // never reads
    r.socket.on('error', () => {});
    s.trackSocket(r.socket);
    raws.push(r);
  }
  const closeMsgs = {};
  for (const mode of ['sync', 'async']) {
    await child.waitMessage((m) => m.type === 'flood-done' && m.mode === mode, 30000, `flood ${mode} done`);
    closeMsgs[mode] = await child.waitMessage((m) => m.type === 'close' && m.route === `flood-${mode}`, 15000, `close of flood ${mode}`);
  }
  const st = await child.request({ cmd: 'stats' }, 10000);
  const peak = rss.peak();
  rss.stop();
  await good.stopStream();
  for (const mode of ['sync', 'async']) {
    const f = st.flood[mode];
    assert.equal(closeMsgs[mode].code, 1013, `${mode}: close code`);
    assert.equal(f.acceptedAfterDrop, 0, `${mode}: a send returned 1/0 after one returned DROPPED (${JSON.stringify(f)})`);
    const accepted = (f.counts[0] + f.counts[1]) * 64 * 1024;
    assert.ok(accepted < 64 * MiB, `${mode}: ${accepted} bytes accepted for a client that never reads`);
  }
  assert.ok(peak - base < 100 * MiB, `RSS grew ${((peak - base) / MiB).toFixed(1)} MiB (base ${(base / MiB).toFixed(1)} MiB)`);
  // The TCP connections are over once the client looks.
  for (const r of raws) {
    r.reader.resume();
    assert.ok(await r.reader.waitEnd(15000), 'flooded connection must end');
  }
  await good.roundTrip(10);
  const returned2 = st.flood.sync.counts[2] + st.flood.async.counts[2];
  t.diagnostic(`send results [BACKPRESSURE, SUCCESS, DROPPED] sync=${JSON.stringify(st.flood.sync.counts)} async=${JSON.stringify(st.flood.async.counts)}; stats().dropped=${st.stats.dropped}`);
  // With closeOnBackpressureLimit nothing is dropped from an open socket: the send that crosses
  // the limit closes it (1013, checked above) and every later send is refused by a closed socket.
  assert.ok(returned2 > 0, 'the flood must have crossed the limit');
  assert.equal(st.stats.dropped, 0, 'stats().dropped must stay 0 when the policy is to close');
});

// ---- connection churn -----------------------------------------------------------------------

/** Open a `ws` client, close it (1000), wait for the close; rejects on any error or deadline. */
function connectClose(url) {
  return deadline(new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { handshakeTimeout: 10000 });
    ws.once('error', reject);
    ws.once('open', () => ws.close(1000));
    ws.once('close', (code) => (code === 1000 ? resolve() : reject(new Error(`closed with ${code}`))));
  }), 15000, `connect/close ${url}`);
}

test('10,000 connect/disconnect cycles (50 at a time): close handler count 10,000, fds back to baseline, RSS within +30 MiB', { timeout: 120000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s, { timeoutMs: 115000, args: ['--expose-gc'] });
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  // Warm up (lazily allocated runtime state), then take the baseline.
  const warm = await pool(50, 50, () => connectClose(`ws://127.0.0.1:${port}/echo`));
  assert.equal(warm.done, 50, warm.errors.join('; '));
  await waitFor(async () => ((await child.request({ cmd: 'stats' })).stats.connections === 1), { timeout: 10000, label: 'warm-up sockets closed' });
  await child.request({ cmd: 'stats', gc: true });
  await sleep(100);
  const base = procStats(child.pid);
  good.startStream(100, 1200);
  const N = 10000;
  const r = await pool(N, 50, () => connectClose(`ws://127.0.0.1:${port}/cycle`));
  assert.equal(r.done, N, `cycles completed ${r.done}/${N}: ${r.errors.join('; ')}`);
  const st = await waitFor(async () => {
    const m = await child.request({ cmd: 'stats' });
    return m.closes.cycle && m.closes.cycle.count >= N && m.stats.connections === 1 ? m : null;
  }, { timeout: 20000, label: 'all cycle close handlers' });
  assert.equal(st.closes.cycle.count, N, 'close handler count');
  assert.equal(st.closes.cycle.codes['1000'], N, `close codes ${JSON.stringify(st.closes.cycle.codes)}`);
  await good.stopStream();
  let now;
  await waitFor(() => { now = procStats(child.pid); return now.fds <= base.fds; }, {
    timeout: 10000, label: 'fd count back to baseline', describe: () => `baseline ${base.fds}, now ${now && now.fds}`,
  });
  assert.equal(now.fds, base.fds, 'fd count');
  await child.request({ cmd: 'stats', gc: true });
  await sleep(100);
  now = procStats(child.pid);
  t.diagnostic(`fds ${base.fds} → ${now.fds}; RSS ${(base.rss / MiB).toFixed(1)} → ${(now.rss / MiB).toFixed(1)} MiB`);
  assert.ok(now.rss - base.rss < 30 * MiB, `RSS ${(base.rss / MiB).toFixed(1)} → ${(now.rss / MiB).toFixed(1)} MiB`);
  assert.equal(st.uncaught, 0);
  await good.roundTrip(10);
});

// ---- a throwing handler ---------------------------------------------------------------------

test('a message handler that throws for one message mid-batch: every other message of the batch and later is delivered, exactly one uncaughtException', { timeout: 30000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s);
  const good = await Good.open(t, s, `ws://127.0.0.1:${port}/echo`);
  const raw = await connectRaw(port, { path: '/throw' });
  s.trackSocket(raw.socket);
  good.startStream(20, 500);
  const batch = [];
  const expected = [];
  for (let i = 0; i < 40; i++) {
    if (i === 20) { batch.push(textFrame('boom')); continue; }
    batch.push(textFrame(`m${i}`));
    expected.push(`m${i}`);
  }
  assert.equal(await raw.reader.write(Buffer.concat(batch)), true); // one write: one batch
  const echoes = [];
  for (let i = 0; i < expected.length; i++) {
    const f = await raw.reader.next(10000);
    assert.ok(f, `connection ended after ${echoes.length} echoes`);
    echoes.push(f.payload.toString());
  }
  assert.deepEqual(echoes, expected, 'every other message of the batch, in order');
  for (let i = 0; i < 5; i++) await raw.reader.write(textFrame(`later${i}`));
  const later = [];
  for (let i = 0; i < 5; i++) later.push((await raw.reader.next(10000)).payload.toString());
  assert.deepEqual(later, ['later0', 'later1', 'later2', 'later3', 'later4']);
  await good.stopStream();
  await good.roundTrip(10);
  const st = await child.request({ cmd: 'stats' });
  assert.equal(st.uncaught, 1, 'exactly one uncaught exception');
  const reported = child.messages.filter((m) => m.type === 'uncaught');
  assert.equal(reported.length, 1);
  assert.match(reported[0].message, /boom/);
  assert.equal(raw.reader.ended, false, 'the socket whose handler threw stays open');
  assert.equal(st.closes.throw, undefined, 'no close for the throwing socket');
});
