'use strict';
// A small DDP client that reconnects and retries the way Meteor's own client does: when the
// socket closes it reconnects (two quick attempts, then backing off), sends `connect` with the
// last session id, then sends again every method call whose result has not arrived (and the ones
// made while disconnected). Used by the scale-out test behind nginx; `localAddress` binds the
// client's source address. Every wait is bounded.

const WebSocket = require('ws');

const CONNECT = { msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] };

class RetryingDdpClient {
  /**
   * @param {string} url ws:// URL of /websocket
   * @param {{ localAddress?: string, maxAttempts?: number, maxDelayMs?: number }} [opts]
   */
  constructor(url, opts = {}) {
    this.url = url;
    this.localAddress = opts.localAddress;
    this.maxAttempts = opts.maxAttempts || 40;
    this.maxDelayMs = opts.maxDelayMs || 1000;
    this.ws = null;
    this.session = null;
    this.connected = false;
    this.stopped = false;
    this.attempt = 0;
    this.seq = 0;
    this.pending = new Map(); // id -> { msg, resolve, reject, sentOn (connection number or -1) }
    this.connections = 0; // DDP `connected` count
    this.closes = []; // { at, code } for sockets that had been connected
    this.reconnectMs = []; // close of a connected socket -> next `connected`
    this.resent = 0; // calls sent again after a reconnect
    this.duplicates = 0; // results for calls already answered
    this.failures = []; // upgrade/connect errors while reconnecting (messages)
    this.onConnected = null; // optional callback(client) after every `connected`
    this._lastCloseAt = null;
    this._firstConnect = null;
    this._timer = null;
  }

  /** Connect; resolves at the first DDP `connected`. */
  start(ms = 10000) {
    this._firstConnect = {};
    const p = new Promise((resolve, reject) => Object.assign(this._firstConnect, { resolve, reject }));
    this._open();
    let t;
    return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`connect ${this.url} from ${this.localAddress} timed out`)), ms); })])
      .finally(() => clearTimeout(t));
  }

  _open() {
    if (this.stopped) return;
    const ws = new WebSocket(this.url, { localAddress: this.localAddress, perMessageDeflate: false, handshakeTimeout: 5000 });
    this.ws = ws;
    let wasConnected = false;
    ws.on('open', () => ws.send(JSON.stringify(this.session ? { ...CONNECT, session: this.session } : CONNECT)));
    ws.on('message', (data) => {
      let m;
      try { m = JSON.parse(String(data)); } catch { return; }
      if (m.msg === 'connected') {
        wasConnected = true;
        this._onConnected(m, ws);
      } else if (m.msg === 'result') {
        const p = this.pending.get(m.id);
        if (!p) { this.duplicates++; return; }
        this.pending.delete(m.id);
        if (m.error) p.reject(Object.assign(new Error(m.error.reason || 'method error'), { ddp: m.error }));
        else p.resolve(m.result);
      } else if (m.msg === 'ping') {
        ws.send(JSON.stringify(m.id === undefined ? { msg: 'pong' } : { msg: 'pong', id: m.id }));
      } else if (m.msg === 'failed') {
        this.failures.push(`DDP version refused: ${JSON.stringify(m)}`);
        ws.close();
      }
    });
    ws.on('error', (e) => { if (!wasConnected) this.failures.push(e.message); });
    ws.on('close', (code) => {
      if (this.ws !== ws) return;
      this.connected = false;
      if (wasConnected) {
        this._lastCloseAt = performance.now();
        this.closes.push({ at: this._lastCloseAt, code });
        this.attempt = 0;
      }
      this._schedule();
    });
  }

  _onConnected(m, ws) {
    const now = performance.now();
    this.connections++;
    this.session = m.session;
    this.connected = true;
    if (this._lastCloseAt !== null) {
      this.reconnectMs.push(now - this._lastCloseAt);
      this._lastCloseAt = null;
    }
    this.attempt = 0;
    // Meteor's client sends again what was not answered, in the order it was first sent.
    for (const p of this.pending.values()) {
      if (p.sentOn !== -1 && p.sentOn !== this.connections) this.resent++;
      p.sentOn = this.connections;
      ws.send(p.msg);
    }
    if (this._firstConnect) { this._firstConnect.resolve(this); this._firstConnect = null; }
    if (this.onConnected) this.onConnected(this);
  }

  _schedule() {
    if (this.stopped) return;
    if (++this.attempt > this.maxAttempts) {
      const err = new Error(`gave up reconnecting to ${this.url} after ${this.maxAttempts} attempts: ${this.failures.slice(-3).join('; ')}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      if (this._firstConnect) this._firstConnect.reject(err);
      return;
    }
    // Like Meteor's Retry: two quick tries (~10 ms), then exponential backoff, fuzzed by ±50%.
    const base = this.attempt <= 2 ? 10 : Math.min(this.maxDelayMs, 50 * 2 ** (this.attempt - 2));
    const delay = base * (0.5 + Math.random());
    this._timer = setTimeout(() => this._open(), delay);
  }

  /** Call a method; resolves with its result once answered (across reconnects). */
  call(method, ...params) {
    const id = String(++this.seq);
    const msg = JSON.stringify({ msg: 'method', id, method, params });
    return new Promise((resolve, reject) => {
      const entry = { msg, resolve, reject, sentOn: -1 };
      this.pending.set(id, entry);
      if (this.connected && this.ws && this.ws.readyState === WebSocket.OPEN) {
        entry.sentOn = this.connections;
        this.ws.send(msg);
      }
    });
  }

  /** Close for good (no reconnect); resolves once the socket is closed (bounded). */
  stop() {
    this.stopped = true;
    clearTimeout(this._timer);
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => { ws.terminate(); resolve(); }, 2000);
      ws.once('close', () => { clearTimeout(t); resolve(); });
      ws.close();
    });
  }
}

module.exports = { RetryingDdpClient };
