'use strict';
// Same-port adoption when the app's http.Server listens on a unix socket path (Meteor's
// UNIX_SOCKET_PATH, common behind nginx or Passenger): upgrades are adopted as unix stream
// sockets, echo works with and without permessage-deflate, the peer has no address (undefined,
// as Node reports it, so Meteor falls back to X-Forwarded-For), and DDP runs over the Meteor
// adapter. Also the TLS route (https.Server on a path → the internal loopback listener).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const tls = require('node:tls');
const { execFileSync } = require('node:child_process');
const WebSocket = require('ws');
const { App } = require('..');
const { createNativeTransport } = require('../meteor');
const { DdpServer } = require('../demo/ddp-session');
const { deadline, waitFor } = require('./helpers/common');

const T = { timeout: 20000 };

function socketPath(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-unix-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'app.sock');
}

function listenOn(server, file) {
  return deadline(new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, resolve);
  }), 5000, `listen ${file}`);
}

function open(url, options) {
  const ws = new WebSocket(url, options);
  const messages = [];
  ws.on('message', (data, isBinary) => messages.push(isBinary ? data : data.toString()));
  return deadline(new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages }));
    ws.once('error', reject);
  }), 5000, `open ${url}`);
}

function closed(ws) {
  return deadline(new Promise((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) return resolve();
    ws.once('close', (code) => resolve(code));
  }), 5000, 'close');
}

function echoApp() {
  const seen = [];
  const app = App().ws('/ws', {
    compression: true,
    open(ws) {
      seen.push({ address: ws.getRemoteAddressAsText(), port: ws.getRemotePort(), xff: ws.getHeaders()['x-forwarded-for'] });
    },
    message(ws, data, isBinary) {
      ws.send(data, isBinary);
    },
  });
  return { app, seen };
}

test('attach on an http.Server listening on a unix socket: echo text, binary and a compressed message', T, async (t) => {
  const file = socketPath(t);
  const { app, seen } = echoApp();
  // Node's view of a client of the socket: an HTTP request's socket.remoteAddress. The upgrade
  // itself never reaches Node's HTTP layer (the core looks at each new connection first).
  const server = http.createServer((req, res) => res.end(String(req.socket.remoteAddress)));
  let nodeConnections = 0;
  server.on('connection', () => nodeConnections++);
  app.attach(server);
  await listenOn(server, file);
  t.after(() => { app.close(); server.close(); });
  const nodeView = await new Promise((resolve, reject) => {
    http.get({ socketPath: file, path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });

  const { ws, messages } = await open(`ws+unix://${file}:/ws`, {
    perMessageDeflate: { threshold: 0 },
    headers: { 'X-Forwarded-For': '203.0.113.7' },
  });
  assert.match(ws.extensions, /permessage-deflate/, 'deflate negotiated over the unix socket');
  const big = 'x'.repeat(64 * 1024);
  ws.send('hello');
  ws.send(Buffer.from([1, 2, 3]));
  ws.send(big);
  await waitFor(() => messages.length === 3, { timeout: 5000, label: 'three echoes' });
  assert.equal(messages[0], 'hello');
  assert.deepEqual([...messages[1]], [1, 2, 3]);
  assert.equal(messages[2], big);
  assert.equal(nodeView, 'undefined', "Node's own view: no peer address on a unix socket");
  assert.equal(nodeConnections, 1, 'the upgrade was taken before Node\'s HTTP layer (the GET is Node\'s only connection)');
  assert.deepEqual(seen, [{ address: undefined, port: undefined, xff: '203.0.113.7' }]);
  ws.close(1000);
  assert.equal(await closed(ws), 1000);
  await waitFor(() => app.stats().connections === 0, { label: 'connection closed' });
  assert.equal(app.stats().upgradesAccepted, 1);
});

test('the Meteor adapter on UNIX_SOCKET_PATH: DDP connect and a method call over native', T, async (t) => {
  const file = socketPath(t);
  const server = http.createServer((req, res) => res.end('app'));
  const events = createNativeTransport({ settings: {} }).setup(server, '', {});
  const ddp = new DdpServer();
  const sockets = [];
  events.on('connection', (socket) => {
    sockets.push(socket);
    ddp.handle(socket);
  });
  await listenOn(server, file);
  t.after(() => server.close());

  const { ws, messages } = await open(`ws+unix://${file}:/websocket`, { headers: { 'X-Forwarded-For': '198.51.100.4' } });
  ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
  await waitFor(() => messages.some((m) => JSON.parse(m).msg === 'connected'), { timeout: 5000, label: 'connected' });
  ws.send(JSON.stringify({ msg: 'method', id: '1', method: 'echo', params: ['over a unix socket'] }));
  const result = await waitFor(() => messages.map((m) => JSON.parse(m)).find((m) => m.msg === 'result'), { timeout: 5000, label: 'result' });
  assert.deepEqual(result, { msg: 'result', id: '1', result: 'over a unix socket' });
  assert.equal(sockets.length, 1);
  assert.equal(sockets[0].remoteAddress, undefined);
  assert.equal(sockets[0].headers['x-forwarded-for'], '198.51.100.4', 'Meteor falls back to X-Forwarded-For');
  ws.close(1000);
  await closed(ws);
});

test('https.Server on a unix socket: the upgrade goes through the internal listener, peer without address', T, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-unix-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-days', '1',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
  } catch (e) {
    if (e.code === 'ENOENT') return t.skip('openssl not installed: apt-get install -y openssl');
    throw e;
  }
  const file = path.join(dir, 'app.sock');
  const { app, seen } = echoApp();
  const server = https.createServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) });
  app.attach(server);
  await listenOn(server, file);
  t.after(() => { app.close(); server.close(); });
  // The ws client has no wss+unix: URLs; give it a TLS connection over the socket path.
  const { ws, messages } = await open('wss://localhost/ws', {
    createConnection: () => tls.connect({ path: file, servername: 'localhost', rejectUnauthorized: false }),
  });
  ws.send('secure');
  await waitFor(() => messages.length === 1, { timeout: 5000, label: 'echo' });
  assert.equal(messages[0], 'secure');
  assert.equal(seen[0].address, undefined);
  ws.close(1000);
  await closed(ws);
});
