'use strict';
// PROXY protocol test helpers: v1/v2 headers, a raw TCP exchange, and real HAProxy in front of
// our servers (proxy-protocol.test.js: the own listener; proxy-attach.test.js: an attached
// http.Server and the Meteor adapter).

const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { deadline, sleep, waitFor, findExecutable, freePort } = require('./common');

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** A WebSocket upgrade request for `target`. */
function upgradeRequest(target = '/echo') {
  return Buffer.from(
    `GET ${target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
}

const V2_SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

function v1(line) {
  return Buffer.from(`${line}\r\n`);
}

/** A v2 header: version/command, family/protocol, then `rest` (addresses, TLVs). */
function v2(verCmd, famProto, rest) {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(rest.length);
  return Buffer.concat([V2_SIG, Buffer.from([verCmd, famProto]), len, rest]);
}

function v2ipv4(src, sport) {
  const rest = Buffer.alloc(12);
  src.split('.').forEach((p, i) => { rest[i] = Number(p); });
  rest.set([127, 0, 0, 1], 4);
  rest.writeUInt16BE(sport, 8);
  rest.writeUInt16BE(9001, 10);
  return v2(0x21, 0x11, rest);
}

function v2ipv6(srcBytes, sport) {
  const rest = Buffer.alloc(36);
  rest.set(srcBytes, 0);
  rest[31] = 1; // ::1
  rest.writeUInt16BE(sport, 32);
  rest.writeUInt16BE(9001, 34);
  return v2(0x21, 0x21, rest);
}

/** Headers every server with proxyProtocol accepts: [name, header, client address, port]. */
const ACCEPTED = [
  ['v1 TCP4', v1('PROXY TCP4 192.0.2.7 127.0.0.1 56324 9001'), '192.0.2.7', 56324],
  ['v1 TCP6', v1('PROXY TCP6 2001:db8::1 ::1 4000 9001'), '2001:db8::1', 4000],
  ['v2 IPv4', v2ipv4('203.0.113.9', 50000), '203.0.113.9', 50000],
  ['v2 IPv6', v2ipv6([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42], 443), '2001:db8::42', 443],
];

/** Openings every server with proxyProtocol closes at once, unanswered: [name, chunks]. */
function refusedOpenings(request) {
  return [
    ['no header (a plain request)', [request]],
    ['garbage', [Buffer.from('\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 random TLS hello bytes')]],
    ['v1 with a bad address', [v1('PROXY TCP4 192.0.2.700 127.0.0.1 1 2'), request]],
    ['v1 with an unknown protocol', [v1('PROXY UDP4 192.0.2.7 127.0.0.1 1 2'), request]],
    ['v1 too long (no CRLF in 107 bytes)', [Buffer.from(`PROXY TCP4 ${' '.repeat(200)}`)]],
    ['v2 too long (length 65535)', [Buffer.concat([V2_SIG, Buffer.from([0x21, 0x11, 0xff, 0xff])])]],
    ['v2 with version 3', [v2(0x31, 0x11, Buffer.alloc(12)), request]],
    ['v2 with a truncated address block', [v2(0x21, 0x21, Buffer.alloc(12)), request]],
    ['v2 naming a UDP connection', [v2(0x21, 0x12, Buffer.alloc(12)), request]],
  ];
}

/** Openings that never complete a header (closed by the handshake timeout). */
const INCOMPLETE_OPENINGS = [
  [Buffer.from('PROXY TCP4 192.0.2.7 ')],
  [V2_SIG.subarray(0, 7)],
  [v2ipv4('192.0.2.7', 1).subarray(0, 20)],
  [], // connects and sends nothing
];

/** Open a TCP connection, write `chunks` (with `gapMs` between them), and collect what comes
 *  back until the server closes or answers a full HTTP head. */
function exchange(port, chunks, { gapMs = 0, timeout = 5000 } = {}) {
  return deadline(new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      s.destroy();
      const head = got.toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
      resolve({ closed, status: status ? Number(status[1]) : null, bytes: got.length });
    };
    s.on('data', (d) => {
      got = Buffer.concat([got, d]);
      if (got.includes('\r\n\r\n')) finish(false);
    });
    s.on('close', () => finish(true));
    s.on('error', (e) => (e.code === 'ECONNRESET' ? finish(true) : reject(e)));
    s.on('connect', async () => {
      for (const c of chunks) {
        if (done || s.destroyed) return;
        s.write(c);
        if (gapMs) await sleep(gapMs);
      }
    });
  }), timeout, `exchange with :${port}`);
}

function byteByByte(buf) {
  return [...buf].map((b) => Buffer.from([b]));
}

/** haproxy's path, or null (a test then skips with the reason `.ci/run` greps its file for). */
const HAPROXY = findExecutable('haproxy');


/**
 * Run HAProxy (mode tcp) for the test `t` with one frontend per route, `[name, backend port,
 * server option ('send-proxy' / 'send-proxy-v2')]`; stopped when the test ends. Resolves to
 * { front: name → frontend port, output: () => what haproxy printed, running: () => boolean }
 * once every frontend accepts.
 */
async function startHaproxy(t, routes) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-proxy-'));
  const front = {};
  for (const [name] of routes) front[name] = await freePort();
  const conf = [
    'global',
    '  maxconn 100',
    'defaults',
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 20s',
    '  timeout server 20s',
    ...routes.flatMap(([name, port, option]) => [
      `frontend fe_${name}`,
      `  bind 127.0.0.1:${front[name]}`,
      `  default_backend be_${name}`,
      `backend be_${name}`,
      `  server s_${name} 127.0.0.1:${port} ${option}`,
    ]),
    '',
  ].join('\n');
  const confPath = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(confPath, conf);
  const proc = spawn(HAPROXY, ['-db', '-f', confPath], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout.on('data', (d) => { output += d; });
  proc.stderr.on('data', (d) => { output += d; });
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  t.after(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    await deadline(exited, 5000, 'haproxy exit');
    fs.rmSync(dir, { recursive: true, force: true });
  });
  // Wait until every frontend accepts (a probe connection only reaches our server as a
  // connection with a header and nothing more, which the handshake timeout closes).
  for (const [name] of routes) {
    await waitFor(() => new Promise((resolve) => {
      const s = net.connect(front[name], '127.0.0.1');
      s.on('connect', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    }), { timeout: 10_000, label: `haproxy listening on ${front[name]}`, describe: () => output });
  }
  return { front, output: () => output, running: () => proc.exitCode === null && proc.signalCode === null };
}

/**
 * A PROXY header, the upgrade request and one masked text frame "hi" in one write; resolves with
 * the first 4 bytes after the response head (the echoed frame: 0x81 2 'h' 'i').
 */
async function echoBehindHeader(port, header, upgrade) {
  const s = net.connect(port, '127.0.0.1');
  await new Promise((r) => s.on('connect', r));
  const payload = Buffer.from('hi');
  const mask = Buffer.from([1, 2, 3, 4]);
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i % 4])]);
  s.write(Buffer.concat([header, upgrade, frame]));
  try {
    return await deadline(new Promise((resolve) => {
      let buf = Buffer.alloc(0);
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end >= 0 && buf.length >= end + 4 + 4) resolve([...buf.subarray(end + 4, end + 8)]);
      });
    }), 5000, 'echo');
  } finally {
    s.destroy();
  }
}

module.exports = {
  HAPROXY,
  V2_SIG,
  ACCEPTED,
  INCOMPLETE_OPENINGS,
  upgradeRequest,
  v1,
  v2,
  v2ipv4,
  v2ipv6,
  refusedOpenings,
  exchange,
  byteByByte,
  echoBehindHeader,
  startHaproxy,
};
