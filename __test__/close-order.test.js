'use strict';
// A close that arrives in the same read as messages reaches the app only after the promise jobs
// those messages' handlers started. Meteor's DDP session needs it: it handles one message at a
// time, the next when the previous handler's promise has settled, and drops what is still queued
// when its socket closes, so a close handled before those jobs loses subscriptions the client
// sent before closing. uWS.js and Node's own sockets give each read its own callback and so a
// microtask checkpoint between a message and the close after it; these tests hold `native` to
// the same order on the Meteor adapter, the own listener and the /uws surface, and check the
// order against uWS.js itself (uws-pack) where it loads.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { connectRaw, textFrame, closeFrame } = require('./helpers/raw');
const { listen, importRealUws } = require('./helpers/common');
const { makeServer, closeAllServers } = require('./helpers/meteor-server');
const { waitFor } = require('./helpers/meteor-util');
const core = require('..');
const WebSocket = require('ws');
const uws = require('../lib/uws');

const ROUNDS = 100;
const SUBS = 3;
const BUSY_MS = 20; // the JS thread is busy while the frames and the close arrive
const T = { timeout: 60000 };

test.after(closeAllServers);

/** A DDP-session-shaped consumer of one socket: a queue worked one message at a time, each
 *  handler async (its work continues in promise jobs), the next message taken when the previous
 *  handler's promise has settled; close drops the queue. */
function queuedSession(onHandle) {
  const s = { handled: [], dropped: null, closed: false };
  let queue = [];
  let working = false;
  const next = () => {
    const m = queue === null ? undefined : queue.shift();
    if (m === undefined) {
      working = false;
      return;
    }
    (async () => {
      s.handled.push(m); // the handler's synchronous part, as a publish function's first lines
      if (onHandle) onHandle(m);
      await null;
    })().finally(next);
  };
  s.data = (m) => {
    if (queue === null) return;
    queue.push(m);
    if (!working) {
      working = true;
      next();
    }
  };
  s.close = () => {
    s.dropped = queue.length;
    s.closed = true;
    queue = null;
  };
  return s;
}

/** One round: a raw client sends SUBS text frames and a close frame in one TCP write while the
 *  JS thread is busy; resolves with the session once the server saw the close. */
async function sendSubsAndClose(port, path, nextSession) {
  const c = await connectRaw(port, { path });
  try {
    const frames = [];
    for (let n = 1; n <= SUBS; n++) frames.push(textFrame(JSON.stringify({ msg: 'sub', id: String(n) })));
    frames.push(closeFrame(1000));
    const session = nextSession();
    c.socket.write(Buffer.concat(frames));
    const until = Date.now() + BUSY_MS;
    while (Date.now() < until); // every frame is read while no JS runs: one delivery holds them all
    const s = await session;
    await waitFor(() => s.closed, 5000, 'the server-side close');
    return s;
  } finally {
    c.socket.destroy();
  }
}

async function rounds(port, path, nextSession) {
  const lost = [];
  for (let r = 0; r < ROUNDS; r++) {
    const s = await sendSubsAndClose(port, path, nextSession);
    if (s.handled.length !== SUBS) lost.push({ round: r, handled: s.handled.length, dropped: s.dropped });
  }
  return lost;
}

/** Sessions handed out in connection order (`onHandle(m)`: see queuedSession). */
function sessionQueue(onHandle) {
  const waiting = [];
  const ready = [];
  return {
    open() {
      const s = queuedSession(onHandle);
      const w = waiting.shift();
      if (w) w(s);
      else ready.push(s);
      return s;
    },
    next() {
      const s = ready.shift();
      return s ? Promise.resolve(s) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** The Meteor adapter on an http.Server, each socket feeding one queued session of `q`. */
function sessionServer(q) {
  return makeServer({
    onConnection(socket) {
      const s = q.open();
      socket.on('data', (raw) => s.data(JSON.parse(raw)));
      socket.on('close', s.close);
    },
  });
}

test(`Meteor adapter: ${SUBS} subscriptions then close in one read, all handled (${ROUNDS} rounds)`, T, async () => {
  const q = sessionQueue();
  const server = await sessionServer(q);
  try {
    assert.deepEqual(await rounds(server.port, '/websocket', () => q.next()), [], 'rounds that lost a subscription');
  } finally {
    await server.close();
  }
});

// Meteor's own test "livedata server - publish object": a DDP client in the same process
// subscribes three times and the first publication disconnects that client. The client's close
// frame reaches the core while the JS thread is still in the delivery that carried the
// subscriptions, so without the rule its close came in the same call chain as they did.
test(`Meteor adapter: the first of ${SUBS} subscriptions closes the client (in this process), all handled (${ROUNDS} rounds)`, T, async () => {
  let client = null;
  const q = sessionQueue((m) => {
    if (m.id !== '1' || client === null) return;
    client.close(1000);
    const until = Date.now() + 5; // the close frame is read and queued before this handler returns
    while (Date.now() < until);
  });
  const server = await sessionServer(q);
  try {
    const lost = [];
    for (let r = 0; r < ROUNDS; r++) {
      client = new WebSocket(`ws://127.0.0.1:${server.port}/websocket`);
      await new Promise((resolve, reject) => { client.once('open', resolve); client.once('error', reject); });
      const session = q.next();
      for (let n = 1; n <= SUBS; n++) client.send(JSON.stringify({ msg: 'sub', id: String(n) }));
      const s = await session;
      await waitFor(() => s.closed, 5000, 'the server-side close');
      client = null;
      if (s.handled.length !== SUBS) lost.push({ round: r, handled: s.handled.length, dropped: s.dropped });
    }
    assert.deepEqual(lost, [], 'rounds that lost a subscription');
  } finally {
    await server.close();
  }
});

/** Route behavior feeding one queued session per socket. */
function sessionRoute(q, sessions) {
  return {
    open(ws) { sessions.set(ws, q.open()); },
    message(ws, m) { sessions.get(ws).data(JSON.parse(Buffer.from(m).toString())); },
    close(ws) { sessions.get(ws).close(); },
  };
}

test(`own listener: ${SUBS} messages then close in one read, all handled (${ROUNDS} rounds)`, T, async () => {
  const q = sessionQueue();
  const app = core.App().ws('/*', sessionRoute(q, new Map()));
  try {
    const port = await listen(app);
    assert.deepEqual(await rounds(port, '/', () => q.next()), [], 'rounds that lost a message');
  } finally {
    app.close();
  }
});

// ---------------------------------------------------------------------------------------------
// The order itself, next to uWS.js: two messages and a close in one read; each message handler
// queues a promise job; the close handler must come after both jobs.

let realUws = null;
let realWhyNot = '';
test.before(async () => {
  ({ uws: realUws, whyNot: realWhyNot } = await importRealUws());
});

async function closeOrder(impl, portOf) {
  const log = [];
  let closed;
  const done = new Promise((resolve) => { closed = resolve; });
  const app = impl.App().ws('/*', {
    message(ws, m) {
      const s = Buffer.from(m).toString();
      log.push(`message ${s}`);
      Promise.resolve().then(() => log.push(`job ${s}`));
    },
    close() {
      log.push('close');
      closed();
    },
  });
  const token = await new Promise((resolve) => app.listen('127.0.0.1', 0, resolve));
  try {
    const c = await connectRaw(portOf(token));
    c.socket.write(Buffer.concat([textFrame('a'), textFrame('b'), closeFrame(1000)]));
    const until = Date.now() + BUSY_MS;
    while (Date.now() < until);
    await done;
    c.socket.destroy();
    return log;
  } finally {
    app.close();
  }
}

function assertJobsBeforeClose(log) {
  assert.ok(log.includes('close'), `no close in ${log.join(', ')}`);
  for (const job of ['job a', 'job b']) {
    assert.ok(log.indexOf(job) !== -1 && log.indexOf(job) < log.indexOf('close'), `${job} before close: ${log.join(', ')}`);
  }
}

test('own listener: the close handler runs after the promise jobs of the messages before it', T, async () => {
  for (let r = 0; r < 20; r++) assertJobsBeforeClose(await closeOrder(core, (t) => t.port));
});

test('/uws surface: the close handler runs after the promise jobs of the messages before it', T, async () => {
  for (let r = 0; r < 20; r++) assertJobsBeforeClose(await closeOrder(uws, uws.us_socket_local_port));
});

test('uws-pack (uWS.js itself): the same order', T, async (t) => {
  if (!realUws) return t.skip(`uws-pack did not load: ${realWhyNot}`);
  for (let r = 0; r < 20; r++) assertJobsBeforeClose(await closeOrder(realUws, realUws.us_socket_local_port));
});
