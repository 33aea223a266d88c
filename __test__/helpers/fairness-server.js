'use strict';
// A saturated echo server with two probes of the Node event loop (issue #20, fairness):
//  - a 10 ms setInterval whose lateness (actual gap − 10 ms) is recorded per tick;
//  - a plain HTTP server: on the WebSocket port itself in `meteor` mode (the Meteor adapter
//    attached to a Node http.Server), on a second port of the same process in `listen` mode (the
//    own listener answers no HTTP; the probe then measures how long Node's I/O callbacks wait).
// Every message costs WORK_US of synchronous JS before it is echoed (a Meteor method stand-in), so
// that the load generator can offer more messages than one core serves. With `defer` 1 that work
// and the echo run in a promise job instead (as Meteor 3's async method handlers do): Node runs
// those jobs after the bridge's call returns, still inside the same wakeup.
//
//   node fairness-server.js <listen|meteor> <compress 0|1> <workUs> [defer 0|1]
// env DTN_PKG: the package to load (default: this checkout). Prints `READY <wsPort> <httpPort>`;
// on stdin `report` prints one JSON line of the probe since the last report and resets it.

const http = require('node:http');
const path = require('node:path');

const [mode = 'listen', compressArg = '0', workArg = '50', deferArg = '0'] = process.argv.slice(2);
const PKG = process.env.DTN_PKG || path.resolve(__dirname, '..', '..');
const COMPRESS = compressArg === '1';
const WORK_MS = Number(workArg) / 1000;
const resolved = Promise.resolve();
/** Run `fn` now, or (defer) in a promise job. */
const handle = deferArg === '1' ? (fn) => { resolved.then(fn); } : (fn) => fn();
const METEOR_DEFLATE = { threshold: 1024, level: 1, memLevel: 1, noContextTakeover: true, maxWindowBits: 8 };

function work() {
  const end = performance.now() + WORK_MS;
  while (performance.now() < end);
}

let handled = 0;
const httpServer = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain' });
  res.end('ok');
});

// Probe: lateness of a 10 ms interval.
const INTERVAL = 10;
let late = [];
let elu = performance.eventLoopUtilization();
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  late.push(Math.max(0, now - last - INTERVAL));
  last = now;
}, INTERVAL);

function stats(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0);
  return { n: s.length, p50: q(0.5), p99: q(0.99), max: s.length ? s[s.length - 1] : 0 };
}

process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  for (const line of d.split('\n')) {
    if (line.trim() === 'report') {
      // utilization: the share of the window the event loop was busy (1 = saturated)
      const utilization = performance.eventLoopUtilization(elu).utilization;
      process.stdout.write(JSON.stringify({ type: 'report', lateness: stats(late), handled, utilization }) + '\n');
      elu = performance.eventLoopUtilization();
      late = [];
      handled = 0;
    }
  }
});
process.stdin.on('end', () => process.exit(0));

function ready(wsPort, httpPort) {
  process.stdout.write(`READY ${wsPort} ${httpPort}\n`);
}

if (mode === 'listen') {
  const { App } = require(PKG);
  const app = App({ threads: 1 });
  app.ws('/*', {
    compression: COMPRESS ? { ...METEOR_DEFLATE } : false,
    idleTimeout: 0,
    message(ws, data, isBinary) {
      handle(() => {
        handled++;
        work();
        ws.send(data, isBinary);
      });
    },
  });
  app.listen('127.0.0.1', 0, (token) => {
    if (!token) process.exit(1);
    httpServer.listen(0, '127.0.0.1', () => ready(token.port, httpServer.address().port));
  });
} else if (mode === 'meteor') {
  if (COMPRESS) delete process.env.SERVER_WEBSOCKET_COMPRESSION;
  else process.env.SERVER_WEBSOCKET_COMPRESSION = 'false';
  const { createNativeTransport } = require(path.join(PKG, 'meteor'));
  // As Meteor calls it: no extensions → no compression; otherwise SERVER_WEBSOCKET_COMPRESSION (unset: defaults).
  const events = createNativeTransport({ settings: {} }).setup(httpServer, '', COMPRESS ? {} : { websocketExtensions: () => [] });
  events.on('connection', (socket) => {
    socket.on('data', (d) => {
      handle(() => {
        handled++;
        work();
        socket.send(d);
      });
    });
  });
  httpServer.listen(0, '127.0.0.1', () => ready(httpServer.address().port, httpServer.address().port));
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
