'use strict';
// Load and fault isolation, with the server in a child process so its fds can be counted and its
// uncaught exceptions observed.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { scope, waitFor, deadline, WsClient } = require('./helpers/common');
const { runNode, procStats, CHILD_PRELUDE } = require('./helpers/proc');

const SERVER_CHILD = `${CHILD_PRELUDE}
let opens = 0, closes = 0, messages = 0;
const uncaught = [];
process.on('uncaughtException', (e) => { uncaught.push(e.message); out({ type: 'uncaught', message: e.message }); });
const app = App();
app.ws('/*', {
  idleTimeout: 0,
  open() { opens++; },
  message(ws, data, isBinary) {
    messages++;
    if (data === 'boom') throw new Error('boom-from-handler');
    ws.send(data, isBinary);
  },
  close() { closes++; },
});
app.listen('127.0.0.1', 0, (tok) => out({ type: 'listening', port: tok && tok.port }));
onCommand((m) => {
  if (m.cmd === 'stats') out({ id: m.id, opens, closes, messages, uncaught, stats: app.stats() });
  if (m.cmd === 'exit') { app.close(); out({ id: m.id }); setImmediate(() => process.exit(0)); }
});
`;

async function startChild(s) {
  const child = s.trackChild(runNode(SERVER_CHILD, { timeoutMs: 110000 }));
  const ready = await child.waitMessage((m) => m.type === 'listening', 10000, 'child listening');
  assert.ok(ready.port > 0, `child failed to listen: ${JSON.stringify(ready)}`);
  return { child, port: ready.port, stats: () => child.request({ cmd: 'stats' }) };
}

test('1,000 concurrent ws clients: each echo arrives, 1,000 close handlers, server fds back to baseline', { timeout: 120000 }, async (t) => {
  const s = scope(t);
  const { child, port, stats } = await startChild(s);
  const url = `ws://127.0.0.1:${port}/load`;

  // Warm-up connection so lazily created server resources are part of the baseline.
  const w = s.trackClient(new WsClient(url));
  await w.opened;
  await w.send('warm');
  assert.equal((await w.next()).text, 'warm');
  w.close(1000);
  await w.waitClose();
  await waitFor(async () => (await stats()).closes === 1, { timeout: 5000, label: 'warm-up close handler' });
  const baseline = procStats(child.pid).fds;

  const N = 1000;
  const clients = Array.from({ length: N }, () => s.trackClient(new WsClient(url, { timeout: 30000 })));
  await deadline(Promise.all(clients.map((c) => c.opened)), 40000, `${N} clients open`);
  const during = procStats(child.pid).fds;
  assert.ok(during >= baseline + N, `server should hold one fd per client (baseline ${baseline}, now ${during})`);
  clients.forEach((c, i) => c.ws.send(`c${i}`));
  const echoes = await deadline(Promise.all(clients.map((c) => c.next(30000))), 35000, `${N} echoes`);
  echoes.forEach((m, i) => assert.equal(m.text, `c${i}`, `client ${i} got ${m.text}`));
  let st = await stats();
  assert.equal(st.opens, N + 1);
  assert.equal(st.messages, N + 1);

  clients.forEach((c) => c.close(1000));
  const infos = await deadline(Promise.all(clients.map((c) => c.waitClose(30000))), 35000, `${N} client closes`);
  assert.ok(infos.every((i) => i.code === 1000), 'every client should see the close echoed with 1000');
  st = await waitFor(async () => {
    const x = await stats();
    return x.closes >= N + 1 ? x : false;
  }, { timeout: 15000, interval: 100, label: `${N} close handlers` });
  assert.equal(st.closes, N + 1, 'close handler count (1,000 + the warm-up)');
  assert.equal(st.stats.connections, 0, 'stats().connections back to 0');
  let fds;
  await waitFor(() => { fds = procStats(child.pid).fds; return fds <= baseline; },
    { timeout: 15000, interval: 100, label: 'server fd count back to baseline', describe: () => `baseline ${baseline}, now ${fds}` });
  t.diagnostic(`server fds: baseline ${baseline}, with ${N} clients ${during}, after ${fds}; close handlers ${st.closes}`);
  await child.request({ cmd: 'exit' }).catch(() => {});
  await child.kill();
});

/** 20 clients send 50 messages each at once; client 7 sends 'boom' as its 26th message. */
async function boomScenario(t) {
  const s = scope(t);
  const { child, port, stats } = await startChild(s);
  const C = 20;
  const M = 50;
  const BOOM_CLIENT = 7;
  const clients = await Promise.all(Array.from({ length: C }, (_, i) => s.ws(`ws://127.0.0.1:${port}/c${i}`)));
  const expected = clients.map((_, i) => Array.from({ length: M }, (__, j) => `${i}:${j}`));
  clients.forEach((c, i) => {
    for (let j = 0; j < M; j++) {
      if (i === BOOM_CLIENT && j === 25) c.ws.send('boom');
      c.ws.send(expected[i][j]);
    }
  });
  return { s, child, port, stats, clients, expected, C, M, BOOM_CLIENT };
}

test('a handler that throws: other clients lose nothing and the error is an uncaught exception', { timeout: 60000 }, async (t) => {
  const { child, port, stats, clients, expected, BOOM_CLIENT, s } = await boomScenario(t);
  const others = clients.map((c, i) => i).filter((i) => i !== BOOM_CLIENT);
  const got = await deadline(Promise.all(others.map((i) => clients[i].take(expected[i].length, 20000))), 25000, 'echoes of the other clients');
  others.forEach((i, k) => assert.deepEqual(got[k].map((m) => m.text), expected[i], `client ${i} lost or reordered messages`));
  const u = await child.waitMessage((m) => m.type === 'uncaught', 10000, 'uncaughtException in the server process');
  assert.equal(u.message, 'boom-from-handler');
  // Exactly one exception, and the server keeps serving new clients.
  const fresh = await s.ws(`ws://127.0.0.1:${port}/fresh`);
  await fresh.send('after');
  assert.equal((await fresh.next()).text, 'after');
  const st = await stats();
  assert.deepEqual(st.uncaught, ['boom-from-handler']);
  await child.request({ cmd: 'exit' }).catch(() => {});
  await child.kill();
});

test("a handler that throws: the throwing socket's other messages are still delivered and it stays open", { timeout: 60000 }, async (t) => {
  const { child, clients, expected, BOOM_CLIENT, stats } = await boomScenario(t);
  const c = clients[BOOM_CLIENT];
  const got = await c.take(expected[BOOM_CLIENT].length, 20000);
  assert.deepEqual(got.map((m) => m.text), expected[BOOM_CLIENT]);
  assert.equal(c.readyState, 1);
  await c.send('later');
  assert.equal((await c.next()).text, 'later');
  const st = await stats();
  assert.deepEqual(st.uncaught, ['boom-from-handler']);
  await child.request({ cmd: 'exit' }).catch(() => {});
  await child.kill();
});
