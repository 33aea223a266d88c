'use strict';
// require('ddp-transport-native/redis'): `bridge(app, options)` carries an /uws app's publishes
// across instances through Redis pub/sub (lib/redis/bridge.js). The Redis client, ioredis, is an
// optional dependency, loaded here on the first bridge() call.

const { Bridge } = require('./bridge');
const { Topics } = require('../uws/topics');

const DEFAULTS = {
  url: 'redis://127.0.0.1:6379',
  prefix: 'ddp-transport-native:',
  maxQueued: 10000,
  maxQueuedBytes: 16 * 1024 * 1024,
  retryMaxMs: 2000,
};
const LIMITS = { maxQueued: [1, 1e7], maxQueuedBytes: [1024, 2 ** 32], retryMaxMs: [10, 60000] };

function loadClient() {
  try {
    return require('ioredis');
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && /'ioredis'/.test(err.message)) {
      throw new Error("ddp-transport-native/redis needs the Redis client 'ioredis', which is not installed "
        + '(an optional dependency of ddp-transport-native): npm install ioredis');
    }
    throw err;
  }
}

/** The options with their defaults; a bad one throws naming the key. */
function bridgeOptions(options) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new TypeError('redis bridge: options must be an object');
  }
  const o = { ...DEFAULTS, redisOptions: {} };
  for (const [k, v] of Object.entries(options || {})) {
    if (v === undefined) continue;
    if (!(k in o)) throw new TypeError(`redis bridge: unknown option ${k} (valid: ${Object.keys(o).join(', ')})`);
    o[k] = v;
  }
  let url;
  try {
    url = new URL(o.url);
  } catch {
    url = null;
  }
  if (typeof o.url !== 'string' || url === null || (url.protocol !== 'redis:' && url.protocol !== 'rediss:')) {
    throw new TypeError(`redis bridge: url must be a redis:// or rediss:// URL (got ${JSON.stringify(o.url)})`);
  }
  if (typeof o.prefix !== 'string') throw new TypeError('redis bridge: prefix must be a string');
  for (const [k, [min, max]] of Object.entries(LIMITS)) {
    if (!Number.isInteger(o[k]) || o[k] < min || o[k] > max) {
      throw new RangeError(`redis bridge: ${k} must be an integer from ${min} to ${max} (got ${o[k]})`);
    }
  }
  if (o.redisOptions === null || typeof o.redisOptions !== 'object') {
    throw new TypeError('redis bridge: redisOptions must be an object (ioredis options)');
  }
  if (url.password) url.password = '***';
  return { ...o, shownUrl: url.href };
}

/** Bridge `app` (an App or SSLApp of ddp-transport-native/uws) to Redis; see redis.d.ts. */
function bridge(app, options) {
  if (!app || !(app._topics instanceof Topics)) {
    throw new TypeError('redis bridge: app must be an App (or SSLApp) of ddp-transport-native/uws: '
      + 'the main API has no publish');
  }
  if (app._topics.broker !== null) throw new Error('redis bridge: this app is already bridged; bridge it once');
  const o = bridgeOptions(options);
  return new Bridge(app, loadClient(), o);
}

module.exports = { bridge };
