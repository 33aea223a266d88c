'use strict';
// The smoke test scripts/test-dist.js runs in a clean directory where `npm install
// ddp-transport-native ws` has just installed the packages from a local registry:
//   1. the core API: an App echoing over a `ws` client with permessage-deflate: a text message,
//      a binary one, and a large compressible one (compressed both ways, checked in app.stats());
//   2. the Meteor adapter: createNativeTransport().setup(httpServer, '', {}) on an http.Server,
//      a minimal DDP session answering {"msg":"connect"} with {"msg":"connected"}, a plain GET
//      on the same port answered by the server's handler, and (Unix) the upgrade taken before
//      Node's HTTP layer saw the connection.
// Prints one line starting with "SMOKE OK" and exits 0, or prints the failure and exits 1.
// Bounded: the whole run is killed after 30 s.

const assert = require('node:assert');
const http = require('node:http');
const WebSocket = require('ws');
const { App } = require('ddp-transport-native');
const { createNativeTransport } = require('ddp-transport-native/meteor');

const deadline = setTimeout(() => {
  console.error('SMOKE FAILED: timed out after 30 s');
  process.exit(1);
}, 30_000);

function nextMessage(ws) {
  return new Promise((resolve, reject) => {
    ws.once('message', (data, isBinary) => resolve({ data, isBinary }));
    ws.once('error', reject);
  });
}

function opened(ws) {
  return new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
}

async function coreEcho() {
  const app = App({ threads: 1 });
  app.ws('/*', {
    compression: { threshold: 64 },
    message: (ws, data, isBinary) => ws.send(data, isBinary),
  });
  const port = await new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (token, err) => (token ? resolve(token.port) : reject(err || new Error('listen failed'))));
  });
  const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, { perMessageDeflate: { threshold: 64 } });
  await opened(ws);
  assert.match(ws.extensions, /permessage-deflate/, 'permessage-deflate negotiated');

  ws.send('hello, native');
  let m = await nextMessage(ws);
  assert.equal(m.isBinary, false);
  assert.equal(m.data.toString(), 'hello, native');

  const bytes = Buffer.from([0, 1, 2, 253, 254, 255]);
  ws.send(bytes);
  m = await nextMessage(ws);
  assert.equal(m.isBinary, true);
  assert.deepEqual(Buffer.from(m.data), bytes);

  const big = JSON.stringify({ msg: 'added', collection: 'smoke', fields: { text: 'ddp '.repeat(8192) } });
  ws.send(big);
  m = await nextMessage(ws);
  assert.equal(m.data.toString(), big);
  const s = app.stats();
  assert.ok(s.wireBytesIn < s.bytesIn, `inbound compressed (wire ${s.wireBytesIn} < payload ${s.bytesIn})`);
  assert.ok(s.wireBytesOut < s.bytesOut, `outbound compressed (wire ${s.wireBytesOut} < payload ${s.bytesOut})`);

  ws.close();
  await new Promise((resolve) => ws.once('close', resolve));
  app.close();
  return `echo text+binary+deflate (${big.length} B message → ${s.wireBytesOut} B on the wire out)`;
}

async function meteorConnect() {
  const server = http.createServer((req, res) => {
    res.writeHead(404);
    res.end();
  });
  // Where the core looks first at each new connection (Unix), the WebSocket never reaches Node's
  // HTTP layer: the server's 'connection' event is the plain GET's only.
  let connections = 0;
  server.on('connection', () => connections++);
  const events = createNativeTransport().setup(server, '', {});
  events.on('connection', (socket) => {
    socket.on('data', (raw) => {
      const msg = JSON.parse(raw);
      if (msg.msg === 'connect') socket.send(JSON.stringify({ msg: 'connected', session: `smoke-${socket.id}` }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const ws = new WebSocket(`ws://127.0.0.1:${server.address().port}/websocket`);
  await opened(ws);
  ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
  const m = JSON.parse((await nextMessage(ws)).data.toString());
  assert.equal(m.msg, 'connected');
  assert.equal(typeof m.session, 'string');
  const status = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: server.address().port, path: '/', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    }).on('error', reject);
  });
  assert.equal(status, 404);
  const firstLook = process.platform !== 'win32';
  if (firstLook) assert.equal(connections, 1, 'the upgrade never reached Node\'s HTTP layer');
  ws.close();
  await new Promise((resolve) => ws.once('close', resolve));
  await new Promise((resolve) => server.close(resolve));
  return `Meteor adapter: DDP connect → connected, plain HTTP on the same port → 404${firstLook ? ', the upgrade taken before Node\'s HTTP parser' : ''}`;
}

(async () => {
  const platformPackage = Object.keys(require('ddp-transport-native/package.json').optionalDependencies || {})
    .find((name) => { try { require.resolve(`${name}/package.json`); return true; } catch { return false; } });
  const results = [await coreEcho(), await meteorConnect()];
  clearTimeout(deadline);
  console.log(`SMOKE OK node ${process.version} ${process.arch} (N-API ${process.versions.napi}), binary from ` +
    `${platformPackage || 'no platform package'}: ${results.join('; ')}`);
  process.exit(0);
})().catch((e) => {
  console.error(`SMOKE FAILED: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
