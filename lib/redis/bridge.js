'use strict';
// The Redis bridge of one /uws app: its publishes go to Redis (PUBLISH prefix+topic), and what the
// other instances publish on a topic this app has subscribers for comes back from Redis
// (SUBSCRIBE prefix+topic, one channel per topic) and is delivered with the app's local publish
// (one native call: the shared frame, compressed once). Two connections: a subscriber connection
// is in Redis's subscriber mode and can send nothing else.
//
// Outbound, the messages one tick publishes on a topic leave as one PUBLISH (a batch, wire.js).
// Delivery is at-most-once, as Redis pub/sub is: a message published while Redis is unreachable,
// or past the outbound cap, is delivered to this instance's subscribers only and counted; one in
// flight when the connection breaks is counted as failed (it may or may not have reached Redis)
// and never sent again (a resend could deliver it twice).

const crypto = require('node:crypto');
const wire = require('./wire');

const SUBSCRIBE_CHUNK = 1000; // channels per SUBSCRIBE/UNSUBSCRIBE command
const BATCH_BYTES = 1024 * 1024; // a topic's batch is sent at once when it reaches this size

class Bridge {
  /** `Redis`: the ioredis class; `o`: validated options (lib/redis/index.js). */
  constructor(app, Redis, o) {
    this._topics = app._topics;
    this._prefix = o.prefix;
    this._prefixBytes = Buffer.byteLength(o.prefix);
    this._url = o.shownUrl; // the password masked
    this._maxQueued = o.maxQueued;
    this._maxQueuedBytes = o.maxQueuedBytes;
    this._id = crypto.randomBytes(wire.ID_BYTES);
    this._closed = false;
    this._closing = null;
    this._warned = false;
    this._c = {
      published: 0, acknowledged: 0, received: 0, ownEchoes: 0, malformed: 0,
      droppedOffline: 0, droppedQueueFull: 0, failed: 0, reconnects: 0, errors: 0,
    };
    this._lastError = null;
    this._queued = 0;
    this._queuedBytes = 0;
    // subscriptions: what the app wants (topics with local subscribers), changes not sent yet,
    // commands in flight, and who waits for all of it to be acknowledged
    this._subscribed = 0; // channels Redis counts on the subscriber connection (its last answer)
    this._changes = new Map(); // topic → true (subscribe) / false (unsubscribe), sent next tick
    this._flushScheduled = false;
    this._subsInFlight = new Set(); // SUBSCRIBE/UNSUBSCRIBE commands not answered yet
    this._syncWaiters = [];
    const common = {
      ...o.redisOptions,
      enableOfflineQueue: false, // not connected: a publish is dropped and counted, not queued
      autoResendUnfulfilledCommands: false, // no resend after a reconnect: no duplicates
      autoResubscribe: false, // the bridge subscribes its topics itself on every `ready`
      maxRetriesPerRequest: null,
      retryStrategy: (times) => Math.min(times * 50, o.retryMaxMs),
    };
    this._pub = new Redis(o.url, { ...common, connectionName: 'ddp-transport-native-pub' });
    this._sub = new Redis(o.url, { ...common, connectionName: 'ddp-transport-native-sub' });
    // outbound: this tick's messages per topic, one PUBLISH per topic at the end of the tick
    this._batches = new Map(); // topic → wire.Batch
    this._inFlight = new Set(); // { n, bytes } of each PUBLISH not answered yet
    this._batchFlushScheduled = false;
    this._flushBatches = () => {
      this._batchFlushScheduled = false;
      const batches = this._batches;
      this._batches = new Map();
      for (const [topic, batch] of batches) this._sendBatch(topic, batch);
    };
    for (const conn of [this._pub, this._sub]) {
      let first = true;
      conn.on('error', (err) => this._error(err));
      // Without resend (autoResendUnfulfilledCommands: false), ioredis never settles the commands
      // in flight when a connection closes: they are settled here, as failed.
      conn.on('close', () => {
        if (conn === this._pub) for (const rec of [...this._inFlight]) this._published(rec, false);
        else this._subsInFlight.clear();
      });
      conn.on('ready', () => {
        if (!first) this._c.reconnects++;
        first = false;
        this._warned = false;
        if (conn === this._sub) this._resubscribe();
        else this._settleWaiters();
      });
    }
    this._sub.on('messageBuffer', (channel, frame) => this._message(channel, frame));
    this._topics.broker = this;
    for (const topic of this._topics.names()) this.topicAdded(topic);
  }

  // ---- the broker interface of lib/uws/topics.js ---------------------------------------------

  topicAdded(topic) {
    this._change(topic, true);
  }

  topicRemoved(topic) {
    this._change(topic, false);
  }

  /** After the local delivery: into this tick's batch for the topic (sent to Redis at the end of
   *  the tick, or at once when it reaches BATCH_BYTES), unless not connected or over the cap (then
   *  counted). */
  publish(topic, message, isBinary, compress) {
    if (this._closed) return;
    if (this._pub.status !== 'ready') {
      this._c.droppedOffline++;
      return;
    }
    const len = wire.byteLengthOf(message);
    const bytes = wire.RECORD_BYTES + len;
    if (this._queued >= this._maxQueued || this._queuedBytes + bytes > this._maxQueuedBytes) {
      this._c.droppedQueueFull++;
      return;
    }
    this._queued++;
    this._queuedBytes += bytes;
    this._c.published++;
    let batch = this._batches.get(topic);
    if (batch === undefined) {
      batch = new wire.Batch();
      this._batches.set(topic, batch);
      if (!this._batchFlushScheduled) {
        this._batchFlushScheduled = true;
        process.nextTick(this._flushBatches);
      }
    }
    batch.add(wire.payloadOf(message), len, isBinary, compress);
    if (batch.bytes >= BATCH_BYTES) {
      this._batches.delete(topic);
      this._sendBatch(topic, batch);
    }
  }

  appClosed() {
    this.close();
  }

  // ---- public --------------------------------------------------------------------------------

  /** Resolves when both connections are up and Redis has acknowledged every subscription change
   *  made so far (topics that got their first subscriber or lost their last); rejects if the
   *  bridge is closed first. */
  synced() {
    if (this._closed) return Promise.reject(new Error('redis bridge: closed'));
    return new Promise((resolve, reject) => {
      this._syncWaiters.push({ resolve, reject });
      this._settleWaiters();
    });
  }

  stats() {
    const c = this._c;
    return {
      instanceId: this._id.toString('hex'),
      connected: !this._closed && this._pub.status === 'ready' && this._sub.status === 'ready',
      topics: this._topics.size(),
      subscribed: this._subscribed,
      published: c.published,
      acknowledged: c.acknowledged,
      received: c.received,
      ownEchoes: c.ownEchoes,
      malformed: c.malformed,
      queued: this._queued,
      queuedBytes: this._queuedBytes,
      maxQueued: this._maxQueued,
      maxQueuedBytes: this._maxQueuedBytes,
      dropped: c.droppedOffline + c.droppedQueueFull,
      droppedOffline: c.droppedOffline,
      droppedQueueFull: c.droppedQueueFull,
      failed: c.failed,
      reconnects: c.reconnects,
      errors: c.errors,
      lastError: this._lastError,
    };
  }

  /** Stop bridging: the app's publishes stay local again; both connections are closed. */
  close() {
    if (this._closing !== null) return this._closing;
    this._flushBatches(); // this tick's publishes leave before QUIT
    this._closed = true;
    if (this._topics.broker === this) this._topics.broker = null;
    for (const w of this._syncWaiters.splice(0)) w.reject(new Error('redis bridge: closed'));
    const end = (conn) => (conn.status === 'ready' ? conn.quit().catch(() => conn.disconnect()) : conn.disconnect());
    this._closing = Promise.all([end(this._pub), end(this._sub)]).then(() => {});
    return this._closing;
  }

  // ---- internals -----------------------------------------------------------------------------

  _error(err) {
    this._c.errors++;
    this._lastError = err.message;
    if (this._warned || this._closed) return;
    this._warned = true;
    process.emitWarning(`redis bridge: ${err.message} (${this._url}); retrying. Until Redis is back, publishes reach `
      + "this instance's subscribers only (counted in stats().droppedOffline)", { code: 'DTN_REDIS_UNAVAILABLE' });
  }

  /** One PUBLISH for a batch; its messages leave the queue when Redis answers (or the connection
   *  fails with them in flight: counted as failed, never sent again). */
  _sendBatch(topic, batch) {
    const rec = { n: batch.count, bytes: batch.bytes - wire.HEADER_BYTES };
    this._inFlight.add(rec);
    this._pub.publish(this._prefix + topic, batch.encode(this._id)).then(() => this._published(rec, true), () => this._published(rec, false));
  }

  /** A PUBLISH answered (ok) or lost with its connection: its messages leave the queue, once. */
  _published(rec, ok) {
    if (!this._inFlight.delete(rec)) return;
    this._queued -= rec.n;
    this._queuedBytes -= rec.bytes;
    if (ok) this._c.acknowledged += rec.n;
    else this._c.failed += rec.n;
  }

  _message(channel, frame) {
    const own = wire.isOwn(this._id, frame);
    if (own === null || channel.length < this._prefixBytes) {
      this._c.malformed++;
      return;
    }
    if (own) {
      this._c.ownEchoes += wire.countMessages(frame); // delivered here when they were published
      return;
    }
    const topic = channel.toString('utf8', this._prefixBytes);
    const ok = wire.eachMessage(frame, (payload, isBinary, compress) => {
      this._c.received++;
      this._topics.deliver(topic, payload, isBinary, compress);
    });
    if (!ok) this._c.malformed++;
  }

  _change(topic, on) {
    if (this._closed) return;
    this._changes.set(topic, on);
    if (!this._flushScheduled) {
      this._flushScheduled = true;
      process.nextTick(() => this._flushChanges());
    }
  }

  /** Send this tick's subscription changes (when not connected, `ready` subscribes them all). */
  _flushChanges() {
    this._flushScheduled = false;
    if (this._closed || this._sub.status !== 'ready') return;
    const add = [];
    const remove = [];
    for (const [topic, on] of this._changes) (on ? add : remove).push(this._prefix + topic);
    this._changes.clear();
    this._send('subscribe', add);
    this._send('unsubscribe', remove);
    this._settleWaiters();
  }

  /** A (re)connected subscriber connection: subscribe every topic the app has now. */
  _resubscribe() {
    if (this._closed) return;
    this._changes.clear();
    this._send('subscribe', [...this._topics.names()].map((t) => this._prefix + t));
    this._settleWaiters();
  }

  _send(command, channels) {
    for (let i = 0; i < channels.length; i += SUBSCRIBE_CHUNK) {
      const token = {};
      this._subsInFlight.add(token);
      this._sub[command](...channels.slice(i, i + SUBSCRIBE_CHUNK)).then((count) => {
        if (this._subsInFlight.has(token)) this._subscribed = count;
      }, () => {}).finally(() => {
        this._subsInFlight.delete(token);
        this._settleWaiters();
      });
    }
  }

  _settleWaiters() {
    if (this._syncWaiters.length === 0) return;
    const done = this._pub.status === 'ready' && this._sub.status === 'ready'
      && this._subsInFlight.size === 0 && this._changes.size === 0;
    if (done) for (const w of this._syncWaiters.splice(0)) w.resolve();
  }
}

module.exports = { Bridge };
