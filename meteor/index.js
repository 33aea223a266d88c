'use strict';
// Meteor's `native` DDP transport: maps Meteor's transport contract (a factory returning
// `{ name, setup(httpServer, pathPrefix, options) }`, and the socket object stream_server.js and
// livedata_server.js use) onto this package's uWebSockets.js-shaped core API. Nothing else.
//
//   const { createNativeTransport } = require('ddp-transport-native/meteor');
//   const events = createNativeTransport().setup(httpServer, '', { websocketExtensions });
//   events.on('connection', (socket) => { socket.on('data', ...); socket.send('...'); });

const EventEmitter = require('node:events');
const crypto = require('node:crypto');
const core = require('../index.js');
const { SendStatus, COMPRESSION_DEFAULTS, BACKPRESSURE_CLOSE_CODE } = require('../lib/constants');
const { describe: show } = require('../lib/describe');
const { takeHeaders, ownString } = require('../lib/websocket');
const { isPlainObject, meteorGlobal, validateSettings, SETTING_KEYS, SETTING_DEFAULTS } = require('./settings');

const NAME = 'native';
/** The contract socket of a core socket, on the core socket itself (a field: cheaper per message
 *  and per socket than a WeakMap's ephemeron entry). */
const CONTRACT_SOCKET = Symbol('ddp-transport-native.socket');
const KIB = 1024;

/** Headers a socket exposes (the same whitelist as Meteor's raw websocket adapter). */
const HEADER_WHITELIST = Object.freeze([
  'referer', 'x-client-ip', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-port',
  'x-cluster-client-ip', 'via', 'x-real-ip', 'x-forwarded-proto', 'x-ssl', 'dnt', 'host',
  'user-agent', 'accept-language', 'cookie',
]);

/** Meteor's permessage-deflate defaults (used when SERVER_WEBSOCKET_COMPRESSION is unset): the
 *  keys Meteor sets, with the core's values (which are Meteor's). */
const DEFAULT_COMPRESSION = Object.freeze(Object.fromEntries(
  ['threshold', 'level', 'memLevel', 'noContextTakeover', 'maxWindowBits'].map((k) => [k, COMPRESSION_DEFAULTS[k]])));

// ---------------------------------------------------------------------------------------------
// SERVER_WEBSOCKET_COMPRESSION

/**
 * Map the value of SERVER_WEBSOCKET_COMPRESSION to the core's `compression` option, as Meteor and
 * sockjs read that variable: unset/empty → Meteor's defaults; JSON falsy (false, 0, null) → false;
 * true (or another truthy number) → the defaults; a JSON object → merged over the defaults.
 * Invalid JSON, a string/array, an unknown key or a bad value throws, naming the variable.
 * @param {string|undefined} value
 * @returns {false | typeof DEFAULT_COMPRESSION}
 */
function compressionFromEnv(value) {
  if (value === undefined || value === null || value === '') return { ...DEFAULT_COMPRESSION };
  let parsed;
  try {
    parsed = JSON.parse(value);
  } catch (e) {
    throw new Error(`SERVER_WEBSOCKET_COMPRESSION must be JSON (false, true or an object of ` +
      `permessage-deflate options), got ${show(value)}: ${e.message}`);
  }
  if (!parsed) return false;
  if (parsed === true || typeof parsed === 'number') return { ...DEFAULT_COMPRESSION };
  if (!isPlainObject(parsed)) {
    throw new Error(`SERVER_WEBSOCKET_COMPRESSION must be false, true or a JSON object of ` +
      `permessage-deflate options, got ${show(value)}`);
  }
  const out = { ...DEFAULT_COMPRESSION, ...parsed };
  core.compressionOptions(out, 'SERVER_WEBSOCKET_COMPRESSION'); // throws naming the variable and the key
  return out;
}

// ---------------------------------------------------------------------------------------------
// Settings: Meteor.settings.packages['ddp-server'].native inside Meteor, opts.settings elsewhere
// (the rules, defaults and validation are in settings.js).

function rawSettings(opts) {
  if (opts.settings !== undefined) return opts.settings;
  const meteor = meteorGlobal();
  if (meteor && meteor.settings) {
    const pkgs = meteor.settings.packages;
    const ddp = pkgs && pkgs['ddp-server'];
    return ddp ? ddp.native : undefined;
  }
  return undefined;
}

/** The keys of an admission-limits object, checked by the core (errors name `label` and the key). */
function checkAdmission(value, label) {
  if (isPlainObject(value)) core.admissionOptions(value, label);
}

// ---------------------------------------------------------------------------------------------
// The socket object of Meteor's transport contract.

function socketId() {
  return crypto.randomUUID();
}

class NativeSocket extends EventEmitter {
  constructor(ws, transport) {
    super();
    this._ws = ws;
    this._transport = transport;
    this._closed = false;
    this._dropped = false;
    this._warned = false;
    this._id = undefined; // made when first read (Meteor's ddp-server never reads it)
    this.protocol = 'websocket-raw';
    this.url = ws.getUrl();
    this.remoteAddress = ws.getRemoteAddressAsText();
    this.remotePort = ws.getRemotePort();
    this.headers = takeHeaders(ws, HEADER_WHITELIST); // only the whitelist stays with the socket
  }

  /** A random string (a UUID), as a SockJS socket has. */
  get id() {
    if (this._id === undefined) this._id = ownString(socketId()); // one string, not a rope of pieces
    return this._id;
  }

  /** Truthy once closed, or once close() was called. */
  get isClosed() {
    return this._closed;
  }

  /** Queue one text frame. */
  send(data) {
    if (this._closed) return;
    if (this._ws.send(data, false, true) === SendStatus.DROPPED) {
      // closeOnBackpressureLimit: the core closed the socket (1013) instead of dropping the frame.
      // (DROPPED also means "already closed": the close callback reports which it was.)
      this._dropped = true;
      if (this._ws.closed) this._closed = true;
    }
  }

  /** Graceful: frames queued before (even in the same tick) reach the client first. */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._ws.end();
  }

  /** Idle timeout in ms (0 = off); stream_server sets 45000, livedata 0 once DDP is up. */
  setWebsocketTimeout(ms) {
    if (this._closed) return;
    const n = Number(ms);
    this._ws.setIdleTimeout(n > 0 ? Math.min(Math.floor(n), 0xffffffff) : 0); // NaN → 0 (off)
  }

  _backpressured() {
    if (this._warned) return;
    this._warned = true;
    this._transport._logger.warn(`ddp-transport-native: closing socket ${this.id} from ` +
      `${this.remoteAddress}:${this.remotePort}: more than ${this._transport._maxBackpressure} bytes ` +
      `queued (slow client; DDP resumes the session on reconnect)`);
  }

  _onClose(code) {
    this._closed = true;
    if (code === BACKPRESSURE_CLOSE_CODE || (code === 1006 && this._dropped)) this._backpressured();
    this._ws = CLOSED_WS;
    this.emit('close');
  }
}

// Stands in for the core socket after close so late calls are harmless and the socket is released.
const CLOSED_WS = {
  send() { return SendStatus.DROPPED; }, end() {}, close() {}, setIdleTimeout() {},
};

// ---------------------------------------------------------------------------------------------
// Plain HTTP GET on the websocket paths: 400, like Meteor's own transports.

const NOT_WEBSOCKET_BODY = 'Not a valid websocket request';

// Path of a request target without its query/fragment; never throws.
function targetPath(url) {
  if (typeof url !== 'string') return '';
  let end = url.length;
  const q = url.indexOf('?');
  if (q !== -1) end = q;
  const h = url.indexOf('#');
  if (h !== -1 && h < end) end = h;
  let path = url.slice(0, end);
  // absolute-form (GET http://host/path HTTP/1.1)
  const scheme = path.indexOf('://');
  if (scheme !== -1 && path[0] !== '/') {
    const slash = path.indexOf('/', scheme + 3);
    path = slash === -1 ? '' : path.slice(slash);
  }
  return path;
}

function installPlainGetGuard(httpServer, paths) {
  const pathSet = new Set(paths);
  const previous = httpServer.listeners('request');
  httpServer.removeAllListeners('request');
  httpServer.on('request', function nativeTransportRequest(req, res) {
    if (pathSet.has(targetPath(req.url))) {
      const body = NOT_WEBSOCKET_BODY;
      res.writeHead(400, { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    for (const listener of previous) listener.call(this, req, res);
  });
}

// ---------------------------------------------------------------------------------------------
// SIGTERM drain

function installSigtermDrain(app, logger) {
  const onSigterm = () => {
    const grace = Number(process.env.METEOR_SIGTERM_GRACE_PERIOD_SECONDS);
    const windowMs = (Number.isFinite(grace) && grace > 0 ? grace : 10) * 1000 * 0.9;
    const intervalMs = 100;
    const steps = Math.max(1, Math.floor(windowMs / intervalMs));
    let connections = 0;
    try { connections = app.stats().connections; } catch (e) { /* closed */ }
    const batch = Math.max(1, Math.ceil(connections / steps));
    // Nobody else handles SIGTERM (outside Meteor): terminate as Node would have, after the drain.
    const alone = process.listenerCount('SIGTERM') === 0;
    Promise.resolve()
      .then(() => app.drain({ batch, intervalMs }))
      .catch((e) => logger.warn(`ddp-transport-native: drain failed: ${e && e.message}`))
      .then(() => { if (alone && process.listenerCount('SIGTERM') === 0) process.kill(process.pid, 'SIGTERM'); });
  };
  process.once('SIGTERM', onSigterm);
  return onSigterm;
}

// ---------------------------------------------------------------------------------------------
// The transport

/**
 * Meteor's `native` DDP transport.
 * @param {{ settings?: object, logger?: { warn(msg: string): void } }} [opts]
 *   settings: the `packages['ddp-server'].native` object when not running inside Meteor (inside
 *   Meteor it is read from Meteor.settings at setup); logger: defaults to console.
 */
function createNativeTransport(opts = {}) {
  return {
    name: NAME,
    setup(httpServer, pathPrefix, options) {
      return setupNative(httpServer, pathPrefix, options || {}, opts || {});
    },
  };
}

// http.Server → the DDP paths already set up on it: a second setup on one server and path
// throws (the second would silently take every upgrade from the first).
const setUpPaths = new WeakMap();

function setupNative(httpServer, pathPrefix, options, opts) {
  if (!httpServer || typeof httpServer.on !== 'function') {
    throw new TypeError('ddp-transport-native: setup(httpServer, pathPrefix, options) needs an http.Server');
  }
  const settings = validateSettings(rawSettings(opts));
  checkAdmission(settings.admission, 'ddp-server.native.admission');
  let compression = compressionFromEnv(process.env.SERVER_WEBSOCKET_COMPRESSION);
  if (typeof options.websocketExtensions === 'function') {
    const ext = options.websocketExtensions();
    if (Array.isArray(ext) && ext.length === 0) compression = false;
  }
  const logger = opts.logger || console;
  const prefix = typeof pathPrefix === 'string' ? pathPrefix.replace(/\/+$/, '') : '';
  const paths = [prefix + '/websocket', prefix + '/websocket/'];
  const taken = setUpPaths.get(httpServer) || new Set();
  if (taken.has(paths[0])) {
    throw new Error(`ddp-transport-native: already set up on this http.Server for "${paths[0]}" (set it up once per server and path prefix)`);
  }
  taken.add(paths[0]);
  setUpPaths.set(httpServer, taken);

  const events = new EventEmitter();
  const app = core.App({
    ...(settings.threads !== null && { threads: settings.threads }),
    ...(settings.io !== null && { io: settings.io }),
    admission: settings.admission,
    proxyProtocol: settings.proxyProtocol,
  });
  const transportState = { _logger: logger, _maxBackpressure: settings.maxBackpressure };
  const fallbackTimeoutMs = Math.round(settings.timeout * 1000);

  const behavior = {
    compression,
    maxPayloadLength: Math.max(1, Math.floor(settings.payloadLength * KIB)),
    maxBackpressure: settings.maxBackpressure,
    closeOnBackpressureLimit: true,
    idleTimeout: 0,
    sendPingsAutomatically: false,
    open(ws) {
      const socket = new NativeSocket(ws, transportState);
      ws[CONTRACT_SOCKET] = socket;
      if (fallbackTimeoutMs > 0) ws.setIdleTimeout(fallbackTimeoutMs);
      events.emit('connection', socket);
    },
    message(ws, data, isBinary) {
      if (isBinary) return; // DDP is text; sockjs and uws ignore binary frames too
      const socket = ws[CONTRACT_SOCKET];
      if (socket !== undefined && !socket._closed) socket.emit('data', data);
    },
    close(ws, code) {
      const socket = ws[CONTRACT_SOCKET];
      if (socket === undefined) return;
      ws[CONTRACT_SOCKET] = undefined;
      socket._onClose(code);
    },
  };
  for (const p of paths) app.ws(p, behavior);
  installPlainGetGuard(httpServer, paths);
  app.attach(httpServer, { paths });

  let sigterm = null;
  if (settings.drainOnSigterm) sigterm = installSigtermDrain(app, logger);
  // attach() closes the app when the server closes; the SIGTERM hook goes with it.
  if (sigterm) httpServer.once('close', () => process.removeListener('SIGTERM', sigterm));

  Object.defineProperty(events, '_app', { value: app, enumerable: false });
  Object.defineProperty(events, '_settings', { value: settings, enumerable: false });
  Object.defineProperty(events, '_compression', { value: compression, enumerable: false });
  Object.defineProperty(events, '_ioMode', { value: app.ioMode, enumerable: false });
  // The same metrics as the main API: Prometheus text, and OpenTelemetry instruments on a meter.
  Object.defineProperty(events, 'metrics', { value: (o) => app.metrics(o), enumerable: false });
  Object.defineProperty(events, 'registerOpenTelemetry', { value: (meter, o) => app.registerOpenTelemetry(meter, o), enumerable: false });
  return events;
}

module.exports = {
  name: NAME,
  createNativeTransport,
  compressionFromEnv,
  validateSettings,
  checkAdmission,
  NativeSocket,
  HEADER_WHITELIST,
  DEFAULT_COMPRESSION,
  SETTING_KEYS,
  SETTING_DEFAULTS,
};
