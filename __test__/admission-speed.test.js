'use strict';
// Letting a reconnect storm in at the box's speed (admission control, crates/native-ws/src/
// admission.rs): 2,000 DDP clients (a child process, 200 connecting at a time: upgrade, DDP
// `connect`, `connected`) into a server that keeps up with them. Through the Meteor adapter on a
// plain http.Server (Meteor's path) and on the own listener, both with admission control at its
// defaults, they connect about as fast as on an own listener with admission control off: a
// healthy server is not throttled. Ratios within one process, never a wall-clock bound.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { App } = require('..');
const { createNativeTransport } = require('../meteor');

const CLIENTS = 2000;
const CONCURRENCY = 200;
const ROUNDS = 3;
/** How much slower than the own listener without admission control a path may be. */
const MAX_RATIO = 2;

const CONNECTED = JSON.stringify({ msg: 'connected', session: 's' });

function connectMany(port) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(__dirname, 'helpers', 'connect-many.js'), String(port), '/websocket',
      String(CLIENTS), String(CONCURRENCY), '30000'], { timeout: 60000 }, (err, stdout) => {
      if (err) return reject(err);
      resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

/** The adapter as Meteor sets it up: a DDP session per connection, `connected` on `connect`. */
async function meteorPath() {
  const server = http.createServer((req, res) => res.end());
  const events = createNativeTransport({ settings: {} }).setup(server, '', {});
  events.on('connection', (socket) => {
    socket.on('data', (d) => { if (String(d).includes('"connect"')) socket.send(CONNECTED); });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: server.address().port, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }) };
}

async function ownListener(options) {
  const app = App(options);
  app.ws('/websocket', {
    idleTimeout: 0,
    message: (ws, data) => { if (Buffer.from(data).includes('"connect"')) ws.send(CONNECTED); },
  });
  const port = await new Promise((resolve, reject) => app.listen('127.0.0.1', 0, (t) => (t ? resolve(t.port) : reject(new Error('listen failed')))));
  return { port, close: async () => app.close() };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test(`${CLIENTS} DDP clients, ${CONCURRENCY} at a time, connect through the Meteor adapter and the own listener (admission control on) within ${MAX_RATIO}x of the own listener without it`, { timeout: 300000 }, async (t) => {
  const paths = {
    'own listener, admission off': () => ownListener({ admission: false }),
    'Meteor adapter, default admission': meteorPath,
    'own listener, default admission': () => ownListener({}),
  };
  const seconds = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, start] of Object.entries(paths)) {
      const server = await start();
      try {
        const r = await connectMany(server.port);
        assert.deepEqual({ connected: r.connected, refused: r.refused, failed: r.failed }, { connected: CLIENTS, refused: 0, failed: 0 }, name);
        seconds[name].push(r.seconds);
      } finally {
        await server.close();
      }
    }
  }
  const base = median(seconds['own listener, admission off']);
  for (const [name, xs] of Object.entries(seconds)) {
    t.diagnostic(`${name}: ${median(xs).toFixed(3)} s (${xs.map((x) => x.toFixed(3)).join(', ')}), ${(median(xs) / base).toFixed(2)}x`);
  }
  for (const name of ['Meteor adapter, default admission', 'own listener, default admission']) {
    const ratio = median(seconds[name]) / base;
    assert.ok(ratio <= MAX_RATIO, `${name}: ${ratio.toFixed(2)}x the own listener without admission control (at most ${MAX_RATIO}x)`);
  }
});
