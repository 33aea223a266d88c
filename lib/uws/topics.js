'use strict';
// Pub/sub topics of one app (uWS semantics): topic → subscribers. A publish is ONE native call:
// the message is encoded once and the same bytes are queued on every subscriber, behind what each
// already queued (so publish and send keep their order on a socket).

const { native } = require('../constants');
const { scheduleFlush } = require('../websocket');
const { arrayBuffer } = require('./util');

class Topics {
  constructor() {
    this._subs = new Map(); // topic → { sockets: Set, ids: Uint32Array | null }
  }

  count(topic) {
    const t = this._subs.get(topic);
    return t === undefined ? 0 : t.sockets.size;
  }

  subscribe(ws, topic) {
    let t = this._subs.get(topic);
    if (t === undefined) {
      t = { sockets: new Set(), ids: null };
      this._subs.set(topic, t);
    }
    if (t.sockets.has(ws)) return true;
    t.sockets.add(ws);
    t.ids = null;
    ws._topics.add(topic);
    this._notify(ws, topic, t.sockets.size, t.sockets.size - 1);
    return true;
  }

  unsubscribe(ws, topic) {
    const t = this._subs.get(topic);
    if (t === undefined || !t.sockets.delete(ws)) return false;
    t.ids = null;
    ws._topics.delete(topic);
    if (t.sockets.size === 0) this._subs.delete(topic);
    this._notify(ws, topic, t.sockets.size, t.sockets.size + 1);
    return true;
  }

  /** Before a socket's close handler: leave every topic (subscription handlers see it). */
  leaveAll(ws) {
    for (const topic of [...ws._topics]) this.unsubscribe(ws, topic);
  }

  _notify(ws, topic, newCount, oldCount) {
    const h = ws._route.behavior.subscription;
    if (h !== undefined) h(ws, arrayBuffer(topic), newCount, oldCount);
  }

  /** True when the topic had a subscriber other than `except` (uWS's answer). */
  publish(topic, message, isBinary, compress, except) {
    const t = this._subs.get(topic);
    if (t === undefined) return false;
    if (t.ids === null) t.ids = Uint32Array.from(t.sockets, (ws) => ws._h);
    let ids = t.ids;
    if (except !== undefined && t.sockets.has(except)) {
      if (t.sockets.size === 1) return true;
      ids = ids.filter((id) => id !== except._h);
    }
    native.publish(ids, message, isBinary === true, compress === true);
    scheduleFlush();
    return true;
  }
}

module.exports = { Topics };
