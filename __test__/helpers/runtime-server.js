'use strict';
// Child-process server for runtimes.test.js, written to run unchanged under Node, Bun and Deno
// (CommonJS; Deno runs it with --unstable-detect-cjs, docs/runtimes.md). It loads the package by
// its name, as a program that installed it would (the repository's package.json makes that name
// resolve to the checkout), and serves on 127.0.0.1, port 0:
//   own     App().ws('/echo', compression on).listen(): echo; records the JS type of each message
//   pubsub  require('ddp-transport-native/uws').App(): '/pubsub' subscribes each socket to 'news'
//           and answers 'subscribed'; each message is published to 'news' (the sender included)
//   same    App().ws('/websocket', compression on).attach(http.Server): echo; each open reports
//           the peer address and port it sees; any other HTTP request → 200 "plain <url>"
//   last    App().ws('/websocket').attach(another http.Server): echo; never drained, so its
//           clients are still connected when `close` comes
// One JSON object per stdout line. Commands, one JSON object per stdin line:
//   {cmd:'stats', id}  → {id, runtime, own and same (their stats()), kinds, opens, closes, peers,
//                        samePort}
//   {cmd:'drain', id}  → drain() of own and same (close code 1001), then {id, type:'drained'}
//   {cmd:'close', id}  → {id, type:'closing'}, then every app and the http server closed and
//                        stdin released: the process must then exit by itself, with code 0.
// `samePort` says how attach() served the upgrades: 'fd' (the socket's fd handed to the core),
// 'pipe' (bytes piped to the core's internal loopback listener: `app._internal`, the listener
// lib/attach.js opens on the first piped upgrade, is set) or 'none' (no upgrade yet), and what
// the runtime's node:http socket offered: its `_handle` and the type of `_handle.fd`.

const http = require('node:http');
const readline = require('node:readline');

const { App } = require('ddp-transport-native');
const uWS = require('ddp-transport-native/uws');

const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

function runtime() {
  if (typeof Bun !== 'undefined') return { name: 'bun', version: Bun.version }; // eslint-disable-line no-undef
  if (typeof Deno !== 'undefined') return { name: 'deno', version: Deno.version.deno }; // eslint-disable-line no-undef
  return { name: 'node', version: process.versions.node };
}

const kinds = { string: 0, buffer: 0, other: 0 };
function echo(ws, data, isBinary) {
  if (typeof data === 'string' && !isBinary) kinds.string++;
  else if (Buffer.isBuffer(data) && isBinary) kinds.buffer++;
  else kinds.other++;
  ws.send(data, isBinary);
}

// ---- own listener -------------------------------------------------------------------------------
const own = App();
own.ws('/echo', { compression: true, idleTimeout: 0, message: echo });

// ---- /uws surface: publish/subscribe -------------------------------------------------------------
const pubsub = uWS.App();
pubsub.ws('/pubsub', {
  compression: uWS.SHARED_COMPRESSOR,
  maxPayloadLength: 1024 * 1024,
  maxBackpressure: 16 * 1024 * 1024, // uWS's default (64 KiB) would drop what follows a 96 KiB message
  idleTimeout: 0,
  open(ws) {
    ws.subscribe('news');
    ws.send('subscribed');
  },
  message(ws, message, isBinary) {
    pubsub.publish('news', message, isBinary, true);
  },
});

// ---- same port: attach() to a node:http server ---------------------------------------------------
let opens = 0;
let closes = 0;
const peers = [];
const same = App();
same.ws('/websocket', {
  compression: true,
  idleTimeout: 0,
  open(ws) {
    opens++;
    if (peers.length < 100) peers.push({ address: ws.getRemoteAddressAsText(), port: ws.getRemotePort() });
  },
  message: echo,
  close() { closes++; },
});
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(`plain ${req.url}`);
});
same.attach(server);
// What attach() looks at on an upgrade (lib/attach.js takeOver): `socket._handle.fd`. Only observed
// here, by a listener put in front of attach()'s (it answers no upgrade itself).
// Under Node the core takes each upgrade at its first look at the connection (lib/first-look.js):
// no upgrade event then.
let socketShape = null;
let upgradeEvents = 0;
server.prependListener('upgrade', (req, socket) => {
  upgradeEvents++;
  if (socketShape !== null) return;
  const h = socket._handle;
  const none = h === undefined || h === null;
  socketShape = {
    handle: none ? String(h) : (h.constructor && h.constructor.name) || 'object without a constructor',
    fd: none ? 'n/a' : (typeof h.fd === 'number' ? 'number' : String(h.fd)),
  };
});

// A second attached server, never drained: its clients are still connected when `close` comes.
const last = App();
last.ws('/websocket', { idleTimeout: 0, message: (ws, data, isBinary) => ws.send(data, isBinary) });
const lastServer = http.createServer((req, res) => res.end('last'));
last.attach(lastServer);

function samePort() {
  const accepted = same.stats() ? same.stats().upgradesAccepted : 0;
  let path = 'none';
  if (accepted > 0) path = same._internal !== null && same._internal !== undefined ? 'pipe' : 'fd';
  return { path, socket: socketShape, upgradeEvents, internalPort: same._internal ? same._internal.port : null };
}

// ---- start ----------------------------------------------------------------------------------------
const ports = {};
function ready() {
  if (ports.own && ports.pubsub && ports.http && ports.last) out({ type: 'listening', pid: process.pid, runtime: runtime(), ports, ioMode: own.ioMode });
}
own.listen('127.0.0.1', 0, (token) => {
  if (!token) { out({ type: 'error', what: 'own listen' }); process.exit(2); }
  ports.own = token.port;
  ready();
});
let pubsubToken = null;
pubsub.listen('127.0.0.1', 0, (token) => {
  if (!token) { out({ type: 'error', what: 'pubsub listen' }); process.exit(2); }
  pubsubToken = token;
  ports.pubsub = uWS.us_socket_local_port(token);
  ready();
});
server.listen(0, '127.0.0.1', () => {
  ports.http = server.address().port;
  ready();
});
lastServer.listen(0, '127.0.0.1', () => {
  ports.last = lastServer.address().port;
  ready();
});

process.on('exit', (code) => out({ type: 'exit', code }));

// ---- commands -------------------------------------------------------------------------------------
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.cmd === 'stats') {
    out({ id: m.id, runtime: runtime(), own: own.stats(), same: same.stats(), kinds, opens, closes, peers, samePort: samePort() });
  } else if (m.cmd === 'drain') {
    Promise.all([own.drain({ intervalMs: 10 }), same.drain({ intervalMs: 10 })]).then(() => out({ id: m.id, type: 'drained' }));
  } else if (m.cmd === 'close') {
    out({ id: m.id, type: 'closing' });
    if (pubsubToken) uWS.us_listen_socket_close(pubsubToken);
    pubsub.close();
    own.close();
    server.close(); // closes `same` too (attach)
    lastServer.close(); // and `last`, with its clients still connected
    rl.close();
    process.stdin.destroy();
    // Nothing else holds the event loop: the process exits by itself. If something does, a
    // non-zero code after 5 s says so (unref'd: it never keeps the process alive).
    setTimeout(() => { out({ type: 'still-alive' }); process.exit(3); }, 5000).unref();
  }
});
