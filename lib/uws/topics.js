'use strict';
// Pub/sub topics of one app (uWS semantics): topic → subscribers. A publish is ONE native call:
// the message is encoded once and the same bytes are queued on every subscriber, behind what each
// already queued (so publish and send keep their order on a socket). A broker (the Redis bridge,
// lib/redis) may be set: it is told when a topic gets its first subscriber or loses its last, and
// is handed every publish after the local delivery; what it receives it hands to deliver().

const { native } = require('../constants');
const { scheduleFlush } = require('../websocket');
const { arrayBuffer } = require('./util');

class Topics {
  constructor() {
    this._subs = new Map(); // topic → { sockets: Set, ids: Uint32Array | null }
    this.broker = null; // { topicAdded(topic), topicRemoved(topic), publish(topic, message, isBinary, compress), appClosed() }
  }

  /** The topics with at least one subscriber. */
  names() {
    return this._subs.keys();
  }

  size() {
    return this._subs.size;
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
    if (t.sockets.size === 1 && this.broker !== null) this.broker.topicAdded(topic);
    this._notify(ws, topic, t.sockets.size, t.sockets.size - 1);
    return true;
  }

  unsubscribe(ws, topic) {
    const t = this._subs.get(topic);
    if (t === undefined || !t.sockets.delete(ws)) return false;
    t.ids = null;
    ws._topics.delete(topic);
    if (t.sockets.size === 0) {
      this._subs.delete(topic);
      if (this.broker !== null) this.broker.topicRemoved(topic);
    }
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

  /** Delivered here, then handed to the broker if there is one. True when the topic had a
   *  subscriber here other than `except` (uWS's answer; subscribers elsewhere are not known). */
  publish(topic, message, isBinary, compress, except) {
    const local = this.deliver(topic, message, isBinary, compress, except);
    if (this.broker !== null) this.broker.publish(topic, message, isBinary === true, compress === true);
    return local;
  }

  /** To this app's subscribers only: one native call, the message encoded once. */
  deliver(topic, message, isBinary, compress, except) {
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
