'use strict';
// The I/O modes (App({ io }), DDP_TRANSPORT_NATIVE_IO): which one an app runs, how it is chosen,
// config errors naming the key, and what defines each mode, seen from JS: with 'inline' a socket
// is read on the JS thread (nothing is read while JS is busy; the message is handled in the turn
// that reads it), with 'threads' an I/O thread reads it while JS is busy.

const test = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const path = require('node:path');
const { App } = require('..');
const { listen, waitFor } = require('./helpers/common');
const { runNode } = require('./helpers/proc');

const INLINE_HERE = process.platform === 'linux';
const ROOT = path.join(__dirname, '..');

test('App({ io }) picks the mode; app.ioMode says which runs', () => {
  const inline = App({ io: 'inline' });
  const threads = App({ io: 'threads' });
  try {
    assert.equal(inline.ioMode, INLINE_HERE ? 'inline' : 'threads');
    assert.equal(threads.ioMode, 'threads');
  } finally {
    inline.close();
    threads.close();
  }
  assert.throws(() => App({ io: 'fast' }), /App\.io must be 'inline' or 'threads', got "fast"/);
});

test('the default: DDP_TRANSPORT_NATIVE_IO, else threads where App.threads is set, else inline', async () => {
  const probe = `const { App } = require(${JSON.stringify(ROOT)});
    const out = {};
    for (const [k, o] of [['none', {}], ['threads2', { threads: 2 }], ['io', { threads: 2, io: 'inline' }]]) {
      try { const a = App(o); out[k] = a.ioMode; a.close(); } catch (e) { out[k] = 'throws: ' + e.message; }
    }
    console.log(JSON.stringify(out));`;
  // (an empty value counts as unset)
  const run = async (value = '') => {
    const child = runNode(probe, { env: { DDP_TRANSPORT_NATIVE_IO: value }, timeoutMs: 20000 });
    const { code } = await child.exited;
    assert.equal(code, 0, child.stderr());
    return child.messages[0];
  };
  const inl = INLINE_HERE ? 'inline' : 'threads';
  assert.deepEqual(await run(undefined), { none: inl, threads2: 'threads', io: inl });
  assert.deepEqual(await run('threads'), { none: 'threads', threads2: 'threads', io: inl });
  assert.deepEqual(await run('inline'), { none: inl, threads2: inl, io: inl });
  const bad = await run('fast');
  assert.match(bad.none, /^throws: DDP_TRANSPORT_NATIVE_IO must be 'inline' or 'threads', got "fast"/);
});

/** Block the JS thread until the worker's client has written a message, then `ms` more. */
function blockUntilSent(flag, ms) {
  Atomics.wait(flag, 0, 0, 5000);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

for (const io of ['inline', 'threads']) {
  test(`${io}: where a socket is read while the JS thread is busy`, { timeout: 30000, skip: io === 'inline' && !INLINE_HERE && 'inline runs on Linux only' }, async (t) => {
    const got = [];
    const app = App({ io }).ws('/*', { message: (ws, m) => got.push(Buffer.from(m).toString()) });
    t.after(() => app.close());
    const port = await listen(app);
    const flag = new Int32Array(new SharedArrayBuffer(4));
    // The client runs on a thread of its own, so it can write while this thread is blocked.
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads');
      const WebSocket = require(${JSON.stringify(require.resolve('ws'))});
      const ws = new WebSocket('ws://127.0.0.1:' + workerData.port + '/x');
      ws.on('open', () => parentPort.postMessage('open'));
      parentPort.on('message', (m) => {
        if (m === 'close') return ws.close();
        ws.send('hello from a busy time', () => { Atomics.store(workerData.flag, 0, 1); Atomics.notify(workerData.flag, 0); });
      });`, { eval: true, workerData: { port, flag } });
    t.after(() => worker.terminate());
    await new Promise((resolve) => worker.once('message', resolve));
    await waitFor(() => app.stats().connections === 1, { label: 'open' });
    const before = app.stats().wireBytesIn;
    worker.postMessage('send');
    blockUntilSent(flag, 200);
    const during = app.stats().wireBytesIn - before;
    if (io === 'inline') assert.equal(during, 0, 'read on the JS thread: nothing while it was busy');
    else assert.ok(during > 0, 'read by an I/O thread while JS was busy');
    await waitFor(() => got.length === 1, { label: 'message' });
    assert.deepEqual(got, ['hello from a busy time']);
    worker.postMessage('close');
    await waitFor(() => app.stats().connections === 0, { label: 'close' });
  });
}

test('inline: a JS thread saturated by other work holds new clients back (admission control)', { timeout: 30000, skip: !INLINE_HERE && 'inline runs on Linux only' }, async (t) => {
  // Only the lag bound: no rate, no pending bound. The saturating work here is not the sockets'
  // (a chain of 4 ms immediates), so each turn still reads everything at once and no message
  // waits long: only the thread's load says that it has no time for new clients.
  const admission = { upgradesPerSecond: 0, maxPendingOpens: 0, maxLagMs: 10, holdMs: 300, retryAfterSeconds: 1 };
  let got = 0;
  const app = App({ io: 'inline', admission }).ws('/*', { message: () => { got++; } });
  t.after(() => app.close());
  const port = await listen(app);
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads');
    const WebSocket = require(${JSON.stringify(require.resolve('ws'))});
    const url = 'ws://127.0.0.1:' + workerData.port + '/x';
    const a = new WebSocket(url);
    a.on('open', () => {
      const tick = setInterval(() => a.send('tick'), 1);
      parentPort.postMessage({ a: 'open' });
      parentPort.once('message', () => setTimeout(() => {
        const at = Date.now();
        const b = new WebSocket(url);
        const done = (r) => { clearInterval(tick); b.terminate(); a.terminate(); parentPort.postMessage({ b: r, ms: Date.now() - at }); };
        b.on('open', () => done('open'));
        b.on('unexpected-response', (req, res) => done(res.statusCode));
        b.on('error', (e) => done(e.message));
      }, 300));
    });`, { eval: true, workerData: { port } });
  t.after(() => worker.terminate());
  await new Promise((resolve) => worker.once('message', resolve));
  await waitFor(() => got > 20, { label: 'ticks' });
  const result = new Promise((resolve) => worker.once('message', resolve));
  worker.postMessage('go');
  const until = Date.now() + 1500;
  await new Promise((resolve) => {
    const busy = () => {
      const end = Date.now() + 4;
      while (Date.now() < end);
      if (Date.now() < until) setImmediate(busy); else resolve();
    };
    setImmediate(busy);
  });
  const r = await result;
  const { deferred, refused } = app.stats().admission;
  assert.ok(deferred >= 1, `the new client was held (${JSON.stringify(r)})`);
  assert.ok(r.b === 503 || (r.b === 'open' && r.ms >= 250), `refused after the hold, or let in once the thread had time: ${JSON.stringify(r)}`);
  if (r.b === 503) assert.equal(refused, 1);
});
