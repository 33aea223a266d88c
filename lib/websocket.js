'use strict';
// The WebSocket object handed to the handlers. A socket is the core's connection id plus the
// facts of its upgrade; every send is queued in Rust and leaves with the end-of-tick flush.

const { native, SendStatus } = require('./constants');
const { closeCode, idleTimeoutMs } = require('./options');

// ---- end-of-tick flushing -----------------------------------------------------------------
// Every send of a JS tick is queued in Rust and written with one syscall per socket here.

let flushScheduled = false;
function flushAll() {
  flushScheduled = false;
  native.flushAll();
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

// While the handlers of a batch the bridge delivered run, the bridge writes what they queued when
// the batch returns to it (src/bridge.rs): no end-of-tick flush is needed for those sends.
let inBatch = false;

/** The handlers of a delivered batch start (true) or are done (false). */
function batchHandlers(on) {
  inBatch = on;
}

/** Write this tick's queued frames at the end of the tick (once per tick), unless the bridge
 *  writes them at the end of the batch being handled. */
function scheduleFlush() {
  if (!flushScheduled && !inBatch) {
    flushScheduled = true;
    process.nextTick(flushAll);
  }
}

class WebSocket {
  /** `info` is the open event's object (see src/bridge.rs): remoteAddress, remotePort (the TCP
   *  peer), proxiedAddress, proxiedPort (the client a PROXY header named, else undefined), url,
   *  protocol, extensions, route, token, headers (joined). */
  constructor(id, info, behavior, userData) {
    this._h = id; // the core's connection id
    this._behavior = behavior;
    this._userData = userData;
    this._peerAddress = info.remoteAddress; // the TCP peer (with proxyProtocol: the proxy)
    this._proxiedAddress = info.proxiedAddress;
    const proxied = info.proxiedAddress !== undefined;
    this._remoteAddress = proxied ? info.proxiedAddress : info.remoteAddress;
    this._remotePort = proxied ? info.proxiedPort : info.remotePort;
    this._url = info.url;
    this._protocol = info.protocol;
    this._extensions = info.extensions;
    this._headers = info.headers; // a string until getHeaders() parses it
    this._ending = false; // end()/close() called
    this._closed = false; // close handler ran
    this._epoch = -1; // the App's microtask-checkpoint count at this socket's last event (lib/app.js)
  }

  get closed() {
    return this._ending;
  }

  send(data, isBinary, compress) {
    if (this._ending) return SendStatus.DROPPED;
    const binary = typeof data === 'string' ? isBinary === true : isBinary !== false;
    const r = native.send(this._h, data, binary, compress !== false);
    scheduleFlush();
    return r;
  }

  end(code, reason) {
    if (this._ending) return;
    closeCode(code === undefined ? 1000 : code, 'end: code');
    this._ending = true;
    native.end(this._h, code === undefined ? 1000 : code, reason === undefined ? '' : String(reason));
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
    native.setIdleTimeout(this._h, idleTimeoutMs(ms));
  }
}

/** `s` as a string of its own: a piece cut from a longer string (a header value from the whole
 *  request head) keeps all of that string alive for as long as the piece is kept. */
function ownString(s) {
  return Buffer.from(s, 'utf8').toString('utf8');
}

/** The upgrade's headers named in `names` (lower-case; those present), which `ws` then forgets
 *  (its getHeaders() answers `{}`): for an owner that keeps them for the socket's life (the Meteor
 *  adapter keeps its whitelist), instead of every socket holding all of them (~0.5 KiB each).
 *  The values are strings of their own, so what is kept does not keep the whole head. */
function takeHeaders(ws, names) {
  const all = ws.getHeaders();
  ws._headers = {};
  const kept = {};
  for (const name of names) {
    const v = all[name];
    if (v !== undefined) kept[name] = ownString(v);
  }
  return kept;
}

module.exports = { WebSocket, headerObject, scheduleFlush, takeHeaders, ownString, batchHandlers };
