'use strict';
// A raw WebSocket client over `net`, able to send deliberately malformed frames and to parse
// exactly what the server writes. All waits have deadlines.

const net = require('node:net');
const crypto = require('node:crypto');
const { deadline } = require('./common');
const proc = require('./proc');

const OP = Object.freeze({ CONT: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa });

/** Parse an HTTP response head ("HTTP/1.1 101 ...\r\nA: b\r\n\r\n" without the final CRLFCRLF). */
function parseHead(headText) {
  const lines = headText.split('\r\n');
  const statusLine = lines.shift();
  const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
  const headers = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i <= 0) continue;
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  return { statusLine, status: m ? Number(m[1]) : NaN, reasonPhrase: m ? m[2] || '' : '', headers };
}

function connectSocket(port, host = '127.0.0.1', timeout = 5000) {
  return deadline(
    new Promise((resolve, reject) => {
      const socket = net.connect({ port, host });
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        resolve(socket);
      });
      socket.once('error', reject);
    }),
    timeout,
    `tcp connect ${host}:${port}`,
  );
}

function upgradeRequestText({ path = '/', host = '127.0.0.1', key, headers = {}, protocols, extensions } = {}) {
  const lines = [
    `GET ${path} HTTP/1.1`,
    `Host: ${host}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${key}`,
    'Sec-WebSocket-Version: 13',
  ];
  if (protocols && protocols.length) lines.push(`Sec-WebSocket-Protocol: ${protocols.join(', ')}`);
  if (extensions) lines.push(`Sec-WebSocket-Extensions: ${extensions}`);
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Read from `socket` until the end of an HTTP head; returns {head, rest} (rest = bytes after it). */
function readHead(socket, timeout = 5000) {
  return deadline(
    new Promise((resolve, reject) => {
      let buf = Buffer.alloc(0);
      const onData = (chunk) => {
        buf = Buffer.concat([buf, chunk]);
        const i = buf.indexOf('\r\n\r\n');
        if (i >= 0) {
          cleanup();
          socket.pause();
          resolve({ head: buf.subarray(0, i).toString('latin1'), rest: buf.subarray(i + 4) });
        }
      };
      const onEnd = () => { cleanup(); reject(new Error(`connection ended before HTTP head; got ${JSON.stringify(buf.toString('latin1'))}`)); };
      const onError = (e) => { cleanup(); reject(e); };
      const cleanup = () => {
        socket.removeListener('data', onData);
        socket.removeListener('end', onEnd);
        socket.removeListener('close', onEnd);
        socket.removeListener('error', onError);
      };
      socket.on('data', onData);
      socket.once('end', onEnd);
      socket.once('close', onEnd);
      socket.once('error', onError);
    }),
    timeout,
    'HTTP response head',
  );
}

/**
 * Open a TCP connection, send a WebSocket upgrade request and read the response head.
 * Resolves {socket, status, statusLine, headers, head, reader, key, accept}. `reader` is a
 * FrameReader already fed with any bytes after the head. Throws unless status is 101 when
 * `expect101` (default true).
 */
async function connectRaw(port, { path = '/', headers, protocols, extensions, expect101 = true, timeout = 5000 } = {}) {
  const socket = await connectSocket(port, '127.0.0.1', timeout);
  socket.setNoDelay(true);
  const key = crypto.randomBytes(16).toString('base64');
  socket.write(upgradeRequestText({ path, key, headers, protocols, extensions }));
  let got;
  try {
    got = await readHead(socket, timeout);
  } catch (e) {
    socket.destroy();
    throw e;
  }
  const parsed = parseHead(got.head);
  const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  if (expect101 && parsed.status !== 101) {
    socket.destroy();
    throw new Error(`expected 101, got: ${parsed.statusLine}`);
  }
  const reader = new FrameReader(socket, got.rest);
  return { socket, key, accept, head: got.head, ...parsed, reader, localPort: socket.localPort };
}

/**
 * Send `requestText` raw over TCP and read the whole HTTP response (until Content-Length is
 * satisfied, or the connection ends). Resolves {status, statusLine, headers, body}.
 */
async function rawHttp(port, requestText, { timeout = 5000 } = {}) {
  const socket = await connectSocket(port, '127.0.0.1', timeout);
  try {
    socket.write(requestText);
    const { head, rest } = await readHead(socket, timeout);
    const parsed = parseHead(head);
    let body = rest;
    const len = parsed.headers['content-length'] !== undefined ? Number(parsed.headers['content-length']) : null;
    if (len === null || body.length < len) {
      body = await deadline(
        new Promise((resolve) => {
          let b = body;
          const done = () => resolve(b);
          socket.on('data', (c) => {
            b = Buffer.concat([b, c]);
            if (len !== null && b.length >= len) resolve(b);
          });
          socket.once('end', done);
          socket.once('close', done);
          socket.once('error', done);
          socket.resume();
        }),
        timeout,
        'HTTP response body',
      );
    }
    return { ...parsed, body: (len !== null ? body.subarray(0, len) : body).toString('utf8') };
  } finally {
    socket.destroy();
  }
}

/**
 * Build one client frame with full control over every header field.
 *   fin (true), rsv1/rsv2/rsv3 (false), opcode, payload (Buffer|string),
 *   mask (true), maskKey (random 4 bytes),
 *   lengthForm: 'auto' | 7 | 16 | 64 — which length encoding to use,
 *   declaredLength: number|bigint — length written in the header (defaults to payload length;
 *     use with lengthForm 64 and a value with the top bit set to make a bad 64-bit length).
 */
function buildFrame({
  fin = true, rsv1 = false, rsv2 = false, rsv3 = false, opcode, payload = Buffer.alloc(0),
  mask = true, maskKey, lengthForm = 'auto', declaredLength,
} = {}) {
  if (typeof opcode !== 'number') throw new TypeError('opcode required');
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'utf8');
  const len = declaredLength === undefined ? BigInt(data.length) : BigInt(declaredLength);
  let form = lengthForm;
  if (form === 'auto') form = len < 126n ? 7 : len < 65536n ? 16 : 64;
  const b0 = (fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (rsv2 ? 0x20 : 0) | (rsv3 ? 0x10 : 0) | (opcode & 0x0f);
  const maskBit = mask ? 0x80 : 0;
  let header;
  if (form === 7) {
    header = Buffer.from([b0, maskBit | Number(len)]);
  } else if (form === 16) {
    header = Buffer.alloc(4);
    header[0] = b0; header[1] = maskBit | 126; header.writeUInt16BE(Number(len), 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = b0; header[1] = maskBit | 127; header.writeBigUInt64BE(BigInt.asUintN(64, len), 2);
  }
  if (!mask) return Buffer.concat([header, data]);
  const key = maskKey ? Buffer.from(maskKey) : crypto.randomBytes(4);
  const masked = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i++) masked[i] = data[i] ^ key[i & 3];
  return Buffer.concat([header, key, masked]);
}

const textFrame = (text, opts = {}) => buildFrame({ opcode: OP.TEXT, payload: Buffer.from(text, 'utf8'), ...opts });
const binaryFrame = (buf, opts = {}) => buildFrame({ opcode: OP.BINARY, payload: buf, ...opts });
const pingFrame = (payload = Buffer.alloc(0), opts = {}) => buildFrame({ opcode: OP.PING, payload, ...opts });

/** Close frame payload: 2-byte code (if code is a number) + reason (string or Buffer). */
function closePayload(code, reason = '') {
  if (code === undefined || code === null) return Buffer.alloc(0);
  const r = Buffer.isBuffer(reason) ? reason : Buffer.from(reason, 'utf8');
  const b = Buffer.alloc(2 + r.length);
  b.writeUInt16BE(code, 0);
  r.copy(b, 2);
  return b;
}
const closeFrame = (code, reason, opts = {}) => buildFrame({ opcode: OP.CLOSE, payload: closePayload(code, reason), ...opts });

/**
 * Parses frames written by the server on `socket`. Frames: {fin, rsv1, rsv2, rsv3, opcode,
 * masked, payload}. Tracks TCP end/close.
 */
class FrameReader {
  constructor(socket, initial = Buffer.alloc(0)) {
    this.socket = socket;
    this.chunks = initial.length ? [initial] : [];
    this.buffered = initial.length;
    this.frames = [];
    this.waiters = [];
    this.ended = false; // 'end' (FIN) or 'close'
    this.error = null;
    this.totalBytes = initial.length;
    this.parseError = null;
    this.endPromise = new Promise((resolve) => { this._resolveEnd = resolve; });
    socket.on('data', (c) => {
      this.chunks.push(c);
      this.buffered += c.length;
      this.totalBytes += c.length;
      this._parse();
    });
    const onEnd = (how) => () => {
      if (!this.ended) {
        this.ended = how;
        this._resolveEnd(how);
      }
      this._wake();
    };
    socket.on('end', onEnd('end'));
    socket.on('close', onEnd('close'));
    socket.on('error', (e) => { this.error = e; onEnd('error')(); });
    this._parse();
    socket.resume();
  }

  _flat() {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] || Buffer.alloc(0);
  }

  _parse() {
    for (;;) {
      if (this.buffered < 2) break;
      const buf = this._flat();
      const b0 = buf[0];
      const b1 = buf[1];
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) break;
        len = buf.readUInt16BE(2); off = 4;
      } else if (len === 127) {
        if (buf.length < 10) break;
        const big = buf.readBigUInt64BE(2);
        if (big > BigInt(Number.MAX_SAFE_INTEGER)) { this.parseError = new Error('server sent absurd 64-bit length'); break; }
        len = Number(big); off = 10;
      }
      const masked = (b1 & 0x80) !== 0;
      let key = null;
      if (masked) {
        if (buf.length < off + 4) break;
        key = buf.subarray(off, off + 4); off += 4;
      }
      if (buf.length < off + len) break;
      let payload = Buffer.from(buf.subarray(off, off + len));
      if (key) for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
      const rest = buf.subarray(off + len);
      this.chunks = rest.length ? [rest] : [];
      this.buffered = rest.length;
      const frame = {
        fin: (b0 & 0x80) !== 0,
        rsv1: (b0 & 0x40) !== 0,
        rsv2: (b0 & 0x20) !== 0,
        rsv3: (b0 & 0x10) !== 0,
        opcode: b0 & 0x0f,
        masked,
        payload,
      };
      const w = this.waiters.shift();
      if (w) w.resolve(frame); else this.frames.push(frame);
    }
  }

  _wake() {
    if (!this.ended) return;
    for (const w of this.waiters.splice(0)) w.resolve(null);
  }

  /** Next frame, or null once the TCP connection ended with nothing left. Rejects on deadline. */
  next(timeout = 5000) {
    if (this.frames.length) return Promise.resolve(this.frames.shift());
    if (this.ended) return Promise.resolve(null);
    let waiter;
    const p = new Promise((resolve) => { waiter = { resolve }; this.waiters.push(waiter); });
    return deadline(p, timeout, 'server frame').catch((e) => {
      const i = this.waiters.indexOf(waiter);
      if (i >= 0) this.waiters.splice(i, 1);
      throw e;
    });
  }

  /**
   * Read frames until a close frame or TCP end. Resolves {code, reason, reasonBytes, closeFrame,
   * frames (non-close frames seen before), ended}. code is null if no close frame arrived,
   * and 1005 if the close frame had no payload.
   */
  async waitClose(timeout = 5000) {
    const end = Date.now() + timeout;
    const frames = [];
    for (let i = 0; i < 1e6; i++) {
      const f = await this.next(Math.max(1, end - Date.now()));
      if (f === null) return { code: null, reason: null, reasonBytes: null, closeFrame: null, frames, ended: this.ended };
      if (f.opcode === OP.CLOSE) {
        const code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
        const reasonBytes = f.payload.length > 2 ? f.payload.subarray(2) : Buffer.alloc(0);
        return { code, reason: reasonBytes.toString('utf8'), reasonBytes, closeFrame: f, frames, ended: this.ended };
      }
      frames.push(f);
    }
    throw new Error('too many frames before close');
  }

  /** Resolves 'end' | 'close' | 'error' once the TCP connection is over; rejects on deadline. */
  waitEnd(timeout = 5000) {
    return deadline(this.endPromise, timeout, 'TCP end/close from server');
  }

  /** Read frames until `pred(frame)` is true; returns all frames read including the match. */
  async readUntil(pred, timeout = 5000, maxFrames = 100000) {
    const end = Date.now() + timeout;
    const out = [];
    for (let i = 0; i < maxFrames; i++) {
      const f = await this.next(Math.max(1, end - Date.now()));
      if (f === null) throw new Error(`connection ended after ${out.length} frames before the expected frame`);
      out.push(f);
      if (pred(f)) return out;
    }
    throw new Error(`no matching frame within ${maxFrames} frames`);
  }

  /** Stop reading from the kernel (the socket's receive buffer fills up). */
  pause() { this.socket.pause(); }

  resume() { this.socket.resume(); }

  write(buf) {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve(false);
      this.socket.write(buf, (err) => resolve(!err));
    });
  }

  destroy() { this.socket.destroy(); }
}

module.exports = {
  OP,
  parseHead,
  connectSocket,
  upgradeRequestText,
  connectRaw,
  rawHttp,
  buildFrame,
  textFrame,
  binaryFrame,
  pingFrame,
  closePayload,
  closeFrame,
  FrameReader,
  // re-exported process helpers
  runNode: proc.runNode,
  procStats: proc.procStats,
};
