'use strict';
// `npm start` (node demo/server.js) as a child process: banner, page, DDP on the same port, clean
// shutdown on SIGTERM and SIGINT.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { withTimeout, httpGet, wsOpen, wsClose, ddpConnect, ddpCall } = require('./helpers/meteor-util');

const SERVER = path.join(__dirname, '..', 'demo', 'server.js');

function startChild() {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const state = { out: '', err: '' };
  child.stdout.on('data', (d) => { state.out += d; });
  child.stderr.on('data', (d) => { state.err += d; });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const listening = withTimeout(new Promise((resolve, reject) => {
    const check = () => {
      const m = /demo listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(state.out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout.on('data', check);
    exited.then((r) => reject(new Error(`demo exited early ${JSON.stringify(r)}: ${state.out}${state.err}`)));
  }), 20000, 'demo banner');
  return { child, state, exited, listening };
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  test(`node demo/server.js serves the page and DDP on one port; ${signal} stops it cleanly`, { timeout: 40000 }, async () => {
    const { child, state, exited, listening } = startChild();
    let client;
    try {
      const port = await listening;
      assert.match(state.out, new RegExp(`^demo listening on http://127\\.0\\.0\\.1:${port}$`, 'm'));
      const page = await httpGet(port, '/');
      assert.equal(page.status, 200);
      assert.match(page.headers['content-type'], /^text\/html/);
      assert.match(page.body, /id="reply"/);
      assert.match(page.body, /id="rtt"/);
      assert.match(page.body, /id="status"/);
      const script = await httpGet(port, '/client.js');
      assert.equal(script.status, 200);
      assert.match(script.body, /new WebSocket\(/);
      assert.equal((await httpGet(port, '/nope')).status, 404);
      const plain = await httpGet(port, '/websocket');
      assert.equal(plain.status, 400);
      assert.equal(plain.body, 'Not a valid websocket request');

      client = await wsOpen(port, '/websocket', { perMessageDeflate: true });
      assert.match(client.upgrade.headers['sec-websocket-extensions'] || '', /permessage-deflate/);
      await ddpConnect(client);
      assert.equal((await ddpCall(client, 'echo', ['hello'])).result, 'hello');

      child.kill(signal);
      const closed = await withTimeout(client.queue.closedPromise, 10000, 'client closed on shutdown');
      assert.ok(closed);
      const r = await withTimeout(exited, 10000, 'demo exit');
      assert.deepEqual(r, { code: 0, signal: null }, state.out + state.err);
    } finally {
      if (client) await wsClose(client);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
}

test('start() in-process: { server, port, close() }', { timeout: 20000 }, async () => {
  const { start } = require('../demo/server');
  const demo = await start({ port: 0 });
  try {
    assert.equal(typeof demo.port, 'number');
    assert.ok(demo.port > 0);
    assert.equal(demo.server.address().port, demo.port);
    const c = await wsOpen(demo.port);
    await ddpConnect(c);
    assert.deepEqual((await ddpCall(c, 'echo', [[1, 2]])).result, [1, 2]);
    await wsClose(c);
  } finally {
    await demo.close();
  }
});
