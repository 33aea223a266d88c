'use strict';
// Same-port mode: `app.attach(httpServer)` on Node's own http.Server / https.Server.
// Plain TCP sockets are adopted by fd (one listening socket, real peer address); TLS sockets go
// through the lazily opened internal 127.0.0.1 listener with the peer address in a preamble.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const http = require('node:http');
const https = require('node:https');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const WebSocket = require('ws');
const { scope, waitFor, sleep, deadline, PKG_PATH, pool } = require('./helpers/common');
const { connectSocket, upgradeRequestText } = require('./helpers/raw');
const { runNode, procStats } = require('./helpers/proc');
const { listeningSockets } = require('./helpers/netinfo');

const MiB = 1024 * 1024;
const FIXTURE = path.join(__dirname, 'helpers', 'attach-server.js');
const { App } = require(PKG_PATH);

// ---- helpers --------------------------------------------------------------------------------

async function startChild(s, env = {}, timeoutMs = 110000, args = []) {
  const child = s.trackChild(runNode(`require(${JSON.stringify(FIXTURE)})`, { env, timeoutMs, args }));
  const ready = await child.waitMessage((m) => m.type === 'listening', 15000, 'child listening');
  assert.ok(ready.port > 0, `child failed to listen: ${JSON.stringify(ready)}`);
  return { child, port: ready.port };
}

/** An in-process http.Server on 127.0.0.1:0, closed (with all its connections) after the test. */
async function startHttp(t, handler) {
  const server = http.createServer(handler || ((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`plain ${req.url}`);
  }));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  await deadline(new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  }), 5000, 'http listen');
  return { server, port: server.address().port };
}

function httpGet(port, urlPath) {
  return deadline(new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
  }), 5000, `GET ${urlPath}`);
}

/** One `ws` client: open, send `msg`, await its echo, close 1000, await the close. */
function echoCycle(url, msg, opts = {}) {
  return deadline(new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { handshakeTimeout: 10000, ...opts });
    let echoed = false;
    ws.once('error', reject);
    ws.once('open', () => ws.send(msg));
    ws.once('message', (data) => {
      if (data.toString() !== msg) reject(new Error(`echo mismatch: ${data.toString()} !== ${msg}`));
      echoed = true;
      ws.close(1000);
    });
    ws.once('close', (code) => {
      if (!echoed) reject(new Error(`closed (${code}) before the echo`));
      else if (code !== 1000) reject(new Error(`closed with ${code}`));
      else resolve();
    });
  }), 15000, `echo cycle ${url}`);
}

/** Run a command asynchronously (never spawnSync: it would stall the addon). */
function run(cmd, args, { cwd, timeout = 30000 } = {}) {
  return deadline(new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    p.stdout.resume();
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err.slice(-2000)}`))));
  }), timeout, `${cmd} ${args.join(' ')}`);
}

let certPromise = null;
let certDir = null;
/** A self-signed cert made once per file with the openssl CLI: {keyFile, certFile}, or null without openssl. */
function selfSignedCert() {
  if (!certPromise) {
    certDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-attach-'));
    certPromise = run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'k.pem', '-out', 'c.pem',
      '-days', '1', '-subj', '/CN=localhost'], { cwd: certDir })
      .then(() => ({ keyFile: path.join(certDir, 'k.pem'), certFile: path.join(certDir, 'c.pem') }),
        (e) => { if (e.code === 'ENOENT') return null; throw e; });
  }
  return certPromise;
}
const NO_OPENSSL = 'openssl not installed: apt-get install -y openssl';
after(() => { if (certDir) fs.rmSync(certDir, { recursive: true, force: true }); });

/** An app echoing on /websocket (no idle timeout); `open` is its open handler. */
function echoApp(s, open) {
  const app = s.trackApp(App());
  app.ws('/websocket', { idleTimeout: 0, open, message(ws, data, isBinary) { ws.send(data, isBinary); } });
  return app;
}

const describeListeners = (l) => l.map((x) => `${x.address}:${x.port}`).join(', ');

// ---- adoption churn -------------------------------------------------------------------------

test('10,000 adopt/echo/close cycles through attach(http.Server) (50 at a time): every echo arrives, fds back to baseline, exactly one listening socket (a plain-TCP app never opens a second one)', { timeout: 120000 }, async (t) => {
  const s = scope(t);
  const { child, port } = await startChild(s, { MODE: 'http' }, 110000, ['--expose-gc']);
  const url = `ws://127.0.0.1:${port}/websocket`;
  let l = listeningSockets(child.pid);
  assert.deepEqual(l.map((x) => x.port), [port], `listening before any upgrade: ${describeListeners(l)}`);
  const warm = await pool(50, 50, (i) => echoCycle(url, `warm-${i}`));
  assert.equal(warm.done, 50, warm.errors.join('; '));
  await waitFor(async () => (await child.request({ cmd: 'stats' })).stats.connections === 0, { timeout: 10000, label: 'warm-up closed' });
  const baseMem = (await child.request({ cmd: 'stats', gc: true })).mem;
  await sleep(100);
  const base = procStats(child.pid);
  const N = 10000;
  const r = await pool(N, 50, (i) => echoCycle(url, `echo-${i}-${'x'.repeat(i % 50)}`));
  assert.equal(r.done, N, `cycles with their echo: ${r.done}/${N}: ${r.errors.join('; ')}`);
  const st = await waitFor(async () => {
    const m = await child.request({ cmd: 'stats' });
    return m.closes >= N + 50 && m.stats.connections === 0 ? m : null;
  }, { timeout: 20000, label: 'every close handler' });
  assert.equal(st.opens, N + 50, 'open handler count');
  assert.equal(st.closes, N + 50, 'close handler count');
  assert.equal(st.closeCodes['1000'], N + 50, `close codes ${JSON.stringify(st.closeCodes)}`);
  assert.equal(st.stats.upgradesAccepted, N + 50);
  let now;
  await waitFor(() => { now = procStats(child.pid); return now.fds <= base.fds; }, {
    timeout: 10000, label: 'fd count back to baseline', describe: () => `baseline ${base.fds}, now ${now && now.fds}`,
  });
  assert.equal(now.fds, base.fds, 'fd count after the cycles');
  // No leak. Node's HTTP parsing of 10,000 upgrades grows V8's heap reservation (heapTotal, not
  // a leak: it plateaus), so the bound is on memory outside the V8 heap plus live JS objects.
  const mem = (await child.request({ cmd: 'stats', gc: true })).mem;
  now = procStats(child.pid);
  const outside = (rss, m) => rss - m.heapTotal;
  t.diagnostic(`RSS ${(base.rss / MiB).toFixed(1)} → ${(now.rss / MiB).toFixed(1)} MiB; V8 heapTotal ${(baseMem.heapTotal / MiB).toFixed(1)} → ${(mem.heapTotal / MiB).toFixed(1)} MiB; heapUsed ${(baseMem.heapUsed / MiB).toFixed(1)} → ${(mem.heapUsed / MiB).toFixed(1)} MiB`);
  assert.ok(outside(now.rss, mem) - outside(base.rss, baseMem) < 30 * MiB,
    `RSS outside the V8 heap grew ${((outside(now.rss, mem) - outside(base.rss, baseMem)) / MiB).toFixed(1)} MiB`);
  assert.ok(mem.heapUsed - baseMem.heapUsed < 10 * MiB, `live JS heap grew ${((mem.heapUsed - baseMem.heapUsed) / MiB).toFixed(1)} MiB`);
  l = listeningSockets(child.pid);
  assert.deepEqual(l.map((x) => x.port), [port], `exactly one listening socket after ${N} adoptions: ${describeListeners(l)}`);
});

// ---- real peer address ----------------------------------------------------------------------

test('remote address of an adopted socket is the real peer: 127.0.0.1 and the client\'s local port', { timeout: 20000 }, async (t) => {
  const s = scope(t);
  const { server, port } = await startHttp(t);
  const seen = [];
  const upgrades = [];
  const app = s.trackApp(App());
  app.ws('/websocket', {
    idleTimeout: 0,
    upgrade(req, res) { upgrades.push({ address: req.remoteAddress, port: req.remotePort }); res.accept(); },
    open(ws) { seen.push({ address: ws.getRemoteAddressAsText(), port: ws.getRemotePort() }); },
    message(ws, data, isBinary) { ws.send(data, isBinary); },
  });
  app.attach(server);
  const clients = [];
  for (let i = 0; i < 3; i++) clients.push(await s.ws(`ws://127.0.0.1:${port}/websocket`));
  // The clients speak first (see the "server speaks first" test for open without client data).
  for (const [i, c] of clients.entries()) {
    assert.ok(c.localPort > 0);
    c.ws.send(`hi${i}`);
    assert.equal((await c.next()).text, `hi${i}`);
  }
  await waitFor(() => seen.length === 3, { label: 'open handlers' });
  const byPort = (a, b) => a.port - b.port;
  const expected = clients.map((c) => ({ address: '127.0.0.1', port: c.localPort })).sort(byPort);
  assert.deepEqual([...seen].sort(byPort), expected, 'getRemoteAddressAsText()/getRemotePort()');
  assert.deepEqual([...upgrades].sort(byPort), expected, 'UpgradeRequest remoteAddress/remotePort');
});

test('open fires for an adopted socket before the client sends anything (the server speaks first)', { timeout: 20000 }, async (t) => {
  const s = scope(t);
  const { server, port } = await startHttp(t);
  const opens = [];
  const app = echoApp(s, (ws) => { opens.push(ws.getRemotePort()); ws.send('welcome'); });
  app.attach(server);
  const c = await s.ws(`ws://127.0.0.1:${port}/websocket`);
  let greeting = null;
  try {
    greeting = (await c.next(5000)).text;
  } catch (e) {
    // Show whether the open event was only waiting for client data.
    const opensBefore = opens.length;
    c.ws.send('nudge');
    const late = await c.take(2, 5000).then((m) => m.map((x) => x.text)).catch((e2) => e2.message);
    assert.fail(`no greeting within 5 s (${e.message}): open handler calls so far ${opensBefore}; `
      + `once the client sent one message it received ${JSON.stringify(late)} (open handler calls ${opens.length})`);
  }
  assert.equal(greeting, 'welcome');
  assert.deepEqual(opens, [c.localPort]);
});

// ---- coexistence with other upgrade listeners -----------------------------------------------

function hmrServer(tag) {
  const wss = new WebSocket.Server({ noServer: true });
  wss.on('connection', (ws) => ws.on('message', (d) => ws.send(`${tag}:${d}`)));
  return wss;
}

test('other upgrade listeners: a ws noServer /hmr handler registered BEFORE attach still works; plain HTTP reaches the request handler', { timeout: 20000 }, async (t) => {
  const s = scope(t);
  const { server, port } = await startHttp(t);
  const wss = hmrServer('hmr-before');
  t.after(() => { for (const c of wss.clients) c.terminate(); wss.close(); });
  server.on('upgrade', (req, socket, head) => {
    if (new URL(req.url, 'http://x').pathname === '/hmr') wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    else socket.destroy();
  });
  const app = s.trackApp(App());
  app.ws('/websocket', { idleTimeout: 0, message(ws, data) { ws.send(`app:${data}`); } });
  app.attach(server);
  const hmr = await s.ws(`ws://127.0.0.1:${port}/hmr`);
  const ours = await s.ws(`ws://127.0.0.1:${port}/websocket`);
  hmr.ws.send('x');
  ours.ws.send('y');
  assert.equal((await hmr.next()).text, 'hmr-before:x');
  assert.equal((await ours.next()).text, 'app:y');
  assert.equal(app.stats().connections, 1, 'only /websocket is the app\'s');
  const plain = await httpGet(port, '/some/page?q=1');
  assert.deepEqual(plain, { status: 200, body: 'plain /some/page?q=1' });
});

test('other upgrade listeners: a ws noServer /hmr handler registered AFTER attach works too; plain HTTP reaches the request handler', { timeout: 20000 }, async (t) => {
  const s = scope(t);
  const { server, port } = await startHttp(t);
  const app = s.trackApp(App());
  app.ws('/websocket', { idleTimeout: 0, message(ws, data) { ws.send(`app:${data}`); } });
  app.attach(server);
  const wss = hmrServer('hmr-after');
  wss.handled = 0;
  wss.destroyedBefore = 0;
  t.after(() => { for (const c of wss.clients) c.terminate(); wss.close(); });
  server.on('upgrade', (req, socket, head) => {
    // Like Vite's HMR server: act on its own path only, leave every other upgrade alone.
    if (new URL(req.url, 'http://x').pathname === '/hmr') {
      wss.handled++;
      if (socket.destroyed) wss.destroyedBefore++;
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    }
  });
  const ours = await s.ws(`ws://127.0.0.1:${port}/websocket`);
  ours.ws.send('y');
  assert.equal((await ours.next()).text, 'app:y');
  let hmr;
  try {
    hmr = await s.ws(`ws://127.0.0.1:${port}/hmr`);
  } catch (e) {
    assert.fail(`/hmr upgrade through a listener registered after attach() failed: ${e.message} `
      + `(handleUpgrade calls: ${wss.handled}, socket destroyed before it: ${wss.destroyedBefore})`);
  }
  hmr.ws.send('x');
  assert.equal((await hmr.next()).text, 'hmr-after:x');
  ours.ws.send('z');
  assert.equal((await ours.next()).text, 'app:z');
  const plain = await httpGet(port, '/other');
  assert.deepEqual(plain, { status: 200, body: 'plain /other' });
});

// ---- https: the internal loopback listener ---------------------------------------------------

test('https fallback: wss echo (text + 1 MiB binary) through attach(https.Server); real peer address via the preamble; the internal listener opens lazily', { timeout: 60000 }, async (t) => {
  const cert = await selfSignedCert();
  if (!cert) return t.skip(NO_OPENSSL);
  const s = scope(t);
  const { keyFile, certFile } = cert;
  const { child, port } = await startChild(s, { MODE: 'https', KEY_FILE: keyFile, CERT_FILE: certFile, REPORT_OPENS: '1' }, 55000);
  let l = listeningSockets(child.pid);
  assert.deepEqual(l.map((x) => x.port), [port], `before the first TLS upgrade: ${describeListeners(l)}`);
  // An ordinary HTTPS request does not open it either.
  const page = await deadline(new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/index', rejectUnauthorized: false, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
  }), 10000, 'https GET');
  assert.deepEqual(page, { status: 200, body: 'plain /index' });
  l = listeningSockets(child.pid);
  assert.deepEqual(l.map((x) => x.port), [port], `after a plain HTTPS request: ${describeListeners(l)}`);
  const c = await s.ws(`wss://127.0.0.1:${port}/websocket`, { rejectUnauthorized: false });
  assert.ok(c.localPort > 0);
  const open = await child.waitMessage((m) => m.type === 'open', 10000, 'open in the child');
  assert.equal(open.address, '127.0.0.1', 'getRemoteAddressAsText()');
  assert.equal(open.port, c.localPort, `getRemotePort() must be the client's local port ${c.localPort}, not the loopback hop's`);
  assert.equal(open.url, '/websocket');
  c.ws.send('hello over tls');
  const m1 = await c.next(10000);
  assert.equal(m1.isBinary, false);
  assert.equal(m1.text, 'hello over tls');
  const big = crypto.randomBytes(MiB);
  c.ws.send(big);
  const m2 = await c.next(20000);
  assert.equal(m2.isBinary, true);
  assert.equal(m2.data.length, MiB);
  assert.ok(Buffer.from(m2.data).equals(big), '1 MiB binary echo intact');
  l = listeningSockets(child.pid);
  assert.equal(l.length, 2, `after the first TLS upgrade: ${describeListeners(l)}`);
  const internal = l.find((x) => x.port !== port);
  assert.ok(internal, 'a second listening socket');
  assert.equal(internal.family, 4);
  assert.equal(internal.addressHex, '0100007F', 'the internal listener binds 127.0.0.1');
  // A second TLS client does not open a third one.
  const c2 = await s.ws(`wss://127.0.0.1:${port}/websocket`, { rejectUnauthorized: false });
  c2.ws.send('second');
  assert.equal((await c2.next(10000)).text, 'second');
  assert.equal(listeningSockets(child.pid).length, 2);
  const open2 = await child.waitMessage((m) => m.type === 'open' && m.port === c2.localPort, 10000, 'second open');
  assert.equal(open2.address, '127.0.0.1');
});

/** Send `text` on a raw TCP connection; collect whatever comes back until the peer closes. */
async function rawExchange(port, text, timeout = 13000) {
  const socket = await connectSocket(port);
  let got = '';
  socket.on('data', (d) => { got += d.toString('latin1'); });
  socket.on('error', () => {});
  const closed = new Promise((resolve) => socket.once('close', () => resolve(true)));
  socket.write(text);
  const wasClosed = await deadline(closed, timeout, 'internal listener closing the connection').catch(() => false);
  socket.destroy();
  return { got, closed: wasClosed };
}

test('the internal listener refuses connections without the secret preamble (no upgrade)', { timeout: 60000 }, async (t) => {
  const cert = await selfSignedCert();
  if (!cert) return t.skip(NO_OPENSSL);
  const s = scope(t);
  const { keyFile, certFile } = cert;
  const { child, port } = await startChild(s, { MODE: 'https', KEY_FILE: keyFile, CERT_FILE: certFile, REPORT_OPENS: '1' }, 55000);
  const c = await s.ws(`wss://127.0.0.1:${port}/websocket`, { rejectUnauthorized: false });
  c.ws.send('x');
  assert.equal((await c.next(10000)).text, 'x');
  const l = listeningSockets(child.pid);
  const internal = l.find((x) => x.port !== port && x.addressHex === '0100007F');
  assert.ok(internal, `internal listener not found: ${describeListeners(l)}`);
  const key = () => crypto.randomBytes(16).toString('base64');
  const plainUpgrade = upgradeRequestText({ path: '/websocket', key: key() });
  const forged = `PEER ${'0'.repeat(32)} 10.9.8.7 4242\r\n${upgradeRequestText({ path: '/websocket', key: key() })}`;
  const forgedNoSecret = `PEER 10.9.8.7 4242\r\n${upgradeRequestText({ path: '/websocket', key: key() })}`;
  const results = await Promise.all([plainUpgrade, forged, forgedNoSecret].map((text) => rawExchange(internal.port, text)));
  for (const [i, r] of results.entries()) {
    const name = ['plain upgrade', 'preamble with a wrong secret', 'preamble without a secret'][i];
    assert.ok(!/^HTTP\/1\.[01] 101/.test(r.got), `${name}: must not be upgraded; got ${JSON.stringify(r.got.slice(0, 120))}`);
    assert.ok(r.closed, `${name}: the internal listener must close the connection (got ${JSON.stringify(r.got.slice(0, 120))})`);
  }
  const st = await child.request({ cmd: 'stats' });
  assert.equal(st.opens, 1, 'only the real TLS client was opened');
  assert.deepEqual(child.messages.filter((m) => m.type === 'open').map((m) => m.address), ['127.0.0.1']);
  // The real path still works afterwards.
  const c2 = await s.ws(`wss://127.0.0.1:${port}/websocket`, { rejectUnauthorized: false });
  c2.ws.send('still');
  assert.equal((await c2.next(10000)).text, 'still');
  c.ws.send('x2');
  assert.equal((await c.next(10000)).text, 'x2');
});

// ---- two apps, two servers ------------------------------------------------------------------

test('two apps in one process, each attached to its own http.Server: no cross-talk, no extra listening socket', { timeout: 20000 }, async (t) => {
  const s = scope(t);
  const mk = async (tag) => {
    const { server, port } = await startHttp(t);
    const sockets = [];
    const closes = [];
    const app = s.trackApp(App());
    app.ws('/websocket', {
      idleTimeout: 0,
      open(ws) { sockets.push(ws); },
      message(ws, data) { ws.send(`${tag}:${data}`); },
      close(ws, code) { closes.push(code); },
    });
    app.attach(server);
    return { tag, app, server, port, sockets, closes };
  };
  const a = await mk('A');
  const b = await mk('B');
  assert.notEqual(a.port, b.port);
  const ca = [await s.ws(`ws://127.0.0.1:${a.port}/websocket`), await s.ws(`ws://127.0.0.1:${a.port}/websocket`)];
  const cb = [await s.ws(`ws://127.0.0.1:${b.port}/websocket`), await s.ws(`ws://127.0.0.1:${b.port}/websocket`)];
  for (const [i, c] of [...ca, ...cb].entries()) c.ws.send(`m${i}`);
  assert.deepEqual([(await ca[0].next()).text, (await ca[1].next()).text], ['A:m0', 'A:m1']);
  assert.deepEqual([(await cb[0].next()).text, (await cb[1].next()).text], ['B:m2', 'B:m3']);
  await waitFor(() => a.sockets.length === 2 && b.sockets.length === 2, { label: 'opens' });
  // A broadcast from app A reaches A's clients only.
  for (const ws of a.sockets) ws.send('only-A');
  assert.equal((await ca[0].next()).text, 'only-A');
  assert.equal((await ca[1].next()).text, 'only-A');
  cb[0].ws.send('ping-b');
  assert.equal((await cb[0].next()).text, 'B:ping-b', 'B sees nothing from A\'s broadcast');
  assert.equal(cb[1].queue.length, 0);
  assert.equal(a.app.stats().connections, 2);
  assert.equal(b.app.stats().connections, 2);
  assert.equal(a.app.stats().messagesIn, 2);
  assert.equal(b.app.stats().messagesIn, 3);
  // Closing A's clients leaves B's alone.
  for (const c of ca) c.close(1000);
  await waitFor(() => a.closes.length === 2, { label: 'A closes' });
  assert.deepEqual(b.closes, []);
  cb[1].ws.send('still');
  assert.equal((await cb[1].next()).text, 'B:still');
  assert.equal(b.app.stats().connections, 2);
  const ports = listeningSockets(process.pid).map((x) => x.port);
  for (const p of [a.port, b.port]) assert.ok(ports.includes(p));
  assert.equal(ports.filter((p) => p !== a.port && p !== b.port).length, 0, `unexpected listening ports ${ports}`);
});

// ---- the pipe path (Windows; DDP_TRANSPORT_NATIVE_SAME_PORT=pipe) -----------------------------

/** Run `fn` with DDP_TRANSPORT_NATIVE_SAME_PORT set to `value` (restored after). */
async function withSamePort(value, fn) {
  const saved = process.env.DDP_TRANSPORT_NATIVE_SAME_PORT;
  process.env.DDP_TRANSPORT_NATIVE_SAME_PORT = value;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.DDP_TRANSPORT_NATIVE_SAME_PORT;
    else process.env.DDP_TRANSPORT_NATIVE_SAME_PORT = saved;
  }
}

test('the pipe path (Windows\' only path; DDP_TRANSPORT_NATIVE_SAME_PORT=pipe elsewhere): echo of text and 1 MiB binary, the real peer address, and server.close() closes the app and its clients at once', { timeout: 30000 }, async (t) => {
  const s = scope(t);
  const { server, port } = await startHttp(t);
  const opens = [];
  const app = echoApp(s, (ws) => { opens.push({ address: ws.getRemoteAddressAsText(), port: ws.getRemotePort() }); });
  await withSamePort('pipe', () => app.attach(server));
  const c = await s.ws(`ws://127.0.0.1:${port}/websocket`);
  c.ws.send('piped');
  assert.equal((await c.next()).text, 'piped');
  const big = crypto.randomBytes(MiB);
  c.ws.send(big);
  const m = await c.next(20000);
  assert.equal(m.isBinary, true);
  assert.ok(Buffer.from(m.data).equals(big), '1 MiB binary echo intact');
  assert.notEqual(app._internal, null, 'the upgrade went through the internal listener');
  assert.deepEqual(opens, [{ address: '127.0.0.1', port: c.localPort }], 'the client\'s address, not the loopback hop\'s');
  // The piped socket is still open in Node; the server's 'close' waits for it, the app must not.
  const serverClosed = new Promise((resolve) => server.close(resolve));
  const { code } = await c.waitClose(5000);
  assert.equal(code, 1001);
  await deadline(serverClosed, 5000, 'the server\'s close once the client is gone');
});

test('DDP_TRANSPORT_NATIVE_SAME_PORT with another value than fd, upgrade or pipe: attach throws naming it, nothing attached', { timeout: 10000 }, async (t) => {
  const s = scope(t);
  const { server } = await startHttp(t);
  const app = s.trackApp(App());
  app.ws('/websocket', {});
  await withSamePort('dup', () => {
    assert.throws(() => app.attach(server), /DDP_TRANSPORT_NATIVE_SAME_PORT must be "fd" .*, "upgrade" .* or "pipe" .*, got "dup"/);
  });
  assert.equal(server.listenerCount('upgrade'), 0);
  await withSamePort('fd', () => app.attach(server));
  assert.equal(server.listenerCount('upgrade'), 1);
});
