'use strict';
// A small DDP server session, shared by the demo, the tests and the benchmark.
//
//   const { DdpServer } = require('./ddp-session');
//   const ddp = new DdpServer({ methods: { name(...params) { return value; /* or a Promise */ } } });
//   ddp.handle(socket);
//
// `socket` is a Meteor-transport socket: on('data', str => ...), on('close', () => ...), send(str),
// close(), and optionally setWebsocketTimeout(ms). Built in: the method `echo` (returns params[0]),
// the method `publish(doc)` (sends `added` to every session subscribed to `fanout`, returns how many
// sessions that was) and the publication `fanout`.
//
// The direct entry, for a transport without a socket object of its own (no EventEmitter in between):
//
//   const session = ddp.open((str) => ws.send(str), () => ws.end());
//   session.receive(str);   // each inbound text message
//   session.closed();       // once, when the connection is gone
//
// `handle(socket)` is a thin user of it. Methods and publications run with `this` = the session:
// `this.id` (the DDP session id), `this.data` (free for the app's per-session state),
// `this.added(collection, id, fields)` (sends `added` and keeps a copy of the fields, as Meteor's
// mergebox does) and `this.hasSub(name)`. `options.publications` adds publications:
// `{ name(subId, ...params) }`, run once on `sub`, before `ready`. (Unsubscribing only stops the
// subscription: no `removed` is sent for what it published.)
//
// This is on the benchmark's hot path: one JSON.parse per inbound message, one JSON.stringify per
// reply, no per-message closures on the synchronous path.

const crypto = require('node:crypto');

const SUPPORTED_VERSIONS = ['1', 'pre2', 'pre1'];
const HANDSHAKE_TIMEOUT_MS = 45000; // what stream_server sets before the DDP handshake
const FANOUT = 'fanout';

// Meteor-style random ids (17 characters from an unambiguous alphabet), from a pooled random buffer.
const ALPHABET = '23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz';
let pool = Buffer.alloc(0);
let poolPos = 0;
function randomId(length = 17) {
  if (poolPos + length > pool.length) {
    pool = crypto.randomBytes(4096);
    poolPos = 0;
  }
  let id = '';
  for (let i = 0; i < length; i++) id += ALPHABET[pool[poolPos++] % ALPHABET.length];
  return id;
}

function methodError(error, reason) {
  return { error, reason, message: `${reason} [${error}]`, errorType: 'Meteor.Error' };
}

// Meteor only shows errors that were thrown on purpose (objects with an `error` field);
// anything else becomes a 500 "Internal server error".
function errorFromThrown(e) {
  if (e && typeof e === 'object' && e.error !== undefined) {
    const reason = typeof e.reason === 'string' ? e.reason : String(e.message || e.error);
    return methodError(e.error, reason);
  }
  return methodError(500, 'Internal server error');
}

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

class Session {
  /**
   * @param {DdpServer} server
   * @param {(str: string) => void} send  sends one text message
   * @param {() => void} close  closes the connection
   * @param {((ms: number) => void) | null} setTimeout  the transport's idle timeout, if it has one
   */
  constructor(server, send, close, setTimeout) {
    this.server = server;
    this._send = send;
    this._close = close;
    this._setTimeout = setTimeout;
    this.socket = null; // the Meteor-contract socket, when served through `handle`
    this.id = null; // DDP session id, set by `connect`
    this.isClosed = false;
    this.subs = null; // Map subId -> publication name, created on first sub
    this.views = null; // mergebox: Map collection -> Map id -> copy of the fields sent
    this.data = null; // the app's per-session state (methods, publications)
  }

  send(obj) {
    if (!this.isClosed) this._send(JSON.stringify(obj));
  }

  /** Send `added` and keep a copy of the fields sent (what Meteor's mergebox keeps per session). */
  added(collection, id, fields) {
    if (this.isClosed) return;
    if (this.views === null) this.views = new Map();
    let view = this.views.get(collection);
    if (view === undefined) this.views.set(collection, (view = new Map()));
    view.set(id, { ...fields });
    this._send(JSON.stringify({ msg: 'added', collection, id, fields }));
  }

  /** Whether a subscription to publication `name` is open. */
  hasSub(name) {
    if (this.subs === null) return false;
    for (const n of this.subs.values()) if (n === name) return true;
    return false;
  }

  /** One inbound text message. */
  receive(raw) {
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch (e) {
      this.send({ msg: 'error', reason: 'Parse error' });
      return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg) || typeof msg.msg !== 'string') {
      this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
      return;
    }
    if (this.id === null) {
      if (msg.msg === 'connect') this.connect(msg);
      else this.send({ msg: 'error', reason: 'Must connect first', offendingMessage: msg });
      return;
    }
    switch (msg.msg) {
      case 'method': return this.method(msg);
      case 'ping': return this.send(msg.id === undefined ? { msg: 'pong' } : { msg: 'pong', id: msg.id });
      case 'pong': return undefined; // any inbound message counts as a heartbeat reply
      case 'sub': return this.sub(msg);
      case 'unsub': return this.unsub(msg);
      default: return this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
    }
  }

  connect(msg) {
    if (typeof msg.version !== 'string' || !SUPPORTED_VERSIONS.includes(msg.version) ||
        (msg.support !== undefined && !Array.isArray(msg.support))) {
      // Propose the first version of the client's list that we speak, else our preferred one.
      let version = SUPPORTED_VERSIONS[0];
      if (Array.isArray(msg.support)) {
        const common = msg.support.find((v) => SUPPORTED_VERSIONS.includes(v));
        if (common) version = common;
      }
      // Like livedata: send `failed`, then close in the same tick (the transport must flush it first).
      this.send({ msg: 'failed', version });
      if (!this.isClosed) this._close();
      return;
    }
    this.id = randomId();
    // The DDP heartbeat takes over from the handshake timeout.
    if (this._setTimeout !== null) this._setTimeout(0);
    this.send({ msg: 'connected', session: this.id });
  }

  method(msg) {
    const id = msg.id;
    if (typeof id !== 'string' || typeof msg.method !== 'string' ||
        (msg.params !== undefined && !Array.isArray(msg.params))) {
      this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
      return;
    }
    const fn = this.server.methods[msg.method];
    if (typeof fn !== 'function') {
      this.reply(id, undefined, methodError(404, `Method '${msg.method}' not found`));
      return;
    }
    let value;
    try {
      value = fn.apply(this, msg.params || []);
    } catch (e) {
      this.reply(id, undefined, errorFromThrown(e));
      return;
    }
    if (isThenable(value)) {
      value.then((v) => this.reply(id, v, undefined), (e) => this.reply(id, undefined, errorFromThrown(e)));
    } else {
      this.reply(id, value, undefined);
    }
  }

  reply(id, result, error) {
    if (this.isClosed) return;
    this._send(JSON.stringify(error === undefined
      ? { msg: 'result', id, result }
      : { msg: 'result', id, error }));
    this._send(JSON.stringify({ msg: 'updated', methods: [id] }));
  }

  sub(msg) {
    const id = msg.id;
    if (typeof id !== 'string' || typeof msg.name !== 'string') {
      this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
      return;
    }
    const pub = msg.name === FANOUT ? null : this.server.publications[msg.name];
    if (msg.name !== FANOUT && typeof pub !== 'function') {
      this.send({ msg: 'nosub', id, error: methodError(404, `Subscription '${msg.name}' not found`) });
      return;
    }
    if (this.subs === null) this.subs = new Map();
    if (!this.subs.has(id)) {
      this.subs.set(id, msg.name);
      if (pub === null) this.server.fanout.add(this);
      else {
        try {
          pub.apply(this, Array.isArray(msg.params) ? [id, ...msg.params] : [id]);
        } catch (e) {
          this.subs.delete(id);
          this.send({ msg: 'nosub', id, error: errorFromThrown(e) });
          return;
        }
      }
    }
    this.send({ msg: 'ready', subs: [id] });
  }

  unsub(msg) {
    const id = msg.id;
    if (typeof id !== 'string') {
      this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
      return;
    }
    if (this.subs !== null && this.subs.delete(id)) this.dropFanoutIfUnused();
    this.send({ msg: 'nosub', id });
  }

  dropFanoutIfUnused() {
    for (const name of this.subs.values()) if (name === FANOUT) return;
    this.server.fanout.delete(this);
  }

  /** The connection is gone (once; later calls do nothing). */
  closed() {
    if (this.isClosed) return;
    this.isClosed = true;
    this.server.fanout.delete(this);
    this.server.sessions.delete(this);
  }
}

class DdpServer {
  /**
   * @param {{ methods?: Record<string, (...params: any[]) => any>,
   *           publications?: Record<string, (subId: string, ...params: any[]) => void> }} [options]
   */
  constructor(options = {}) {
    const server = this;
    this.sessions = new Set();
    this.fanout = new Set(); // sessions subscribed to `fanout`
    this.fanoutSeq = 0;
    this.methods = Object.assign(Object.create(null), {
      echo(x) { return x; },
      publish(doc) { return server.publish(doc); },
    }, options.methods || {});
    this.publications = Object.assign(Object.create(null), options.publications || {});
  }

  /**
   * Serve DDP on one connection, called directly: `send(str)` sends a text message, `close()`
   * closes the connection, `setTimeout(ms)` (optional) sets the transport's idle timeout (45 s
   * until the DDP handshake, then 0, as stream_server does). Feed it with `session.receive(str)`
   * and `session.closed()`.
   * @returns {Session}
   */
  open(send, close, setTimeout = null) {
    const session = new Session(this, send, close, setTimeout);
    this.sessions.add(session);
    // Kill a connection that never sends the DDP handshake (stream_server does the same).
    if (setTimeout !== null) setTimeout(HANDSHAKE_TIMEOUT_MS);
    return session;
  }

  /** Serve DDP on one Meteor-contract socket (through `open`). */
  handle(socket) {
    const session = this.open((str) => socket.send(str), () => socket.close(),
      typeof socket.setWebsocketTimeout === 'function' ? (ms) => socket.setWebsocketTimeout(ms) : null);
    session.socket = socket;
    socket.on('data', (raw) => session.receive(raw));
    socket.on('close', () => session.closed());
    return session;
  }

  /** Send `added` for `doc` to every session subscribed to `fanout`; returns how many there were. */
  publish(doc) {
    const frame = JSON.stringify({ msg: 'added', collection: FANOUT, id: String(++this.fanoutSeq), fields: doc });
    let n = 0;
    for (const session of this.fanout) {
      if (session.isClosed) continue;
      session._send(frame);
      n++;
    }
    return n;
  }
}

module.exports = { DdpServer, randomId, SUPPORTED_VERSIONS };
