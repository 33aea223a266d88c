'use strict';
// Bounded cork: in a JS tick that sends to many sockets (a fan-out), the first sockets are
// written before the tick ends (a first batch of 8, then every 64), so the first deliveries do not
// wait for the last send — while a tick touching few sockets still writes each once, at its end. The server runs in a child
// process whose tick sends to every socket and then stays busy for BUSY_MS.

const test = require('node:test');
const assert = require('node:assert/strict');
const WebSocket = require('ws');
const { runNode } = require('./helpers/proc');
const { pool, deadline } = require('./helpers/common');

const BUSY_MS = 600;

const SERVER = `
const { App } = require(process.env.DTN_PKG);
const sockets = new Set();
const app = App().ws('/ws', {
  compression: { threshold: 0 },
  open: (ws) => sockets.add(ws),
  close: (ws) => sockets.delete(ws),
  message: (ws, data) => {
    if (data !== 'go') return;
    const doc = JSON.stringify({ msg: 'changed', collection: 'c', id: 'x', fields: { text: 'y'.repeat(4000) } });
    for (const s of sockets) s.send(doc);
    const end = Date.now() + ${BUSY_MS};
    while (Date.now() < end) {} // the rest of a long tick
  },
});
app.listen('127.0.0.1', 0, (t) => console.log(JSON.stringify({ port: t.port })));
process.stdin.on('data', () => { app.close(); process.exit(0); });
`;

async function fanOut(t, clients, deflate) {
  const child = runNode(SERVER, { timeoutMs: 60000 });
  t.after(() => child.kill());
  const { port } = await child.waitMessage((m) => m.port, 10000);
  const sockets = [];
  await pool(clients, 50, async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: deflate });
    await deadline(new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); }), 10000, 'open');
    sockets.push(ws);
  });
  t.after(() => sockets.forEach((ws) => ws.terminate()));
  const arrivals = [];
  const all = Promise.all(sockets.map((ws) => new Promise((resolve) => ws.once('message', () => { arrivals.push(Date.now()); resolve(); }))));
  const start = Date.now();
  sockets[0].send('go');
  await deadline(all, 20000, 'every delivery');
  arrivals.sort((a, b) => a - b);
  const times = arrivals.map((x) => x - start);
  return { first: times[0], last: times[times.length - 1], times };
}

test('a fan-out to 300 sockets: the first deliveries leave before the tick ends (compressed, as Meteor sends)', { timeout: 60000 }, async (t) => {
  const { first, last } = await fanOut(t, 300, true);
  t.diagnostic(`first delivery ${first} ms, last ${last} ms after the broadcast (tick busy ${BUSY_MS} ms)`);
  assert.ok(last >= BUSY_MS * 0.9, `the last sockets are written at the end of the tick (${last} ms)`);
  assert.ok(first < BUSY_MS / 2, `the first delivery did not wait for the end of the tick (${first} ms)`);
});

test('a tick that touches a few sockets writes them at its end, once', { timeout: 60000 }, async (t) => {
  const { first } = await fanOut(t, 5, false);
  assert.ok(first >= BUSY_MS * 0.9, `few sockets stay corked until the end of the tick (${first} ms)`);
});

test('a fan-out to 20 sockets: the first batch of 8 leaves at once, the other 12 at the end of the tick', { timeout: 60000 }, async (t) => {
  const { times } = await fanOut(t, 20, true);
  t.diagnostic(`deliveries (ms after the broadcast): ${times.join(', ')}`);
  const early = times.filter((ms) => ms < BUSY_MS / 2).length;
  const late = times.filter((ms) => ms >= BUSY_MS * 0.9).length;
  assert.deepEqual({ early, late }, { early: 8, late: 12 });
});
