'use strict';
// App of the uWS compat surface: a layer over the main API's app (lib/app.js) whose routes are
// registered with the core's uWS matching rules; handlers get uWS's arguments.

const { TemplatedApp } = require('../app');
const { UWS_PATTERN_PREFIX } = require('../constants');
const O = require('../options');
const { UWebSocket } = require('./websocket');
const { UHttpRequest, UHttpResponse } = require('./http');
const { Topics } = require('./topics');
const { arrayBuffer, text } = require('./util');

function rethrow(err) {
  throw err;
}

/** The listen token handed to listen callbacks (us_listen_socket_close / us_socket_local_port). */
class ListenSocket {
  constructor(app, port, close) {
    this._app = app;
    this.port = port;
    this._close = close;
  }
}

class UApp {
  constructor(options) {
    // uWS.js has no admission control: none unless asked for (`admission` in the options).
    this._inner = new TemplatedApp({ admission: false, ...(options || {}) });
    this._topics = new Topics();
  }

  ws(pattern, behavior) {
    const { opts, maxLifetime } = O.uwsRouteOptions(pattern, behavior);
    const b = behavior || {};
    const route = { behavior: b, pattern: UWS_PATTERN_PREFIX + pattern, maxLifetime };
    const inner = {
      open: (ws) => this._open(route, ws),
      message: (ws, data, isBinary) => {
        const u = ws._uws;
        if (u !== undefined && !u._done && b.message) b.message(u, arrayBuffer(data), isBinary);
      },
      drain: (ws) => {
        const u = ws._uws;
        if (u !== undefined && !u._done && b.drain) b.drain(u);
      },
      ping: (ws, data) => {
        const u = ws._uws;
        if (u !== undefined && !u._done && b.ping) b.ping(u, arrayBuffer(data));
      },
      pong: (ws, data) => {
        const u = ws._uws;
        if (u !== undefined && !u._done && b.pong) b.pong(u, arrayBuffer(data));
      },
      close: (ws, code, reason) => {
        if (ws._uws !== undefined) this._finish(ws._uws, code, reason);
      },
    };
    if (b.upgrade) inner.upgrade = (req, res) => this._upgrade(route, req, res);
    opts.upgradeHook = b.upgrade !== undefined;
    opts.reportControl = b.ping !== undefined || b.pong !== undefined;
    const index = this._inner._native.addRoute(route.pattern, opts);
    this._inner._routes[index] = { pattern: route.pattern, behavior: inner };
    return this;
  }

  _upgrade(route, r, res) {
    const req = new UHttpRequest(r, route.pattern);
    const ures = new UHttpResponse(r, res);
    try {
      route.behavior.upgrade(ures, req, {});
    } finally {
      req._valid = false;
    }
  }

  _open(route, inner) {
    const ws = new UWebSocket(this, route, inner);
    inner._uws = ws;
    if (route.maxLifetime > 0) {
      ws._lifetime = setTimeout(() => !ws._done && ws.close(), route.maxLifetime * 60000);
      ws._lifetime.unref();
    }
    if (route.behavior.open) route.behavior.open(ws);
  }

  /** Once per socket, from end()/close() synchronously or from the core's close event: leave
   *  every topic, then the close handler; the socket is closed for JS from then on. */
  _finish(ws, code, reason) {
    if (ws._done) return;
    this._topics.leaveAll(ws);
    ws._done = true;
    if (ws._lifetime) clearTimeout(ws._lifetime);
    const h = ws._route.behavior.close;
    if (h) h(ws, code, arrayBuffer(reason));
  }

  /** `listen(port, cb)`, `listen(host, port, cb)`, `listen(port, options, cb)`; cb gets the
   *  listen socket, or false when it could not listen (as uWS). */
  listen(a, b, c) {
    let args = [a, b, c];
    let options = 0;
    if (typeof a === 'number' && typeof b === 'number') [args, options] = [[a, c], b]; // (port, options, cb)
    const { host, port, cb } = O.listenArgs(...args);
    // uSockets binds a given port (not 0) with SO_REUSEPORT unless told
    // LIBUS_LISTEN_EXCLUSIVE_PORT: node:cluster workers (or any processes) listening on one port
    // share it.
    const share = port !== 0 && (options & O.LIBUS_LISTEN_EXCLUSIVE_PORT) === 0;
    this._inner._listen(host, port, share, (token) => {
      cb(token ? new ListenSocket(this, token.port, () => this._stopListening()) : false);
    });
    return this;
  }

  publish(topic, message, isBinary, compress) {
    return this._topics.publish(text(topic), message, isBinary, compress);
  }

  numSubscribers(topic) {
    return this._topics.count(text(topic));
  }

  /** Close the listener and every socket now (close handlers run with 1006, as uWS); a broker
   *  (the Redis bridge) closes with the app. */
  close() {
    const broker = this._topics.broker;
    if (broker !== null) broker.appClosed();
    for (const inner of this._inner._sockets.values()) {
      const u = inner._uws;
      if (u !== undefined && !u._done) {
        try {
          this._finish(u, 1006, '');
        } catch (err) {
          process.nextTick(rethrow, err);
        }
      }
    }
    this._inner.close();
    return this;
  }

  _stopListening() {
    this._inner._native.stopListening();
    this._inner._listening = 0;
    this._inner._updateRef();
  }
}

module.exports = { UApp, ListenSocket };
