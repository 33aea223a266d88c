'use strict';
// The peer address is reported exactly as Node reports `socket.remoteAddress` for the same
// connection: IPv4-mapped IPv6 for an IPv4 client of a dual-stack (`::`) listener, plain IPv6,
// plain IPv4 — in attach mode (compared with Node's own view of a client at that address), on the own
// listener, and through the Meteor adapter (`this.connection.clientAddress` keeps its form when
// an app switches transport).

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const WebSocket = require('ws');
const { App } = require('..');
const { createNativeTransport } = require('../meteor');
const { deadline, listen } = require('./helpers/common');

const T = { timeout: 20000 };

function hasIpv6Loopback() {
  return new Promise((resolve) => {
    const s = http.createServer();
    s.once('error', () => resolve(false));
    s.listen(0, '::1', () => s.close(() => resolve(true)));
  });
}

/** Open a ws connection from `from` (client address) to `to`; resolve when open. */
function connect(to, port, from, path = '/ws') {
  const host = to.includes(':') ? `[${to}]` : to;
  const ws = new WebSocket(`ws://${host}:${port}${path}`, { localAddress: from });
  return deadline(new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  }), 5000, `connect ${from} → ${to}:${port}`);
}

function closeWs(ws) {
  return deadline(new Promise((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) return resolve();
    ws.once('close', resolve);
    ws.close();
  }), 5000, 'ws close');
}

/** An app whose route records each socket's reported address by remote port. */
function recordingApp() {
  const seen = new Map();
  const app = App().ws('/ws', {
    open(ws) {
      seen.set(ws.getRemotePort(), ws.getRemoteAddressAsText());
    },
  });
  return { app, seen };
}

const cases = [
  { listenOn: '::', client: '127.0.0.1', to: '127.0.0.1', expected: '::ffff:127.0.0.1', v6: true },
  { listenOn: '::', client: '::1', to: '::1', expected: '::1', v6: true },
  { listenOn: '0.0.0.0', client: '127.0.0.1', to: '127.0.0.1', expected: '127.0.0.1' },
  { listenOn: '127.0.0.1', client: '127.0.0.2', to: '127.0.0.1', expected: '127.0.0.2' },
  { listenOn: '::1', client: '::1', to: '::1', expected: '::1', v6: true },
];

for (const c of cases) {
  test(`attach, http.Server on ${c.listenOn}, client ${c.client}: ${c.expected}, as Node reports it`, T, async (t) => {
    if (c.v6 && !(await hasIpv6Loopback())) return t.skip('no IPv6 loopback on this machine');
    const { app, seen } = recordingApp();
    // Node's view of a client: an HTTP request's socket.remoteAddress (the upgrade itself never
    // reaches Node's HTTP layer: the core looks at each new connection first).
    const server = http.createServer((req, res) => res.end(req.socket.remoteAddress));
    app.attach(server);
    await new Promise((resolve) => server.listen(0, c.listenOn, resolve));
    t.after(() => { app.close(); server.close(); });
    const nodeView = await deadline(new Promise((resolve, reject) => {
      http.get({ host: c.to, port: server.address().port, localAddress: c.client, agent: false }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve(body));
      }).on('error', reject);
    }), 5000, 'an HTTP request');
    const ws = await connect(c.to, server.address().port, c.client);
    const port = ws._socket.localPort;
    await deadline((async () => { while (!seen.has(port)) await new Promise((r) => setTimeout(r, 10)); })(), 3000, 'open');
    assert.equal(nodeView, c.expected, "Node's own view");
    assert.equal(seen.get(port), nodeView);
    await closeWs(ws);
  });

  test(`own listener on ${c.listenOn}, client ${c.client}: ${c.expected}`, T, async (t) => {
    if (c.v6 && !(await hasIpv6Loopback())) return t.skip('no IPv6 loopback on this machine');
    const { app, seen } = recordingApp();
    t.after(() => app.close());
    const port = await listen(app, c.listenOn, 0);
    const ws = await connect(c.to, port, c.client);
    const local = ws._socket.localPort;
    await deadline((async () => { while (!seen.has(local)) await new Promise((r) => setTimeout(r, 10)); })(), 3000, 'open');
    assert.equal(seen.get(local), c.expected);
    await closeWs(ws);
  });
}

test('Meteor adapter on a dual-stack server: socket.remoteAddress is the IPv4-mapped form, as with sockjs', T, async (t) => {
  if (!(await hasIpv6Loopback())) return t.skip('no IPv6 loopback on this machine');
  const server = http.createServer();
  const events = createNativeTransport({ settings: {} }).setup(server, '', {});
  const sockets = [];
  events.on('connection', (s) => sockets.push(s));
  await new Promise((resolve) => server.listen(0, '::', resolve));
  t.after(() => server.close());
  const ws = await connect('127.0.0.1', server.address().port, '127.0.0.1', '/websocket');
  await deadline((async () => { while (sockets.length === 0) await new Promise((r) => setTimeout(r, 10)); })(), 3000, 'connection');
  assert.equal(sockets[0].remoteAddress, '::ffff:127.0.0.1');
  assert.equal(sockets[0].remotePort, ws._socket.localPort);
  await closeWs(ws);
});
