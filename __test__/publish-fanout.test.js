'use strict';
// app.publish to many subscribers, some of them slow (their sockets paused: partial writes,
// backpressure), with the real `ws` client. A published message is one buffer that every
// subscriber's queue refers to (the core's shared frames, crates/native-ws/src/outbox.rs): every
// subscriber still gets every byte, in order with its own sends; a subscriber closed mid-publish
// disturbs no other; getBufferedAmount counts the shared frames; drain fires.

const test = require('node:test');
const assert = require('node:assert');
const WebSocket = require('ws');
const uws = require('../lib/uws');

const N = 24; // subscribers
const SLOW = [0, 1, 2, 3, 4, 5]; // paused until every round is published
const ROUNDS = 8;
const BIG = 1 << 20;
const PROBE = 1000; // a socket of its own topic

/** A payload of `len` bytes unique to `seed` (so a misplaced or mixed-up byte shows). */
function pattern(len, seed) {
  const b = Buffer.allocUnsafe(len);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < len; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

/** A compressible text of about `len` bytes (DDP-like JSON), unique to `seed`. */
function doc(len, seed) {
  const parts = [];
  for (let i = 0, n = 0; n < len; i++) {
    parts.push(`{"_id":"d${seed}-${i}","name":"user ${i % 97}","n":${(i * seed) % 1000}}`);
    n += parts[i].length + 1;
  }
  return `{"msg":"added","seed":${seed},"docs":[${parts.join(',')}]}`;
}

const until = async (f, ms = 20000, what = 'condition') => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};
const tick = () => new Promise((r) => setImmediate(r));

/** An app whose sockets are kept by the index in their URL (/c/<i>); below PROBE they subscribe to `t`. */
function serve(behavior) {
  const server = new Map();
  const drains = new Map();
  return new Promise((resolve) => {
    const app = uws.App().ws('/c/:i', {
      maxBackpressure: 256 * 1024 * 1024,
      ...behavior,
      upgrade: (res, req, ctx) => res.upgrade({ i: Number(req.getParameter(0)) }, req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), ctx),
      open: (ws) => {
        if (ws.getUserData().i < PROBE) ws.subscribe('t');
        server.set(ws.getUserData().i, ws);
      },
      drain: (ws) => drains.set(ws.getUserData().i, (drains.get(ws.getUserData().i) || 0) + 1),
      close: (ws) => server.delete(ws.getUserData().i),
    });
    app.listen('127.0.0.1', 0, (t) => resolve({ app, server, drains, port: uws.us_socket_local_port(t) }));
  });
}

/**
 * A `ws` client of /c/<i> that checks every message on arrival against `want(j)` (the j-th
 * message it must get), keeping only counts: `got` messages so far, `bad` the first mismatch.
 */
function connect(port, i, want, opts) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/c/${i}`, opts);
  ws.got = 0;
  ws.bad = null;
  ws.on('message', (d, isBinary) => {
    const w = want(i, ws.got);
    const ok = Buffer.isBuffer(w) ? isBinary && d.equals(w) : !isBinary && d.toString() === w;
    if (!ok && ws.bad === null) ws.bad = `message ${ws.got}: got ${d.length} bytes, want ${w === undefined ? 'none' : w.length}`;
    ws.got++;
  });
  ws.closed = new Promise((r) => ws.on('close', (code) => r(code)));
  ws.opened = new Promise((r, j) => { ws.on('open', r); ws.on('error', j); });
  return ws;
}

/** Close everything a test opened, even when it failed. */
function cleanup(t, app, clients) {
  t.after(() => {
    for (const c of clients) c.terminate();
    app.close();
  });
}

test('publish of 1 MiB and small messages to 24 subscribers, 6 of them paused: every byte, in order with their own sends; closes mid-publish disturb nobody; buffered amount and drain', { timeout: 120000 }, async (t) => {
  const { app, server, drains, port } = await serve({});
  // Round k: a 1 MiB publish, a small one, then each socket's own send.
  const big = [];
  const want = (i, j) => [big[Math.floor(j / 3)], `small ${Math.floor(j / 3)}`, `own ${i} ${Math.floor(j / 3)}`][j % 3];
  const clients = [];
  cleanup(t, app, clients);
  for (let i = 0; i < N; i++) clients.push(connect(port, i, want));
  await Promise.all(clients.map((c) => c.opened));
  await until(() => server.size === N && app.numSubscribers('t') === N, 5000, 'subscriptions');
  for (const i of SLOW) clients[i]._socket.pause();

  // getBufferedAmount counts a shared frame exactly: one subscriber, a frame past the share
  // threshold, read before the end of the tick writes it.
  const probeMsg = pattern(4096, 999);
  const probeClient = connect(port, PROBE, () => probeMsg);
  clients.push(probeClient);
  await probeClient.opened;
  await until(() => server.has(PROBE), 5000, 'probe socket');
  const probe = server.get(PROBE);
  probe.subscribe('probe');
  app.publish('probe', probeMsg, true);
  assert.strictEqual(probe.getBufferedAmount(), 4096 + 4, 'the queued shared frame, header included');
  await tick();
  assert.strictEqual(probe.getBufferedAmount(), 0, 'written at the end of the tick');
  await until(() => probeClient.got === 1, 5000, 'probe message');
  assert.strictEqual(probeClient.bad, null);

  const closedSlow = 0; // closed by the server once it holds shared frames
  const quitter = N - 1; // closes its own connection after round 4
  let rounds = 0;
  let closedWith = 0;
  // The kernel's socket buffers take a few MiB of a paused subscriber's frames: publish until
  // every paused subscriber has more than a frame queued in user space (bounded).
  const queued = (i) => (server.has(i) ? server.get(i).getBufferedAmount() : 0);
  while (rounds < ROUNDS || SLOW.slice(1).some((i) => queued(i) <= BIG)) {
    assert.ok(rounds < 40, `paused subscribers never held a frame: ${SLOW.map(queued)}`);
    const k = rounds++;
    big.push(pattern(BIG, k + 1));
    app.publish('t', big[k], true);
    app.publish('t', `small ${k}`);
    for (const [i, ws] of server) if (i < PROBE) ws.send(`own ${i} ${k}`);
    await tick();
    if (closedWith === 0 && queued(closedSlow) > BIG) {
      closedWith = queued(closedSlow);
      server.get(closedSlow).close();
    }
    if (k === 4) clients[quitter].terminate();
  }
  assert.ok(closedWith > BIG, 'a paused subscriber was closed while it held shared frames');
  for (const i of SLOW.slice(1)) {
    const amount = queued(i);
    assert.ok(amount <= rounds * (BIG + 10 + 20 + 20), `subscriber ${i}: buffered ${amount} counts each frame once`);
  }
  assert.ok(!server.has(closedSlow));

  for (const i of SLOW) clients[i]._socket.resume();
  // (a paused client learns of the close only once it reads again)
  assert.strictEqual(await clients[closedSlow].closed, 1006);
  const live = [...Array(N).keys()].filter((i) => i !== closedSlow && i !== quitter);
  assert.strictEqual(probeClient.got, 1, 'the probe socket got nothing published on `t`');
  await until(() => live.every((i) => clients[i].got >= 3 * rounds), 60000, 'every message at every subscriber');
  for (const i of live) {
    assert.strictEqual(clients[i].bad, null, `subscriber ${i}`);
    assert.strictEqual(clients[i].got, 3 * rounds, `subscriber ${i}: nothing more`);
  }
  // The subscriber closed mid-publish got a prefix of its messages, each whole.
  assert.strictEqual(clients[closedSlow].bad, null, 'closed subscriber');
  assert.ok(clients[closedSlow].got < 3 * rounds);
  await until(() => SLOW.slice(1).every((i) => queued(i) === 0), 10000, 'queues written');
  await until(() => SLOW.slice(1).every((i) => drains.get(i) >= 1), 5000, 'drain on every paused subscriber');
  assert.ok(!server.has(quitter));
  t.diagnostic(`${rounds} rounds; subscriber ${closedSlow} closed with ${closedWith} bytes queued after ${clients[closedSlow].got} messages`);
});

test('compressed publish (SHARED_COMPRESSOR) of a 4 KiB and a 1 MiB document to 16 subscribers, 4 paused, some not compressing: each compressed once, every subscriber gets them intact and in order', { timeout: 120000 }, async (t) => {
  const { app, server, port } = await serve({ compression: uws.SHARED_COMPRESSOR });
  const n = 16;
  const slow = [0, 1, 2, 3];
  const docs = [];
  const bigDocs = [];
  const want = (i, j) => [docs[Math.floor(j / 3)], bigDocs[Math.floor(j / 3)], `own ${i} ${Math.floor(j / 3)}`][j % 3];
  const clients = [];
  cleanup(t, app, clients);
  // Every third client declines permessage-deflate: it gets the plain frames of the same publish.
  for (let i = 0; i < n; i++) clients.push(connect(port, i, want, { perMessageDeflate: i % 3 !== 2 }));
  await Promise.all(clients.map((c) => c.opened));
  await until(() => server.size === n, 5000, 'subscriptions');
  for (const i of slow) clients[i]._socket.pause();
  const stats = () => app._inner.stats(); // the main API's counters, under the compat surface
  const before = stats().compressions;
  let rounds = 0;
  // A big document that compresses little (base64 of noise, ~1.3 MiB → ~1 MiB): the paused
  // subscribers' kernel buffers fill within a few rounds.
  while (rounds < 4 || slow.some((i) => server.get(i).getBufferedAmount() === 0)) {
    assert.ok(rounds < 40, 'paused subscribers never held a frame');
    const k = rounds++;
    docs.push(doc(4096, k + 1));
    bigDocs.push(pattern(BIG, k + 100).toString('base64'));
    app.publish('t', docs[k], false, true);
    app.publish('t', bigDocs[k], false, true);
    for (const [i, ws] of server) ws.send(`own ${i} ${k}`);
    await tick();
  }
  for (const i of slow) clients[i]._socket.resume();
  await until(() => clients.every((c) => c.got >= 3 * rounds), 60000, 'every message at every subscriber');
  for (let i = 0; i < n; i++) {
    assert.strictEqual(clients[i].bad, null, `subscriber ${i}`);
    assert.strictEqual(clients[i].got, 3 * rounds, `subscriber ${i}: nothing more`);
  }
  // One compression per published message, whatever the number of subscribers.
  assert.strictEqual(stats().compressions - before, 2 * rounds);
  t.diagnostic(`${rounds} rounds`);
});
