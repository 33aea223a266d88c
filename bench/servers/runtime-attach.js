'use strict';
// The same-port server of bench/runtimes.js, runnable unchanged under Node, Bun and Deno (Deno:
// `deno run -A --unstable-detect-cjs`): App().ws('/websocket').attach(http.Server) on 127.0.0.1,
// its handlers calling the demo's DDP session directly (as native-raw.js does on the own
// listener), no compression. Under Node the upgrade's fd is adopted unless
// DDP_TRANSPORT_NATIVE_SAME_PORT=pipe; under Bun and Deno every upgrade takes the pipe path
// (docs/runtimes.md). It does not use ./common.js: that reads Node-only APIs
// (performance.eventLoopUtilization, node:cluster workers).
//
//   <runtime> bench/servers/runtime-attach.js [--port P] [--own]
// prints `READY <port>`, then `PATH fd|pipe|own` after the first upgrade it served, and exits when
// its stdin ends or on SIGTERM/SIGINT. --own: the same app on its own listener
// (App().listen('127.0.0.1', P)) instead of attach(): no same-port path at all, for comparison.

const http = require('node:http');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const { App } = require(ROOT);
const { DdpServer } = require(path.join(ROOT, 'demo', 'ddp-session'));

const i = process.argv.indexOf('--port');
const port = i >= 0 ? Number(process.argv[i + 1]) : 0;
const OWN = process.argv.includes('--own');

const ddp = new DdpServer();
const SESSION = Symbol('session');
const server = http.createServer((req, res) => {
  res.writeHead(404, { 'Content-Type': 'text/plain' });
  res.end('not found');
});
let reported = false;
const app = App();
app.ws('/websocket', {
  compression: false,
  idleTimeout: 0,
  open(ws) {
    ws.getUserData()[SESSION] = ddp.open((str) => ws.send(str), () => ws.end(1000));
    if (!reported) {
      reported = true;
      // lib/attach.js opens the internal loopback listener (app._internal) on the first piped upgrade.
      process.stdout.write(`PATH ${OWN ? 'own' : app._internal ? 'pipe' : 'fd'}\n`);
    }
  },
  message(ws, data, isBinary) {
    if (!isBinary) ws.getUserData()[SESSION].receive(data);
  },
  close(ws) {
    const session = ws.getUserData()[SESSION];
    if (session) session.closed();
  },
});
if (!OWN) app.attach(server);

let exiting = false;
function bye() {
  if (exiting) return;
  exiting = true;
  if (OWN) app.close();
  else server.close();
  process.exit(0);
}
process.on('SIGTERM', bye);
process.on('SIGINT', bye);
process.stdin.on('end', bye);
process.stdin.on('error', bye);
process.stdin.resume();

if (OWN) {
  app.listen('127.0.0.1', port, (token) => {
    if (!token) { console.error('listen failed'); process.exit(2); }
    process.stdout.write(`READY ${token.port}\n`);
  });
} else {
  server.listen(port, '127.0.0.1', () => process.stdout.write(`READY ${server.address().port}\n`));
}
