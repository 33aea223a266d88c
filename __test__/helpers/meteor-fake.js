'use strict';
// A Meteor server process as the takeover (meteor/takeover.js) sees it, for each Meteor line.
// Written for these tests from the facts listed in docs/meteor-upstream.md; no Meteor code.
//
// - WebApp.httpServer: an http.Server with the app's request handler and webapp's
//   timeout-adjusting request listener.
// - Real sockjs (the npm package Meteor uses) mounted at <prefix>/sockjs, then the /websocket →
//   /sockjs/websocket rewrite that replaces the request and upgrade listeners with one wrapper.
// - The stream server. '3.4' (Meteor 3.0–3.4): the connection steps inline in sockjs's handler,
//   with sockjs-only `send` and `setWebsocketTimeout` (they reach into sockjs's session, so a
//   foreign socket breaks there), `open_sockets` replaced on every close. '3.5': the transport
//   registry (resolution: settings, DDP_TRANSPORT, DISABLE_SOCKJS → uws, sockjs; names checked
//   against a fixed list, 'native' on it only when `patched`) and `_onConnection(socket)`.
// - A DDP server on the stream server's registration callbacks: demo/ddp-session.js.

const http = require('node:http');
const EventEmitter = require('node:events');
const sockjs = require('sockjs');
const { DdpServer } = require('../../demo/ddp-session');
const { listen, closeServer } = require('./meteor-util');

const HANDSHAKE_TIMEOUT_MS = 45000;

/** Meteor's rewrite of /websocket to sockjs's raw endpoint, in front of every listener. */
function rewriteWebsocketPath(httpServer, prefix, sockjsPrefix) {
  for (const event of ['request', 'upgrade']) {
    const before = httpServer.listeners(event).slice();
    httpServer.removeAllListeners(event);
    httpServer.on(event, function rewrite(req, ...rest) {
      const q = req.url.indexOf('?');
      const path = q < 0 ? req.url : req.url.slice(0, q);
      if (path === `${prefix}/websocket` || path === `${prefix}/websocket/`) {
        req.url = `${sockjsPrefix}/websocket${q < 0 ? '' : req.url.slice(q)}`;
      }
      for (const l of before) l.call(this, req, ...rest);
    });
  }
}

/** sockjs on the server, as Meteor mounts it; returns sockjs's server (it emits 'connection'). */
function mountSockjs(WebApp, prefix) {
  const sockjsPrefix = `${prefix}/sockjs`;
  const server = sockjs.createServer({
    prefix: sockjsPrefix, log() {}, heartbeat_delay: 45000, disconnect_delay: 60000,
    faye_server_options: { extensions: [] },
  });
  const httpServer = WebApp.httpServer;
  httpServer.removeListener('request', WebApp._timeoutAdjustmentRequestCallback);
  server.installHandlers(httpServer);
  httpServer.on('request', WebApp._timeoutAdjustmentRequestCallback);
  rewriteWebsocketPath(httpServer, prefix, sockjsPrefix);
  return server;
}

/** The sockjs-only socket methods Meteor installs (they only work on a sockjs connection). */
function sockjsOnlyMethods(socket) {
  socket.setWebsocketTimeout = (ms) => {
    const raw = socket.protocol === 'websocket' || socket.protocol === 'websocket-raw';
    if (raw && socket._session.recv) socket._session.recv.connection.setTimeout(ms);
  };
  socket.send = (data) => socket.write(data);
}

/** What a stream server does with a new socket (shared by both lines; 3.4 runs it inline). */
function acceptSocket(ss, socket) {
  socket.setWebsocketTimeout(HANDSHAKE_TIMEOUT_MS);
  socket.on('close', () => { ss.open_sockets = ss.open_sockets.filter((s) => s !== socket); });
  ss.open_sockets.push(socket);
  if (process.env.TEST_METADATA && process.env.TEST_METADATA !== '{}') {
    socket.send(JSON.stringify({ testMessageOnConnect: true }));
  }
  for (const cb of ss.registration_callbacks) cb(socket);
}

class StreamServerBase {
  constructor() {
    this.registration_callbacks = [];
    this.open_sockets = [];
  }

  register(cb) {
    this.registration_callbacks.push(cb);
    for (const s of this.open_sockets) cb(s);
  }
}

/** Meteor 3.0–3.4: sockjs is the transport and the connection steps are inline. */
class StreamServer34 extends StreamServerBase {
  constructor(WebApp, prefix) {
    super();
    mountSockjs(WebApp, prefix).on('connection', (socket) => {
      if (!socket) return;
      sockjsOnlyMethods(socket);
      acceptSocket(this, socket);
    });
  }
}

/** Meteor 3.5: a transport from the registry, sockets through _onConnection. */
class StreamServer35 extends StreamServerBase {
  constructor(transport, WebApp, prefix) {
    super();
    transport.setup(WebApp.httpServer, prefix, { websocketExtensions: () => [] })
      .on('connection', (socket) => this._onConnection(socket));
  }

  _onConnection(socket) {
    if (!socket) return;
    if (!socket.setWebsocketTimeout || !socket.send) sockjsOnlyMethods(socket);
    acceptSocket(this, socket);
  }
}

/** Meteor 3.5's registry and name resolution (see the facts in shared/meteor-contract.md). */
function makeRegistry() {
  const factories = new Map();
  return {
    register(name, factory) {
      if (factories.has(name)) throw new Error(`DDP transport "${name}" already registered`);
      factories.set(name, factory);
    },
    get: (name) => factories.get(name),
    names: () => [...factories.keys()],
  };
}

function resolveTransport({ registry, settings, runtimeConfig, patched }) {
  const valid = patched ? ['sockjs', 'uws', 'native'] : ['sockjs', 'uws'];
  const chosen = settings.packages && settings.packages['ddp-server'] && settings.packages['ddp-server'].transport;
  const name = chosen || process.env.DDP_TRANSPORT || (process.env.DISABLE_SOCKJS ? 'uws' : 'sockjs');
  if (!valid.includes(name)) throw new Error(`Unknown DDP transport: "${name}". Valid transports: ${valid.join(', ')}`);
  const factory = registry.get(name);
  if (!factory) throw new Error(`DDP transport "${name}" is not included in this application bundle.`);
  runtimeConfig.DDP_TRANSPORT = name;
  return factory();
}

/**
 * @param {object} [o]
 * @param {'3.4'|'3.5'} [o.line]
 * @param {boolean} [o.patched]   3.5: ddp-server accepts "native" (the registry path)
 * @param {object} [o.settings]   Meteor.settings
 * @param {string} [o.prefix]     ROOT_URL_PATH_PREFIX
 * @param {(registry) => void} [o.register]  3.5: providers registering before ddp-server loads
 */
function fakeMeteor(o = {}) {
  const line = o.line || '3.4';
  const prefix = o.prefix || '';
  const settings = o.settings || {};
  const runtimeConfig = { ROOT_URL_PATH_PREFIX: prefix };
  const httpServer = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`app:${req.url}`);
  });
  const WebApp = { httpServer, _timeoutAdjustmentRequestCallback: () => {} };
  httpServer.on('request', WebApp._timeoutAdjustmentRequestCallback);
  const Meteor = { isServer: true, settings, startupHooks: [], startup(fn) { this.startupHooks.push(fn); } };
  const registry = line === '3.5' ? makeRegistry() : null;
  let streamServer;
  if (line === '3.5') {
    registry.register('sockjs', () => ({
      name: 'sockjs',
      setup(server, pfx) {
        const events = new EventEmitter();
        mountSockjs({ ...WebApp, httpServer: server }, pfx).on('connection', (s) => events.emit('connection', s));
        return events;
      },
    }));
    registry.register('uws', () => ({ name: 'uws', setup: () => new EventEmitter() })); // stands in: never connected here
    if (o.register) o.register(registry);
    const transport = resolveTransport({ registry, settings, runtimeConfig, patched: !!o.patched });
    streamServer = new StreamServer35(transport, WebApp, prefix);
  } else {
    streamServer = new StreamServer34(WebApp, prefix);
  }
  Meteor.server = { stream_server: streamServer };
  const ddp = new DdpServer();
  streamServer.register((socket) => ddp.handle(socket));
  return {
    line, Meteor, WebApp, runtimeConfig, registry, streamServer, ddp, httpServer,
    /** The takeover's context. */
    ctx(extra = {}) { return { Meteor, WebApp, runtimeConfig, ...extra }; },
    /** Make this the process's Meteor (globals as a Meteor server has them). */
    installGlobals() {
      globalThis.Package = { meteor: { Meteor }, webapp: { WebApp } };
      if (registry) globalThis.Package['ddp-transport-registry'] = { DDPTransportRegistry: registry };
      globalThis.__meteor_runtime_config__ = runtimeConfig;
    },
    async listen() { this.port = await listen(httpServer); return this.port; },
    async close() { await closeServer(httpServer); },
  };
}

function removeGlobals() {
  delete globalThis.Package;
  delete globalThis.__meteor_runtime_config__;
}

module.exports = { fakeMeteor, removeGlobals };
