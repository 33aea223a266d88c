'use strict';
// Constants shared with the Rust core. Each is defined once, in Rust, and read here from the
// addon (see src/constants.rs): send results, event kinds of a batch, the route and
// permessage-deflate defaults, and which close codes an endpoint may send.

const native = require('./load-binding.js');

const c = native.constants();

/** `ws.send()` results, as uWebSockets.js defines them. */
const SendStatus = Object.freeze({
  BACKPRESSURE: c.sendStatus.backpressure,
  SUCCESS: c.sendStatus.success,
  DROPPED: c.sendStatus.dropped,
});

/** Kinds of the events in a batch (`tag = id * EVENT_KINDS + kind`). */
const Event = Object.freeze({
  OPEN: c.event.open,
  TEXT: c.event.text,
  BINARY: c.event.binary,
  DRAIN: c.event.drain,
  CLOSE: c.event.close,
  UPGRADE: c.event.upgrade,
  PING: c.event.ping,
  PONG: c.event.pong,
  ABORTED: c.event.aborted,
  CLAIMED: c.event.claimed,
  RETURNED: c.event.returned,
  KINDS: c.event.kinds,
});

/** Defaults of a route's behavior (the core's `Behavior::default()`), in the JS API's units. */
const ROUTE_DEFAULTS = Object.freeze({ ...c.routeDefaults });

/** permessage-deflate defaults (the core's `DeflateConfig::default()`): Meteor's, plus
 *  `requestMaxWindowBits: 10` (a small client window the server parks between messages). */
const COMPRESSION_DEFAULTS = Object.freeze({
  ...c.compressionDefaults,
  requestMaxWindowBits: c.compressionDefaults.requestMaxWindowBits ?? undefined,
});

/** Admission control's defaults (the core's `AdmissionConfig::default()`): upgrades per second,
 *  burst, admitted sockets waiting for their open event, hold time, Retry-After. */
const ADMISSION_DEFAULTS = Object.freeze({ ...c.admissionDefaults });

/** Time one event-loop turn may spend handling delivered events, ms (the core's TURN_BUDGET). */
const TURN_BUDGET_MS = c.turnBudgetMs;

/** How long an upgrade's handshake may take, ms (the core's HANDSHAKE_TIMEOUT); also the wait
 *  for the PROXY header of a connection to an attached server (lib/proxy-header.js). */
const HANDSHAKE_TIMEOUT_MS = c.handshakeTimeoutMs;

/** Kinds of `send` (message, fragments, ping) and the prefix of routes matched with uWS's rules:
 *  for the uWS compat surface (lib/uws/). */
const SEND_KIND = Object.freeze({ ...c.sendKind });
const UWS_PATTERN_PREFIX = c.uwsPatternPrefix;

/** Close codes an endpoint may send in a close frame (RFC 6455 §7.4). */
const CLOSE_CODE_RANGES = Object.freeze(c.closeCodeRanges.map((r) => Object.freeze([r.from, r.to])));

/** The close code of a socket closed for `closeOnBackpressureLimit` (1013, try again later). */
const BACKPRESSURE_CLOSE_CODE = c.backpressureCloseCode;

function isValidCloseCode(code) {
  return Number.isInteger(code) && CLOSE_CODE_RANGES.some(([from, to]) => code >= from && code <= to);
}

/** The ranges as text for error messages: "1000-1003, 1007-1014 or 3000-4999". */
const CLOSE_CODES_TEXT = CLOSE_CODE_RANGES.map(([a, b]) => `${a}-${b}`).join(', ').replace(/, ([^,]*)$/, ' or $1');

module.exports = {
  native,
  SendStatus,
  Event,
  ROUTE_DEFAULTS,
  COMPRESSION_DEFAULTS,
  ADMISSION_DEFAULTS,
  TURN_BUDGET_MS,
  HANDSHAKE_TIMEOUT_MS,
  CLOSE_CODE_RANGES,
  CLOSE_CODES_TEXT,
  BACKPRESSURE_CLOSE_CODE,
  SEND_KIND,
  UWS_PATTERN_PREFIX,
  isValidCloseCode,
};
