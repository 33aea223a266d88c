'use strict';
// Received pings and pongs reach the `ping`/`pong` handlers (main API: a Buffer; the uWS compat
// surface: an ArrayBuffer, as uWS passes it, checked against real uWS.js when uws-pack loads),
// and an upgrade whose client leaves before the answer fires `res.onAborted` (main API and uWS
// surface); answering it later does nothing.

const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const WebSocket = require('ws');
const { App } = require('..');
const uws = require('../lib/uws');
const { listen, waitFor, deadline } = require('./helpers/common');
const { upgradeRequestText } = require('./helpers/raw');

const T = { timeout: 20000 };

function open(port, path = '/ws') {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`);
  ws.pongs = [];
  ws.on('pong', (d) => ws.pongs.push(d.toString()));
  return deadline(new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  }), 5000, 'open');
}

test('main API: ping and pong handlers get the payload as a Buffer; pings are still answered', T, async (t) => {
  const got = [];
  const app = App().ws('/ws', {
    ping: (ws, data) => got.push(['ping', data.toString(), Buffer.isBuffer(data)]),
    pong: (ws, data) => got.push(['pong', data.toString()]),
  });
  t.after(() => app.close());
  const ws = await open(await listen(app));
  ws.ping('hello');
  ws.pong('unsolicited');
  await waitFor(() => got.length === 2 && ws.pongs.length === 1, { label: 'ping, pong and the answer' });
  assert.deepEqual(got, [['ping', 'hello', true], ['pong', 'unsolicited']]);
  assert.deepEqual(ws.pongs, ['hello'], 'the core still answers the ping');
  ws.close();
});

test('main API without ping/pong handlers: pings answered, nothing reported', T, async (t) => {
  const app = App().ws('/ws', {});
  t.after(() => app.close());
  const ws = await open(await listen(app));
  ws.ping('p');
  await waitFor(() => ws.pongs.length === 1, { label: 'pong' });
  ws.close();
});

/** The same uWS program against an implementation: the server pings, the client pings. */
async function uwsPingProgram(impl) {
  const events = [];
  const app = impl.App().ws('/*', {
    open: (ws) => ws.ping('from-server'),
    ping: (ws, message) => events.push(['ping', message instanceof ArrayBuffer, Buffer.from(message).toString()]),
    pong: (ws, message) => events.push(['pong', message instanceof ArrayBuffer, Buffer.from(message).toString()]),
  });
  const token = await new Promise((resolve) => app.listen('127.0.0.1', 0, resolve));
  const port = impl.us_socket_local_port(token);
  try {
    const ws = await open(port, '/');
    await waitFor(() => events.length === 1, { label: 'the pong to our ping' });
    ws.ping('from-client');
    await waitFor(() => events.length === 2, { label: 'the client ping' });
    ws.close();
    return events;
  } finally {
    impl.us_listen_socket_close(token);
  }
}

test('uWS surface: ping/pong handlers get ArrayBuffers, as with uWS.js', T, async () => {
  const ours = await uwsPingProgram(uws);
  assert.deepEqual(ours, [['pong', true, 'from-server'], ['ping', true, 'from-client']]);
  let real;
  try {
    real = await import('uws-pack');
  } catch (e) {
    return; // uWS.js did not load here: ours is checked against its documented behaviour above
  }
  assert.deepEqual(await uwsPingProgram(real), ours, 'identical to uWS.js');
});

/** Send an upgrade request on a raw socket, then destroy it before the server answers. */
async function abandonUpgrade(port, path) {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject); });
  sock.write(upgradeRequestText({ path, key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
  await new Promise((r) => setTimeout(r, 100));
  sock.destroy();
}

test('main API: res.onAborted runs when the client leaves before the answer; a late accept does nothing', T, async (t) => {
  let res;
  let aborted = 0;
  let opened = 0;
  const app = App().ws('/ws', {
    upgrade: (req, r) => {
      res = r;
      r.onAborted(() => aborted++);
    },
    open: () => opened++,
  });
  t.after(() => app.close());
  const port = await listen(app);
  await abandonUpgrade(port, '/ws');
  await waitFor(() => aborted === 1, { label: 'onAborted' });
  res.accept({});
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(opened, 0);
  assert.equal(app.stats().connections, 0);
});

test('uWS surface: res.onAborted during an async upgrade; the same with uWS.js', T, async () => {
  async function program(impl) {
    const log = [];
    const app = impl.App().ws('/*', {
      upgrade: (res, req, context) => {
        res.onAborted(() => log.push('aborted'));
        setTimeout(() => log.push('timer'), 400);
      },
      open: () => log.push('open'),
    });
    const token = await new Promise((resolve) => app.listen('127.0.0.1', 0, resolve));
    try {
      await abandonUpgrade(impl.us_socket_local_port(token), '/');
      await waitFor(() => log.includes('timer'), { label: 'the deferred answer time' });
      return log;
    } finally {
      impl.us_listen_socket_close(token);
    }
  }
  const ours = await program(uws);
  assert.deepEqual(ours, ['aborted', 'timer']);
  let real;
  try {
    real = await import('uws-pack');
  } catch (e) {
    return;
  }
  assert.deepEqual(await program(real), ours, 'identical to uWS.js');
});

test('uWS surface: app.publish of a compressed message to 8 subscribers compresses once, same bytes for all', T, async (t) => {
  const app = uws.App().ws('/*', {
    compression: uws.SHARED_COMPRESSOR,
    open: (ws) => ws.subscribe('room'),
  });
  const token = await new Promise((resolve) => app.listen('127.0.0.1', 0, resolve));
  t.after(() => app.close());
  const port = uws.us_socket_local_port(token);
  const clients = [];
  for (let i = 0; i < 8; i++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: true });
    ws.got = [];
    ws.on('message', (d) => ws.got.push(d.toString()));
    await deadline(new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); }), 5000, 'open');
    clients.push(ws);
  }
  await waitFor(() => app.numSubscribers('room') === 8, { label: 'subscribed' });
  const before = app._inner.stats();
  const message = JSON.stringify({ msg: 'changed', fields: { text: 'lorem ipsum '.repeat(400) } });
  assert.equal(app.publish('room', message, false, true), true);
  await waitFor(() => clients.every((c) => c.got.length === 1), { label: 'every subscriber' });
  for (const c of clients) assert.equal(c.got[0], message);
  const after = app._inner.stats();
  assert.equal(after.compressions - before.compressions, 1, 'compressed once');
  assert.equal(after.compressionsReused - before.compressionsReused, 7, 'the frame reused for the 7 others');
  assert.ok(after.wireBytesOut - before.wireBytesOut < 8 * message.length / 2, 'compressed on the wire');
  clients.forEach((c) => c.close());
});
