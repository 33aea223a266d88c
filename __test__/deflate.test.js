'use strict';
// permessage-deflate (RFC 7692) end to end: the `ws` client, faye-websocket + permessage-deflate2
// (Meteor's server-to-server DDP client), a raw client checking RSV1 and the 101's exact
// Sec-WebSocket-Extensions value, zip-bomb and fragment-flood caps in a child process, and
// SERVER_WEBSOCKET_COMPRESSION through the Meteor adapter. (Headless Chromium: browser-demo.test.js.)

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const crypto = require('node:crypto');
const Faye = require('faye-websocket');
const deflate2 = require('permessage-deflate2');

const { scope, WsClient, deadline, waitFor } = require('./helpers/common');
const raw = require('./helpers/raw');
const { runNode, procStats, CHILD_PRELUDE } = require('./helpers/proc');
const {
  MIB, deflateMessage, inflateMessage, readMessage, messageData, assertValidResponse,
  compressibleText, peakRss,
} = require('./helpers/pmd');

const { OP } = raw;
const KIB = 1024;
const CHROME_OFFER = 'permessage-deflate; client_max_window_bits';
const FIREFOX_OFFER = 'permessage-deflate';
// The default settings' answers: Meteor's (server_no_context_takeover) plus a bound on the client's
// window, so the server parks it between messages (1 KiB) instead of keeping an inflater: 10 bits
// when the client offers client_max_window_bits, else one message (client_no_context_takeover).
const DEFAULT_TO_CHROME = 'permessage-deflate; server_no_context_takeover; client_max_window_bits=10';
const DEFAULT_TO_FIREFOX = 'permessage-deflate; server_no_context_takeover; client_no_context_takeover';
// Meteor's defaults (SERVER_WEBSOCKET_COMPRESSION unset).
const METEOR_DEFAULTS = { threshold: 1024, level: 1, memLevel: 1, noContextTakeover: true, maxWindowBits: 8 };

/**
 * Echo behavior: text/binary echoed with compression allowed; a text message starting with "nc:"
 * is answered (without the prefix) with `send(x, false, false)` (compression off for that message).
 */
function echoBehavior(compression, extra = {}) {
  return {
    compression,
    idleTimeout: 0,
    message(ws, data, isBinary) {
      if (!isBinary && typeof data === 'string' && data.startsWith('nc:')) ws.send(data.slice(3), false, false);
      else ws.send(data, isBinary);
    },
    ...extra,
  };
}

/** A `ws` client (via the queued WsClient helper) plus the 101's response headers. */
async function wsOpen(s, url, opts) {
  const c = s.trackClient(new WsClient(url, opts));
  let headers = null;
  c.ws.once('upgrade', (res) => { headers = res.headers; });
  await c.opened;
  return { c, headers };
}

async function rawOpen(s, port, extensions, path = '/') {
  const conn = await raw.connectRaw(port, { path, extensions });
  s.trackSocket(conn.socket);
  return conn;
}

/** Send one text (or binary) message from the raw client, optionally compressed (RSV1). */
function rawSend(conn, data, { compress = false, binary = false, windowBits } = {}) {
  const payload = Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8');
  const opcode = binary ? OP.BINARY : OP.TEXT;
  const body = compress ? deflateMessage(payload, { windowBits }) : payload;
  return conn.reader.write(raw.buildFrame({ opcode, rsv1: compress, payload: body }));
}

// ---------------------------------------------------------------------------------------------

describe('1. ws client, perMessageDeflate: true', () => {
  test('negotiated value on the 101; 100 B, 10 KiB and 1 MiB echo intact both ways', { timeout: 20000 }, async (t) => {
    const s = scope(t);
    let offer = null;
    let serverExt = null;
    const { app, port } = await s.app(echoBehavior({ threshold: 1024 }, {
      upgrade(req, res) { offer = req.extensions; res.accept(); },
      open(ws) { serverExt = ws.getExtensions(); },
    }));
    const { c, headers } = await wsOpen(s, `ws://127.0.0.1:${port}/`, { perMessageDeflate: true });

    assert.equal(offer, CHROME_OFFER, "ws's default offer");
    // Defaults: server_no_context_takeover (noContextTakeover true); no server_max_window_bits
    // (not offered); client_max_window_bits=10 (requestMaxWindowBits' default).
    const expected = DEFAULT_TO_CHROME;
    assert.equal(headers['sec-websocket-extensions'], expected, '101 Sec-WebSocket-Extensions');
    assertValidResponse(offer, headers['sec-websocket-extensions']);
    // The server's open handler runs after the 101 left (delivered to JS asynchronously).
    await waitFor(() => serverExt !== null, { label: 'server open handler' });
    assert.equal(serverExt, expected, 'ws.getExtensions() on the server');
    assert.equal(c.ws.extensions, 'permessage-deflate', 'the ws client activated the extension');

    const small = 'a'.repeat(99) + '!';
    assert.equal(Buffer.byteLength(small), 100);
    await c.send(small);
    const m1 = await c.next();
    assert.equal(m1.isBinary, false);
    assert.equal(m1.text, small);

    const tenText = compressibleText(10 * KIB, 300, 'ten');
    await c.send(tenText);
    assert.equal((await c.next()).text, tenText);

    const tenBin = crypto.randomBytes(10 * KIB);
    await c.send(tenBin, { binary: true });
    const m3 = await c.next();
    assert.equal(m3.isBinary, true);
    assert.ok(Buffer.from(m3.data).equals(tenBin), '10 KiB binary echoed intact');

    const before = app.stats();
    const big = compressibleText(MIB, 120, 'big');
    await c.send(big);
    const m4 = await c.next(10000);
    assert.equal(m4.text.length, big.length);
    assert.ok(m4.text === big, '1 MiB text echoed intact');
    const after = app.stats();
    const inBytes = after.bytesIn - before.bytesIn;
    const inWire = after.wireBytesIn - before.wireBytesIn;
    const outBytes = after.bytesOut - before.bytesOut;
    const outWire = after.wireBytesOut - before.wireBytesOut;
    assert.equal(inBytes, MIB, 'inflated bytes in');
    assert.equal(outBytes, MIB, 'bytes out before compression');
    assert.ok(inWire < inBytes / 2, `client→server was compressed on the wire (${inWire} wire bytes for ${inBytes})`);
    assert.ok(outWire < outBytes / 2, `server→client was compressed on the wire (${outWire} wire bytes for ${outBytes})`);
  });
});

describe('2. ws client options against noContextTakeover:false, maxWindowBits:15', () => {
  const SERVER = { threshold: 1024, noContextTakeover: false, maxWindowBits: 15 };
  const base = compressibleText(1500, 1500, 'doc');
  const messages = Array.from({ length: 30 }, (_, i) => JSON.stringify({
    msg: 'changed', collection: 'tasks', id: `task-${i}`, fields: { text: base, n: i },
  }));

  async function run(t, perMessageDeflate, expectedHeader, { wireOutRatio, wireInRatio, server } = {}) {
    const s = scope(t);
    const { app, port } = await s.app(echoBehavior({ ...SERVER, ...server }));
    const { c, headers } = await wsOpen(s, `ws://127.0.0.1:${port}/`, { perMessageDeflate });
    assert.equal(headers['sec-websocket-extensions'], expectedHeader);
    const before = app.stats();
    for (const m of messages) await c.send(m);
    const got = await c.take(messages.length, 10000);
    for (let i = 0; i < messages.length; i++) assert.equal(got[i].text, messages[i], `message ${i} intact`);
    // A second round, one at a time (each message compressed against the previous ones).
    for (let i = 0; i < messages.length; i++) {
      await c.send(messages[i]);
      assert.equal((await c.next()).text, messages[i], `round 2, message ${i} intact`);
    }
    const after = app.stats();
    const bytesOut = after.bytesOut - before.bytesOut;
    const wireOut = after.wireBytesOut - before.wireBytesOut;
    const bytesIn = after.bytesIn - before.bytesIn;
    const wireIn = after.wireBytesIn - before.wireBytesIn;
    const total = messages.reduce((n, m) => n + Buffer.byteLength(m), 0) * 2;
    assert.equal(bytesOut, total);
    assert.equal(bytesIn, total);
    if (wireOutRatio) assert.ok(wireOut < bytesOut * wireOutRatio, `server kept its context: ${wireOut} wire bytes for ${bytesOut}`);
    if (wireInRatio) assert.ok(wireIn < bytesIn * wireInRatio, `client kept its context: ${wireIn} wire bytes for ${bytesIn}`);
  }

  test('{ serverNoContextTakeover, clientNoContextTakeover }: 30 similar messages intact', { timeout: 20000 }, async (t) => {
    await run(t, { serverNoContextTakeover: true, clientNoContextTakeover: true },
      'permessage-deflate; server_no_context_takeover; client_no_context_takeover');
  });

  test('{ clientMaxWindowBits: 10 }: context takeover both ways, 30 similar messages intact', { timeout: 20000 }, async (t) => {
    // Offer "permessage-deflate; client_max_window_bits=10": answered 10 (requestMaxWindowBits'
    // default), the client's window is parked between messages.
    // These 1.5 KiB messages repeat each other from further back than 1 KiB: the client's
    // context helps less (the trade of the small window, see docs/compression.md).
    await run(t, { clientMaxWindowBits: 10 }, 'permessage-deflate; client_max_window_bits=10', { wireOutRatio: 0.25, wireInRatio: 0.6 });
  });

  test('default ws offer: context takeover both ways, the client asked for 10 bits', { timeout: 20000 }, async (t) => {
    await run(t, true, 'permessage-deflate; client_max_window_bits=10', { wireOutRatio: 0.25, wireInRatio: 0.6 });
  });

  test('requestMaxWindowBits 15: 15-bit windows both ways (the server keeps an inflater)', { timeout: 20000 }, async (t) => {
    await run(t, true, 'permessage-deflate; client_max_window_bits=15', { wireOutRatio: 0.25, wireInRatio: 0.25, server: { requestMaxWindowBits: 15 } });
  });
});

describe('3. faye-websocket Client + permessage-deflate2 (Meteor server-to-server DDP client)', () => {
  function fayeOpen(s, url, extensions) {
    const ws = new Faye.Client(url, [], { extensions });
    const queue = [];
    const waiters = [];
    let closed = null;
    ws.on('message', (ev) => { const w = waiters.shift(); if (w) w(ev.data); else queue.push(ev.data); });
    ws.on('close', (ev) => { closed = { code: ev.code, reason: ev.reason }; });
    s.trackClient({ terminate() { try { ws.close(); } catch { /* gone */ } } });
    const next = (timeout = 5000) => {
      if (queue.length) return Promise.resolve(queue.shift());
      if (closed) return Promise.reject(new Error(`faye socket closed (${closed.code}) before message`));
      let w;
      return deadline(new Promise((resolve) => { w = resolve; waiters.push(w); }), timeout, 'faye message')
        .catch((e) => { const i = waiters.indexOf(w); if (i >= 0) waiters.splice(i, 1); throw e; });
    };
    const opened = deadline(new Promise((resolve, reject) => {
      ws.on('open', () => resolve());
      ws.on('error', (e) => reject(e instanceof Error ? e : new Error(`faye error: ${e && e.message}`)));
      ws.on('close', (ev) => reject(new Error(`faye closed before open: ${ev.code}`)));
    }), 5000, 'faye open');
    return opened.then(() => ({ ws, next, closeInfo: () => closed }));
  }

  async function run(t, extensions, expectedHeader) {
    const s = scope(t);
    let offer = null;
    const { app, port } = await s.app(echoBehavior({ ...METEOR_DEFAULTS }, {
      upgrade(req, res) { offer = req.extensions; res.accept(); },
    }));
    const f = await fayeOpen(s, `ws://127.0.0.1:${port}/websocket`, extensions);
    const header = f.ws.headers && f.ws.headers['sec-websocket-extensions'];
    assert.equal(header, expectedHeader, `101 answer to faye's offer ${JSON.stringify(offer)}`);
    assertValidResponse(offer, header);

    const below = JSON.stringify({ msg: 'method', method: 'echo', params: ['x'.repeat(200)], id: '1' });
    const above = JSON.stringify({ msg: 'result', id: '2', result: compressibleText(5000, 180, 'res') });
    assert.ok(Buffer.byteLength(below) < 1024 && Buffer.byteLength(above) > 1024);
    const before = app.stats();
    for (const m of [below, above, below, above]) {
      f.ws.send(m);
      assert.equal(await f.next(), m);
    }
    const after = app.stats();
    const bytesOut = after.bytesOut - before.bytesOut;
    const wireOut = after.wireBytesOut - before.wireBytesOut;
    assert.ok(wireOut < bytesOut, `replies above the threshold went compressed (${wireOut} wire bytes for ${bytesOut})`);
    assert.equal(f.closeInfo(), null, 'still open');
  }

  test('extensions: [permessage-deflate2] against Meteor defaults: below/above threshold echo intact', { timeout: 20000 }, async (t) => {
    // permessage-deflate2's default offer is "permessage-deflate; client_max_window_bits".
    await run(t, [deflate2], DEFAULT_TO_CHROME);
  });

  test('configured permessage-deflate2 (requestMaxWindowBits 8, threshold 0): 8-bit server window', { timeout: 20000 }, async (t) => {
    // Asks server_max_window_bits=8: the answer is 8, so faye inflates with a 256-byte window.
    await run(t, [deflate2.configure({ requestMaxWindowBits: 8, threshold: 0, level: 1 })],
      'permessage-deflate; server_no_context_takeover; server_max_window_bits=8; client_max_window_bits=10');
  });
});

describe('4. RSV1 on the wire (raw client)', () => {
  test('replies: 2 KiB compressed (RSV1), 100 B not; compress=false → RSV1 clear', { timeout: 15000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    const conn = await rawOpen(s, port, CHROME_OFFER);
    assert.equal(conn.headers['sec-websocket-extensions'], DEFAULT_TO_CHROME);

    const twoK = compressibleText(2 * KIB, 150, 'two');
    await rawSend(conn, twoK);
    const r1 = await readMessage(conn.reader);
    assert.equal(r1.opcode, OP.TEXT);
    assert.equal(r1.rsv1, true, '2 KiB reply (>= threshold 1024) has RSV1');
    assert.ok(r1.payload.length < 2 * KIB, 'and is smaller on the wire');
    assert.equal(inflateMessage(r1.payload).toString('utf8'), twoK);

    const hundred = 'h'.repeat(100);
    await rawSend(conn, hundred);
    const r2 = await readMessage(conn.reader);
    assert.equal(r2.rsv1, false, '100-byte reply (< threshold) has RSV1 clear');
    assert.equal(r2.payload.toString('utf8'), hundred);

    await rawSend(conn, `nc:${twoK}`);
    const r3 = await readMessage(conn.reader);
    assert.equal(r3.rsv1, false, 'send(x, false, false) → RSV1 clear even at 2 KiB');
    assert.equal(r3.payload.toString('utf8'), twoK);
    for (const f of [...r1.frames, ...r2.frames, ...r3.frames]) {
      assert.equal(f.rsv2 || f.rsv3, false);
      assert.equal(f.masked, false, 'server frames are unmasked');
    }
  });

  test('client sends compressed (RSV1) text and binary; split over two frames', { timeout: 15000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    const conn = await rawOpen(s, port, CHROME_OFFER);

    const text = compressibleText(3000, 200, 'up');
    await rawSend(conn, text, { compress: true });
    const r1 = await readMessage(conn.reader);
    assert.equal(r1.opcode, OP.TEXT);
    assert.equal(r1.rsv1, true);
    assert.equal(inflateMessage(r1.payload).toString('utf8'), text);

    const short = 'short compressed message';
    await rawSend(conn, short, { compress: true });
    const r2 = await readMessage(conn.reader);
    assert.equal(r2.rsv1, false);
    assert.equal(r2.payload.toString('utf8'), short);

    const bin = Buffer.concat([crypto.randomBytes(600), Buffer.alloc(1500, 7)]);
    await rawSend(conn, bin, { compress: true, binary: true });
    const r3 = await readMessage(conn.reader);
    assert.equal(r3.opcode, OP.BINARY);
    assert.ok(messageData(r3).equals(bin), 'compressed binary echoed intact');

    // One compressed message in two frames: RSV1 on the first frame only.
    const split = compressibleText(4000, 250, 'split');
    const z = deflateMessage(Buffer.from(split));
    const k = Math.floor(z.length / 2);
    await conn.reader.write(Buffer.concat([
      raw.buildFrame({ opcode: OP.TEXT, fin: false, rsv1: true, payload: z.subarray(0, k) }),
      raw.buildFrame({ opcode: OP.CONT, fin: true, rsv1: false, payload: z.subarray(k) }),
    ]));
    const r4 = await readMessage(conn.reader);
    assert.equal(messageData(r4).toString('utf8'), split);

    // Several messages in a row (the server's inflater keeps its context: no client_no_context_takeover).
    for (let i = 0; i < 5; i++) {
      const m = `${i}:${text}`;
      await rawSend(conn, m, { compress: true });
      assert.equal(messageData(await readMessage(conn.reader)).toString('utf8'), m, `message ${i}`);
    }
  });

  test('RSV1 on a continuation frame → close 1002', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    const conn = await rawOpen(s, port, CHROME_OFFER);
    const z = deflateMessage(Buffer.from(compressibleText(2000, 100, 'c')));
    const k = Math.floor(z.length / 2);
    await conn.reader.write(Buffer.concat([
      raw.buildFrame({ opcode: OP.TEXT, fin: false, rsv1: true, payload: z.subarray(0, k) }),
      raw.buildFrame({ opcode: OP.CONT, fin: true, rsv1: true, payload: z.subarray(k) }),
    ]));
    const c = await conn.reader.waitClose();
    assert.equal(c.code, 1002);
    assert.equal(c.frames.length, 0, 'no message delivered');
  });

  test('garbage compressed payload → close 1007', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    const conn = await rawOpen(s, port, CHROME_OFFER);
    // 0xff…: BFINAL=1, BTYPE=11 (reserved) → not a deflate stream.
    await conn.reader.write(raw.buildFrame({ opcode: OP.TEXT, rsv1: true, payload: Buffer.alloc(32, 0xff) }));
    const c = await conn.reader.waitClose();
    assert.equal(c.code, 1007);
    assert.equal(c.frames.length, 0);
  });

  test('RSV1 without the extension negotiated → close 1002', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    const conn = await rawOpen(s, port, undefined);
    assert.equal(conn.headers['sec-websocket-extensions'], undefined);
    await rawSend(conn, 'hello', { compress: true });
    assert.equal((await conn.reader.waitClose()).code, 1002);
  });
});

describe('5. negotiation over real sockets (exact 101 values)', () => {
  // A message with repeats ~2000 bytes apart: inflating the reply with the answered
  // server_max_window_bits proves the server kept to that window.
  const probe = compressibleText(3000, 2000, 'probe');

  async function check(s, port, offer, expected) {
    const conn = await rawOpen(s, port, offer);
    const got = conn.headers['sec-websocket-extensions'];
    assert.equal(got, expected, `answer to ${JSON.stringify(offer)}`);
    if (expected === undefined) {
      await rawSend(conn, probe);
      const r = await readMessage(conn.reader);
      assert.equal(r.rsv1, false, 'no extension → never RSV1');
      assert.equal(r.payload.toString('utf8'), probe);
      conn.socket.destroy();
      return;
    }
    const first = offer.split(',').map((x) => x.trim()).find((o) => {
      try { assertValidResponse(o, got); return true; } catch { return false; }
    });
    assert.ok(first !== undefined, `${JSON.stringify(got)} is an RFC 7692 answer to one of the offers in ${JSON.stringify(offer)}`);
    const p = assertValidResponse(first, got);
    await rawSend(conn, probe, { compress: true, windowBits: p.clientMaxWindowBits || 15 });
    const r = await readMessage(conn.reader);
    assert.equal(r.rsv1, true);
    assert.equal(inflateMessage(r.payload, { windowBits: p.serverMaxWindowBits || 15 }).toString('utf8'), probe);
    conn.socket.destroy();
  }

  test('server with the defaults (noContextTakeover, maxWindowBits 8)', { timeout: 15000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024 }));
    await check(s, port, CHROME_OFFER, DEFAULT_TO_CHROME);
    await check(s, port, FIREFOX_OFFER, DEFAULT_TO_FIREFOX);
    await check(s, port, 'permessage-deflate; server_max_window_bits=10',
      'permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8');
    await check(s, port, 'permessage-deflate; server_no_context_takeover; client_no_context_takeover',
      'permessage-deflate; server_no_context_takeover; client_no_context_takeover');
    await check(s, port, 'permessage-deflate; server_max_window_bits=7, permessage-deflate', DEFAULT_TO_FIREFOX);
    // requestMaxWindowBits 15: exactly Meteor's (faye's) answers, 15 meaning no bound.
    const { port: p15 } = await s.app(echoBehavior({ threshold: 1024, requestMaxWindowBits: 15 }));
    await check(s, p15, CHROME_OFFER, 'permessage-deflate; server_no_context_takeover; client_max_window_bits=15');
    await check(s, p15, FIREFOX_OFFER, 'permessage-deflate; server_no_context_takeover');
    await check(s, port, 'x-foo; bar', undefined);
  });

  test('server with takeover, 15 bits and requestMaxWindowBits 10', { timeout: 15000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior({ threshold: 1024, noContextTakeover: false, maxWindowBits: 15, requestMaxWindowBits: 10 }));
    await check(s, port, CHROME_OFFER, 'permessage-deflate; client_max_window_bits=10');
    // client_max_window_bits not offered: the window cannot be bounded, so it is asked per message
    await check(s, port, FIREFOX_OFFER, 'permessage-deflate; client_no_context_takeover');
    await check(s, port, 'permessage-deflate; server_max_window_bits=10', 'permessage-deflate; client_no_context_takeover; server_max_window_bits=10');
    await check(s, port, 'permessage-deflate; server_no_context_takeover; client_no_context_takeover',
      'permessage-deflate; server_no_context_takeover; client_no_context_takeover');
    await check(s, port, 'permessage-deflate; server_max_window_bits=7, permessage-deflate', 'permessage-deflate; client_no_context_takeover');
    await check(s, port, 'permessage-deflate; client_max_window_bits=9', 'permessage-deflate; client_max_window_bits=9');
    await check(s, port, 'x-foo; bar', undefined);
  });

  test('compression off on the server → no extension header', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await s.app(echoBehavior(false));
    await check(s, port, CHROME_OFFER, undefined);
    await check(s, port, FIREFOX_OFFER, undefined);
  });
});

describe('5b. compress once, send many (Meteor defaults: server_no_context_takeover)', () => {
  const { addedMessage } = require('../bench/ddp-doc');
  const doc = addedMessage(7);

  /** N raw Chromium-style clients; then one tick sends `doc` to every socket; the frames each got. */
  async function fanOut(t, compression, n) {
    const s = scope(t);
    const sockets = [];
    const { app, port } = await s.app({ compression, idleTimeout: 0, open(ws) { sockets.push(ws); } });
    const conns = [];
    for (let i = 0; i < n; i++) conns.push(await rawOpen(s, port, CHROME_OFFER));
    await waitFor(() => sockets.length === n);
    const before = app.stats();
    for (const ws of sockets) ws.send(String(doc), false, true); // as mergebox: per socket, the same string
    const got = await Promise.all(conns.map((c) => readMessage(c.reader)));
    const after = app.stats();
    const header = compression.noContextTakeover ? DEFAULT_TO_CHROME : 'permessage-deflate; client_max_window_bits=10';
    for (const c of conns) assert.equal(c.headers['sec-websocket-extensions'], header, 'the server window is not announced');
    return { got, compressions: after.compressions - before.compressions, reused: after.compressionsReused - before.compressionsReused };
  }

  test('8 sockets get byte-identical frames that inflate at window 15; compressions +1, reused +7', { timeout: 15000 }, async (t) => {
    const { got, compressions, reused } = await fanOut(t, METEOR_DEFAULTS, 8);
    assert.equal(compressions, 1, 'compressed once');
    assert.equal(reused, 7);
    for (const r of got) {
      assert.equal(r.rsv1, true);
      assert.deepEqual(r.payload, got[0].payload, 'byte-identical frames');
    }
    assert.equal(inflateMessage(got[0].payload, { windowBits: 15 }).toString('utf8'), doc);
    assert.ok(got[0].payload.length < doc.length / 1.7, `4 KiB document: ${doc.length} → ${got[0].payload.length} bytes`);
  });

  test('context takeover: every socket compresses for itself', { timeout: 15000 }, async (t) => {
    const { got, compressions, reused } = await fanOut(t, { ...METEOR_DEFAULTS, noContextTakeover: false }, 4);
    assert.equal(compressions, 4);
    assert.equal(reused, 0);
    for (const r of got) assert.equal(inflateMessage(r.payload).toString('utf8'), doc);
  });
});

describe('6. caps over a real socket (server in a child process)', () => {
  const CHILD = `${CHILD_PRELUDE}
const app = App();
app.ws('/*', {
  compression: { threshold: 1024 },
  maxPayloadLength: 1024 * 1024,
  maxFragments: 10000,
  idleTimeout: 0,
  message: (ws, data, isBinary) => ws.send(data, isBinary),
  close: (ws, code) => out({ type: 'close', code }),
});
app.listen('127.0.0.1', 0, (token, err) => {
  if (!token) { out({ type: 'error', message: String(err && err.message) }); process.exit(1); }
  out({ type: 'listening', port: token.port });
});
onCommand((m) => {
  if (m.cmd === 'stats') out({ id: m.id, stats: app.stats() });
});
`;

  async function startChild(t) {
    const child = runNode(CHILD, { timeoutMs: 60000 });
    t.after(() => child.kill());
    const ready = await child.waitMessage((m) => m.type === 'listening' || m.type === 'error', 10000, 'child listening');
    assert.equal(ready.type, 'listening', JSON.stringify(ready));
    return { child, port: ready.port };
  }

  test('zip bomb (16 MiB of zeros) → 1009, bounded RSS; a good client keeps working', { timeout: 30000 }, async (t) => {
    const s = scope(t);
    const { child, port } = await startChild(t);

    // Warm up: a good client, compressed traffic both ways (the inflater exists).
    const { c: good } = await wsOpen(s, `ws://127.0.0.1:${port}/`, { perMessageDeflate: true });
    const doc = compressibleText(4000, 300, 'good');
    await good.send(doc);
    assert.equal((await good.next()).text, doc);

    const rss0 = procStats(child.pid).rss;
    const hwm0 = peakRss(child.pid);
    const bomb = deflateMessage(Buffer.alloc(16 * MIB));
    assert.ok(bomb.length < 64 * KIB, `bomb is small on the wire (${bomb.length} bytes)`);
    const conn = await rawOpen(s, port, CHROME_OFFER);
    await conn.reader.write(raw.buildFrame({ opcode: OP.BINARY, rsv1: true, payload: bomb }));
    const closed = await conn.reader.waitClose(10000);
    assert.equal(closed.code, 1009, 'message over maxPayloadLength (after inflating) → 1009');
    assert.equal(closed.frames.length, 0);
    await child.waitMessage((m) => m.type === 'close' && m.code === 1009, 5000, 'server close 1009');
    const rss1 = procStats(child.pid).rss;
    const hwm1 = peakRss(child.pid);
    t.diagnostic(`child RSS ${(rss0 / MIB).toFixed(1)} → ${(rss1 / MIB).toFixed(1)} MiB, peak ${(hwm0 / MIB).toFixed(1)} → ${(hwm1 / MIB).toFixed(1)} MiB`);
    assert.ok(rss1 - rss0 < 40 * MIB, `RSS growth ${((rss1 - rss0) / MIB).toFixed(1)} MiB < 40 MiB`);
    assert.ok(hwm1 - hwm0 < 40 * MIB, `peak RSS growth ${((hwm1 - hwm0) / MIB).toFixed(1)} MiB < 40 MiB`);

    // The good client is unaffected, and new clients are served.
    await good.send(`again ${doc}`);
    assert.equal((await good.next()).text, `again ${doc}`);
    const { c: fresh } = await wsOpen(s, `ws://127.0.0.1:${port}/`, { perMessageDeflate: true });
    await fresh.send(doc);
    assert.equal((await fresh.next()).text, doc);
    const st = await child.request({ cmd: 'stats' });
    assert.equal(st.stats.closesByCode['1009'], 1);
  });

  // Stored (level 0) deflate of n bytes is n + 6 bytes once the sync tail is removed; find the
  // input size whose compressed form is exactly `frames` bytes (bounded search).
  function storedOfLength(frames) {
    let n = frames - 6;
    for (let i = 0; i < 20; i++) {
      const text = compressibleText(n, 97, 'frag');
      const z = deflateMessage(Buffer.from(text), { level: 0 });
      if (z.length === frames) return { text, z };
      n += frames - z.length;
    }
    throw new Error(`no input deflates to exactly ${frames} bytes`);
  }

  function onePerFrame(z) {
    const parts = [];
    for (let i = 0; i < z.length; i++) {
      parts.push(raw.buildFrame({
        opcode: i === 0 ? OP.TEXT : OP.CONT,
        rsv1: i === 0,
        fin: i === z.length - 1,
        payload: z.subarray(i, i + 1),
      }));
    }
    return Buffer.concat(parts);
  }

  test('fragment flood: 10,000 one-byte compressed frames (= maxFragments) delivered intact; 10,001 → 1009', { timeout: 30000 }, async (t) => {
    const s = scope(t);
    const { port } = await startChild(t);

    const ok = storedOfLength(10000);
    const conn = await rawOpen(s, port, CHROME_OFFER);
    await conn.reader.write(onePerFrame(ok.z));
    const r = await readMessage(conn.reader, 15000);
    assert.equal(messageData(r).toString('utf8'), ok.text, '10,000-frame compressed message echoed intact');

    const over = storedOfLength(10001);
    const conn2 = await rawOpen(s, port, CHROME_OFFER);
    await conn2.reader.write(onePerFrame(over.z));
    const closed = await conn2.reader.waitClose(15000);
    assert.equal(closed.code, 1009, 'more than maxFragments frames → 1009');
    assert.equal(closed.frames.length, 0);

    // The first connection still works.
    const again = compressibleText(2000, 100, 'after');
    await rawSend(conn, again, { compress: true });
    assert.equal(messageData(await readMessage(conn.reader)).toString('utf8'), again);
  });
});

describe('7. SERVER_WEBSOCKET_COMPRESSION through the Meteor adapter', () => {
  const { createNativeTransport } = require('../meteor');
  const ENV = 'SERVER_WEBSOCKET_COMPRESSION';

  /** Set the variable (undefined = unset) for the duration of fn, then restore it. */
  function withEnv(value, fn) {
    const had = Object.prototype.hasOwnProperty.call(process.env, ENV);
    const saved = process.env[ENV];
    if (value === undefined) delete process.env[ENV];
    else process.env[ENV] = value;
    try {
      return fn();
    } finally {
      if (had) process.env[ENV] = saved;
      else delete process.env[ENV];
    }
  }

  function setup(server) {
    return createNativeTransport({ settings: {} })
      .setup(server, '', { websocketExtensions: () => [deflate2] });
  }

  async function start(t, envValue) {
    const server = http.createServer((req, res) => { res.end('ok'); });
    const events = withEnv(envValue, () => setup(server));
    t.after(async () => {
      server.closeAllConnections();
      await deadline(new Promise((resolve) => server.close(() => resolve())), 5000, 'http server close').catch(() => {});
      try { events._app.close(); } catch { /* already closed with the server */ }
    });
    events.on('connection', (socket) => socket.on('data', (d) => socket.send(d)));
    await deadline(new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    }), 5000, 'http listen');
    return { server, events, port: server.address().port };
  }

  test('unset → the 101 carries permessage-deflate (Meteor defaults)', { timeout: 10000 }, async (t) => {
    const before = process.env[ENV];
    const s = scope(t);
    const { port } = await start(t, undefined);
    assert.equal(process.env[ENV], before, 'restored');
    const conn = await rawOpen(s, port, CHROME_OFFER, '/websocket');
    assert.equal(conn.headers['sec-websocket-extensions'], DEFAULT_TO_CHROME);
    const big = compressibleText(3000, 150, 'meteor');
    await rawSend(conn, big, { compress: true });
    const r = await readMessage(conn.reader);
    assert.equal(r.rsv1, true, '3000-byte reply ≥ threshold 1024 is compressed');
    assert.equal(inflateMessage(r.payload).toString('utf8'), big);
    await rawSend(conn, '0123456789');
    const r2 = await readMessage(conn.reader);
    assert.equal(r2.rsv1, false, '10-byte reply below threshold 1024');
    assert.equal(r2.payload.toString('utf8'), '0123456789');
  });

  test('"false" → no extension header', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await start(t, 'false');
    const conn = await rawOpen(s, port, CHROME_OFFER, '/websocket');
    assert.equal(conn.headers['sec-websocket-extensions'], undefined);
    const big = compressibleText(3000, 150, 'plain');
    await rawSend(conn, big);
    const r = await readMessage(conn.reader);
    assert.equal(r.rsv1, false);
    assert.equal(r.payload.toString('utf8'), big);
  });

  test('{"threshold":0} → even a 10-byte reply has RSV1', { timeout: 10000 }, async (t) => {
    const s = scope(t);
    const { port } = await start(t, '{"threshold":0}');
    const conn = await rawOpen(s, port, CHROME_OFFER, '/websocket');
    assert.equal(conn.headers['sec-websocket-extensions'], DEFAULT_TO_CHROME);
    await rawSend(conn, '0123456789');
    const r = await readMessage(conn.reader);
    assert.equal(r.rsv1, true, '10-byte reply compressed with threshold 0');
    assert.equal(inflateMessage(r.payload).toString('utf8'), '0123456789');
  });

  test('"not json" → setup throws naming SERVER_WEBSOCKET_COMPRESSION', { timeout: 10000 }, () => {
    const before = process.env[ENV];
    const server = http.createServer();
    assert.throws(() => withEnv('not json', () => setup(server)), /SERVER_WEBSOCKET_COMPRESSION/);
    assert.equal(process.env[ENV], before, 'restored');
    assert.equal(server.listenerCount('upgrade'), 0, 'nothing attached');
  });
});
