'use strict';
// attach(): the core's first look at each new connection (lib/first-look.js, native-ws peek.rs).
// An upgrade on the app's paths never reaches Node's HTTP layer; every other connection does,
// with every byte intact and the answer Node gives without attach(). Each case runs against
// the same server with and without the first look (DDP_TRANSPORT_NATIVE_SAME_PORT=upgrade:
// Node parses every request, the upgrade event hands ours over), side by side.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const crypto = require('node:crypto');
const { scope, sleep, deadline, PKG_PATH } = require('./helpers/common');
const { upgradeRequestText } = require('./helpers/raw');

const { App } = require(PKG_PATH);

const T = { timeout: 60000 };

/** An http.Server (options `opts`) answering "<method> <url> <httpVersion>", counting its
 *  'connection' and 'upgrade' events, with an app echoing on /websocket attached; the first
 *  look off when `look` is false. */
async function serve(t, { look = true, opts = {}, app: appOptions } = {}) {
  const s = scope(t);
  const server = http.createServer(opts, (req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => res.end(`${req.method} ${req.url} ${req.httpVersion}${body ? ` ${body}` : ''}`));
  });
  const seen = { connections: 0, upgrades: 0, opens: [] };
  server.on('connection', () => seen.connections++);
  const app = s.trackApp(App(appOptions));
  app.ws('/websocket', {
    idleTimeout: 0,
    open: (ws) => seen.opens.push(ws.getRemotePort()),
    message: (ws, data, isBinary) => ws.send(data, isBinary),
  });
  const before = process.env.DDP_TRANSPORT_NATIVE_SAME_PORT;
  process.env.DDP_TRANSPORT_NATIVE_SAME_PORT = look ? 'fd' : 'upgrade';
  try {
    app.attach(server);
  } finally {
    if (before === undefined) delete process.env.DDP_TRANSPORT_NATIVE_SAME_PORT;
    else process.env.DDP_TRANSPORT_NATIVE_SAME_PORT = before;
  }
  server.on('upgrade', () => seen.upgrades++);
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, app, port: server.address().port, seen };
}

/** Connect, send `chunks` (`gapMs` apart), collect everything until the server closes or
 *  `quietMs` pass without a byte (`waitMs` at most). Resolves { bytes (latin1), closed, ms }. */
function exchange(port, chunks, { gapMs = 0, quietMs = 400, waitMs = 10000, linger = 0 } = {}) {
  return deadline(new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    let quiet = null;
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(quiet);
      s.destroy();
      resolve({ bytes: out, closed, ms: Date.now() - t0 });
    };
    const arm = () => {
      clearTimeout(quiet);
      quiet = setTimeout(() => finish(false), quietMs);
    };
    s.on('data', (d) => {
      out += d.toString('latin1');
      arm();
    });
    s.on('close', () => finish(true));
    s.on('error', () => {});
    s.on('connect', async () => {
      if (linger) await sleep(linger);
      for (const c of chunks) {
        if (s.destroyed) return;
        s.write(c);
        if (gapMs) await sleep(gapMs);
      }
      arm();
    });
  }), waitMs + 5000, `exchange with :${port}`);
}

/** A response without its Date header (it differs from one second to the next). */
const stable = (bytes) => bytes.replace(/\r\nDate: [^\r]*/gi, '');

const upgrade = (path = '/websocket') => upgradeRequestText({ path, key: crypto.randomBytes(16).toString('base64') });

/** One masked text frame. */
function frame(text) {
  const payload = Buffer.from(text);
  const mask = crypto.randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]);
}

test('an upgrade on the app\'s path never reaches Node: no connection or upgrade event, the real peer, frames sent with the head kept', T, async (t) => {
  const { port, seen } = await serve(t);
  const r = await exchange(port, [Buffer.concat([Buffer.from(upgrade()), frame('hi')])]);
  assert.match(r.bytes, /^HTTP\/1\.1 101 /);
  assert.ok(r.bytes.endsWith('\x81\x02hi'), `the echo of the frame sent with the head: ${JSON.stringify(r.bytes.slice(-8))}`);
  assert.equal(seen.connections, 0, 'Node\'s server never saw the connection');
  assert.equal(seen.upgrades, 0);
  assert.equal(seen.opens.length, 1);
  // The same through Node's parser: the upgrade event brings it.
  const old = await serve(t, { look: false });
  const r2 = await exchange(old.port, [Buffer.concat([Buffer.from(upgrade()), frame('hi')])]);
  assert.ok(r2.bytes.endsWith('\x81\x02hi'));
  assert.deepEqual([old.seen.connections, old.seen.upgrades], [1, 1]);
});

test('plain HTTP, pipelined requests, HTTP/1.0, a POST with a body, a malformed head, an upgrade on another path: the answer Node gives without the first look, byte for byte', T, async (t) => {
  const look = await serve(t);
  const old = await serve(t, { look: false });
  const cases = [
    ['GET', ['GET /page?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']],
    ['pipelined', ['GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /websocket HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']],
    ['HTTP/1.0', ['GET /websocket HTTP/1.0\r\n\r\n']],
    ['HTTP/1.0 upgrade', [upgrade().replace('HTTP/1.1', 'HTTP/1.0')]],
    ['POST', ['POST /websocket HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello']],
    ['a GET on our path without Upgrade', ['GET /websocket HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']],
    ['malformed', ['GET /websocket HTTP/1.1\r\nno colon here\r\n\r\n']],
    ['an upgrade on another path (no listener)', [upgrade('/other')]],
  ];
  for (const [name, chunks] of cases) {
    const [a, b] = [await exchange(look.port, chunks), await exchange(old.port, chunks)];
    assert.equal(stable(a.bytes), stable(b.bytes), `${name}: the same answer`);
    assert.equal(a.closed, b.closed, `${name}: closed alike`);
  }
  assert.equal(look.seen.upgrades, old.seen.upgrades, 'the other path\'s upgrade reached Node\'s upgrade event');
});

test('a head split over many packets: an upgrade is still the core\'s (no upgrade event); a plain request is Node\'s, intact', T, async (t) => {
  const { port, seen } = await serve(t);
  const bytes = [...Buffer.from(upgrade())].map((b) => Buffer.from([b]));
  const r = await exchange(port, bytes, { gapMs: 2 });
  assert.match(r.bytes, /^HTTP\/1\.1 101 /);
  assert.equal(seen.connections + seen.upgrades, 0);
  const plain = [...Buffer.from('GET /websocket?split HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')].map((b) => Buffer.from([b]));
  const p = await exchange(port, plain, { gapMs: 2 });
  assert.match(p.bytes, /^HTTP\/1\.1 200 OK.*GET \/websocket\?split 1\.1$/s);
  assert.equal(seen.connections, 1);
});

test('a keep-alive connection whose later request upgrades: served through the upgrade event', T, async (t) => {
  const { port, seen } = await serve(t);
  const r = await exchange(port, ['GET /first HTTP/1.1\r\nHost: x\r\n\r\n', Buffer.concat([Buffer.from(upgrade()), frame('later')])], { gapMs: 100 });
  assert.match(r.bytes, /^HTTP\/1\.1 200 OK.*GET \/first 1\.1HTTP\/1\.1 101 /s);
  assert.ok(r.bytes.endsWith('\x81\x05later'));
  assert.deepEqual([seen.connections, seen.upgrades, seen.opens.length], [1, 1, 1]);
});

test('a client that connects and sends nothing, and a slowloris head: Node gets them after the look\'s wait and answers as it does without it', T, async (t) => {
  // Node answers a head not complete within headersTimeout with 408 (checked every
  // connectionsCheckingInterval).
  const opts = { headersTimeout: 3000, requestTimeout: 3000, connectionsCheckingInterval: 250 };
  const look = await serve(t, { opts });
  const old = await serve(t, { opts, look: false });
  const cases = [
    ['nothing', []],
    ['a partial upgrade head', [upgrade().slice(0, 60)]],
    ['a partial plain head', ['GET /slow HTTP/1.1\r\nHost: x\r\n']],
  ];
  for (const [name, chunks] of cases) {
    const [a, b] = await Promise.all([exchange(look.port, chunks, { quietMs: 9000 }), exchange(old.port, chunks, { quietMs: 9000 })]);
    assert.equal(stable(a.bytes), stable(b.bytes), `${name}: the same answer`);
    assert.ok(a.closed && b.closed, `${name}: closed`);
    // Bounded: the look's wait (2 s) at most on top of Node's own timeout.
    assert.ok(a.ms < b.ms + 2500, `${name}: ${a.ms} ms with the first look, ${b.ms} without`);
  }
  // A client that waits past the look and then sends an upgrade: Node's upgrade event serves it.
  const late = await exchange(look.port, [Buffer.concat([Buffer.from(upgrade()), frame('late')])], { linger: 2500 });
  assert.ok(late.bytes.startsWith('HTTP/1.1 101 ') && late.bytes.endsWith('\x81\x04late'), JSON.stringify(late.bytes.slice(0, 40)));
  assert.equal(look.seen.upgrades, 1);
});

test('server.close() with connections still being looked at: they are closed, the server closes; drain() refuses new upgrades with 503 at the first look', T, async (t) => {
  const { server, app, port } = await serve(t);
  const silent = net.connect(port, '127.0.0.1');
  silent.on('error', () => {});
  await new Promise((resolve) => silent.once('connect', resolve));
  await sleep(100);
  const draining = app.drain({ batch: 1, intervalMs: 10 });
  const refused = await exchange(port, [upgrade()]);
  assert.match(refused.bytes, /^HTTP\/1\.1 503 /);
  await draining;
  const closedSilent = new Promise((resolve) => silent.once('close', resolve));
  await deadline(new Promise((resolve) => server.close(resolve)), 5000, 'server close');
  await deadline(closedSilent, 5000, 'the silent client closed');
});

test('https.Server: no first look (its bytes are TLS records): Node\'s own onconnection stays; an http.Server\'s is wrapped', T, async (t) => {
  const s = scope(t);
  const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const plain = net.createServer();
  await listen(plain);
  t.after(() => plain.close());
  const nodes = plain._handle.onconnection; // net.js's one function, on every server's handle
  const secure = https.createServer({});
  const app = s.trackApp(App());
  app.ws('/websocket', {});
  app.attach(secure);
  await listen(secure);
  t.after(() => secure.close());
  assert.equal(secure._handle.onconnection, nodes);
  const { server } = await serve(t);
  assert.notEqual(server._handle.onconnection, nodes);
});

test('detach (app.close()): Node\'s own onconnection is back, every connection reaches Node again', T, async (t) => {
  const { server, app, port, seen } = await serve(t);
  const wrapped = server._handle.onconnection;
  app.close();
  assert.notEqual(server._handle.onconnection, wrapped);
  const r = await exchange(port, ['GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
  assert.match(r.bytes, /GET \/after 1\.1$/);
  assert.equal(seen.connections, 1);
});
