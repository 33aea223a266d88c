'use strict';
// app.drain(): stop accepting upgrades (503), end sockets in batches with every queued frame
// flushed before the close frame, resolve once all are closed; stats() along the way.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { performance } = require('node:perf_hooks');
const { scope, waitFor, deadline, wsExpectRejected, PKG_PATH } = require('./helpers/common');

const N = 50;
const PER_CLIENT = 5;
const OPTS = { batch: 10, intervalMs: 20, code: 1001, reason: 'deploy' };

/**
 * An app (standalone listener) with N connected `ws` clients on /c/<i>. Every server-side
 * `ws.end` call is recorded with the synchronous group it ran in (one group per drain step).
 */
async function setup(t) {
  const s = scope(t);
  const sockets = new Map(); // index → server ws
  const ends = []; // {idx, group, at}
  const serverCloses = []; // {idx, code, reason, at}
  let group = 0;
  let groupOpen = false;
  const { app, port } = await s.app({
    idleTimeout: 0,
    open(ws) {
      const idx = Number(ws.getUrl().split('/').pop());
      sockets.set(idx, ws);
      const end = ws.end;
      ws.end = function recordedEnd(...args) {
        if (!groupOpen) {
          group++;
          groupOpen = true;
          process.nextTick(() => { groupOpen = false; });
        }
        ends.push({ idx, group, at: performance.now() });
        return end.apply(this, args);
      };
    },
    message(ws, data, isBinary) { ws.send(data, isBinary); },
    close(ws, code, reason) {
      serverCloses.push({ idx: Number(ws.getUrl().split('/').pop()), code, reason, at: performance.now() });
    },
  });
  const clients = [];
  const closeAt = new Array(N).fill(null);
  for (let i = 0; i < N; i++) {
    const c = await s.ws(`ws://127.0.0.1:${port}/c/${i}`);
    c.ws.once('close', () => { closeAt[i] = performance.now(); });
    clients.push(c);
  }
  await waitFor(() => sockets.size === N, { label: 'all open handlers', timeout: 10000 });
  return { s, app, port, sockets, ends, serverCloses, clients, closeAt };
}

/** In one tick: PER_CLIENT numbered messages to every client, then drain(OPTS). */
function sendThenDrain(ctx) {
  const expected = new Map();
  for (const [idx, ws] of ctx.sockets) {
    const list = [];
    for (let k = 0; k < PER_CLIENT; k++) {
      const m = `n-${idx}-${k}-${'p'.repeat(k * 1000)}`;
      assert.notEqual(ws.send(m), 2, 'send before drain must not be DROPPED');
      list.push(m);
    }
    expected.set(idx, list);
  }
  const state = { resolvedAt: null, closesAtResolve: null, statsAtResolve: null };
  const promise = ctx.app.drain(OPTS).then(() => {
    state.resolvedAt = performance.now();
    state.closesAtResolve = ctx.serverCloses.length;
    state.statsAtResolve = ctx.app.stats();
  });
  return { expected, promise, state };
}

test('drain({batch: 10, intervalMs: 20, code: 1001, reason: "deploy"}) with 50 clients: every message sent before, then close 1001 "deploy"; 503 for new upgrades meanwhile; closes spread over batches; resolves after all closed', { timeout: 30000 }, async (t) => {
  const ctx = await setup(t);
  // One client does not read for a while: its close handshake cannot complete, so the drain is
  // certainly still running when the rejected upgrades below are answered.
  const slow = ctx.clients[N - 1];
  slow.ws._socket.pause();
  const { expected, promise, state } = sendThenDrain(ctx);
  const rejected = await Promise.all([0, 1, 2].map(() => wsExpectRejected(`ws://127.0.0.1:${ctx.port}/c/new`)));
  const resolvedBefore503 = state.resolvedAt !== null;
  slow.ws._socket.resume();
  for (const r of rejected) assert.equal(r.status, 503, `new upgrade during drain: ${r.status} ${r.body}`);
  assert.equal(resolvedBefore503, false, 'the drain must still be in progress when the 503s arrive');
  await deadline(promise, 15000, 'drain promise');

  // Every client: all its messages in order, then close 1001 "deploy".
  for (let i = 0; i < N; i++) {
    const c = ctx.clients[i];
    const got = await c.take(PER_CLIENT, 5000);
    assert.deepEqual(got.map((m) => m.text), expected.get(i), `client ${i}: messages before the close`);
    const info = await c.waitClose(5000);
    assert.deepEqual(info, { code: 1001, reason: 'deploy' }, `client ${i}: close`);
  }
  // The promise resolved only once every socket was closed.
  assert.equal(state.closesAtResolve, N, 'close handlers run before the drain promise resolves');
  assert.equal(state.statsAtResolve.connections, 0);
  for (const sc of ctx.serverCloses) assert.equal(sc.code, 1001, `server close code for ${sc.idx}`);
  assert.equal(new Set(ctx.serverCloses.map((x) => x.idx)).size, N, 'each close handler exactly once');
  assert.equal(ctx.serverCloses.length, N);

  // Batches: every socket ended exactly once, at most 10 per step, over several steps.
  assert.equal(ctx.ends.length, N);
  assert.equal(new Set(ctx.ends.map((e) => e.idx)).size, N);
  const groups = new Map();
  for (const e of ctx.ends) groups.set(e.group, [...(groups.get(e.group) || []), e]);
  for (const [g, list] of groups) assert.ok(list.length <= OPTS.batch, `step ${g} ended ${list.length} sockets`);
  const groupStart = new Map([...groups].map(([g, list]) => [g, Math.min(...list.map((e) => e.at))]));
  // Close times: every client closed after the step that ended it started, so the closes span
  // as many distinct batches as there were steps.
  const endOf = new Map(ctx.ends.map((e) => [e.idx, e]));
  for (let i = 0; i < N; i++) {
    assert.ok(ctx.closeAt[i] !== null, `client ${i} close time`);
    assert.ok(ctx.closeAt[i] >= groupStart.get(endOf.get(i).group), `client ${i} closed before its batch was ended`);
  }
  const closedBatches = new Set(ctx.ends.map((e) => e.group));
  t.diagnostic(`steps: ${[...groups].map(([g, l]) => `${g}:${l.length}`).join(' ')}`);
  assert.ok(closedBatches.size >= 4, `closes span ${closedBatches.size} batches; expected ≥ 4 (50 sockets, batch 10)`);
  // Later batches really closed later: the last batch's clients all closed after the first
  // batch's clients had been ended (not all at once).
  const gs = [...groups.keys()].sort((a, b) => a - b);
  const last = gs[gs.length - 1];
  for (const e of groups.get(last)) assert.ok(ctx.closeAt[e.idx] > groupStart.get(gs[0]));
});

test('stats() during and after drain: connections falls to 0, closesByCode["1001"] == 50, dropped == 0', { timeout: 30000 }, async (t) => {
  const ctx = await setup(t);
  const before = ctx.app.stats();
  assert.equal(before.connections, N);
  assert.equal(before.dropped, 0);
  const samples = [];
  const sampler = setInterval(() => samples.push(ctx.app.stats().connections), 5);
  t.after(() => clearInterval(sampler));
  const { expected, promise } = sendThenDrain(ctx);
  samples.push(ctx.app.stats().connections); // right after the first step was started
  await deadline(promise, 15000, 'drain promise');
  clearInterval(sampler);
  const after = ctx.app.stats();
  samples.push(after.connections);
  for (let i = 1; i < samples.length; i++) {
    assert.ok(samples[i] <= samples[i - 1], `connections must not rise during a drain: ${samples.join(',')}`);
  }
  assert.equal(after.connections, 0);
  assert.equal(after.closesByCode['1001'], N, `closesByCode ${JSON.stringify(after.closesByCode)}`);
  assert.equal(after.dropped, 0);
  assert.equal(after.messagesOut - before.messagesOut, N * PER_CLIENT, 'every message queued before the drain was sent');
  for (let i = 0; i < N; i++) {
    const got = await ctx.clients[i].take(PER_CLIENT, 5000);
    assert.deepEqual(got.map((m) => m.text), expected.get(i));
    assert.equal((await ctx.clients[i].waitClose(5000)).code, 1001);
  }
  t.diagnostic(`connections sampled during the drain: ${[...new Set(samples)].join(' → ')}`);
});

test('drain on an app attached to an http.Server: 503 for new upgrades on the shared port, 1001 for the adopted sockets', { timeout: 30000 }, async (t) => {
  const s = scope(t);
  const { App } = require(PKG_PATH);
  const server = http.createServer((req, res) => res.end('plain'));
  t.after(() => { server.closeAllConnections(); server.close(); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  const closes = [];
  const app = s.trackApp(App());
  app.ws('/websocket', {
    idleTimeout: 0,
    message(ws, data) { ws.send(`echo:${data}`); },
    close(ws, code, reason) { closes.push({ code, reason }); },
  });
  app.attach(server);
  const clients = [];
  for (let i = 0; i < 10; i++) {
    const c = await s.ws(`ws://127.0.0.1:${port}/websocket`);
    c.ws.send(`hi${i}`);
    assert.equal((await c.next()).text, `echo:hi${i}`);
    clients.push(c);
  }
  assert.equal(app.stats().connections, 10);
  const slow = clients[9];
  slow.ws._socket.pause();
  let resolved = false;
  const p = app.drain({ batch: 3, intervalMs: 20, code: 1001, reason: 'deploy' }).then(() => { resolved = true; });
  const r = await wsExpectRejected(`ws://127.0.0.1:${port}/websocket`);
  const resolvedAt503 = resolved;
  slow.ws._socket.resume();
  assert.equal(r.status, 503, `new upgrade on the shared port during drain: ${r.status} ${r.body}`);
  assert.equal(resolvedAt503, false);
  await deadline(p, 15000, 'drain promise');
  for (const c of clients) assert.deepEqual(await c.waitClose(5000), { code: 1001, reason: 'deploy' });
  assert.equal(closes.length, 10);
  assert.equal(app.stats().connections, 0);
  assert.equal(app.stats().closesByCode['1001'], 10);
});
