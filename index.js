'use strict';
// Public API of ddp-transport-native: a uWebSockets.js-shaped App over the Rust core.
// Options are validated here (clear errors naming the key); the native layer only translates.

const net = require('net');
const native = require('./binding.js');

const KIND_OPEN = 0;
const KIND_TEXT = 1;
const KIND_BINARY = 2;
const KIND_DRAIN = 3;
const KIND_CLOSE = 4;
const KIND_UPGRADE = 5;

const SendStatus = Object.freeze({ BACKPRESSURE: 0, SUCCESS: 1, DROPPED: 2 });

const MiB = 1024 * 1024;
const COMPRESSION_DEFAULTS = Object.freeze({
  threshold: 1024,
  level: 1,
  memLevel: 1,
  strategy: 0,
  noContextTakeover: true,
  maxWindowBits: 8,
  requestNoContextTakeover: false,
  requestMaxWindowBits: undefined,
});
const HANDLERS = ['upgrade', 'open', 'message', 'drain', 'close'];
const BEHAVIOR_KEYS = [
  'compression', 'maxPayloadLength', 'maxFragments', 'idleTimeout', 'maxBackpressure',
  'closeOnBackpressureLimit', 'sendPingsAutomatically', ...HANDLERS,
];

// ---- option validation ------------------------------------------------------------------

function describe(v) {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

function checkKeys(obj, valid, where) {
  if (obj === null || typeof obj !== 'object') {
    throw new TypeError(`${where} must be an object, got ${describe(obj)}`);
  }
  for (const key of Object.keys(obj)) {
    if (!valid.includes(key)) {
      throw new TypeError(`Unknown ${where} option "${key}". Valid options: ${valid.join(', ')}`);
    }
  }
}

function intOption(obj, key, where, min, max, dflt) {
  const v = obj[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${where}.${key} must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

function boolOption(obj, key, where, dflt) {
  const v = obj[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new TypeError(`${where}.${key} must be a boolean, got ${describe(v)}`);
  return v;
}

/** Normalise `compression` (false | true | object) to the native shape, or null when off. */
function compressionOptions(value, where) {
  if (value === undefined || value === false) return null;
  if (value === true) value = {};
  checkKeys(value, Object.keys(COMPRESSION_DEFAULTS), where);
  const d = COMPRESSION_DEFAULTS;
  const out = {
    threshold: intOption(value, 'threshold', where, 0, 2 ** 31, d.threshold),
    level: intOption(value, 'level', where, 0, 9, d.level),
    memLevel: intOption(value, 'memLevel', where, 1, 9, d.memLevel),
    strategy: intOption(value, 'strategy', where, 0, 4, d.strategy),
    noContextTakeover: boolOption(value, 'noContextTakeover', where, d.noContextTakeover),
    maxWindowBits: intOption(value, 'maxWindowBits', where, 8, 15, d.maxWindowBits),
    requestNoContextTakeover: boolOption(value, 'requestNoContextTakeover', where, d.requestNoContextTakeover),
    requestMaxWindowBits: intOption(value, 'requestMaxWindowBits', where, 8, 15, undefined),
  };
  return out;
}

function routeOptions(pattern, behavior) {
  const where = `behavior for "${pattern}"`;
  checkKeys(behavior, BEHAVIOR_KEYS, 'behavior');
  for (const h of HANDLERS) {
    if (behavior[h] !== undefined && typeof behavior[h] !== 'function') {
      throw new TypeError(`${where}.${h} must be a function, got ${describe(behavior[h])}`);
    }
  }
  const c = behavior.compression;
  if (c !== undefined && typeof c !== 'boolean' && (c === null || typeof c !== 'object')) {
    throw new TypeError(`${where}.compression must be false, true or an options object, got ${describe(c)}`);
  }
  return {
    maxPayloadLength: intOption(behavior, 'maxPayloadLength', where, 1, 2 ** 31, 16 * MiB),
    maxFragments: intOption(behavior, 'maxFragments', where, 1, 2 ** 31, 131072),
    idleTimeoutMs: intOption(behavior, 'idleTimeout', where, 0, 86400, 120) * 1000,
    maxBackpressure: intOption(behavior, 'maxBackpressure', where, 0, 2 ** 40, 16 * MiB),
    closeOnBackpressureLimit: boolOption(behavior, 'closeOnBackpressureLimit', where, false),
    sendPingsAutomatically: boolOption(behavior, 'sendPingsAutomatically', where, true),
    upgradeHook: typeof behavior.upgrade === 'function',
    compression: compressionOptions(c, `${where}.compression`) || undefined,
  };
}

function nativeError(e, what) {
  const m = /^(E[A-Z]+): (.*)$/.exec(e.message);
  const err = new Error(`${what} failed: ${m ? `${m[1]}: ${m[2]}` : e.message}`);
  err.code = m ? m[1] : 'EIO';
  return err;
}

// ---- end-of-tick flushing -----------------------------------------------------------------
// Every send of a JS tick is queued in Rust and written with one syscall per socket here.

let flushScheduled = false;
function flushAll() {
  flushScheduled = false;
  native.flushAll();
}

function rethrow(err) {
  throw err;
}

/** Parse the `name\0value\0...` string the core sends into a lower-case header object. */
function headerObject(joined) {
  const headers = {};
  let i = 0;
  while (i < joined.length) {
    const a = joined.indexOf('\0', i);
    const b = joined.indexOf('\0', a + 1);
    const k = joined.slice(i, a).toLowerCase();
    const v = joined.slice(a + 1, b);
    headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    i = b + 1;
  }
  return headers;
}

function toBuffer(data) {
  if (Buffer.isBuffer(data)) return data;
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError(`send: data must be a string, Buffer, ArrayBuffer or ArrayBufferView, got ${describe(data)}`);
}

function validCloseCode(code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

// ---- WebSocket ------------------------------------------------------------------------------

class WebSocket {
  constructor(id, info, behavior, userData) {
    this._h = id; // the core's connection id
    this._behavior = behavior;
    this._userData = userData;
    this._remoteAddress = info[0];
    this._remotePort = info[1];
    this._url = info[2];
    this._protocol = info[3];
    this._extensions = info[4];
    this._headers = info[7]; // a string until getHeaders() parses it
    this._ending = false; // end()/close() called
    this._closed = false; // close handler ran
  }

  get closed() {
    return this._ending;
  }

  send(data, isBinary, compress) {
    if (this._ending) return SendStatus.DROPPED;
    let r;
    if (typeof data === 'string') {
      r = native.sendText(this._h, data, isBinary === true, compress !== false);
    } else {
      r = native.sendBytes(this._h, toBuffer(data), isBinary !== false, compress !== false);
    }
    if (!flushScheduled) {
      flushScheduled = true;
      process.nextTick(flushAll);
    }
    return r;
  }

  end(code, reason) {
    if (this._ending) return;
    if (code === undefined) code = 1000;
    if (!Number.isInteger(code) || !validCloseCode(code)) {
      throw new RangeError(`end: code must be 1000-1003, 1007-1014 or 3000-4999, got ${describe(code)}`);
    }
    this._ending = true;
    native.end(this._h, code, reason === undefined ? '' : String(reason));
  }

  close() {
    if (this._ending) return;
    this._ending = true;
    native.close(this._h);
  }

  cork(fn) {
    fn();
    if (!this._ending) flushAll();
    return this;
  }

  getBufferedAmount() {
    return this._closed ? 0 : native.bufferedAmount(this._h);
  }

  getRemoteAddressAsText() {
    return this._remoteAddress;
  }

  getRemotePort() {
    return this._remotePort;
  }

  getUserData() {
    if (this._userData === undefined) this._userData = {};
    return this._userData;
  }

  getUrl() {
    return this._url;
  }

  getHeaders() {
    if (typeof this._headers === 'string') this._headers = headerObject(this._headers);
    return this._headers;
  }

  getProtocol() {
    return this._protocol;
  }

  getExtensions() {
    return this._extensions;
  }

  setIdleTimeout(ms) {
    if (this._ending) return;
    if (typeof ms !== 'number' || !(ms >= 0) || ms > 2 ** 32 - 1) {
      throw new RangeError(`setIdleTimeout: ms must be a number from 0 to 4294967295, got ${describe(ms)}`);
    }
    native.setIdleTimeout(this._h, Math.floor(ms));
  }
}

// ---- App ------------------------------------------------------------------------------------

class TemplatedApp {
  constructor(options) {
    if (options === undefined) options = {};
    checkKeys(options, ['threads'], 'App');
    const threads = intOption(options, 'threads', 'App', 1, 16, 1);
    this._native = new native.NativeApp(threads, (...batch) => this._dispatch(batch));
    this._routes = [];
    this._sockets = new Map();
    this._userData = new Map();
    this._listening = 0;
    this._refd = true;
    this._attached = [];
    this._internal = null;
    this._closed = false;
    this._drainWaiters = [];
    this._updateRef();
  }

  ws(pattern, behavior) {
    if (typeof pattern !== 'string' || !pattern.startsWith('/') && pattern !== '*') {
      throw new TypeError(`ws: pattern must be a path string like "/*" or "/websocket", got ${describe(pattern)}`);
    }
    const opts = routeOptions(pattern, behavior);
    const index = this._native.addRoute(pattern, opts);
    this._routes[index] = { pattern, behavior };
    return this;
  }

  listen(a, b, c) {
    let host = '0.0.0.0';
    let port;
    let cb;
    if (typeof a === 'string') [host, port, cb] = [a, b, c];
    else [port, cb] = [a, b];
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new RangeError(`listen: port must be an integer from 0 to 65535, got ${describe(port)}`);
    }
    if (typeof cb !== 'function') throw new TypeError('listen: the last argument must be a callback');
    let bound;
    try {
      bound = this._native.listen(host, port);
    } catch (e) {
      const err = nativeError(e, `listen ${host}:${port}`);
      if (cb.length < 2) process.emitWarning(err.message, 'ListenWarning', err.code);
      cb(false, err);
      return this;
    }
    this._listening++;
    this._updateRef();
    cb({ host, port: bound });
    return this;
  }

  attach(server, options) {
    if (!server || typeof server.on !== 'function' || typeof server.listeners !== 'function') {
      throw new TypeError('attach: server must be an http.Server or https.Server');
    }
    if (options === undefined) options = {};
    checkKeys(options, ['paths'], 'attach');
    const paths = options.paths === undefined ? this._routes.map((r) => r.pattern) : options.paths;
    if (!Array.isArray(paths) || paths.some((p) => typeof p !== 'string')) {
      throw new TypeError(`attach: paths must be an array of path strings, got ${describe(paths)}`);
    }
    // Like Meteor's stream_server: upgrades on our paths are ours alone; every other upgrade
    // goes to the listeners that were there before, untouched.
    const previous = server.listeners('upgrade').slice();
    server.removeAllListeners('upgrade');
    const onUpgrade = (req, socket, head) => {
      const url = req.url || '';
      const q = url.indexOf('?');
      const path = q < 0 ? url : url.slice(0, q);
      if (this._closed || !paths.some((p) => native.pathMatches(p, path))) {
        // Nobody else will take it (Node's own rule for an unhandled upgrade): destroy it.
        if (previous.length === 0 && server.listenerCount('upgrade') <= 1) socket.destroy();
        for (const l of previous) l.call(server, req, socket, head);
        return;
      }
      this._takeOver(req, socket, head);
    };
    server.on('upgrade', onUpgrade);
    const onClose = () => this.close();
    server.once('close', onClose);
    this._attached.push({ server, onUpgrade, onClose, previous });
    return this;
  }

  _takeOver(req, socket, head) {
    const handle = socket._handle;
    const fd = handle && !socket.encrypted && typeof handle.fd === 'number' ? handle.fd : -1;
    if (fd < 0) {
      this._viaLoopback(req, socket, head);
      return;
    }
    // Node stops reading; Rust dups the fd, validates the handshake and writes the 101; Node's
    // handle is then closed, which closes only its own fd (no FIN: the dup keeps the socket).
    if (typeof handle.readStop === 'function') handle.readStop();
    try {
      this._native.adopt(fd, req.method, req.url, req.rawHeaders, head);
    } catch (e) {
      // Only dup() can fail here (EMFILE: out of file descriptors). Like a failed accept, this
      // costs one connection, not the server: the client sees the socket close and retries.
      socket.destroy();
      process.emitWarning(nativeError(e, 'adopting an upgraded socket'));
      return;
    }
    socket.destroy();
  }

  // Sockets without an fd (TLS terminated in Node): pipe them to the internal loopback
  // listener (127.0.0.1, kernel-chosen port, opened on first use), with the real peer address
  // in a preamble that carries a per-app secret.
  _viaLoopback(req, socket, head) {
    if (this._internal === null) {
      try {
        this._internal = this._native.internalListener();
      } catch (e) {
        socket.destroy();
        process.nextTick(rethrow, nativeError(e, 'opening the internal listener'));
        return;
      }
    }
    const { port, secret } = this._internal;
    const lines = [`PEER ${secret} ${socket.remoteAddress} ${socket.remotePort}`, `${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    const inner = net.connect(port, '127.0.0.1');
    inner.setNoDelay(true);
    socket.setNoDelay?.(true);
    inner.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head && head.length) inner.write(head);
    socket.pipe(inner);
    inner.pipe(socket);
    const done = () => {
      socket.destroy();
      inner.destroy();
    };
    socket.on('error', done);
    inner.on('error', done);
    socket.on('close', done);
    inner.on('close', done);
  }

  _updateRef() {
    const want = !this._closed && (this._listening > 0 || this._sockets.size > 0);
    if (want !== this._refd) {
      this._refd = want;
      this._native.setRef(want);
    }
  }

  _dispatch(batch) {
    // After app.close() every socket is closed and its close handler ran; events still queued
    // in Rust are void (a socket whose open never reached JS gets neither open nor close).
    for (let i = 0; i < batch.length && !this._closed; i += 2) {
      const tag = batch[i];
      const v = batch[i + 1];
      const kind = tag % 8;
      const id = (tag - kind) / 8;
      try {
        if (kind === KIND_TEXT || kind === KIND_BINARY) {
          const ws = this._sockets.get(id);
          if (ws !== undefined && !ws._ending) {
            const h = ws._behavior.message;
            if (h !== undefined) h(ws, v, kind === KIND_BINARY);
          }
        } else if (kind === KIND_OPEN) {
          this._open(id, v);
        } else if (kind === KIND_CLOSE) {
          this._close(id, v[0], v[1]);
        } else if (kind === KIND_DRAIN) {
          const ws = this._sockets.get(id);
          if (ws !== undefined && ws._behavior.drain) ws._behavior.drain(ws);
        } else if (kind === KIND_UPGRADE) {
          this._upgrade(v);
        }
      } catch (err) {
        // One handler's exception must not lose the rest of the batch; it surfaces as an
        // uncaught exception, as it would from any Node event handler.
        process.nextTick(rethrow, err);
      }
    }
  }

  _open(id, info) {
    const route = this._routes[info[5]];
    const token = info[6];
    let userData;
    if (token !== 0 && this._userData.has(token)) {
      userData = this._userData.get(token);
      this._userData.delete(token);
    }
    const ws = new WebSocket(id, info, route.behavior, userData);
    this._sockets.set(id, ws);
    if (this._sockets.size === 1) this._updateRef();
    if (route.behavior.open) route.behavior.open(ws);
  }

  _close(id, code, reason) {
    const ws = this._sockets.get(id);
    if (ws === undefined) return;
    this._sockets.delete(id);
    this._finish(ws, code, reason);
    if (this._sockets.size === 0) {
      this._updateRef();
      for (const w of this._drainWaiters.splice(0)) w();
    }
  }

  _finish(ws, code, reason) {
    ws._ending = true;
    ws._closed = true;
    if (ws._behavior.close) ws._behavior.close(ws, code, reason);
  }

  _upgrade(v) {
    const [token, routeIndex, method, url, remoteAddress, remotePort, protocols, extensions, flat] = v;
    const route = this._routes[routeIndex];
    let answered = false;
    const res = {
      accept: (userData, protocol) => {
        if (answered || this._closed) return;
        answered = true;
        if (userData !== undefined) this._userData.set(token, userData);
        this._native.decide(token, true, typeof protocol === 'string' ? protocol : undefined, 0, '');
      },
      reject: (status, body) => {
        if (answered || this._closed) return;
        answered = true;
        const s = Number.isInteger(status) && status >= 400 && status <= 599 ? status : 403;
        this._native.decide(token, false, undefined, s, body === undefined ? 'Forbidden' : String(body));
      },
    };
    const req = { method, url, headers: headerObject(flat), remoteAddress, remotePort, protocols, extensions };
    try {
      route.behavior.upgrade(req, res);
    } catch (err) {
      res.reject(500, 'Internal Server Error');
      throw err;
    }
  }

  drain(options) {
    if (options === undefined) options = {};
    checkKeys(options, ['batch', 'intervalMs', 'code', 'reason'], 'drain');
    const batch = intOption(options, 'batch', 'drain', 1, 2 ** 31, 100);
    const intervalMs = intOption(options, 'intervalMs', 'drain', 0, 3600000, 50);
    const code = intOption(options, 'code', 'drain', 1000, 4999, 1001);
    if (!validCloseCode(code)) throw new RangeError(`drain.code must be a valid close code, got ${code}`);
    const reason = options.reason === undefined ? 'server draining' : String(options.reason);
    if (!this._closed) this._native.setDraining(true);
    return new Promise((resolve) => {
      const step = () => {
        let n = 0;
        for (const ws of this._sockets.values()) {
          if (n >= batch) break;
          if (!ws._ending) {
            ws.end(code, reason);
            n++;
          }
        }
        if (n > 0 && [...this._sockets.values()].some((ws) => !ws._ending)) setTimeout(step, intervalMs);
      };
      if (this._sockets.size === 0) return resolve();
      this._drainWaiters.push(resolve);
      step();
    });
  }

  stats() {
    const s = this._closed ? null : this._native.stats();
    if (s === null) return this._lastStats || null;
    const closesByCode = {};
    for (let i = 0; i < s.closes.length; i += 2) closesByCode[String(s.closes[i])] = s.closes[i + 1];
    const out = {
      connections: s.connections,
      upgradesAccepted: s.upgradesAccepted,
      upgradesRejected: s.upgradesRejected,
      messagesIn: s.messagesIn,
      messagesOut: s.messagesOut,
      bytesIn: s.bytesIn,
      bytesOut: s.bytesOut,
      wireBytesIn: s.wireBytesIn,
      wireBytesOut: s.wireBytesOut,
      backpressureEvents: s.backpressureEvents,
      dropped: s.dropped,
      closesByCode,
    };
    this._lastStats = out;
    return out;
  }

  close() {
    if (this._closed) return;
    this.stats();
    this._closed = true;
    for (const a of this._attached) {
      a.server.removeListener('upgrade', a.onUpgrade);
      a.server.removeListener('close', a.onClose);
      for (const l of a.previous) a.server.on('upgrade', l);
    }
    this._attached = [];
    this._native.stopListening();
    const open = [...this._sockets.values()];
    for (const ws of open) if (!ws._ending) native.end(ws._h, 1001, 'server closing');
    native.flushAll();
    this._native.close();
    for (const ws of open) native.forget(ws._h);
    this._sockets.clear();
    for (const ws of open) {
      try {
        this._finish(ws, 1001, 'server closing');
      } catch (err) {
        process.nextTick(rethrow, err);
      }
    }
    for (const w of this._drainWaiters.splice(0)) w();
  }
}

function App(options) {
  return new TemplatedApp(options);
}

module.exports = {
  App,
  SendStatus,
  /** Validate permessage-deflate options (as for `behavior.compression`); errors name `where`
   *  and the key. Returns the normalised options, or null when compression is off. */
  compressionOptions,
};
