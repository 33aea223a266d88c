'use strict';
// A child process that connects many DDP-speaking WebSocket clients to one server, a few hundred
// at a time, as clients reconnecting after a deploy do: TCP connect, upgrade, wait for the 101,
// send DDP `connect`, wait for `connected`. Keeps every socket open until all are connected, then
// prints one JSON line: { connected, refused, failed, seconds } and closes them.
//   node connect-many.js <port> <path> <clients> <concurrency> <timeout ms>

const net = require('node:net');
const { upgradeRequestText, textFrame } = require('./raw');

const [port, urlPath, clients, concurrency, timeoutMs] = process.argv.slice(2);
const N = Number(clients);
const C = Number(concurrency);
const CONNECT = textFrame(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
const REQUEST = upgradeRequestText({ path: urlPath, key: 'dGhlIHNhbXBsZSBub25jZQ==' });

const open = [];
let started = 0;
let done = 0;
let connected = 0;
let refused = 0;
let failed = 0;
const t0 = performance.now();

function finish() {
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`${JSON.stringify({ connected, refused, failed, seconds })}\n`);
  for (const s of open) s.destroy();
  process.exit(0);
}

function settle(outcome) {
  if (outcome === 'connected') connected++;
  else if (outcome === 'refused') refused++;
  else failed++;
  done++;
  if (done === N) finish();
  else if (started < N) one();
}

function one() {
  started++;
  const s = net.connect(Number(port), '127.0.0.1');
  let buf = Buffer.alloc(0);
  let upgraded = false;
  let over = false;
  const end = (outcome) => { if (!over) { over = true; settle(outcome); } };
  s.setNoDelay(true);
  s.on('connect', () => s.write(REQUEST));
  s.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (!upgraded) {
      const i = buf.indexOf('\r\n\r\n');
      if (i < 0) return;
      const status = buf.subarray(0, 12).toString('latin1');
      if (!status.startsWith('HTTP/1.1 101')) { end(status.includes(' 503') ? 'refused' : 'failed'); s.destroy(); return; }
      upgraded = true;
      buf = buf.subarray(i + 4);
      s.write(CONNECT);
    }
    if (buf.includes('"connected"')) { open.push(s); end('connected'); }
  });
  s.on('error', () => end('failed'));
  s.on('close', () => end('failed'));
}

setTimeout(finish, Number(timeoutMs)).unref();
for (let i = 0; i < Math.min(C, N); i++) one();
