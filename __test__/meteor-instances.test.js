'use strict';
// Several instances: two independent apps in one process, and node:cluster workers sharing one
// port. No instance opens a second port.

const { test, describe, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { DdpServer } = require('../demo/ddp-session');
const { makeServer, closeAllServers } = require('./helpers/meteor-server');

after(() => closeAllServers());
const {
  delay, withTimeout, wsOpen, wsClose, ddpConnect, ddpCall, listeningPorts,
} = require('./helpers/meteor-util');

async function ddpApp() {
  const ddp = new DdpServer();
  const s = await makeServer({ options: {}, onConnection: (socket) => ddp.handle(socket) });
  return { ...s, ddp };
}

describe('two apps in one process', () => {
  test('own sessions, no cross-talk, no extra listening socket', { timeout: 30000 }, async () => {
    const a = await ddpApp();
    const b = await ddpApp();
    const clients = [];
    try {
      assert.notEqual(a.port, b.port);
      const open = async (app) => {
        const c = await wsOpen(app.port);
        clients.push(c);
        c.session = await ddpConnect(c);
        return c;
      };
      const a1 = await open(a);
      const a2 = await open(a);
      const b1 = await open(b);
      const b2 = await open(b);
      const sessions = new Set([a1, a2, b1, b2].map((c) => c.session));
      assert.equal(sessions.size, 4, 'every client has its own session id');
      assert.equal(a.sockets.length, 2);
      assert.equal(b.sockets.length, 2);

      // Everyone subscribes to `fanout` in their own app.
      for (const [i, c] of [a1, a2, b1, b2].entries()) {
        c.ws.send(JSON.stringify({ msg: 'sub', id: `s${i}`, name: 'fanout', params: [] }));
        await c.queue.nextMatching((m) => m.msg === 'ready');
      }
      // A publishes: both A clients get it, B clients get nothing.
      const r = await ddpCall(a1, 'publish', [{ from: 'A' }]);
      assert.equal(r.result, 2, 'A has two subscribers');
      const addedA1 = await a1.queue.nextMatching((m) => m.msg === 'added');
      const addedA2 = await a2.queue.nextMatching((m) => m.msg === 'added');
      assert.deepEqual(addedA1.fields, { from: 'A' });
      assert.deepEqual(addedA2.fields, { from: 'A' });
      const rb = await ddpCall(b2, 'publish', [{ from: 'B' }]);
      assert.equal(rb.result, 2);
      const addedB1 = await b1.queue.nextMatching((m) => m.msg === 'added');
      assert.deepEqual(addedB1.fields, { from: 'B' }, 'the first thing B sees is B\'s own message');
      await b2.queue.nextMatching((m) => m.msg === 'added' && m.fields.from === 'B');
      await delay(200);
      for (const c of [a1, a2, b1, b2]) {
        for (const raw of c.queue.items) {
          const m = JSON.parse(raw);
          if (m.msg === 'added') assert.fail(`unexpected extra added: ${raw}`);
        }
      }

      // Echo works on each, with each app's own sockets.
      assert.equal((await ddpCall(a2, 'echo', ['to-a'])).result, 'to-a');
      assert.equal((await ddpCall(b1, 'echo', ['to-b'])).result, 'to-b');

      // No second port: this process listens on exactly the two http servers' ports.
      assert.deepEqual(listeningPorts(process.pid), [a.port, b.port].sort((x, y) => x - y));
    } finally {
      for (const c of clients) await wsClose(c);
      await a.close();
      await b.close();
    }
  });
});

describe('node:cluster', () => {
  test('2 workers share one port; both serve; every client gets its echo', { timeout: 90000 }, async () => {
    const helper = path.join(__dirname, 'helpers', 'cluster-server.js');
    const child = spawn(process.execPath, [helper], {
      env: { ...process.env, CLUSTER_WORKERS: '2' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const clients = [];
    try {
      const ready = await withTimeout(new Promise((resolve, reject) => {
        const check = () => {
          const m = /READY (\d+) ([\d,]+)/.exec(out);
          if (m) resolve({ port: Number(m[1]), pids: m[2].split(',').map(Number) });
          else if (/ERROR/.test(out)) reject(new Error(out));
        };
        child.stdout.on('data', check);
        exited.then(({ code, signal }) => reject(new Error(`cluster exited early (${code}, ${signal}): ${out}${err}`)));
      }), 30000, 'cluster ready');
      assert.equal(ready.pids.length, 2);

      const N = 20;
      const results = await withTimeout(Promise.all(Array.from({ length: N }, async (_, i) => {
        const c = await wsOpen(ready.port);
        clients.push(c);
        await ddpConnect(c);
        const who = await ddpCall(c, 'whoami', []);
        const echo = await ddpCall(c, 'echo', [`client-${i}`]);
        return { pid: who.result, echo: echo.result, i };
      })), 30000, 'cluster clients');
      for (const r of results) assert.equal(r.echo, `client-${r.i}`);
      const served = new Map();
      for (const r of results) served.set(r.pid, (served.get(r.pid) || 0) + 1);
      assert.deepEqual([...served.keys()].sort(), [...ready.pids].sort(), `both workers served: ${JSON.stringify([...served])}`);

      // No second port: workers hold no listening socket; the primary only the shared port.
      for (const pid of ready.pids) assert.deepEqual(listeningPorts(pid), [], `worker ${pid} listens on nothing`);
      assert.deepEqual(listeningPorts(child.pid), [ready.port], 'primary listens on the shared port only');
    } finally {
      for (const c of clients) await wsClose(c);
      child.kill('SIGTERM');
      const r = await withTimeout(exited, 10000, 'cluster exit').catch(() => {
        child.kill('SIGKILL');
        return null;
      });
      if (r) assert.equal(r.code, 0, `cluster exited cleanly: ${out}${err}`);
    }
  });
});

describe('drainOnSigterm', () => {
  test('SIGTERM closes sockets (1001) in batches over METEOR_SIGTERM_GRACE_PERIOD_SECONDS, then exits', { timeout: 60000 }, async () => {
    const helper = path.join(__dirname, 'helpers', 'drain-server.js');
    const child = spawn(process.execPath, [helper], {
      env: { ...process.env, METEOR_SIGTERM_GRACE_PERIOD_SECONDS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const clients = [];
    try {
      const port = await withTimeout(new Promise((resolve, reject) => {
        child.stdout.on('data', () => {
          const m = /READY (\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        exited.then((r) => reject(new Error(`exited early ${JSON.stringify(r)}: ${out}${err}`)));
      }), 20000, 'drain server ready');
      for (let i = 0; i < 10; i++) {
        const c = await wsOpen(port);
        clients.push(c);
        await ddpConnect(c);
      }
      const closedAt = [];
      for (const c of clients) c.queue.closedPromise.then((x) => closedAt.push({ t: Date.now(), code: x.code }));
      const t0 = Date.now();
      child.kill('SIGTERM');
      await withTimeout(Promise.all(clients.map((c) => c.queue.closedPromise)), 5000, 'every client closed');
      for (const x of closedAt) assert.equal(x.code, 1001, 'going away');
      const times = closedAt.map((x) => x.t).sort((p, q) => p - q);
      assert.ok(times[times.length - 1] - times[0] >= 150,
        `closes are spread out, not all at once: ${times.map((t) => t - t0).join(',')} ms`);
      assert.ok(times[times.length - 1] - t0 < 2500, 'within the grace period (1 s) plus slack');
      const r = await withTimeout(exited, 10000, 'exit after drain');
      assert.equal(r.signal, 'SIGTERM', `terminated by the re-raised SIGTERM: ${JSON.stringify(r)} ${out}${err}`);
    } finally {
      for (const c of clients) await wsClose(c);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
