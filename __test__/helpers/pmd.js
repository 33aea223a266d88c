'use strict';
// permessage-deflate (RFC 7692) helpers for deflate.test.js: client-side compression of one
// message, inflation of a server message, reading a whole (possibly fragmented) message from a
// raw FrameReader, and a checker for Sec-WebSocket-Extensions response values.

const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const raw = require('./raw');

const TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);
const MIB = 1024 * 1024;

/**
 * Compress one message the way an RFC 7692 sender does: raw deflate ending with a sync flush,
 * then the trailing 00 00 ff ff removed. (`finishFlush` is what makes the *sync* API end with a
 * sync flush; `flush` alone only governs stream writes and the sync call would end with Z_FINISH.)
 */
function deflateMessage(buf, { level, windowBits } = {}) {
  const opts = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
  if (level !== undefined) opts.level = level;
  if (windowBits !== undefined) opts.windowBits = windowBits;
  const out = zlib.deflateRawSync(Buffer.isBuffer(buf) ? buf : Buffer.from(buf), opts);
  assert.deepEqual(out.subarray(out.length - 4), TAIL, 'sync-flushed deflate output ends with 00 00 ff ff');
  return out.subarray(0, out.length - 4);
}

/** Inflate one received message payload (append the 00 00 ff ff tail back). */
function inflateMessage(payload, { windowBits = 15 } = {}) {
  return zlib.inflateRawSync(Buffer.concat([payload, TAIL]), {
    windowBits,
    finishFlush: zlib.constants.Z_SYNC_FLUSH,
    maxOutputLength: 64 * MIB,
  });
}

/**
 * Read one complete data message from a raw FrameReader (skipping pings/pongs).
 * Returns {opcode, rsv1 (of the first frame), frames, payload (concatenated, as on the wire)}.
 * Throws on a close frame or end of connection.
 */
async function readMessage(reader, timeout = 5000) {
  const end = Date.now() + timeout;
  const frames = [];
  for (let i = 0; i < 100000; i++) {
    const f = await reader.next(Math.max(1, end - Date.now()));
    if (f === null) throw new Error(`connection ended while reading a message (${frames.length} frames read)`);
    if (f.opcode === raw.OP.PING || f.opcode === raw.OP.PONG) continue;
    if (f.opcode === raw.OP.CLOSE) {
      const code = f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
      throw new Error(`close frame ${code} "${f.payload.subarray(2).toString('utf8')}" while reading a message`);
    }
    frames.push(f);
    if (f.fin) break;
  }
  const first = frames[0];
  return {
    opcode: first.opcode,
    rsv1: first.rsv1,
    frames,
    payload: Buffer.concat(frames.map((f) => f.payload)),
  };
}

/** Payload of a message, inflated when its first frame has RSV1. */
function messageData(msg, { windowBits = 15 } = {}) {
  return msg.rsv1 ? inflateMessage(msg.payload, { windowBits }) : msg.payload;
}

/**
 * Parse a Sec-WebSocket-Extensions value into [{name, params: [[key, value|true]]}].
 * Good enough for the server's responses (tokens and quoted strings, no commas inside quotes).
 */
function parseExtensions(value) {
  if (value === undefined || value === null || value.trim() === '') return [];
  return value.split(',').map((element) => {
    const parts = element.split(';').map((p) => p.trim());
    const name = parts.shift();
    const params = parts.filter((p) => p !== '').map((p) => {
      const i = p.indexOf('=');
      if (i < 0) return [p, true];
      let v = p.slice(i + 1).trim();
      if (v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
      return [p.slice(0, i).trim(), v];
    });
    return { name, params };
  });
}

const WINDOW_RE = /^(?:[89]|1[0-5])$/;

/**
 * Assert that `response` is an RFC 7692 §7 acceptable answer to the single permessage-deflate
 * `offer` (a string like "permessage-deflate; client_max_window_bits"):
 *   one element, named permessage-deflate; every parameter known and at most once;
 *   *_no_context_takeover without a value; server_no_context_takeover present if offered;
 *   server_max_window_bits present iff offered (this server's documented rule; RFC: must be
 *     present with a value <= the offer when offered), value 8..15 <= the offered value;
 *   client_max_window_bits only if offered, with a value 8..15 (<= the offered value if any).
 * Returns {serverNoContextTakeover, clientNoContextTakeover, serverMaxWindowBits, clientMaxWindowBits}.
 */
function assertValidResponse(offer, response) {
  const [off] = parseExtensions(offer);
  const offered = new Map(off.params);
  const els = parseExtensions(response);
  assert.equal(els.length, 1, `exactly one extension in the response ${JSON.stringify(response)}`);
  const [el] = els;
  assert.equal(el.name, 'permessage-deflate', `response names permessage-deflate: ${JSON.stringify(response)}`);
  const known = ['server_no_context_takeover', 'client_no_context_takeover', 'server_max_window_bits', 'client_max_window_bits'];
  const seen = new Map();
  for (const [k, v] of el.params) {
    assert.ok(known.includes(k), `known parameter ${k} in ${JSON.stringify(response)}`);
    assert.ok(!seen.has(k), `parameter ${k} at most once in ${JSON.stringify(response)}`);
    seen.set(k, v);
  }
  for (const k of ['server_no_context_takeover', 'client_no_context_takeover']) {
    if (seen.has(k)) assert.equal(seen.get(k), true, `${k} carries no value`);
  }
  if (offered.has('server_no_context_takeover')) {
    assert.ok(seen.has('server_no_context_takeover'), 'server_no_context_takeover offered → must be in the response');
  }
  if (offered.has('server_max_window_bits')) {
    assert.ok(seen.has('server_max_window_bits'), 'server_max_window_bits offered → must be answered');
    const v = seen.get('server_max_window_bits');
    assert.match(String(v), WINDOW_RE, 'server_max_window_bits is 8..15');
    assert.ok(Number(v) <= Number(offered.get('server_max_window_bits')), `server_max_window_bits=${v} <= offered`);
  } else {
    assert.ok(!seen.has('server_max_window_bits'), `server_max_window_bits not offered → not answered (${JSON.stringify(response)})`);
  }
  if (seen.has('client_max_window_bits')) {
    assert.ok(offered.has('client_max_window_bits'), 'client_max_window_bits answered only when offered (RFC 7692 §7.1.2.2)');
    const v = seen.get('client_max_window_bits');
    assert.match(String(v), WINDOW_RE, 'client_max_window_bits in a response has a value 8..15');
    const o = offered.get('client_max_window_bits');
    if (o !== true) assert.ok(Number(v) <= Number(o), `client_max_window_bits=${v} <= offered ${o}`);
  }
  return {
    serverNoContextTakeover: seen.has('server_no_context_takeover'),
    clientNoContextTakeover: seen.has('client_no_context_takeover'),
    serverMaxWindowBits: seen.has('server_max_window_bits') ? Number(seen.get('server_max_window_bits')) : undefined,
    clientMaxWindowBits: seen.has('client_max_window_bits') ? Number(seen.get('client_max_window_bits')) : undefined,
  };
}

/** A compressible text of exactly `len` bytes whose repeats are `period` bytes apart. */
function compressibleText(len, period = 2000, seed = 'x') {
  const unit = [];
  let n = 0;
  for (let i = 0; unit.join('').length < period && i < 100000; i++) {
    unit.push(`${seed}-${(i * 2654435761 >>> 0).toString(36)}-${n += i}|`);
  }
  const u = unit.join('').slice(0, period);
  return u.repeat(Math.ceil(len / period)).slice(0, len);
}

/** VmHWM (peak RSS) of a live process, bytes. */
function peakRss(pid) {
  const status = require('node:fs').readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmHWM:\s+(\d+)\s+kB/.exec(status);
  return m ? Number(m[1]) * 1024 : NaN;
}

module.exports = {
  TAIL,
  MIB,
  deflateMessage,
  inflateMessage,
  readMessage,
  messageData,
  parseExtensions,
  assertValidResponse,
  compressibleText,
  peakRss,
};
