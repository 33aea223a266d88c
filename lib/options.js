'use strict';
// Option validation for the public API. Every error names the key and the valid values; the
// native layer receives only validated, normalised options.

const { ROUTE_DEFAULTS, COMPRESSION_DEFAULTS, ADMISSION_DEFAULTS, CLOSE_CODES_TEXT, isValidCloseCode } = require('./constants');
const { describe } = require('./describe');

const HANDLERS = ['upgrade', 'open', 'message', 'drain', 'close', 'ping', 'pong'];
const BEHAVIOR_KEYS = [
  'compression', 'maxPayloadLength', 'maxFragments', 'idleTimeout', 'maxBackpressure',
  'closeOnBackpressureLimit', 'sendPingsAutomatically', ...HANDLERS,
];


function checkKeys(obj, valid, where) {
  if (obj === null || typeof obj !== 'object') {
    throw new TypeError(`${where} must be an object, got ${describe(obj)}`);
  }
  for (const key of Object.keys(obj)) {
    if (!valid.includes(key)) {
      throw new TypeError(`Unknown ${where} option "${key}". Valid options: ${valid.join(', ')}`);
    }
  }
}

function intOption(obj, key, where, min, max, dflt) {
  const v = obj[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${where}.${key} must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

function boolOption(obj, key, where, dflt) {
  const v = obj[key];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new TypeError(`${where}.${key} must be a boolean, got ${describe(v)}`);
  return v;
}

/** Normalise `compression` (false | true | object) to the native shape, or null when off. */
function compressionOptions(value, where) {
  if (value === undefined || value === false) return null;
  if (value === true) value = {};
  checkKeys(value, Object.keys(COMPRESSION_DEFAULTS), where);
  const d = COMPRESSION_DEFAULTS;
  return {
    threshold: intOption(value, 'threshold', where, 0, 2 ** 31, d.threshold),
    level: intOption(value, 'level', where, 0, 9, d.level),
    memLevel: intOption(value, 'memLevel', where, 1, 9, d.memLevel),
    strategy: intOption(value, 'strategy', where, 0, 4, d.strategy),
    noContextTakeover: boolOption(value, 'noContextTakeover', where, d.noContextTakeover),
    maxWindowBits: intOption(value, 'maxWindowBits', where, 8, 15, d.maxWindowBits),
    requestNoContextTakeover: boolOption(value, 'requestNoContextTakeover', where, d.requestNoContextTakeover),
    requestMaxWindowBits: intOption(value, 'requestMaxWindowBits', where, 8, 15, d.requestMaxWindowBits),
  };
}

/** `app.ws(pattern, behavior)` → the native route options. */
function routeOptions(pattern, behavior) {
  if (typeof pattern !== 'string' || !pattern.startsWith('/') && pattern !== '*') {
    throw new TypeError(`ws: pattern must be a path string like "/*" or "/websocket", got ${describe(pattern)}`);
  }
  const where = `behavior for "${pattern}"`;
  checkKeys(behavior, BEHAVIOR_KEYS, 'behavior');
  for (const h of HANDLERS) {
    if (behavior[h] !== undefined && typeof behavior[h] !== 'function') {
      throw new TypeError(`${where}.${h} must be a function, got ${describe(behavior[h])}`);
    }
  }
  const c = behavior.compression;
  if (c !== undefined && typeof c !== 'boolean' && (c === null || typeof c !== 'object')) {
    throw new TypeError(`${where}.compression must be false, true or an options object, got ${describe(c)}`);
  }
  const d = ROUTE_DEFAULTS;
  return {
    maxPayloadLength: intOption(behavior, 'maxPayloadLength', where, 1, 2 ** 31, d.maxPayloadLength),
    maxFragments: intOption(behavior, 'maxFragments', where, 1, 2 ** 31, d.maxFragments),
    idleTimeoutMs: intOption(behavior, 'idleTimeout', where, 0, 86400, d.idleTimeoutMs / 1000) * 1000,
    maxBackpressure: intOption(behavior, 'maxBackpressure', where, 0, 2 ** 40, d.maxBackpressure),
    closeOnBackpressureLimit: boolOption(behavior, 'closeOnBackpressureLimit', where, d.closeOnBackpressureLimit),
    sendPingsAutomatically: boolOption(behavior, 'sendPingsAutomatically', where, d.sendPingsAutomatically),
    upgradeHook: typeof behavior.upgrade === 'function',
    reportControl: typeof behavior.ping === 'function' || typeof behavior.pong === 'function',
    compression: compressionOptions(c, `${where}.compression`) || undefined,
  };
}

// ---- the uWebSockets.js compat surface (lib/uws) ------------------------------------------

/** uWS.js's listen option (uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT): bind without SO_REUSEPORT. */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/** uWS's CompressOptions bits (values as uWebSockets.js v20 defines them). */
const UWS_COMPRESS = Object.freeze({
  DISABLED: 0,
  SHARED_COMPRESSOR: 1,
  SHARED_DECOMPRESSOR: 1 << 8,
  DEDICATED_DECOMPRESSOR_512B: 9 << 8,
  DEDICATED_DECOMPRESSOR_1KB: 10 << 8,
  DEDICATED_DECOMPRESSOR_2KB: 11 << 8,
  DEDICATED_DECOMPRESSOR_4KB: 12 << 8,
  DEDICATED_DECOMPRESSOR_8KB: 13 << 8,
  DEDICATED_DECOMPRESSOR_16KB: 14 << 8,
  DEDICATED_DECOMPRESSOR_32KB: 15 << 8,
  DEDICATED_DECOMPRESSOR: 15 << 8,
  DEDICATED_COMPRESSOR_3KB: (9 << 4) | 1,
  DEDICATED_COMPRESSOR_4KB: (9 << 4) | 2,
  DEDICATED_COMPRESSOR_8KB: (10 << 4) | 3,
  DEDICATED_COMPRESSOR_16KB: (11 << 4) | 4,
  DEDICATED_COMPRESSOR_32KB: (12 << 4) | 5,
  DEDICATED_COMPRESSOR_64KB: (13 << 4) | 6,
  DEDICATED_COMPRESSOR_128KB: (14 << 4) | 7,
  DEDICATED_COMPRESSOR_256KB: (15 << 4) | 8,
  DEDICATED_COMPRESSOR: (15 << 4) | 8,
});

const UWS_HANDLERS = ['dropped', 'subscription', 'ping', 'pong'];
const UWS_DEFAULTS = Object.freeze({ maxPayloadLength: 16 * 1024, idleTimeout: 120, maxBackpressure: 64 * 1024 });

/** uWS `compression` bits → our compression object (or the object/boolean form as is). Shared
 *  compressor: no context takeover (one compressor per thread); dedicated: context takeover with
 *  the window and memLevel the size implies; shared decompressor (also when none is named, as in
 *  uWS): ask the client for client_no_context_takeover; dedicated decompressor: ask for its window
 *  (a client that cannot be asked for a window is asked for client_no_context_takeover, as uWS
 *  does). A decompressor alone negotiates the extension but never compresses. */
function uwsCompression(flags, where) {
  if (typeof flags !== 'number') return flags;
  const valid = new Set(Object.values(UWS_COMPRESS));
  const comp = flags & 0xff;
  const decomp = flags & 0xf00;
  if (!Number.isInteger(flags) || flags & ~0xfff || !valid.has(comp) || !valid.has(decomp)) {
    throw new TypeError(`${where} must be a uWS compression constant (DISABLED, SHARED_COMPRESSOR, DEDICATED_COMPRESSOR_3KB…_256KB, or'ed with SHARED_DECOMPRESSOR / DEDICATED_DECOMPRESSOR_512B…_32KB) or our options object, got ${describe(flags)}`);
  }
  if (flags === 0) return false;
  const c = { threshold: 0 };
  if (comp === 0) c.threshold = 2 ** 31;
  else if (comp === UWS_COMPRESS.SHARED_COMPRESSOR) c.noContextTakeover = true;
  else Object.assign(c, { noContextTakeover: false, maxWindowBits: comp >> 4, memLevel: comp & 15 });
  // No decompressor named: uWS uses its shared one (measured on uws-pack 20.0.8: it answers
  // client_no_context_takeover).
  if (decomp === UWS_COMPRESS.SHARED_DECOMPRESSOR || decomp === 0) c.requestNoContextTakeover = true;
  else c.requestMaxWindowBits = decomp >> 8;
  return c;
}

/** `App().ws(pattern, behavior)` of the uWS surface → { opts (native route options), maxLifetime
 *  (minutes) }. uWS defaults: maxPayloadLength 16 KiB, maxBackpressure 64 KiB, idleTimeout 120
 *  (0 or at least 8, as uWS requires). */
function uwsRouteOptions(pattern, behavior) {
  if (behavior === undefined) behavior = {};
  checkKeys(behavior, [...BEHAVIOR_KEYS, ...UWS_HANDLERS, 'maxLifetime'], 'behavior');
  const where = `behavior for "${pattern}"`;
  for (const h of UWS_HANDLERS) {
    if (behavior[h] !== undefined && typeof behavior[h] !== 'function') {
      throw new TypeError(`${where}.${h} must be a function, got ${describe(behavior[h])}`);
    }
  }
  const idle = intOption(behavior, 'idleTimeout', where, 0, 86400, UWS_DEFAULTS.idleTimeout);
  if (idle > 0 && idle < 8) throw new RangeError(`${where}.idleTimeout must be 0 or from 8 to 86400 (as in uWS), got ${idle}`);
  const maxLifetime = intOption(behavior, 'maxLifetime', where, 0, 240, 0);
  const base = { ...UWS_DEFAULTS, ...behavior, compression: uwsCompression(behavior.compression, `${where}.compression`) };
  for (const k of [...UWS_HANDLERS, 'maxLifetime']) delete base[k];
  return { opts: routeOptions(pattern.startsWith('*') ? `/${pattern}` : pattern, base), maxLifetime };
}

/** Admission control's keys: [min, max] (the hold stays under the 10 s handshake timeout). */
const ADMISSION_KEYS = {
  upgradesPerSecond: [0, 1e6],
  burst: [1, 1e6],
  maxPendingOpens: [0, 1e6],
  maxLagMs: [0, 60000],
  holdMs: [0, 8000],
  retryAfterSeconds: [0, 86400],
};

/**
 * `admission`: undefined or true → the defaults; false → off; an object → merged over the
 * defaults (0 turns the rate or the pending bound off). Returns the limits, or null when off.
 * `where` names the option in errors (e.g. `App.admission`, `ddp-server.native.admission`).
 */
function admissionOptions(value, where) {
  if (value === undefined || value === true) return { ...ADMISSION_DEFAULTS };
  if (value === false || value === null) return null;
  checkKeys(value, Object.keys(ADMISSION_KEYS), where);
  const out = { ...ADMISSION_DEFAULTS };
  for (const [key, [min, max]] of Object.entries(ADMISSION_KEYS)) out[key] = intOption(value, key, where, min, max, out[key]);
  return out;
}

/** Where upgraded connections are served: on the JS thread ('inline') or on the I/O threads. */
const IO_MODES = ['inline', 'threads'];
/** Sets `io` for apps that do not (e.g. every app of a test run, or of a Meteor server). */
const IO_VARIABLE = 'DDP_TRANSPORT_NATIVE_IO';

/** `App.io`, else DDP_TRANSPORT_NATIVE_IO, else 'threads' when `App.threads` is set (the I/O
 *  threads it sizes then read the sockets), else 'inline' (docs/architecture.md, I/O modes: why). */
function ioOption(options) {
  if (options.io !== undefined) {
    if (!IO_MODES.includes(options.io)) {
      throw new TypeError(`App.io must be ${IO_MODES.map((m) => `'${m}'`).join(' or ')}, got ${describe(options.io)}`);
    }
    return options.io;
  }
  const env = process.env[IO_VARIABLE];
  if (env !== undefined && env !== '') {
    if (!IO_MODES.includes(env)) {
      throw new TypeError(`${IO_VARIABLE} must be ${IO_MODES.map((m) => `'${m}'`).join(' or ')}, got ${describe(env)}`);
    }
    return env;
  }
  return options.threads !== undefined ? 'threads' : 'inline';
}

/** `App(options)` → the I/O threads, the I/O mode, admission control's limits (null: off), and
 *  whether connections to the own listener must open with a PROXY protocol header (v1 or v2). */
function appOptions(options) {
  if (options === undefined) options = {};
  checkKeys(options, ['threads', 'io', 'admission', 'proxyProtocol'], 'App');
  if (options.admission !== undefined && typeof options.admission !== 'boolean' &&
      (options.admission === null || typeof options.admission !== 'object')) {
    throw new TypeError(`App.admission must be true, false or an object with the keys ` +
      `${Object.keys(ADMISSION_KEYS).join(', ')}, got ${describe(options.admission)}`);
  }
  return {
    threads: intOption(options, 'threads', 'App', 1, 16, 1),
    io: ioOption(options),
    admission: admissionOptions(options.admission, 'App.admission'),
    proxyProtocol: boolOption(options, 'proxyProtocol', 'App', false),
  };
}

/** `listen([host,] port, cb)` → { host, port, cb }. */
function listenArgs(a, b, c) {
  let host = '0.0.0.0';
  let port;
  let cb;
  if (typeof a === 'string') [host, port, cb] = [a, b, c];
  else [port, cb] = [a, b];
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(`listen: port must be an integer from 0 to 65535, got ${describe(port)}`);
  }
  if (typeof cb !== 'function') throw new TypeError('listen: the last argument must be a callback');
  return { host, port, cb };
}

/** `attach(server, { paths })` → the paths (default: every route's pattern). */
function attachOptions(server, options, routePatterns) {
  if (!server || typeof server.on !== 'function' || typeof server.listeners !== 'function') {
    throw new TypeError('attach: server must be an http.Server or https.Server');
  }
  if (options === undefined) options = {};
  checkKeys(options, ['paths'], 'attach');
  const paths = options.paths === undefined ? routePatterns : options.paths;
  if (!Array.isArray(paths) || paths.some((p) => typeof p !== 'string')) {
    throw new TypeError(`attach: paths must be an array of path strings, got ${describe(paths)}`);
  }
  return { paths };
}

/** A close code given to `end()` or `drain()`. */
function closeCode(code, where) {
  if (!isValidCloseCode(code)) {
    throw new RangeError(`${where} must be ${CLOSE_CODES_TEXT}, got ${describe(code)}`);
  }
  return code;
}

/** `drain(options)` → { batch, intervalMs, code, reason }. */
function drainOptions(options) {
  if (options === undefined) options = {};
  checkKeys(options, ['batch', 'intervalMs', 'code', 'reason'], 'drain');
  return {
    batch: intOption(options, 'batch', 'drain', 1, 2 ** 31, 100),
    intervalMs: intOption(options, 'intervalMs', 'drain', 0, 3600000, 50),
    code: closeCode(options.code === undefined ? 1001 : options.code, 'drain.code'),
    reason: options.reason === undefined ? 'server draining' : String(options.reason),
  };
}

/** A per-socket idle timeout in ms. */
function idleTimeoutMs(ms) {
  if (typeof ms !== 'number' || !(ms >= 0) || ms > 2 ** 32 - 1) {
    throw new RangeError(`setIdleTimeout: ms must be a number from 0 to 4294967295, got ${describe(ms)}`);
  }
  return Math.floor(ms);
}

/** Turn a core error ("EADDRINUSE: ...") into an Error with `code`. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Statuses a refusal may have (a 1xx is not an answer that ends a request). */
const REFUSAL_STATUS = Object.freeze({ min: 200, max: 599, fallback: 403 });

/**
 * Headers an upgrade hook adds to its answer: an object `{ name: value }` (an array value gives
 * the header once per item) or a list of [name, value] pairs. Flattened for the core as
 * [name, value, ...]; a name that is not an HTTP token, or a value with CR, LF or NUL, throws.
 */
function answerHeaders(headers, where) {
  if (headers === undefined || headers === null) return [];
  const pairs = Array.isArray(headers) ? headers
    : typeof headers === 'object' ? Object.entries(headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]]))
      : null;
  if (pairs === null) throw new TypeError(`${where} must be an object of header names to values, or [name, value] pairs, got ${describe(headers)}`);
  const flat = [];
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError(`${where}: each header must be a [name, value] pair, got ${describe(pair)}`);
    const name = String(pair[0]);
    const value = String(pair[1]);
    if (!TOKEN.test(name)) throw new TypeError(`${where}: ${describe(name)} is not a valid HTTP header name`);
    if (/[\r\n\0]/.test(value)) throw new TypeError(`${where}: the value of ${name} contains CR, LF or NUL`);
    flat.push(name, value);
  }
  return flat;
}

/** A refusal's status: an integer 200..599, else 403. */
function refusalStatus(status) {
  return Number.isInteger(status) && status >= REFUSAL_STATUS.min && status <= REFUSAL_STATUS.max ? status : REFUSAL_STATUS.fallback;
}

function nativeError(e, what) {
  const m = /^(E[A-Z]+): (.*)$/.exec(e.message);
  const err = new Error(`${what} failed: ${m ? `${m[1]}: ${m[2]}` : e.message}`);
  err.code = m ? m[1] : 'EIO';
  return err;
}

module.exports = {
  answerHeaders,
  refusalStatus,
  UWS_COMPRESS,
  LIBUS_LISTEN_EXCLUSIVE_PORT,
  uwsCompression,
  uwsRouteOptions,
  describe,
  compressionOptions,
  routeOptions,
  appOptions,
  IO_VARIABLE,
  admissionOptions,
  listenArgs,
  attachOptions,
  closeCode,
  drainOptions,
  idleTimeoutMs,
  nativeError,
};
