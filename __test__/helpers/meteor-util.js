'use strict';
// Shared helpers for the Meteor-adapter, demo and browser tests. Loopback only; every wait is bounded.

const http = require('node:http');
const net = require('node:net');
const fs = require('node:fs');
const crypto = require('node:crypto');
const WebSocket = require('ws');

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Reject after `ms` unless `promise` settles first. */
function withTimeout(promise, ms, label = 'operation') {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${label} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Wait until `predicate()` is truthy, polling every `step` ms, at most `ms` ms. */
async function waitFor(predicate, ms = 3000, label = 'condition', step = 10) {
  const end = Date.now() + ms;
  for (;;) {
    const v = predicate();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${label} not met within ${ms} ms`);
    await delay(step);
  }
}

function listen(server, host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      server.removeListener('error', reject);
      resolve(server.address().port);
    });
  });
}

function closeServer(server) {
  return withTimeout(new Promise((resolve) => {
    server.close(() => resolve());
    if (typeof server.closeAllConnections === 'function') server.closeAllConnections();
  }), 5000, 'server.close').catch(() => {});
}

/** Plain HTTP GET → { status, headers, body }. */
function httpGet(port, path, headers = {}) {
  return withTimeout(new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
  }), 5000, `GET ${path}`);
}

/** Write raw bytes on a TCP connection; resolve with what came back once the peer closes or `ms` passed. */
function rawExchange(port, bytes, ms = 1000) {
  return new Promise((resolve) => {
    const chunks = [];
    const sock = net.connect(port, '127.0.0.1');
    const done = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    const timer = setTimeout(done, ms);
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', done);
    sock.on('close', done);
    sock.write(bytes);
  });
}

/** A WebSocket-client frame (masked), FIN set. */
function maskedFrame(opcode, payload) {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const mask = crypto.randomBytes(4);
  let header;
  if (data.length < 126) {
    header = Buffer.from([0x80 | opcode, 0x80 | data.length]);
  } else if (data.length < 65536) {
    header = Buffer.alloc(4);
    header[0] = 0x80 | opcode; header[1] = 0x80 | 126; header.writeUInt16BE(data.length, 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = 0x80 | opcode; header[1] = 0x80 | 127; header.writeBigUInt64BE(BigInt(data.length), 2);
  }
  const masked = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i++) masked[i] = data[i] ^ mask[i & 3];
  return Buffer.concat([header, mask, masked]);
}

function upgradeRequest(path, extraHeaders = {}) {
  const key = crypto.randomBytes(16).toString('base64');
  let text = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n`;
  for (const [k, v] of Object.entries(extraHeaders)) text += `${k}: ${v}\r\n`;
  return Buffer.from(text + '\r\n', 'latin1');
}

/**
 * Raw upgrade: sends the request (plus `after` bytes in the same write), resolves with
 * { sock, head, rest } once the response head arrived.
 */
function rawUpgrade(port, path, { headers = {}, after = null, ms = 3000 } = {}) {
  return withTimeout(new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const onData = (c) => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf('\r\n\r\n');
      if (end !== -1) {
        sock.removeListener('data', onData);
        resolve({ sock, head: buf.slice(0, end).toString('latin1'), rest: buf.slice(end + 4) });
      }
    };
    sock.on('data', onData);
    sock.once('error', reject);
    sock.once('connect', () => {
      const req = upgradeRequest(path, headers);
      sock.write(after ? Buffer.concat([req, after]) : req);
    });
  }), ms, `raw upgrade ${path}`);
}

/** Open a `ws` client; resolves with { ws, upgrade (the 101 response), queue }. */
function wsOpen(port, path = '/websocket', options = {}) {
  return withTimeout(new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { perMessageDeflate: false, ...options });
    const queue = messageQueue(ws);
    let upgrade = null;
    ws.once('upgrade', (res) => { upgrade = res; });
    ws.once('open', () => resolve({ ws, upgrade, queue }));
    ws.once('error', reject);
    ws.once('unexpected-response', (req, res) => reject(new Error(`unexpected response ${res.statusCode}`)));
  }), 5000, `ws open ${path}`);
}

/**
 * Collects a ws client's messages. next(ms) → the oldest unread one; nextMatching(pred, ms) → the
 * oldest unread JSON message satisfying pred (others stay unread); closed → {code, reason} or null.
 */
function messageQueue(ws) {
  const items = [];
  const wakers = []; // resolved when a message arrives or the socket closes
  const notify = () => { for (const w of wakers.splice(0)) w(); };
  const arrival = () => new Promise((resolve) => { wakers.push(resolve); });
  const q = {
    items,
    closed: null,
    closedPromise: new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        q.closed = { code, reason: String(reason) };
        resolve(q.closed);
        notify();
      });
    }),
    async take(pred, ms = 3000, label = 'message') {
      const end = Date.now() + ms;
      for (;;) {
        const i = items.findIndex(pred);
        if (i !== -1) return items.splice(i, 1)[0];
        if (q.closed) throw new Error(`socket closed (${q.closed.code}) while waiting for ${label}`);
        const left = end - Date.now();
        if (left <= 0) throw new Error(`${label} not received within ${ms} ms`);
        await withTimeout(arrival(), left, label).catch(() => {});
      }
    },
    next(ms = 3000) {
      return q.take(() => true, ms, 'next message');
    },
    async nextMatching(pred, ms = 3000) {
      const raw = await q.take((r) => {
        if (typeof r !== 'string') return false;
        try { return pred(JSON.parse(r)); } catch (e) { return false; }
      }, ms, 'matching message');
      return JSON.parse(raw);
    },
  };
  ws.on('message', (data, isBinary) => {
    items.push(isBinary ? data : data.toString());
    notify();
  });
  return q;
}

/** DDP connect over an open ws client; resolves with the session id. */
async function ddpConnect(client) {
  client.ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] }));
  const m = await client.queue.nextMatching((x) => x.msg === 'connected' || x.msg === 'failed');
  if (m.msg !== 'connected') throw new Error(`DDP connect failed: ${JSON.stringify(m)}`);
  return m.session;
}

let callSeq = 0;
/** DDP method call; resolves with the `result` message. */
async function ddpCall(client, method, params, ms = 5000) {
  const id = `c${++callSeq}`;
  client.ws.send(JSON.stringify({ msg: 'method', id, method, params }));
  return client.queue.nextMatching((x) => x.msg === 'result' && x.id === id, ms);
}

/** Close a ws client and wait (bounded) for its close. */
async function wsClose(client) {
  if (!client || !client.ws) return;
  if (client.ws.readyState === WebSocket.CLOSED) return;
  try { client.ws.close(); } catch (e) { /* ignore */ }
  await withTimeout(client.queue.closedPromise, 3000, 'ws close').catch(() => client.ws.terminate());
}

// ---------------------------------------------------------------------------------------------
// Listening sockets owned by a process (the "no second port" promise).

function socketInodes(pid) {
  const inodes = new Set();
  let fds = [];
  try { fds = fs.readdirSync(`/proc/${pid}/fd`); } catch (e) { return inodes; }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch (e) { /* fd went away */ }
  }
  return inodes;
}

/** TCP ports in LISTEN state whose socket is held by `pid` (IPv4 and IPv6). */
function listeningPorts(pid = process.pid) {
  const inodes = socketInodes(pid);
  const ports = new Set();
  for (const file of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    let text = '';
    try { text = fs.readFileSync(file, 'utf8'); } catch (e) { continue; }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const [, local, , state] = cols;
      const inode = cols[9];
      if (state !== '0A' || !inodes.has(inode)) continue;
      ports.add(parseInt(local.split(':')[1], 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

module.exports = {
  delay,
  withTimeout,
  waitFor,
  listen,
  closeServer,
  httpGet,
  rawExchange,
  rawUpgrade,
  maskedFrame,
  upgradeRequest,
  wsOpen,
  messageQueue,
  ddpConnect,
  ddpCall,
  wsClose,
  listeningPorts,
};
