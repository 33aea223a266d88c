'use strict';
// Real DDP clients from npm (simpleddp over `ws`, and the `ddp` package over faye-websocket)
// against the demo server: DDP over the `native` transport on the demo's own port.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const SimpleDDP = require('simpleddp');
const IsomorphicWs = require('isomorphic-ws');
const DDPClient = require('ddp');
const { withTimeout } = require('./helpers/meteor-util');

const T = { timeout: 30000 };

let demo;
const clients = [];

function simple(port) {
  const c = new SimpleDDP({
    endpoint: `ws://127.0.0.1:${port}/websocket`,
    SocketConstructor: IsomorphicWs,
    reconnectInterval: 1000,
    autoReconnect: false,
    maxTimeout: 10000,
  });
  clients.push(c);
  return c;
}

before(async () => {
  demo = await require('../demo/server').start({ port: 0, host: '127.0.0.1' });
});

after(async () => {
  for (const c of clients) {
    try { await withTimeout(c.disconnect(), 3000, 'simpleddp disconnect'); } catch (e) { /* ignore */ }
  }
  await demo.close();
});

describe('simpleddp (ws)', () => {
  test('connect and call echo', T, async () => {
    const server = simple(demo.port);
    await withTimeout(server.connect(), 10000, 'simpleddp connect');
    assert.equal(server.connected, true);
    assert.equal(typeof server.ddpConnection.sessionId, 'string');
    assert.equal(await withTimeout(server.call('echo', 'hello'), 5000, 'echo'), 'hello');
    const obj = { n: 1, list: [1, 2, 3], nested: { s: 'ünïcödé ✓' } };
    assert.deepEqual(await withTimeout(server.call('echo', obj), 5000, 'echo object'), obj);
    await assert.rejects(withTimeout(server.call('no-such-method'), 5000, 'unknown method'),
      (e) => e && e.error === 404);
  });

  test('sub("fanout") receives an added after another client calls publish', T, async () => {
    const reader = simple(demo.port);
    const writer = simple(demo.port);
    await withTimeout(Promise.all([reader.connect(), writer.connect()]), 10000, 'connect both');
    assert.notEqual(reader.ddpConnection.sessionId, writer.ddpConnection.sessionId);
    const added = new Promise((resolve) => {
      const listener = reader.on('added', (m) => {
        if (m.collection === 'fanout' && m.fields && m.fields.from === 'writer') {
          listener.stop();
          resolve(m);
        }
      });
    });
    const sub = reader.subscribe('fanout');
    await withTimeout(sub.ready(), 5000, 'sub ready');
    const count = await withTimeout(writer.call('publish', { from: 'writer', text: 'hi' }), 5000, 'publish');
    assert.ok(count >= 1, `publish reached ${count} subscriber(s)`);
    const m = await withTimeout(added, 5000, 'added message');
    assert.equal(typeof m.id, 'string');
    assert.deepEqual(m.fields, { from: 'writer', text: 'hi' });
    const docs = reader.collection('fanout').fetch();
    assert.ok(docs.some((d) => d.from === 'writer'), 'the document is in simpleddp\'s collection');
  });
});

describe('ddp (faye-websocket)', () => {
  test('connect and call echo', T, async () => {
    const client = new DDPClient({
      host: '127.0.0.1',
      port: demo.port,
      path: 'websocket',
      autoReconnect: false,
      maintainCollections: true,
    });
    try {
      await withTimeout(new Promise((resolve, reject) => {
        client.connect((err, wasReconnect) => (err ? reject(err) : resolve(wasReconnect)));
      }), 10000, 'ddp connect');
      assert.equal(typeof client.session, 'string');
      const result = await withTimeout(new Promise((resolve, reject) => {
        client.call('echo', [{ from: 'ddp' }], (err, res) => (err ? reject(err) : resolve(res)));
      }), 5000, 'ddp echo');
      assert.deepEqual(result, { from: 'ddp' });
      const err = await withTimeout(new Promise((resolve) => {
        client.call('nope', [], (e) => resolve(e));
      }), 5000, 'ddp unknown method');
      assert.equal(err.error, 404);
    } finally {
      client.close();
    }
  });
});
