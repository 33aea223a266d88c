'use strict';
// The uWS compat surface (require('ddp-transport-native/uws')), one scenario per feature of
// uWebSockets.js's documented API, with the real `ws` client.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const WebSocket = require('ws');
const uws = require('../lib/uws');
const { freePort, importRealUws } = require('./helpers/common');

/** Start an app with one route; resolves { port, app }. */
function serve(pattern, behavior, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const app = uws.App().ws(pattern, behavior);
    app.listen(host, 0, (t) => resolve({ app, token: t, port: uws.us_socket_local_port(t) }));
  });
}

function connect(port, p = '/', opts) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${p}`, opts);
  ws.msgs = [];
  ws.on('message', (d, b) => ws.msgs.push(b ? d : d.toString()));
  ws.closed = new Promise((r) => ws.on('close', (code, reason) => r([code, reason.toString()])));
  ws.opened = new Promise((r, j) => { ws.on('open', r); ws.on('error', j); });
  return ws;
}

const until = async (f) => { while (!f()) await new Promise((r) => setTimeout(r, 5)); };

test('constants have uWS.js v20 values (compared with uws-pack when it loads)', async () => {
  assert.strictEqual(uws.SHARED_COMPRESSOR, 1);
  assert.strictEqual(uws.DEDICATED_COMPRESSOR_3KB, 145);
  let real;
  try { real = await import('uws-pack'); } catch { return; }
  for (const k of Object.keys(real)) if (typeof real[k] === 'number') assert.strictEqual(uws[k], real[k], k);
});

test('compression flags are accepted and negotiated; bad flags name the key', async () => {
  assert.throws(() => uws.App().ws('/*', { compression: 3 }), /compression must be a uWS compression constant/);
  assert.throws(() => uws.App().ws('/*', { idleTimeout: 4 }), /idleTimeout must be 0 or from 8/);
  const { app, port } = await serve('/*', { compression: uws.SHARED_COMPRESSOR | uws.SHARED_DECOMPRESSOR, message: (ws, m) => ws.send(m, false, true) });
  const c = connect(port, '/', { perMessageDeflate: true });
  await c.opened;
  assert.match(c.extensions, /permessage-deflate/);
  c.send('x'.repeat(3000));
  await until(() => c.msgs.length === 1);
  assert.strictEqual(c.msgs[0], 'x'.repeat(3000));
  app.close();
});

test('listen forms and us_listen_socket_close', async () => {
  const app = uws.App().ws('/*', {});
  await new Promise((r) => app.listen(0, (t) => { assert.ok(uws.us_socket_local_port(t) > 0); uws.us_listen_socket_close(t); r(); }));
  await new Promise((r) => app.listen(0, uws.LIBUS_LISTEN_EXCLUSIVE_PORT, (t) => { assert.ok(t); uws.us_listen_socket_close(t); r(); }));
  app.close();
});

test('message is an ArrayBuffer with isBinary; send defaults to text, uncompressed', async () => {
  const seen = [];
  const { app, port } = await serve('/*', { message: (ws, m, b) => { seen.push([m instanceof ArrayBuffer, b]); ws.send(m); } });
  const c = connect(port);
  await c.opened;
  c.send(Buffer.from('bin'));
  await until(() => c.msgs.length === 1);
  assert.deepStrictEqual(seen, [[true, true]]);
  assert.strictEqual(c.msgs[0], 'bin'); // sent back as text (isBinary defaults to false)
  app.close();
});

test('upgrade(res, req, context): req getters, route parameters, async res.upgrade, refusal', async () => {
  let facts;
  const { app, port } = await serve('/room/:id/*', {
    upgrade: (res, req, context) => {
      facts = [req.getUrl(), req.getMethod(), req.getQuery(), req.getQuery('a'), req.getHeader('x-k'), req.getHeader('none'), req.getParameter(0), req.getParameter('id'), req.getParameter(1)];
      let n = 0;
      req.forEach(() => n++);
      assert.ok(n > 3);
      const key = req.getHeader('sec-websocket-key');
      if (req.getParameter(0) === 'no') return res.writeStatus('401 Unauthorized').writeHeader('x', 'y').end('go away');
      res.onAborted(() => {});
      setTimeout(() => res.cork(() => res.upgrade({ id: 7 }, key, '', '', context)), 10);
    },
    open: (ws) => ws.send(JSON.stringify(ws.getUserData())),
  });
  const c = connect(port, '/room/42/x?a=1&b=2', { headers: { 'x-k': 'v' } });
  await until(() => c.msgs.length === 1);
  assert.deepStrictEqual(facts, ['/room/42/x', 'get', 'a=1&b=2', '1', 'v', '', '42', '42', '']);
  assert.strictEqual(c.msgs[0], '{"id":7}');
  const status = (p) => new Promise((r) => { const w = new WebSocket(`ws://127.0.0.1:${port}${p}`); w.on('unexpected-response', (q, res) => r(res.statusCode)); w.on('error', () => {}); });
  assert.strictEqual(await status('/room/no/x'), 401);
  assert.strictEqual(await status('/room/42'), 404); // uWS: "/room/:id/*" needs the slash
  c.close();
  app.close();
});

test('fragments arrive as one message; ping reaches the client', async () => {
  const { app, port } = await serve('/*', { open: (ws) => { ws.ping('hi'); ws.sendFirstFragment('a'); ws.sendFragment('b'); ws.sendLastFragment('c'); } });
  const c = connect(port);
  const ping = new Promise((r) => c.on('ping', (d) => r(d.toString())));
  assert.strictEqual(await ping, 'hi');
  await until(() => c.msgs.length === 1);
  assert.deepStrictEqual(c.msgs, ['abc']);
  app.close();
});

test('close() runs the close handler synchronously (1006); calls after it throw; end(code, msg)', async () => {
  const order = [];
  const { app, port } = await serve('/*', {
    message: (ws, m) => {
      const t = Buffer.from(m).toString();
      if (t === 'close') ws.close(); else ws.end(4000, 'bye');
      order.push('after');
      assert.throws(() => ws.send('x'), /Invalid access of closed uWS.WebSocket/);
    },
    close: (ws, code, msg) => order.push(`close ${code} ${Buffer.from(msg).toString()} ${msg instanceof ArrayBuffer}`),
  });
  const a = connect(port);
  await a.opened;
  a.send('close');
  assert.deepStrictEqual((await a.closed)[0], 1006);
  const b = connect(port);
  await b.opened;
  b.send('end');
  assert.deepStrictEqual(await b.closed, [4000, 'bye']);
  assert.deepStrictEqual(order, ['close 1006  true', 'after', 'close 4000 bye true', 'after']);
  app.close();
});

/** Runs in a worker: `n` times, connect to `port`, and once the client has the 101 ask the
 *  HTTP server on `hport` to publish to the topic every open handler subscribes to. Reports how
 *  many publishes found no subscriber and how many clients got nothing. */
const OPEN_RACE_CLIENT = `
const { workerData: { port, hport, n, ws: wsPath }, parentPort } = require('node:worker_threads');
const http = require('node:http');
const WebSocket = require(wsPath);
const agent = new http.Agent({ keepAlive: true });
let early = 0, missed = 0, i = 0;
const one = () => {
  if (i++ === n) { agent.destroy(); return parentPort.postMessage({ early, missed }); }
  const ws = new WebSocket('ws://127.0.0.1:' + port + '/');
  let got = false;
  ws.on('message', () => { got = true; });
  ws.on('open', () => http.get({ host: '127.0.0.1', port: hport, path: '/', agent }, (r) => {
    let body = '';
    r.on('data', (d) => { body += d; });
    r.on('end', () => {
      if (body === '0') early++;
      setTimeout(() => { if (!got) missed++; ws.terminate(); one(); }, 5);
    });
  }));
};
one();
`;

/** The open race above against `impl` (this package's /uws or uWS.js itself), with an upgrade
 *  handler or without. */
async function openRace(impl, hook, n) {
  const behavior = { open: (ws) => ws.subscribe('t') };
  if (hook) {
    behavior.upgrade = (res, req, context) => res.upgrade({}, req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
  }
  const app = impl.App().ws('/*', behavior);
  const token = await new Promise((r) => app.listen('127.0.0.1', 0, r));
  const server = require('http').createServer((req, res) => {
    const subscribers = app.numSubscribers('t');
    app.publish('t', 'x');
    res.end(String(subscribers));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { Worker } = require('worker_threads');
  const w = new Worker(OPEN_RACE_CLIENT, { eval: true, workerData: { port: impl.us_socket_local_port(token), hport: server.address().port, n, ws: require.resolve('ws') } });
  try {
    return await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
  } finally {
    await w.terminate();
    server.close();
    impl.us_listen_socket_close(token);
    if (app.close) app.close();
  }
}

test('open has run before anything a client does once it has the 101 reaches the app (with an upgrade handler and without), as in uWS.js', { timeout: 120000 }, async () => {
  const N = 200;
  const { uws: real } = await importRealUws();
  for (const hook of [true, false]) {
    assert.deepStrictEqual(await openRace(uws, hook, N), { early: 0, missed: 0 }, `upgrade handler: ${hook}`);
    if (real) assert.deepStrictEqual(await openRace(real, hook, N), { early: 0, missed: 0 }, `uws-pack, upgrade handler: ${hook}`);
  }
});

test('pub/sub: subscribe/isSubscribed/getTopics, subscription handler, ws.publish skips the sender, app.publish, numSubscribers, order with send', async () => {
  const subs = [];
  let app;
  ({ app, port: test.port } = await serve('/*', {
    subscription: (ws, topic, n, o) => subs.push([Buffer.from(topic).toString(), n, o]),
    open: (ws) => { assert.strictEqual(ws.subscribe('t'), true); assert.ok(ws.isSubscribed('t')); assert.deepStrictEqual(ws.getTopics(), ['t']); },
    message: (ws, m) => { ws.send('before'); ws.publish('t', m); app.publish('t', 'all'); ws.send('after'); },
  }));
  const a = connect(test.port);
  const b = connect(test.port);
  await Promise.all([a.opened, b.opened]);
  await until(() => app.numSubscribers('t') === 2);
  a.send('from a');
  await until(() => a.msgs.length === 3 && b.msgs.length === 2);
  assert.deepStrictEqual(a.msgs, ['before', 'all', 'after']);
  assert.deepStrictEqual(b.msgs, ['from a', 'all']);
  assert.strictEqual(app.publish('nobody', 'x'), false);
  a.close();
  await until(() => app.numSubscribers('t') === 1);
  assert.deepStrictEqual(subs, [['t', 1, 0], ['t', 2, 1], ['t', 1, 2]]);
  app.close();
});

test('backpressure: getBufferedAmount, dropped and drain handlers', async () => {
  let dropped = 0;
  let drained = 0;
  const { app, port } = await serve('/*', {
    maxBackpressure: 64 * 1024,
    message: (ws) => { const big = Buffer.alloc(1 << 20); for (let i = 0; i < 50; i++) ws.send(big, true); assert.ok(ws.getBufferedAmount() > 0); },
    dropped: (ws, m, isBinary) => {
      // uWS hands the refused message back as an ArrayBuffer
      if (m instanceof ArrayBuffer && m.byteLength === 1 << 20 && isBinary === true) dropped++;
    },
    drain: () => drained++,
  });
  const c = connect(port);
  await c.opened;
  c.send('go');
  await until(() => drained > 0);
  assert.ok(dropped > 0);
  app.close();
});

test('getRemoteAddress is 4 bytes for IPv4, getRemoteAddressAsText an ArrayBuffer; getUserData', async () => {
  let r;
  const { app, port } = await serve('/*', { open: (ws) => { r = [new Uint8Array(ws.getRemoteAddress()).join('.'), Buffer.from(ws.getRemoteAddressAsText()).toString(), typeof ws.getUserData()]; ws.cork(() => ws.send('x')); } });
  const c = connect(port);
  await until(() => c.msgs.length === 1);
  assert.deepStrictEqual(r, ['127.0.0.1', '127.0.0.1', 'object']);
  app.close();
});

test('maxLifetime and all uWS behaviour keys are accepted', () => {
  uws.App().ws('/*', { maxLifetime: 1, dropped() {}, subscription() {}, ping() {}, pong() {}, closeOnBackpressureLimit: true, sendPingsAutomatically: false }).close();
});

test('SSLApp: TLS with key/cert files, a wss client', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'uws-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'], { stdio: 'ignore' });
  } catch (e) {
    if (e.code === 'ENOENT') return t.skip('openssl not installed: apt-get install -y openssl');
    throw e;
  }
  const app = uws.SSLApp({ key_file_name: key, cert_file_name: cert }).ws('/*', { message: (ws, m) => ws.send(m) });
  const port = await new Promise((r) => app.listen('127.0.0.1', 0, (t) => r(uws.us_socket_local_port(t))));
  const c = new WebSocket(`wss://127.0.0.1:${port}/x`, { rejectUnauthorized: false });
  await new Promise((r) => c.on('open', r));
  c.send('secure');
  const got = await new Promise((r) => c.on('message', (d) => r(d.toString())));
  assert.strictEqual(got, 'secure');
  c.close();
  app.close();
});

// ---------------------------------------------------------------------------------------------
// Parity with real uWS.js: each scenario runs against this surface and uws-pack, same assertions.

let realUws = null;
let realWhyNot = '';
test.before(async () => {
  ({ uws: realUws, whyNot: realWhyNot } = await importRealUws());
});

/** Run `scenario(impl)` against ours and against uws-pack (skipped, saying why, if it does not load). */
function both(name, scenario) {
  test(`${name} (this surface)`, () => scenario(uws));
  test(`${name} (uws-pack)`, (t) => (realUws ? scenario(realUws) : t.skip(`uws-pack did not load: ${realWhyNot}`)));
}

function serveWith(impl, routes) {
  return new Promise((resolve) => {
    const app = impl.App();
    for (const [pattern, behavior] of routes) app.ws(pattern, behavior);
    app.listen('127.0.0.1', 0, (t) => resolve({ app, port: impl.us_socket_local_port(t), token: t }));
  });
}

/** Open a ws client; resolves with its 101 response and negotiated extensions, or the refusal. */
function handshake(port, p, opts = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${p}`, { perMessageDeflate: false, ...opts });
    let upgrade = null;
    ws.on('upgrade', (res) => { upgrade = res; });
    ws.on('message', (d) => { ws.close(); resolve({ upgrade, extensions: ws.extensions, first: d.toString() }); });
    ws.on('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ refused: { status: res.statusCode, message: res.statusMessage, headers: res.headers, body } }));
    });
    ws.on('error', (e) => { if (!e.message.startsWith('Unexpected server response')) reject(e); });
  });
}

both('res.upgrade: the extensions argument decides ("" turns compression off for that client)', async (impl) => {
  const { app, port } = await serveWith(impl, [['/*', {
    compression: impl.SHARED_COMPRESSOR,
    upgrade: (res, req, context) => {
      const ext = req.getUrl() === '/off' ? '' : req.getHeader('sec-websocket-extensions');
      res.upgrade({}, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), ext, context);
    },
    open: (ws) => ws.send('hi'),
  }]]);
  try {
    const on = await handshake(port, '/on', { perMessageDeflate: true });
    assert.match(on.extensions, /^permessage-deflate/);
    const off = await handshake(port, '/off', { perMessageDeflate: true });
    assert.strictEqual(off.extensions, '');
    assert.strictEqual(off.upgrade.headers['sec-websocket-extensions'], undefined);
  } finally {
    app.close();
  }
});

both('headers written before res.upgrade are in the 101; a refusal sends its status line, headers and body', async (impl) => {
  const { app, port } = await serveWith(impl, [['/*', {
    upgrade: (res, req, context) => {
      const url = req.getUrl();
      if (url === '/no') return void res.writeStatus('401 Unauthorized').writeHeader('x-why', 'nope').end('go away');
      if (url === '/moved') return void res.writeStatus('302 Found').writeHeader('Location', '/elsewhere').end();
      if (url === '/plain') return void res.end('just this');
      res.writeStatus('101 Switching Protocols').writeHeader('x-hello', 'world').writeHeader('set-cookie', 'a=1');
      res.upgrade({}, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open: (ws) => ws.send('open'),
  }]]);
  try {
    const ok = await handshake(port, '/yes');
    assert.strictEqual(ok.first, 'open');
    assert.strictEqual(ok.upgrade.headers['x-hello'], 'world');
    assert.deepStrictEqual(ok.upgrade.headers['set-cookie'], ['a=1']);
    const no = (await handshake(port, '/no')).refused;
    assert.deepStrictEqual([no.status, no.message, no.headers['x-why'], no.body], [401, 'Unauthorized', 'nope', 'go away']);
    const moved = (await handshake(port, '/moved')).refused;
    assert.deepStrictEqual([moved.status, moved.message, moved.headers.location, moved.body], [302, 'Found', '/elsewhere', '']);
    const plain = (await handshake(port, '/plain')).refused;
    assert.deepStrictEqual([plain.status, plain.body], [200, 'just this']);
  } finally {
    app.close();
  }
});

both('route priority: static, then parameter, then wildcard, whatever the order of ws() calls', async (impl) => {
  const named = (name) => ({ open: (ws) => ws.send(name) });
  const { app, port } = await serveWith(impl, [
    ['/a/*', named('/a/*')], ['/a/:p', named('/a/:p')], ['/a/static', named('/a/static')], ['/*', named('/*')],
  ]);
  try {
    const got = [];
    for (const p of ['/a/static', '/a/x', '/a/x/y', '/b', '/a/']) got.push([p, (await handshake(port, p)).first]);
    assert.deepStrictEqual(got, [['/a/static', '/a/static'], ['/a/x', '/a/:p'], ['/a/x/y', '/a/*'], ['/b', '/*'], ['/a/', '/a/*']]);
  } finally {
    app.close();
  }
});

both('listen: apps that listen on one given port share it (SO_REUSEPORT, as uSockets binds): connections are spread; a listener that does not share is refused', async (impl) => {
  const mk = (tag) => {
    const app = impl.App();
    app.ws('/*', { open: (ws) => ws.send(tag) });
    return app;
  };
  const listen = (app, ...args) => new Promise((resolve) => app.listen(...args, resolve));
  const [a, b] = [mk('a'), mk('b')];
  const port = await freePort();
  const ta = await listen(a, '127.0.0.1', port);
  const tb = await listen(b, '127.0.0.1', port);
  const blocker = require('node:net').createServer();
  try {
    assert.ok(ta && tb, 'a second app listens on the same port');
    const seen = new Set();
    for (let i = 0; i < 32 && seen.size < 2; i++) seen.add((await handshake(port, '/x')).first);
    assert.deepEqual([...seen].sort(), ['a', 'b'], 'the kernel spreads connections over both');
    const err = await new Promise((resolve) => {
      blocker.once('error', resolve);
      blocker.listen(port, '127.0.0.1', () => resolve(null));
    });
    assert.equal(err && err.code, 'EADDRINUSE', 'a socket without SO_REUSEPORT cannot take the port');
  } finally {
    blocker.close();
    for (const t of [ta, tb]) if (t) impl.us_listen_socket_close(t);
  }
});

test('listen: a port bound as port 0, and the main API (App().listen), do not share', async () => {
  const mk = () => {
    const app = uws.App();
    app.ws('/*', {});
    return app;
  };
  const listen = (app, ...args) => new Promise((resolve) => app.listen(...args, resolve));
  const any = await listen(mk(), '127.0.0.1', 0);
  const refused = await listen(mk(), '127.0.0.1', uws.us_socket_local_port(any));
  uws.us_listen_socket_close(any);
  assert.equal(refused, false, 'port 0 is bound without SO_REUSEPORT (as uSockets)');
  const port = await freePort();
  const shared = await listen(mk(), '127.0.0.1', port);
  try {
    assert.ok(shared);
    const { App } = require('..');
    const app = App();
    app.ws('/*', {});
    const res = await new Promise((resolve) => app.listen('127.0.0.1', port, (t, err) => resolve({ t, err })));
    assert.equal(res.t, false);
    assert.equal(res.err.code, 'EADDRINUSE', 'the main API binds without SO_REUSEPORT');
    app.close();
  } finally {
    uws.us_listen_socket_close(shared);
  }
});
