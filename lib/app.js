'use strict';
// The App: routes, listeners, same-port attachment, the dispatch of event batches from the core
// to the handlers, drain, stats and close.

const tls = require('tls');
const { native, Event, TURN_BUDGET_MS } = require('./constants');
const O = require('./options');
const { WebSocket, headerObject, batchHandlers } = require('./websocket');
const { attach, detach } = require('./attach');
const M = require('./metrics');

// Bun and Deno implement N-API but not the libuv loop the inline mode watches its fd with: Bun's
// uv_poll_init panics ("unsupported uv function"), Deno's loop never calls the poll handle back.
// There the app runs the threaded mode.
const INLINE_RUNTIME = !process.versions.bun && typeof globalThis.Deno === 'undefined';

function rethrow(err) {
  throw err;
}

class TemplatedApp {
  constructor(options) {
    const { threads, io, admission, proxyProtocol } = O.appOptions(options);
    // The bridge calls this with a batch `-1, ms, tag, value, ...` (`ms`: the event-loop turn's
    // budget left), or with no arguments when the turn's budget ran out: then it settles after this
    // turn's other I/O (src/bridge.rs, fairness). A batch's handlers stop when the budget is spent;
    // the rest of the batch waits in `_carry` and runs first, from setImmediate turns (a budget of
    // TURN_BUDGET_MS each), before the bridge settles.
    // A turn lasts from its first delivery until the event loop's check phase, where a
    // setImmediate queued with that delivery tells the bridge (`turnOver`): deliveries Node chains
    // in between (woken while handlers or their promise jobs ran) share the turn's budget.
    this._carry = null; // { batch, i }: events delivered but not handled yet, in order
    this._settleFn = () => this._settle();
    this._turnMarked = false;
    this._turnOverFn = () => {
      this._turnMarked = false;
      this._bridge.turnOver();
    };
    // Close after what came before it: a socket's close handler runs only once the promise jobs
    // of its earlier events' handlers have run, as it does when each read is its own callback
    // (uWS.js, Node's sockets). A delivery can hold several reads of one socket, its close
    // included, with no microtask checkpoint between them (chunks of one wakeup are one JS call
    // after another), so a close whose socket had an event since the last checkpoint waits in
    // the carry for the next turn. `_epoch` counts checkpoints: `_mark` stamps a socket with it
    // and queues the microtask that moves it on.
    this._epoch = 0;
    this._epochQueued = false;
    this._epochFn = () => {
      this._epochQueued = false;
      this._epoch++;
    };
    this._native = new native.NativeApp(threads, io === 'inline' && INLINE_RUNTIME, (...batch) => {
      if (batch.length === 0) {
        setImmediate(this._settleFn);
        return true;
      }
      return this._deliver(batch);
    });
    // 'inline' only where the runtime lets the core watch a fd in its event loop (Linux, Node)
    this.ioMode = this._native.ioMode;
    // settle() delivers events whose handlers may close the app: it lives on a handle of its own
    this._bridge = this._native.bridgeHandle();
    this._native.setAdmission(admission);
    this._proxyProtocol = proxyProtocol;
    if (proxyProtocol) this._native.setProxyProtocol(true);
    this._routes = [];
    this._sockets = new Map();
    this._userData = new Map();
    this._listening = 0;
    this._refd = true;
    this._attached = [];
    this._internal = null;
    this._closed = false;
    this._drainWaiters = [];
    this._pendingUpgrades = new Map(); // token → the upgrade's res, until answered or aborted
    // connections an attached server accepted that the core examines (lib/first-look.js):
    // token → what to do with Node's handle once it is decided
    this._examining = new Map();
    this._nextExamine = 1;
    this._updateRef();
  }

  ws(pattern, behavior) {
    const opts = O.routeOptions(pattern, behavior);
    const index = this._native.addRoute(pattern, opts);
    this._routes[index] = { pattern, behavior };
    return this;
  }

  listen(a, b, c) {
    const { host, port, cb } = O.listenArgs(a, b, c);
    return this._listen(host, port, false, cb);
  }

  /** The one door to the own listener. `share`: bind with SO_REUSEPORT, so that processes which
   *  all listen so share the port (the /uws surface's default for a given port, as uWS.js; Unix
   *  only). */
  _listen(host, port, share, cb) {
    let bound;
    try {
      bound = this._native.listen(host, port, share);
    } catch (e) {
      const err = O.nativeError(e, `listen ${host}:${port}`);
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
    const { paths } = O.attachOptions(server, options, this._routes.map((r) => r.pattern));
    if (this._proxyProtocol && server instanceof tls.Server) {
      throw new Error('attach: App option proxyProtocol needs a plain http.Server (or the app\'s own listener, listen()); an https.Server (and a /uws SSLApp, which attaches to one) reads TLS first, before any PROXY header could be read: terminate TLS in the proxy');
    }
    if (this._attached.some((a) => a.server === server)) {
      throw new Error(`attach: this app is already attached to this server (paths ${paths.join(', ')}); attach it once`);
    }
    this._attached.push(attach(this, server, paths, { proxyProtocol: this._proxyProtocol }));
    return this;
  }

  _updateRef() {
    const want = !this._closed && (this._listening > 0 || this._sockets.size > 0);
    if (want !== this._refd) {
      this._refd = want;
      this._native.setRef(want);
    }
  }

  /** A chunk from the bridge: false when the turn's budget ran out before its end (the rest waits). */
  _deliver(batch) {
    if (!this._turnMarked) {
      this._turnMarked = true;
      setImmediate(this._turnOverFn);
    }
    const left = batch[1]; // the header: the turn's budget left, ms
    let i = 2;
    if (this._carry !== null) {
      // only after an exception left a carry behind: keep the order
      batch = this._carry.batch.slice(this._carry.i).concat(batch.slice(2));
      this._carry = null;
      i = 0;
    }
    batchHandlers(true); // the bridge writes what they send when this call returns
    try {
      i = this._dispatch(batch, i, left);
    } finally {
      batchHandlers(false);
    }
    if (i < batch.length && !this._closed) {
      this._carry = { batch, i };
      return false;
    }
    return true;
  }

  /** setImmediate after a delivery: handle what the budget left (one budget per turn), then let
   *  the bridge settle (deliver more next turn, or wait for the next event). */
  _settle() {
    const c = this._carry;
    if (c !== null && !this._closed) {
      c.i = this._dispatch(c.batch, c.i, TURN_BUDGET_MS);
      if (c.i < c.batch.length && !this._closed) {
        setImmediate(this._settleFn);
        return;
      }
    }
    this._carry = null;
    this._bridge.settle();
  }

  /** Handle `batch` from index `i` until its end or the turn's budget (`left` ms from now);
   *  returns where it stopped.
   *  Past the budget it stops between two sockets' events, so one socket's run (a read's
   *  pipelined messages) is handled in one turn, unless that run alone has taken a budget. */
  _dispatch(batch, i, left) {
    // After app.close() every socket is closed and its close handler ran; events still queued
    // in Rust are void (a socket whose open never reached JS gets neither open nor close).
    let runId = -1;
    let runStart = 0;
    let now = performance.now(); // read once per event: after its handler (the next one starts then)
    const deadline = now + left;
    for (; i < batch.length && !this._closed; i += 2) {
      const tag = batch[i];
      const v = batch[i + 1];
      const kind = tag % Event.KINDS;
      const id = (tag - kind) / Event.KINDS;
      if (id !== runId) {
        if (runId !== -1 && now >= deadline) return i;
        runId = id;
        runStart = now;
      }
      if (kind === Event.CLOSE) {
        const ws = this._sockets.get(id);
        if (ws !== undefined && ws._epoch === this._epoch) return i; // see `_epoch`
      }
      try {
        if (kind === Event.TEXT || kind === Event.BINARY) {
          const ws = this._sockets.get(id);
          if (ws !== undefined && !ws._ending) {
            this._mark(ws);
            const h = ws._behavior.message;
            if (h !== undefined) h(ws, v, kind === Event.BINARY);
          }
        } else if (kind === Event.OPEN) {
          this._open(id, v);
        } else if (kind === Event.CLOSE) {
          this._close(id, v.code, v.reason);
        } else if (kind === Event.DRAIN) {
          const ws = this._sockets.get(id);
          if (ws !== undefined && ws._behavior.drain) {
            this._mark(ws);
            ws._behavior.drain(ws);
          }
        } else if (kind === Event.PING || kind === Event.PONG) {
          const ws = this._sockets.get(id);
          const h = ws === undefined || ws._ending ? undefined : ws._behavior[kind === Event.PING ? 'ping' : 'pong'];
          if (h !== undefined) {
            this._mark(ws);
            h(ws, v);
          }
        } else if (kind === Event.UPGRADE) {
          this._upgrade(v);
        } else if (kind === Event.CLAIMED || kind === Event.RETURNED) {
          const done = this._examining.get(v);
          if (done !== undefined) {
            this._examining.delete(v);
            done(kind === Event.CLAIMED ? 'claimed' : 'returned');
          }
        } else if (kind === Event.ABORTED) {
          const res = this._pendingUpgrades.get(v);
          if (res !== undefined) res._abort();
        }
      } catch (err) {
        // One handler's exception must not lose the rest of the batch; it surfaces as an
        // uncaught exception, as it would from any Node event handler.
        process.nextTick(rethrow, err);
      }
      now = performance.now();
      if (now - runStart >= TURN_BUDGET_MS) return i + 2;
    }
    return i;
  }

  _open(id, info) {
    const route = this._routes[info.route];
    let userData;
    if (info.token !== 0 && this._userData.has(info.token)) {
      userData = this._userData.get(info.token);
      this._userData.delete(info.token);
    }
    const ws = new WebSocket(id, info, route.behavior, userData);
    this._sockets.set(id, ws);
    if (this._sockets.size === 1) this._updateRef();
    this._mark(ws);
    if (route.behavior.open) route.behavior.open(ws);
  }

  /** `ws` gets an event's handler now: its close waits for the next microtask checkpoint. */
  _mark(ws) {
    ws._epoch = this._epoch;
    if (!this._epochQueued) {
      this._epochQueued = true;
      queueMicrotask(this._epochFn);
    }
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

  _upgrade(u) {
    const route = this._routes[u.route];
    const token = u.token;
    const pending = this._pendingUpgrades;
    let answered = false;
    let onAborted;
    const answer = () => {
      if (answered || this._closed) return false;
      answered = true;
      pending.delete(token);
      return true;
    };
    const res = {
      accept: (userData, protocol, options) => {
        const o = options || {};
        const headers = O.answerHeaders(o.headers, 'accept: headers');
        const extensions = o.extensions === undefined ? undefined : String(o.extensions);
        if (!answer()) return;
        if (userData !== undefined) this._userData.set(token, userData);
        this._native.decide(token, true, typeof protocol === 'string' ? protocol : undefined, extensions, 0, undefined, '', headers);
      },
      reject: (status, body, options) => {
        const o = options || {};
        const headers = O.answerHeaders(o.headers, 'reject: headers');
        if (!answer()) return;
        const statusText = o.statusText === undefined ? undefined : String(o.statusText);
        this._native.decide(token, false, undefined, undefined, O.refusalStatus(status), statusText,
          body === undefined ? 'Forbidden' : String(body), headers);
      },
      /** `cb()` runs if the client goes away before accept/reject; answering later is a no-op. */
      onAborted: (cb) => {
        onAborted = cb;
        return res;
      },
      _event: u, // the core's upgrade event (the /uws layer reads the TCP peer from it)
      _abort: () => {
        answered = true;
        pending.delete(token);
        const cb = onAborted;
        onAborted = null;
        if (typeof cb === 'function') cb();
      },
    };
    pending.set(token, res);
    const req = {
      method: u.method,
      url: u.url,
      headers: headerObject(u.headers),
      // The client: the one a PROXY header named (App option proxyProtocol), else the TCP peer.
      remoteAddress: u.proxiedAddress === undefined ? u.remoteAddress : u.proxiedAddress,
      remotePort: u.proxiedAddress === undefined ? u.remotePort : u.proxiedPort,
      protocols: u.protocols,
      extensions: u.extensions,
    };
    try {
      route.behavior.upgrade(req, res);
    } catch (err) {
      res.reject(500, 'Internal Server Error');
      throw err;
    }
  }

  drain(options) {
    const { batch, intervalMs, code, reason } = O.drainOptions(options);
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
      compressions: s.compressions,
      compressionsReused: s.compressionsReused,
      // admission control: whether it bounds upgrades; upgrades let through, held first, answered 503 + Retry-After; the
      // admitted sockets whose first event JS has not taken yet, the admission window and the new clients in it (gauges)
      admission: {
        on: s.admissionOn,
        admitted: s.admissionAdmitted,
        deferred: s.admissionDeferred,
        refused: s.admissionRefused,
        waiting: s.admissionWaiting,
        window: s.admissionWindow,
        inFlight: s.admissionInFlight,
      },
      closesByCode,
    };
    this._lastStats = out;
    return out;
  }

  /** stats() in the Prometheus text exposition format (serve it with `metricsContentType`). */
  metrics(options) {
    const s = this.stats();
    if (s === null) return '';
    return M.prometheusText(s, options);
  }

  /** Observable instruments on an OpenTelemetry meter, read from stats(); returns an unregister function. */
  registerOpenTelemetry(meter, options) {
    return M.registerOpenTelemetry(meter, () => this.stats(), options);
  }

  close() {
    if (this._closed) return;
    this.stats();
    this._closed = true;
    this._pendingUpgrades.clear();
    for (const a of this._attached) detach(a);
    this._attached = [];
    this._native.stopListening();
    const open = [...this._sockets.values()];
    for (const ws of open) if (!ws._ending) native.end(ws._h, 1001, 'server closing');
    native.flushAll();
    this._native.close();
    // Connections still examined: the core let go of its copy; Node's is closed unanswered.
    for (const done of this._examining.values()) done('closed');
    this._examining.clear();
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

module.exports = { TemplatedApp };
