'use strict';
// Socket and app lifecycle: end/close ordering, the close handler's once-only guarantee, the
// no-op-after-close contract, idle timeouts, listen errors, config validation and process exit.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { scope, waitFor, sleep, listen, deadline, WsClient } = require('./helpers/common');
const { connectRaw, connectSocket, upgradeRequestText, textFrame, closeFrame, OP } = require('./helpers/raw');
const { runNode, CHILD_PRELUDE } = require('./helpers/proc');

const T = { timeout: 20000 };

test("send('bye'); end(4001, 'done') in one tick: client gets 'bye' then close 4001 'done'", T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    open(ws) { ws.send('bye'); ws.end(4001, 'done'); },
    close(ws, code, reason) { closes.push([code, reason]); },
  });
  const c = s.trackClient(new WsClient(`ws://127.0.0.1:${port}/`));
  await c.opened;
  const m = await c.next();
  assert.equal(m.text, 'bye');
  const ci = await c.waitClose();
  assert.deepEqual(ci, { code: 4001, reason: 'done' });
  assert.equal(c.queue.length, 0);
  await waitFor(() => closes.length === 1, { label: 'close handler' });
  assert.deepEqual(closes, [[4001, 'done']]);
});

test('100 sends then end() in one tick: all 100 arrive, in order, before the close frame', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({
    open(ws) {
      for (let i = 0; i < 100; i++) ws.send(`n${i}`);
      ws.end();
    },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  const ci = await raw.reader.waitClose(10000);
  assert.notEqual(ci.code, null, 'a close frame must follow the data (graceful end)');
  assert.deepEqual(ci.frames.map((f) => f.payload.toString()), Array.from({ length: 100 }, (_, i) => `n${i}`));
  assert.ok(ci.frames.every((f) => f.opcode === OP.TEXT));
  raw.socket.write(closeFrame(ci.code === 1005 ? undefined : ci.code));
  await raw.reader.waitEnd(10000);
});

test('end() waits for the peer close then ends TCP; the close frame echo from the client is accepted', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    open(ws) { ws.end(4002, 'bye now'); },
    close(ws, code, reason) { closes.push([code, reason]); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const ci = await c.waitClose();
  assert.deepEqual(ci, { code: 4002, reason: 'bye now' });
  await waitFor(() => closes.length > 0, { label: 'close handler' });
  await sleep(200);
  assert.deepEqual(closes, [[4002, 'bye now']]);
});

/** Starts an app whose close handler records every call per url. */
async function closeCounter(t, extra = {}) {
  const s = scope(t);
  const calls = [];
  const sockets = {};
  const { app, port } = await s.app({
    idleTimeout: 0,
    open(ws) { sockets[ws.getUrl()] = ws; },
    message(ws, data) {
      if (data === 'server-end') ws.end(4003, 'server end');
      else if (data === 'server-close') ws.close();
      else ws.send(data);
    },
    close(ws, code, reason) { calls.push({ url: ws.getUrl(), code, reason }); },
    ...extra,
  });
  return { s, app, port, calls, sockets };
}

test('close handler fires exactly once per socket: client close, server end, server close, client destroy', T, async (t) => {
  const { s, app, port, calls } = await closeCounter(t);
  const a = await s.ws(`ws://127.0.0.1:${port}/client-close`);
  const b = await s.ws(`ws://127.0.0.1:${port}/server-end`);
  const c = await s.ws(`ws://127.0.0.1:${port}/server-close`);
  const d = await s.ws(`ws://127.0.0.1:${port}/client-destroy`);
  a.close(1000, 'a');
  b.ws.send('server-end');
  c.ws.send('server-close');
  d.terminate(); // abrupt TCP close, no close frame
  const ca = await a.waitClose();
  const cb = await b.waitClose();
  const cc = await c.waitClose();
  assert.equal(ca.code, 1000);
  assert.deepEqual(cb, { code: 4003, reason: 'server end' });
  assert.equal(cc.code, 1006, 'forceful close(): client sees no close frame');
  await waitFor(() => calls.length >= 4, { label: '4 close handlers', describe: () => JSON.stringify(calls) });
  // A bounded grace period for any duplicate call, then app.close() must not call them again.
  await sleep(300);
  app.close();
  await sleep(200);
  const byUrl = (u) => calls.filter((x) => x.url === u);
  assert.deepEqual(byUrl('/client-close').map((x) => [x.code, x.reason]), [[1000, 'a']]);
  assert.deepEqual(byUrl('/server-end').map((x) => [x.code, x.reason]), [[4003, 'server end']]);
  assert.deepEqual(byUrl('/server-close').map((x) => x.code), [1006]);
  assert.deepEqual(byUrl('/client-destroy').map((x) => x.code), [1006]);
  assert.equal(calls.length, 4);
});

test('app.close() closes every open socket and runs each close handler once', T, async (t) => {
  const { s, app, port, calls, sockets } = await closeCounter(t);
  const clients = [];
  for (let i = 0; i < 5; i++) clients.push(await s.ws(`ws://127.0.0.1:${port}/c${i}`));
  await waitFor(() => Object.keys(sockets).length === 5, { label: '5 open handlers' });
  app.close();
  const infos = await Promise.all(clients.map((c) => c.waitClose(10000)));
  assert.equal(infos.length, 5);
  await waitFor(() => calls.length >= 5, { label: '5 close handlers', describe: () => JSON.stringify(calls) });
  await sleep(200);
  assert.equal(calls.length, 5);
  assert.deepEqual(calls.map((c) => c.url).sort(), ['/c0', '/c1', '/c2', '/c3', '/c4']);
  // After close, the port no longer accepts connections.
  const refused = await new Promise((resolve) => {
    const so = net.connect({ port, host: '127.0.0.1' });
    so.once('connect', () => { so.destroy(); resolve(false); });
    so.once('error', () => resolve(true));
  });
  assert.equal(refused, true, 'listener should be closed after app.close()');
  // app.close() twice is harmless.
  assert.doesNotThrow(() => app.close());
});

const CLIENTS_CHILD = `
'use strict';
const fs = require('node:fs');
const WebSocket = require(process.env.WS_PATH);
const N = Number(process.env.N);
let closed = 0;
for (let i = 0; i < N; i++) {
  const ws = new WebSocket('ws://127.0.0.1:' + process.env.PORT + '/r' + i);
  ws.on('error', () => {});
  ws.on('open', () => fs.appendFileSync(process.env.FILE, 'open\\n'));
  ws.on('close', (code) => {
    process.stdout.write(JSON.stringify({ type: 'closed', i, code }) + '\\n');
    if (++closed === N) process.exit(0);
  });
}
setTimeout(() => process.exit(3), 15000);
`;

test('app.close() before the open events reached JS: every open handler is paired with one close; none runs after close', T, async (t) => {
  // Clients run in a child process and report their 101s through a file, which this thread
  // polls synchronously: app.close() is then called before this thread could run any open event.
  const s = scope(t);
  const opens = [];
  const closes = [];
  const { app, port } = await s.app({
    idleTimeout: 0,
    open(ws) { opens.push(ws.getUrl()); },
    close(ws) { closes.push(ws.getUrl()); },
  });
  const N = 5;
  const file = path.join(os.tmpdir(), `dtn-core-open-${process.pid}-${Date.now()}`);
  t.after(() => fs.rmSync(file, { force: true }));
  const child = s.trackChild(runNode(CLIENTS_CHILD, {
    env: { PORT: String(port), FILE: file, N: String(N), WS_PATH: require.resolve('ws') }, timeoutMs: 20000,
  }));
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const countOpen = () => {
    try { return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l === 'open').length; } catch { return 0; }
  };
  // In the inline I/O mode the 101 leaves in the turn of this thread that runs the open
  // handlers: no client can have it while this thread is blocked, so the case cannot arise there.
  const inline = app.ioMode === 'inline';
  const until = Date.now() + (inline ? 1000 : 10000);
  let seen = 0;
  while (Date.now() < until && seen < N) {
    seen = countOpen();
    if (seen < N) Atomics.wait(pause, 0, 0, 5);
  }
  if (inline) {
    assert.equal(seen, 0, 'inline: no client has its 101 before this thread ran the open handlers');
    await waitFor(() => countOpen() === N, { label: 'the clients\' handshakes' });
    assert.equal(opens.length, N);
  } else {
    assert.equal(seen, N, 'clients in the child should have completed their handshakes');
  }
  const opensAtClose = opens.length;
  app.close();
  for (let i = 0; i < N; i++) await child.waitMessage((m) => m.type === 'closed' && m.i === i, 10000, `client ${i} closed`);
  await sleep(300);
  const summary = `opens before app.close(): ${opensAtClose}, opens now: ${JSON.stringify(opens)}, closes: ${JSON.stringify(closes)}`;
  t.diagnostic(summary);
  assert.deepEqual([...closes].sort(), [...opens].sort(), `close handlers must pair with open handlers (${summary})`);
  assert.equal(opens.length, opensAtClose, `open handler ran after app.close() (${summary})`);
});

test('clients that vanish right after the upgrade: open and close handlers still pair up', T, async (t) => {
  const s = scope(t);
  const opens = [];
  const closes = [];
  const { app, port } = await s.app({
    idleTimeout: 0,
    open(ws) { opens.push(ws.getUrl()); },
    close(ws, code) { closes.push([ws.getUrl(), code]); },
  });
  const N = 20;
  for (let i = 0; i < N; i++) {
    const so = await connectSocket(port);
    s.trackSocket(so);
    // Upgrade request, and in the same write a close frame (even i) or nothing; then destroy.
    const req = Buffer.from(upgradeRequestText({ path: `/v${i}`, key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
    so.write(i % 2 === 0 ? Buffer.concat([req, closeFrame(1000)]) : req);
    so.destroy();
  }
  await waitFor(() => app.stats().connections === 0 && opens.length === closes.length,
    { timeout: 10000, label: 'all vanished sockets settled', describe: () => `opens ${opens.length}, closes ${closes.length}, stats ${JSON.stringify(app.stats())}` });
  await sleep(200);
  assert.deepEqual(closes.map((c) => c[0]).sort(), [...opens].sort());
  assert.equal(new Set(closes.map((c) => c[0])).size, closes.length, 'one close per socket');
});

test('after close every method is a harmless no-op; getters keep working', T, async (t) => {
  const s = scope(t);
  const results = {};
  let server;
  const check = (ws, where) => {
    const r = {};
    r.closed = ws.closed;
    r.sendText = ws.send('x');
    r.sendBin = ws.send(Buffer.from('y'), true);
    r.buffered = ws.getBufferedAmount();
    let corkCalled = false;
    r.corkReturn = ws.cork(() => { corkCalled = true; r.sendInCork = ws.send('z'); }) === ws;
    r.corkCalled = corkCalled;
    r.noThrow = true;
    try {
      ws.end(1000, 'again');
      ws.end();
      ws.close();
      ws.setIdleTimeout(1000);
      ws.setIdleTimeout(0);
    } catch (e) {
      r.noThrow = String(e);
    }
    r.addr = ws.getRemoteAddressAsText();
    r.port = ws.getRemotePort();
    r.userData = ws.getUserData();
    r.url = ws.getUrl();
    r.hdr = ws.getHeaders()['x-k'];
    r.protocol = ws.getProtocol();
    results[where] = r;
  };
  const closes = [];
  const { port } = await s.app({
    upgrade(req, res) { res.accept({ id: 7 }); },
    open(ws) { server = ws; },
    close(ws, code) { closes.push(code); check(ws, 'inHandler'); setTimeout(() => check(ws, 'later'), 50); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/after?q=1`, { headers: { 'X-K': 'v' } });
  c.close(1000);
  await c.waitClose();
  await waitFor(() => results.later, { label: 'checks after close' });
  for (const where of ['inHandler', 'later']) {
    const r = results[where];
    assert.deepEqual(r, {
      closed: true,
      sendText: 2,
      sendBin: 2,
      buffered: 0,
      corkReturn: true,
      corkCalled: true,
      sendInCork: 2,
      noThrow: true,
      addr: '127.0.0.1',
      port: c.localPort,
      userData: { id: 7 },
      url: '/after?q=1',
      hdr: 'v',
      protocol: '',
    }, where);
  }
  assert.equal(server.closed, true);
  await sleep(100);
  assert.deepEqual(closes, [1000], 'end()/close() after close must not trigger another close handler');
});

test('ws.closed becomes true as soon as end() or close() is called', T, async (t) => {
  const s = scope(t);
  const seen = [];
  const { port } = await s.app({
    open(ws) {
      const before = ws.closed;
      if (ws.getUrl() === '/end') ws.end(1000); else ws.close();
      seen.push([ws.getUrl(), before, ws.closed, ws.send('late')]);
    },
  });
  const a = await connectRaw(port, { path: '/end' });
  s.trackSocket(a.socket);
  const b = await connectRaw(port, { path: '/close' });
  s.trackSocket(b.socket);
  await waitFor(() => seen.length === 2, { label: 'open handlers' });
  const m = Object.fromEntries(seen.map(([u, ...rest]) => [u, rest]));
  assert.deepEqual(m['/end'], [false, true, 2]);
  assert.deepEqual(m['/close'], [false, true, 2]);
  const ca = await a.reader.waitClose(5000);
  assert.equal(ca.code, 1000);
  assert.deepEqual(ca.frames, [], "a send after end() must not be written");
});

test('ws.close() is forceful: TCP closes without a close frame; handler gets 1006', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 0,
    message(ws, data) { ws.send(`echo:${data}`); ws.close(); },
    close(ws, code) { closes.push(code); },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  raw.socket.write(textFrame('hi'));
  const frames = [];
  for (let i = 0; i < 10; i++) {
    const f = await raw.reader.next(10000);
    if (f === null) break;
    frames.push(f);
  }
  assert.ok(raw.reader.ended, 'TCP connection must be closed');
  assert.ok(!frames.some((f) => f.opcode === OP.CLOSE), 'no close frame after close()');
  await waitFor(() => closes.length > 0, { label: 'close handler' });
  await sleep(100);
  assert.deepEqual(closes, [1006]);
});

test('idleTimeout 1 s without automatic pings: a silent client is closed with 1001', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 1,
    sendPingsAutomatically: false,
    close(ws, code) { closes.push(code); },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  const ci = await raw.reader.waitClose(10000);
  assert.equal(ci.code, 1001, `close frame code ${ci.code}`);
  assert.ok(!ci.frames.some((f) => f.opcode === OP.PING), 'no pings when sendPingsAutomatically is false');
  raw.socket.write(closeFrame(1001));
  await raw.reader.waitEnd(10000);
  await waitFor(() => closes.length > 0, { label: 'close handler' });
  assert.deepEqual(closes, [1001]);
});

test('idleTimeout 1 s with automatic pings: a ws client (auto-pong) stays open past 3 s', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 1,
    sendPingsAutomatically: true,
    message(ws, d) { ws.send(d); },
    close(ws, code) { closes.push(code); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await sleep(3500);
  assert.equal(c.readyState, 1, `client closed: ${JSON.stringify(c.closeInfo)}`);
  assert.deepEqual(closes, []);
  assert.ok(c.pings >= 1, 'server should have sent pings');
  await c.send('still alive');
  assert.equal((await c.next()).text, 'still alive');
});

test('traffic from the client keeps an idle socket open (no pings)', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 1,
    sendPingsAutomatically: false,
    message(ws, d) { ws.send(d); },
    close(ws, code) { closes.push(code); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  for (let i = 0; i < 25; i++) { // 2.5 s in all: past the 1 s idle timeout
    await sleep(100);
    await c.send(`k${i}`);
    assert.equal((await c.next()).text, `k${i}`);
  }
  assert.deepEqual(closes, []);
  assert.equal(c.readyState, 1);
});

test('setIdleTimeout(300) in open closes a silent client (1001)', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 120,
    sendPingsAutomatically: false,
    open(ws) { ws.setIdleTimeout(300); },
    close(ws, code) { closes.push(code); },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  const ci = await raw.reader.waitClose(10000);
  assert.equal(ci.code, 1001);
  raw.socket.write(closeFrame(1001));
  await raw.reader.waitEnd(10000);
  await waitFor(() => closes.length > 0, { label: 'close handler' });
  assert.deepEqual(closes, [1001]);
});

test('setIdleTimeout(0) in open disables the behavior idleTimeout', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    idleTimeout: 1,
    sendPingsAutomatically: false,
    open(ws) { ws.setIdleTimeout(0); },
    message(ws, d) { ws.send(d); },
    close(ws, code) { closes.push(code); },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  await sleep(3000);
  assert.equal(raw.reader.ended, false, 'socket must still be open');
  assert.deepEqual(raw.reader.frames, []);
  raw.socket.write(textFrame('awake'));
  const f = await raw.reader.next(5000);
  assert.equal(f.opcode, OP.TEXT);
  assert.equal(f.payload.toString(), 'awake');
  assert.deepEqual(closes, []);
});

test('a longer setIdleTimeout in open replaces a shorter behavior idleTimeout (no close at the old one)', T, async (t) => {
  const s = scope(t);
  const closes = [];
  const t0 = Date.now();
  const { port } = await s.app({
    idleTimeout: 1,
    sendPingsAutomatically: false,
    open(ws) { ws.setIdleTimeout(2500); },
    close(ws, code) { closes.push({ code, at: Date.now() - t0 }); },
  });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  await sleep(1800);
  assert.equal(raw.reader.ended, false, 'still open after the behavior idleTimeout (1 s)');
  const ci = await raw.reader.waitClose(10000);
  assert.equal(ci.code, 1001);
  await waitFor(() => closes.length > 0, { label: 'close handler' });
  assert.ok(closes[0].at >= 2400, `closed at ${closes[0].at} ms, after the 2.5 s set in open`);
});

test('listen on a port already in use: cb(false, err) with err.code EADDRINUSE', T, async (t) => {
  const s = scope(t);
  const blocker = net.createServer();
  await new Promise((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.after(() => blocker.close());
  const busy = blocker.address().port;
  const { App } = require('..');
  const app = s.trackApp(App());
  app.ws('/*', {});
  const res = await deadline(new Promise((resolve) => {
    app.listen('127.0.0.1', busy, (token, err) => resolve({ token, err }));
  }), 5000, 'listen callback');
  assert.equal(res.token, false);
  assert.ok(res.err instanceof Error, 'second argument should be an Error');
  assert.equal(res.err.code, 'EADDRINUSE');
});

test('a second app can listen after the first one closed (port released)', T, async (t) => {
  const s = scope(t);
  const { App } = require('..');
  const a = s.trackApp(App());
  a.ws('/*', {});
  const port = await listen(a);
  a.close();
  const b = s.trackApp(App());
  b.ws('/*', { open(ws) { ws.send('second'); } });
  await waitFor(async () => {
    try { return await listen(b, '127.0.0.1', port); } catch { return false; }
  }, { timeout: 5000, interval: 100, label: 're-listen on the released port' });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  assert.equal((await c.next()).text, 'second');
});

test('app.listen(port, cb) form works (port 0)', T, async (t) => {
  const s = scope(t);
  const { App } = require('..');
  const app = s.trackApp(App());
  app.ws('/*', { message(ws, d) { ws.send(d); } });
  const token = await deadline(new Promise((resolve) => { app.listen(0, (tok) => resolve(tok)); }), 5000, 'listen(port, cb)');
  assert.ok(token, 'listen failed');
  assert.equal(typeof token.port, 'number');
  assert.ok(token.port > 0);
  assert.equal(typeof token.host, 'string');
  const c = await s.ws(`ws://127.0.0.1:${token.port}/`);
  await c.send('p');
  assert.equal((await c.next()).text, 'p');
});

test('listen returns the app (chainable) and ws() returns the app', T, async (t) => {
  const s = scope(t);
  const { App } = require('..');
  const app = s.trackApp(App());
  assert.equal(app.ws('/*', {}), app);
  let port;
  const ret = app.listen('127.0.0.1', 0, (tok) => { port = tok && tok.port; });
  assert.equal(ret, app);
  await waitFor(() => port, { label: 'listen callback' });
});

function assertConfigError(fn, key) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof TypeError || err instanceof RangeError, `expected TypeError/RangeError, got ${err && err.constructor && err.constructor.name}: ${err && err.message}`);
    assert.ok(String(err.message).includes(key), `message ${JSON.stringify(err.message)} should name ${key}`);
    return true;
  });
}

test('config errors throw TypeError/RangeError naming the key', T, async (t) => {
  const s = scope(t);
  const { App } = require('..');
  const app = s.trackApp(App());
  assertConfigError(() => app.ws('/*', { maxPayloadLength: 'x' }), 'maxPayloadLength');
  assertConfigError(() => app.ws('/*', { maxPayload: 1 }), 'maxPayload');
  assertConfigError(() => app.ws('/*', { compression: 5 }), 'compression');
  assertConfigError(() => app.ws('/*', { idleTimeout: -1 }), 'idleTimeout');
  assertConfigError(() => app.ws('/*', { maxBackpressure: 'big' }), 'maxBackpressure');
  assertConfigError(() => App({ threads: 0 }), 'threads');
  assertConfigError(() => App({ threads: 17 }), 'threads');
  assertConfigError(() => App({ threads: 1.5 }), 'threads');
  // A valid config after the failures still works.
  app.ws('/*', { maxPayloadLength: 1024, message(ws, d) { ws.send(d); } });
  const port = await listen(app);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await c.send('ok');
  assert.equal((await c.next()).text, 'ok');
});

test('App({threads: 4}) serves clients', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({ message(ws, d) { ws.send(d); } }, { appOptions: { threads: 4 } });
  const cs = await Promise.all(Array.from({ length: 8 }, () => s.ws(`ws://127.0.0.1:${port}/`)));
  await Promise.all(cs.map((c, i) => c.send(`t${i}`)));
  const got = await Promise.all(cs.map((c) => c.next()));
  assert.deepEqual(got.map((m) => m.text), cs.map((_, i) => `t${i}`));
});

const EXIT_CHILD = `${CHILD_PRELUDE}
const app = App();
app.ws('/*', {
  message(ws, data, isBinary) {
    ws.send(data, isBinary);
    if (process.env.CLOSE_WHEN === 'after-echo') setImmediate(() => { app.close(); out({ type: 'app-closed', at: Date.now() }); });
  },
  close(ws, code) {
    out({ type: 'ws-close', code });
    if (process.env.CLOSE_WHEN === 'on-close') { app.close(); out({ type: 'app-closed', at: Date.now() }); }
  },
});
app.listen('127.0.0.1', 0, (tok) => out({ type: 'listening', port: tok && tok.port }));
`;

for (const when of ['on-close', 'after-echo']) {
  test(`process exits by itself within 2 s after app.close() (${when === 'on-close' ? 'after the client left' : 'with a client still connected'})`, T, async (t) => {
    const s = scope(t);
    const child = s.trackChild(runNode(EXIT_CHILD, { env: { CLOSE_WHEN: when }, timeoutMs: 15000 }));
    const ready = await child.waitMessage((m) => m.type === 'listening', 10000, 'child listening');
    assert.ok(ready.port > 0);
    const c = await s.ws(`ws://127.0.0.1:${ready.port}/`);
    await c.send('one echo');
    assert.equal((await c.next()).text, 'one echo');
    if (when === 'on-close') c.close(1000);
    const closedMsg = await child.waitMessage((m) => m.type === 'app-closed', 10000, 'app-closed');
    await c.waitClose(5000);
    const exit = await deadline(child.exited, 8000, 'child exit');
    const elapsed = exit.exitAt - closedMsg.at;
    assert.equal(exit.code, 0, `exit code ${exit.code} signal ${exit.signal}; stderr: ${child.stderr()}`);
    assert.ok(elapsed < 2000, `process took ${elapsed} ms to exit after app.close()`);
  });
}
