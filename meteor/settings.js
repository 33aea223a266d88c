'use strict';
// The Meteor transport's settings: their rules, their defaults and their validation. No native
// code, so the takeover (meteor/takeover.js) can check settings before, and without, loading the
// addon. Read from `packages['ddp-server'].native` on the registry path and from
// `packages['ddp-transport-native']` by the takeover (which adds `enabled`).

const { describe: show } = require('../lib/describe');

const MIB = 1024 * 1024;

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isInt(v, min, max) {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

const SETTING_KEYS = Object.freeze({
  payloadLength: {
    check: (v) => typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= MIB,
    valid: 'a positive number of KiB (at most 1048576 = 1 GiB)',
  },
  timeout: {
    check: (v) => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= 2147483,
    valid: 'a number of seconds >= 0 (0 = off)',
  },
  maxBackpressure: {
    check: (v) => isInt(v, 1, 2 ** 40),
    valid: 'a positive integer number of bytes (at most 2^40)',
  },
  threads: { check: (v) => isInt(v, 1, 16), valid: 'an integer 1..16' },
  // the core's I/O mode (App({ io })): 'inline' (sockets read on the JS thread) or 'threads'
  io: { check: (v) => v === 'inline' || v === 'threads', valid: "'inline' or 'threads'" },
  drainOnSigterm: { check: (v) => typeof v === 'boolean', valid: 'true or false' },
  // admission control (App({ admission })): the object's own keys are checked by the core's
  // admissionOptions when the transport is set up (checkAdmission in index.js)
  admission: { check: (v) => typeof v === 'boolean' || isPlainObject(v), valid: 'true, false or an object of admission limits' },
  // PROXY protocol (App({ proxyProtocol }) on the attached http.Server): behind HAProxy
  // send-proxy / send-proxy-v2 or a cloud network load balancer
  proxyProtocol: { check: (v) => typeof v === 'boolean', valid: 'true or false' },
});

const SETTING_DEFAULTS = Object.freeze({
  payloadLength: 16384, // KiB = 16 MiB
  timeout: 0, // s; fallback idle timeout for sockets whose user never calls setWebsocketTimeout
  maxBackpressure: 16 * MIB,
  threads: null, // the core's: 1
  io: null, // the core's default: DDP_TRANSPORT_NATIVE_IO, else 'threads' if `threads` is set, else 'inline'
  drainOnSigterm: false,
  admission: true, // the core's defaults (on)
  proxyProtocol: false, // true: every connection to the app's port opens with a PROXY header
});

/**
 * Validate a settings object and fill in the defaults: `packages['ddp-server'].native` (the
 * registry path) by default, or another object with its own rules (the takeover's
 * `packages["ddp-transport-native"]`). Errors name `label` and the key.
 * @param {object|undefined|null} raw
 * @param {{ label?: string, rules?: object, defaults?: object }} [o]
 */
function validateSettings(raw, { label = 'ddp-server.native', rules = SETTING_KEYS, defaults = SETTING_DEFAULTS } = {}) {
  if (raw === undefined || raw === null) return { ...defaults };
  if (!isPlainObject(raw)) {
    throw new Error(`${label} must be an object with the keys ${Object.keys(rules).join(', ')}, got ${show(raw)}`);
  }
  const out = { ...defaults };
  for (const key of Object.keys(raw)) {
    const rule = rules[key];
    if (!rule) {
      throw new Error(`${label} has an unknown key ${show(key)}; valid keys: ${Object.keys(rules).join(', ')}`);
    }
    const v = raw[key];
    if (v === undefined) continue;
    if (!rule.check(v)) throw new Error(`${label}.${key} must be ${rule.valid}, got ${show(v)}`);
    out[key] = v;
  }
  return out;
}

/** Meteor's `Meteor` object in a Meteor server process (a global there, and in `Package`), else null. */
function meteorGlobal() {
  const g = globalThis;
  if (g.Meteor && typeof g.Meteor === 'object') return g.Meteor;
  // On the server, package exports live in the global `Package` registry.
  if (g.Package && g.Package.meteor && g.Package.meteor.Meteor) return g.Package.meteor.Meteor;
  return null;
}

module.exports = { isPlainObject, meteorGlobal, validateSettings, SETTING_KEYS, SETTING_DEFAULTS };
