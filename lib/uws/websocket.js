'use strict';
// The WebSocket of the uWS compat surface: uWS's methods and defaults over the core's socket
// (`inner`, a lib/websocket.js WebSocket). Like uWS: send defaults to text and no compression,
// end()/close() run the close handler synchronously, and any call after that throws.

const { native, SendStatus, SEND_KIND: K } = require('../constants');
const { scheduleFlush } = require('../websocket');
const { closeCode } = require('../options');
const { arrayBuffer, text, addressBytes, proxiedBytes, closedError } = require('./util');

class UWebSocket {
  constructor(app, route, inner) {
    this._app = app;
    this._route = route; // { behavior, ... } of the compat route
    this._inner = inner;
    this._h = inner._h;
    this._topics = new Set();
    this._done = false; // close handler ran: every call throws
    this._lifetime = null;
  }

  _live() {
    if (this._done) throw closedError();
  }

  _send(data, isBinary, compress, kind) {
    this._live();
    const r = native.send(this._h, data, isBinary === true, compress === true, kind);
    scheduleFlush();
    if (r === SendStatus.DROPPED && this._route.behavior.dropped) this._route.behavior.dropped(this, arrayBuffer(data), isBinary === true);
    return r;
  }

  send(message, isBinary, compress) {
    return this._send(message, isBinary, compress, K.message);
  }

  /** Fragments are sent uncompressed (a permitted choice; RSV1 stays clear). */
  sendFirstFragment(message, isBinary, compress) {
    return this._send(message, isBinary, compress, K.firstFragment);
  }

  sendFragment(message, compress) {
    return this._send(message, false, compress, K.fragment);
  }

  sendLastFragment(message, compress) {
    return this._send(message, false, compress, K.lastFragment);
  }

  ping(message) {
    return this._send(message === undefined ? '' : message, true, false, K.ping);
  }

  /** Graceful: the close frame goes out behind what is queued; the close handler runs now. */
  end(code, shortMessage) {
    this._live();
    const c = code === undefined || code === 0 ? 1000 : closeCode(code, 'end: code');
    const reason = shortMessage === undefined ? '' : text(shortMessage);
    this._inner.end(c, reason);
    this._app._finish(this, c, reason);
  }

  /** Forceful: no close frame; the close handler runs now with 1006. */
  close() {
    this._live();
    this._inner.close();
    this._app._finish(this, 1006, '');
  }

  cork(cb) {
    this._live();
    cb();
    native.flushAll();
    return this;
  }

  getBufferedAmount() {
    this._live();
    return native.bufferedAmount(this._h);
  }

  getRemoteAddress() {
    this._live();
    return addressBytes(this._inner._peerAddress);
  }

  getRemoteAddressAsText() {
    this._live();
    return arrayBuffer(this._inner._peerAddress || '');
  }

  /** The client a PROXY header named (App({ proxyProtocol: true })); empty without one. */
  getProxiedRemoteAddress() {
    this._live();
    return proxiedBytes(this._inner._proxiedAddress);
  }

  getProxiedRemoteAddressAsText() {
    this._live();
    return arrayBuffer(this._inner._proxiedAddress || '');
  }

  getUserData() {
    return this._inner.getUserData();
  }

  subscribe(topic) {
    this._live();
    return this._app._topics.subscribe(this, text(topic));
  }

  unsubscribe(topic) {
    this._live();
    return this._app._topics.unsubscribe(this, text(topic));
  }

  isSubscribed(topic) {
    this._live();
    return this._topics.has(text(topic));
  }

  getTopics() {
    this._live();
    return [...this._topics];
  }

  /** To every subscriber of `topic` except this socket (uWS's rule). */
  publish(topic, message, isBinary, compress) {
    this._live();
    return this._app._topics.publish(text(topic), message, isBinary, compress, this);
  }
}

module.exports = { UWebSocket };
