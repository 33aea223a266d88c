'use strict';
// The Meteor takeover: `native` serves a Meteor app's `/websocket` with no file of Meteor copied
// or patched, on every Meteor 3.x. `import 'ddp-transport-native/meteor/auto'` (auto.js) and the
// Atmosphere package (ddp-transport-native/server.js) both come here.
//
// What it relies on, from Meteor's code (the versions read are listed in docs/meteor-upstream.md):
// - Once ddp-server has loaded, `Meteor.server.stream_server` exists with Meteor's own transport
//   (sockjs unless 3.5 selected another) and `WebApp.httpServer` does not listen yet. App code and
//   package code that loads after ddp-server run in that window.
// - sockjs's installHandlers and Meteor's `/websocket` → `/sockjs/websocket` rewrite each replace
//   the server's `request`/`upgrade` listeners with one wrapper. Wrapping the lists again after
//   them (attach() and the plain-GET guard do) puts us first: we see `/websocket` before the
//   rewrite, every other request and upgrade goes on to sockjs and the app untouched.
// - 3.5+ hands a transport's socket to `stream_server._onConnection(socket)`; 3.0–3.4 run the same
//   steps inline in sockjs's connection handler, which also swaps in sockjs-only `send` and
//   `setWebsocketTimeout`, so our socket must not go through it: `handOff` runs those steps.
// - webapp serializes `__meteor_runtime_config__` in its main(), after startup hooks, but
//   autoupdate hashes it in its own startup hook: the browser switch is set here, at load.

const { describe: show } = require('../lib/describe');
const { isPlainObject, meteorGlobal, validateSettings, SETTING_KEYS, SETTING_DEFAULTS } = require('./settings');
const { installClientFallback } = require('./client-fallback');

const PACKAGE = 'ddp-transport-native';
const NAME = 'native';
const LOG_PREFIX = `${PACKAGE}:`;
const SETTINGS_LABEL = `Meteor.settings.packages["${PACKAGE}"]`;
/** Environment variable that turns the takeover off (0/false) or on (1/true, the default). */
const SWITCH_VARIABLE = 'DDP_TRANSPORT_NATIVE';
/** The stream server's websocket timeout until the DDP handshake (3.0–3.4 set it inline). */
const HANDSHAKE_TIMEOUT_MS = 45 * 1000;
/** Marks the stream server a takeover serves: one socket owner per process, whichever copy of
 *  this module (the app's node_modules, the Atmosphere package's) runs second. */
const OWNER = Symbol.for(`${PACKAGE}.takeover`);

const RULES = Object.freeze({
  ...SETTING_KEYS,
  enabled: { check: (v) => typeof v === 'boolean', valid: 'true or false (false: Meteor\'s transport keeps /websocket)' },
});
const DEFAULTS = Object.freeze({ ...SETTING_DEFAULTS, enabled: true });

const OFF_WORDS = ['0', 'false', 'off', 'no'];
const ON_WORDS = ['1', 'true', 'on', 'yes'];

/** DDP_TRANSPORT_NATIVE: unset/empty or a yes → on, a no → off; anything else is a config error. */
function switchedOn(env) {
  const v = env[SWITCH_VARIABLE];
  if (v === undefined || v === '') return true;
  const word = String(v).trim().toLowerCase();
  if (OFF_WORDS.includes(word)) return false;
  if (ON_WORDS.includes(word)) return true;
  throw new Error(`${SWITCH_VARIABLE} must be 0 or 1 (${OFF_WORDS.join('/')} or ${ON_WORDS.join('/')}), got ${show(v)}`);
}

/** A transport the app selected explicitly through Meteor's own switches, or null. */
function explicitTransport(Meteor, env) {
  const ddpServer = Meteor.settings && isPlainObject(Meteor.settings.packages)
    ? Meteor.settings.packages['ddp-server'] : undefined;
  if (ddpServer && ddpServer.transport) {
    return { name: String(ddpServer.transport), where: 'Meteor.settings.packages["ddp-server"].transport' };
  }
  if (env.DDP_TRANSPORT) return { name: String(env.DDP_TRANSPORT), where: 'DDP_TRANSPORT' };
  return null;
}

/** Why Meteor's internals do not fit, or null when they do. */
function unexpectedInternals(Meteor, WebApp, runtimeConfig) {
  const server = WebApp && WebApp.httpServer;
  if (!server || typeof server.listeners !== 'function' || typeof server.on !== 'function') {
    return 'WebApp.httpServer is not an http.Server';
  }
  if (!runtimeConfig || typeof runtimeConfig !== 'object') return '__meteor_runtime_config__ is missing';
  const ss = Meteor.server && Meteor.server.stream_server;
  if (!ss || typeof ss !== 'object') return 'Meteor.server.stream_server is missing (is ddp-server loaded?)';
  if (!Array.isArray(ss.registration_callbacks)) return 'Meteor.server.stream_server.registration_callbacks is not an array';
  if (typeof ss._onConnection !== 'function' && !Array.isArray(ss.open_sockets)) {
    return 'Meteor.server.stream_server has neither _onConnection (Meteor 3.5+) nor open_sockets (3.0–3.4)';
  }
  return null;
}

/**
 * Give a socket to Meteor's stream server as Meteor's own transports do: 3.5+ through
 * `_onConnection`; 3.0–3.4 with the steps their sockjs connection handler takes.
 */
function handOff(ss, socket) {
  if (typeof ss._onConnection === 'function') {
    ss._onConnection(socket);
    return;
  }
  socket.setWebsocketTimeout(HANDSHAKE_TIMEOUT_MS);
  // The list is replaced on every close: read it through the stream server each time.
  socket.on('close', () => {
    ss.open_sockets = ss.open_sockets.filter((s) => s !== socket);
  });
  ss.open_sockets.push(socket);
  const metadata = process.env.TEST_METADATA;
  if (metadata && metadata !== '{}') socket.send(JSON.stringify({ testMessageOnConnect: true }));
  for (const callback of ss.registration_callbacks) callback(socket);
}

function describeCompression(c) {
  if (!c) return 'compression off';
  return `permessage-deflate (threshold ${c.threshold} B, level ${c.level})`;
}

/**
 * Take over `/websocket` in a Meteor server process.
 * @param {object} ctx
 * @param {object} ctx.Meteor          Meteor (settings, server)
 * @param {object} ctx.WebApp          WebApp (httpServer)
 * @param {object} [ctx.WebAppInternals] WebAppInternals (the page's SockJS fallback script)
 * @param {object} ctx.runtimeConfig   __meteor_runtime_config__
 * @param {string} [ctx.source]        how it was loaded (for the log lines)
 * @param {{ info?: Function, log?: Function, warn: Function }} [ctx.logger]  default: console
 * @param {() => object} [ctx.load]    loads the transport module (default: ./index.js, the addon)
 * @returns {{ state: 'serving'|'registry'|'stood-down'|'off'|'unavailable', reason: string,
 *   transport?: import('node:events').EventEmitter, settings?: object }}
 *   Config errors (settings, DDP_TRANSPORT_NATIVE, SERVER_WEBSOCKET_COMPRESSION) throw.
 */
function takeOver(ctx) {
  const { Meteor, WebApp, runtimeConfig } = ctx;
  const logger = ctx.logger || console;
  const info = (m) => (logger.info || logger.log).call(logger, `${LOG_PREFIX} ${m}`);
  const warn = (m) => logger.warn(`${LOG_PREFIX} ${m}`);
  const done = (state, reason, extra) => ({ state, reason, ...extra });
  const env = process.env;

  const raw = Meteor && Meteor.settings && isPlainObject(Meteor.settings.packages)
    ? Meteor.settings.packages[PACKAGE] : undefined;
  const { enabled, ...settings } = validateSettings(raw, { label: SETTINGS_LABEL, rules: RULES, defaults: DEFAULTS });
  const on = switchedOn(env);
  const served = 'Meteor\'s own transport serves /websocket';

  if (!on || !enabled) {
    const why = on ? `${SETTINGS_LABEL}.enabled is false` : `${SWITCH_VARIABLE}=${env[SWITCH_VARIABLE]}`;
    info(`turned off (${why}); ${served}.`);
    return done('off', why);
  }
  const unexpected = Meteor ? unexpectedInternals(Meteor, WebApp, runtimeConfig) : 'Meteor is missing';
  if (unexpected) {
    warn(`Meteor's internals are not what this version knows (${unexpected}); ${served}. ` +
      `Nothing is broken; report your Meteor release to ${PACKAGE} if it should work.`);
    return done('unavailable', unexpected);
  }
  const ss = Meteor.server.stream_server;
  if (ss[OWNER]) return ss[OWNER];

  const explicit = explicitTransport(Meteor, env);
  if (explicit && explicit.name !== NAME) {
    const why = `${explicit.where} selects "${explicit.name}"`;
    info(`stands down: ${why}; Meteor's "${explicit.name}" transport serves /websocket.`);
    return done('stood-down', why);
  }
  const selected = runtimeConfig.DDP_TRANSPORT;
  if (selected === NAME) {
    const why = 'ddp-server selected "native" through its transport registry';
    info(`${why}; it serves /websocket already (nothing to take over).`);
    return done('registry', why);
  }
  if (selected !== undefined && selected !== 'sockjs') {
    const why = `Meteor selected its "${selected}" transport`;
    info(`stands down: ${why}; it serves /websocket.`);
    return done('stood-down', why);
  }

  let meteor;
  try {
    meteor = (ctx.load || (() => require('./index.js')))();
  } catch (e) {
    const first = String(e && e.message ? e.message : e);
    warn(`could not load its native binary; ${served} (SockJS). ${first.replace(/\n\s*/g, ' ')}`);
    return done('unavailable', first.split('\n')[0]);
  }
  // A wrong SERVER_WEBSOCKET_COMPRESSION is a config error, as with Meteor's transports: throw.
  meteor.compressionFromEnv(env.SERVER_WEBSOCKET_COMPRESSION);
  meteor.checkAdmission(settings.admission, `${SETTINGS_LABEL}.admission`);

  const prefix = runtimeConfig.ROOT_URL_PATH_PREFIX || '';
  let transport;
  try {
    // (the settings left to the core's defaults, null here, are left out: the adapter fills them)
    const given = Object.fromEntries(Object.entries(settings).filter(([, v]) => v !== null));
    transport = meteor.createNativeTransport({ settings: given, logger }).setup(WebApp.httpServer, prefix, {});
  } catch (e) {
    warn(`could not attach to WebApp.httpServer (${e && e.message}); ${served}.`);
    return done('unavailable', String(e && e.message));
  }
  transport.on('connection', (socket) => handOff(ss, socket));

  // Browsers open a raw WebSocket to /websocket: 3.0–3.4 clients read DISABLE_SOCKJS, 3.5
  // clients use SockJS only when DDP_TRANSPORT is "sockjs". /sockjs stays mounted.
  runtimeConfig.DISABLE_SOCKJS = true;
  runtimeConfig.DDP_TRANSPORT = NAME;
  // A browser whose WebSocket constructor fails turns the flags back and uses SockJS.
  installClientFallback(ctx.WebAppInternals);

  const status = done('serving', ctx.source || 'takeover', { transport, settings });
  Object.defineProperty(ss, OWNER, { value: status, enumerable: false, configurable: true });
  info(`native serves ${prefix}/websocket on the app's own port (${describeCompression(transport._compression)}, ` +
    `payloadLength ${settings.payloadLength} KiB, maxBackpressure ${settings.maxBackpressure} B, ` +
    `io ${transport._ioMode}${settings.threads !== null ? `, threads ${settings.threads}` : ''}` +
    `${settings.drainOnSigterm ? ', drain on SIGTERM' : ''}` +
    `${settings.proxyProtocol ? ', PROXY protocol required' : ''}); ` +
    `SockJS stays at ${prefix}/sockjs. Off: ${SWITCH_VARIABLE}=0.`);
  return status;
}

/** The takeover with Meteor's globals, from `import 'ddp-transport-native/meteor/auto'` or the
 *  Atmosphere package. Outside a Meteor server process it does nothing (one line says so). */
function takeOverFromGlobals(source, logger = console) {
  const Meteor = meteorGlobal();
  const g = globalThis;
  if (!Meteor || !Meteor.isServer || !g.Package) {
    logger.warn(`${LOG_PREFIX} ${source}: not a Meteor server process; nothing done.`);
    return { state: 'unavailable', reason: 'not a Meteor server process' };
  }
  const { WebApp, WebAppInternals } = g.Package.webapp || {};
  return takeOver({ Meteor, WebApp, WebAppInternals, runtimeConfig: g.__meteor_runtime_config__, source, logger });
}

/**
 * The Atmosphere package's part: register `native` with Meteor's transport registry where there
 * is one (a patched 3.5 ddp-server selects it through the registry; the takeover then stands
 * aside), and take over when ddp-server has built its stream server: now if it has, else at
 * startup (this package loaded first; that is still before autoupdate's startup hook, which
 * loads after ddp-server).
 */
function fromAtmospherePackage(logger = console) {
  const g = globalThis;
  const registry = g.Package && g.Package['ddp-transport-registry'] && g.Package['ddp-transport-registry'].DDPTransportRegistry;
  if (registry && !registry.get(NAME)) {
    registry.register(NAME, () => require('./index.js').createNativeTransport());
  }
  const source = `the Atmosphere package ${PACKAGE}`;
  const Meteor = meteorGlobal();
  if (Meteor && Meteor.server && Meteor.server.stream_server) return takeOverFromGlobals(source, logger);
  if (Meteor && typeof Meteor.startup === 'function') {
    Meteor.startup(() => { takeOverFromGlobals(source, logger); });
    return { state: 'deferred', reason: 'ddp-server had not loaded yet: at startup' };
  }
  return takeOverFromGlobals(source, logger);
}

module.exports = {
  takeOver,
  takeOverFromGlobals,
  fromAtmospherePackage,
  handOff,
  SWITCH_VARIABLE,
  SETTINGS_LABEL,
  HANDSHAKE_TIMEOUT_MS,
};
