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
  constructor(server, socket) {
    this.server = server;
    this.socket = socket;
    this.id = null; // DDP session id, set by `connect`
    this.closed = false;
    this.subs = null; // Map subId -> publication name, created on first sub
  }

  send(obj) {
    if (!this.closed) this.socket.send(JSON.stringify(obj));
  }

  onData(raw) {
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
    const socket = this.socket;
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
      socket.close();
      return;
    }
    this.id = randomId();
    // The DDP heartbeat takes over from the handshake timeout.
    if (typeof socket.setWebsocketTimeout === 'function') socket.setWebsocketTimeout(0);
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
    if (this.closed) return;
    const socket = this.socket;
    socket.send(JSON.stringify(error === undefined
      ? { msg: 'result', id, result }
      : { msg: 'result', id, error }));
    socket.send(JSON.stringify({ msg: 'updated', methods: [id] }));
  }

  sub(msg) {
    const id = msg.id;
    if (typeof id !== 'string' || typeof msg.name !== 'string') {
      this.send({ msg: 'error', reason: 'Bad request', offendingMessage: msg });
      return;
    }
    if (msg.name !== FANOUT) {
      this.send({ msg: 'nosub', id, error: methodError(404, `Subscription '${msg.name}' not found`) });
      return;
    }
    if (this.subs === null) this.subs = new Map();
    if (!this.subs.has(id)) {
      this.subs.set(id, msg.name);
      this.server.fanout.add(this);
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

  onClose() {
    if (this.closed) return;
    this.closed = true;
    this.server.fanout.delete(this);
    this.server.sessions.delete(this);
  }
}

class DdpServer {
  /**
   * @param {{ methods?: Record<string, (...params: any[]) => any> }} [options]
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
  }

  /** Serve DDP on one Meteor-contract socket. */
  handle(socket) {
    const session = new Session(this, socket);
    this.sessions.add(session);
    // Kill a socket that never sends the DDP handshake (stream_server does the same).
    if (typeof socket.setWebsocketTimeout === 'function') socket.setWebsocketTimeout(HANDSHAKE_TIMEOUT_MS);
    socket.on('data', (raw) => session.onData(raw));
    socket.on('close', () => session.onClose());
    return session;
  }

  /** Send `added` for `doc` to every session subscribed to `fanout`; returns how many there were. */
  publish(doc) {
    const frame = JSON.stringify({ msg: 'added', collection: FANOUT, id: String(++this.fanoutSeq), fields: doc });
    let n = 0;
    for (const session of this.fanout) {
      if (session.closed) continue;
      session.socket.send(frame);
      n++;
    }
    return n;
  }
}

module.exports = { DdpServer, randomId, SUPPORTED_VERSIONS };
