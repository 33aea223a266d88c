'use strict';
// RFC 6455 protocol enforcement seen from a raw client: the exact close code the server sends,
// the TCP connection ending, and a well-behaved `ws` client on the same app losing nothing.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { scope, waitFor } = require('./helpers/common');
const {
  OP, connectRaw, buildFrame, textFrame, binaryFrame, pingFrame, closeFrame, closePayload,
} = require('./helpers/raw');

const T = { timeout: 20000 };
const MAX_PAYLOAD = 1024;
const MAX_FRAGMENTS = 100;

/** One app with the limits under test; echo; records close handler calls per URL. */
async function setup(t) {
  const s = scope(t);
  const closes = [];
  const opens = [];
  const { app, port } = await s.app({
    maxPayloadLength: MAX_PAYLOAD,
    maxFragments: MAX_FRAGMENTS,
    idleTimeout: 0,
    open(ws) { opens.push(ws.getUrl()); },
    message(ws, data, isBinary) { ws.send(data, isBinary); },
    close(ws, code, reason) { closes.push({ url: ws.getUrl(), code, reason }); },
  });
  // The well-behaved neighbour: exchanges messages before, during and after the bad client.
  const good = await s.ws(`ws://127.0.0.1:${port}/good`);
  let sent = 0;
  const expected = [];
  const exchange = async (n) => {
    for (let i = 0; i < n; i++) {
      const m = `good-${sent++}`;
      expected.push(m);
      good.ws.send(m);
    }
  };
  const verifyGood = async () => {
    const got = await good.take(expected.length - verifyGood.received, 10000);
    verifyGood.received += got.length;
    verifyGood.all.push(...got.map((m) => m.text));
    assert.deepEqual(verifyGood.all, expected.slice(0, verifyGood.all.length), 'good client echoes out of order / lost');
    assert.equal(good.readyState, 1, 'good client must stay open');
  };
  verifyGood.received = 0;
  verifyGood.all = [];
  await exchange(10);
  await verifyGood();
  const bad = await connectRaw(port, { path: '/bad' });
  s.trackSocket(bad.socket);
  return { s, app, port, good, bad, closes, opens, exchange, verifyGood };
}

/**
 * Send `frames` (Buffers, written as one chunk) from the bad client, and assert the server closes
 * with `code` (or one of `code` if an array) and then ends the TCP connection.
 * The good client keeps talking throughout.
 */
async function expectFailure(t, frames, code, { label } = {}) {
  const ctx = await setup(t);
  const { bad, exchange, verifyGood } = ctx;
  bad.socket.write(Buffer.concat(frames));
  await exchange(10);
  const closeInfo = await bad.reader.waitClose(10000);
  const codes = Array.isArray(code) ? code : [code];
  assert.ok(
    codes.includes(closeInfo.code),
    `${label || 'case'}: expected close code ${codes.join(' or ')}, got ${closeInfo.code === null ? 'no close frame' : closeInfo.code}`
      + ` (reason ${JSON.stringify(closeInfo.reason)}; frames before: ${closeInfo.frames.map((f) => f.opcode).join(',')})`,
  );
  // Application data must not have been delivered for the bad message.
  assert.deepEqual(closeInfo.frames.filter((f) => f.opcode === OP.TEXT || f.opcode === OP.BINARY).map((f) => f.payload.toString()), [],
    'no echo expected for a malformed message');
  const how = await bad.reader.waitEnd(10000);
  assert.ok(how, 'TCP connection must end');
  await exchange(10);
  await verifyGood();
  // The server's close handler for the bad socket ran exactly once.
  await waitFor(() => ctx.closes.some((c) => c.url === '/bad'), { label: 'close handler of the bad socket', timeout: 5000 });
  await exchange(5);
  await verifyGood();
  assert.equal(ctx.closes.filter((c) => c.url === '/bad').length, 1);
  assert.equal(ctx.closes.filter((c) => c.url === '/good').length, 0, 'good client must not be closed');
  return { ctx, closeInfo };
}

test('unmasked client frame → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('hello', { mask: false })], 1002);
});

test('RSV1 without a negotiated extension → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('hello', { rsv1: true })], 1002);
});

test('RSV2 set → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('hello', { rsv2: true })], 1002);
});

test('RSV3 set → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('hello', { rsv3: true })], 1002);
});

test('RSV bits on a ping → 1002', T, async (t) => {
  await expectFailure(t, [pingFrame(Buffer.from('p'), { rsv2: true })], 1002);
});

test('reserved data opcode 3 → 1002', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: 0x3, payload: Buffer.from('x') })], 1002);
});

test('reserved control opcode 0xB → 1002', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: 0xb, payload: Buffer.from('x') })], 1002);
});

test('control frame (ping) with a 126-byte payload → 1002', T, async (t) => {
  await expectFailure(t, [pingFrame(Buffer.alloc(126, 0x61))], 1002);
});

test('close frame with a 126-byte payload → 1002', T, async (t) => {
  await expectFailure(t, [closeFrame(1000, 'r'.repeat(124))], 1002);
});

test('fragmented ping (FIN=0) → 1002', T, async (t) => {
  await expectFailure(t, [pingFrame(Buffer.from('ab'), { fin: false })], 1002);
});

test('continuation frame without a started message → 1002', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.CONT, payload: Buffer.from('orphan') })], 1002);
});

test('a new text frame while a fragmented message is open → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('part1', { fin: false }), textFrame('part2')], 1002);
});

test('a new binary frame while a fragmented text message is open → 1002', T, async (t) => {
  await expectFailure(t, [textFrame('part1', { fin: false }), binaryFrame(Buffer.from('x'))], 1002);
});

test('64-bit length with the most significant bit set → 1002 (or 1009)', T, async (t) => {
  // RFC 6455 5.2: the most significant bit MUST be 0. A server may also refuse the size first.
  const f = buildFrame({ opcode: OP.BINARY, payload: Buffer.from('abc'), lengthForm: 64, declaredLength: (1n << 63n) | 3n });
  await expectFailure(t, [f], [1002, 1009]);
});

const BAD_UTF8 = Buffer.from('cebae1bdb9cf83cebcceb5eda080656469746564', 'hex'); // κόσμε + surrogate ED A0 80 + "edited"

test('invalid UTF-8 in one text frame → 1007', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.TEXT, payload: BAD_UTF8 })], 1007);
});

test('invalid UTF-8 split across two fragments (mid-sequence) → 1007', T, async (t) => {
  const bytes = Buffer.from('cebae1bdb9cf83cebcceb5eda080', 'hex');
  const a = bytes.subarray(0, 12); // ends with the lone lead byte 0xED
  const b = bytes.subarray(12); // A0 80
  await expectFailure(t, [
    buildFrame({ opcode: OP.TEXT, fin: false, payload: a }),
    buildFrame({ opcode: OP.CONT, fin: true, payload: b }),
  ], 1007);
});

test('truncated UTF-8 at the end of a text message → 1007', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.TEXT, payload: Buffer.from('ceba e1bd'.replace(' ', ''), 'hex') })], 1007);
});

test('valid UTF-8 split mid-sequence across fragments (with a ping between) is accepted', T, async (t) => {
  const ctx = await setup(t);
  const euro = Buffer.from('a€b😀c', 'utf8');
  // Split inside € (3 bytes) and inside 😀 (4 bytes).
  const parts = [euro.subarray(0, 2), euro.subarray(2, 6), euro.subarray(6)];
  ctx.bad.socket.write(Buffer.concat([
    buildFrame({ opcode: OP.TEXT, fin: false, payload: parts[0] }),
    pingFrame(Buffer.from('mid')),
    buildFrame({ opcode: OP.CONT, fin: false, payload: parts[1] }),
    buildFrame({ opcode: OP.CONT, fin: true, payload: parts[2] }),
  ]));
  const f1 = await ctx.bad.reader.next(5000);
  assert.equal(f1.opcode, OP.PONG);
  assert.equal(f1.payload.toString(), 'mid');
  const f2 = await ctx.bad.reader.next(5000);
  assert.equal(f2.opcode, OP.TEXT);
  assert.equal(f2.fin, true);
  assert.equal(f2.rsv1, false);
  assert.equal(f2.masked, false, 'server frames must not be masked');
  assert.equal(f2.payload.toString('utf8'), 'a€b😀c');
  await ctx.exchange(3);
  await ctx.verifyGood();
});

for (const code of [0, 999, 1004, 1005, 1006, 1015, 1100, 2000, 2999]) {
  test(`close frame with invalid code ${code} → 1002`, T, async (t) => {
    await expectFailure(t, [closeFrame(code, '')], 1002);
  });
}

test('close frame with a 1-byte payload → 1002', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.CLOSE, payload: Buffer.from([0x03]) })], 1002);
});

test('close frame with an invalid UTF-8 reason → 1007', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.CLOSE, payload: closePayload(1000, Buffer.from('cebae1bdb9cf83cebcceb5eda080', 'hex')) })], 1007);
});

test('close frame with a fragmented flag (FIN=0) → 1002', T, async (t) => {
  await expectFailure(t, [buildFrame({ opcode: OP.CLOSE, fin: false, payload: closePayload(1000) })], 1002);
});

for (const [code, reason] of [[1000, ''], [1000, 'normal bye'], [3000, 'app'], [4999, 'private']]) {
  test(`client close ${code} ${JSON.stringify(reason)}: server echoes a close and the handler gets it`, T, async (t) => {
    const ctx = await setup(t);
    ctx.bad.socket.write(closeFrame(code, reason));
    const ci = await ctx.bad.reader.waitClose(5000);
    assert.equal(ci.code, code, 'server should echo the close code');
    assert.equal(ci.closeFrame.masked, false);
    await ctx.bad.reader.waitEnd(10000);
    await waitFor(() => ctx.closes.some((c) => c.url === '/bad'), { label: 'close handler' });
    assert.deepEqual(ctx.closes.filter((c) => c.url === '/bad'), [{ url: '/bad', code, reason }]);
    await ctx.exchange(5);
    await ctx.verifyGood();
  });
}

test('close frame without a payload: server closes; handler gets 1005', T, async (t) => {
  const ctx = await setup(t);
  ctx.bad.socket.write(buildFrame({ opcode: OP.CLOSE }));
  const ci = await ctx.bad.reader.waitClose(5000);
  assert.ok(ci.closeFrame, 'a close frame must be sent back');
  assert.ok(ci.code === 1005 || ci.code === 1000, `echoed close should be empty or 1000, got ${ci.code}`);
  await ctx.bad.reader.waitEnd(10000);
  await waitFor(() => ctx.closes.some((c) => c.url === '/bad'), { label: 'close handler' });
  assert.equal(ctx.closes.find((c) => c.url === '/bad').code, 1005);
});

test('ping with payload → pong with the same payload; connection stays usable', T, async (t) => {
  const ctx = await setup(t);
  const payload = Buffer.from([0, 1, 2, 0xff, 0x41, 0x42]);
  ctx.bad.socket.write(pingFrame(payload));
  const f = await ctx.bad.reader.next(5000);
  assert.equal(f.opcode, OP.PONG);
  assert.equal(f.fin, true);
  assert.ok(f.payload.equals(payload));
  // a 125-byte ping (the largest allowed)
  const p125 = Buffer.alloc(125, 0x7a);
  ctx.bad.socket.write(pingFrame(p125));
  const f2 = await ctx.bad.reader.next(5000);
  assert.equal(f2.opcode, OP.PONG);
  assert.ok(f2.payload.equals(p125));
  ctx.bad.socket.write(textFrame('still-here'));
  const f3 = await ctx.bad.reader.next(5000);
  assert.equal(f3.opcode, OP.TEXT);
  assert.equal(f3.payload.toString(), 'still-here');
  // unsolicited pong is ignored
  ctx.bad.socket.write(buildFrame({ opcode: OP.PONG, payload: Buffer.from('u') }));
  ctx.bad.socket.write(textFrame('after-pong'));
  const f4 = await ctx.bad.reader.next(5000);
  assert.equal(f4.opcode, OP.TEXT);
  assert.equal(f4.payload.toString(), 'after-pong');
  await ctx.exchange(3);
  await ctx.verifyGood();
  assert.equal(ctx.closes.length, 0);
});

test(`a message of exactly maxPayloadLength (${MAX_PAYLOAD}) is accepted, in one frame and in fragments`, T, async (t) => {
  const ctx = await setup(t);
  const p = Buffer.alloc(MAX_PAYLOAD, 0x62);
  ctx.bad.socket.write(binaryFrame(p));
  const f = await ctx.bad.reader.next(5000);
  assert.equal(f.opcode, OP.BINARY);
  assert.equal(f.payload.length, MAX_PAYLOAD);
  ctx.bad.socket.write(Buffer.concat([
    buildFrame({ opcode: OP.BINARY, fin: false, payload: p.subarray(0, 500) }),
    buildFrame({ opcode: OP.CONT, fin: false, payload: p.subarray(500, 1000) }),
    buildFrame({ opcode: OP.CONT, fin: true, payload: p.subarray(1000) }),
  ]));
  const g = await ctx.bad.reader.next(5000);
  assert.equal(g.opcode, OP.BINARY);
  assert.equal(g.payload.length, MAX_PAYLOAD);
});

test(`one frame over maxPayloadLength (${MAX_PAYLOAD + 1} bytes) → 1009`, T, async (t) => {
  await expectFailure(t, [binaryFrame(Buffer.alloc(MAX_PAYLOAD + 1, 0x63))], 1009);
});

test('one text frame far over maxPayloadLength (64 KiB) → 1009', T, async (t) => {
  await expectFailure(t, [textFrame('x'.repeat(65536))], 1009);
});

test('fragments each under the limit but over maxPayloadLength in total → 1009', T, async (t) => {
  const chunk = Buffer.alloc(300, 0x64);
  await expectFailure(t, [
    buildFrame({ opcode: OP.BINARY, fin: false, payload: chunk }),
    buildFrame({ opcode: OP.CONT, fin: false, payload: chunk }),
    buildFrame({ opcode: OP.CONT, fin: false, payload: chunk }),
    buildFrame({ opcode: OP.CONT, fin: true, payload: chunk }),
  ], 1009);
});

test('text fragments over maxPayloadLength in total, never finished → 1009', T, async (t) => {
  const chunk = Buffer.alloc(400, 0x65);
  await expectFailure(t, [
    buildFrame({ opcode: OP.TEXT, fin: false, payload: chunk }),
    buildFrame({ opcode: OP.CONT, fin: false, payload: chunk }),
    buildFrame({ opcode: OP.CONT, fin: false, payload: chunk }),
  ], 1009);
});

test(`exactly maxFragments (${MAX_FRAGMENTS}) frames in one message is accepted`, T, async (t) => {
  const ctx = await setup(t);
  const frames = [];
  for (let i = 0; i < MAX_FRAGMENTS; i++) {
    frames.push(buildFrame({ opcode: i === 0 ? OP.TEXT : OP.CONT, fin: i === MAX_FRAGMENTS - 1, payload: Buffer.from('y') }));
  }
  ctx.bad.socket.write(Buffer.concat(frames));
  const f = await ctx.bad.reader.next(5000);
  assert.equal(f.opcode, OP.TEXT);
  assert.equal(f.payload.toString(), 'y'.repeat(MAX_FRAGMENTS));
});

test(`more fragments than maxFragments (${MAX_FRAGMENTS + 1}) → 1009`, T, async (t) => {
  const frames = [];
  const n = MAX_FRAGMENTS + 1;
  for (let i = 0; i < n; i++) {
    frames.push(buildFrame({ opcode: i === 0 ? OP.TEXT : OP.CONT, fin: i === n - 1, payload: Buffer.from('z') }));
  }
  await expectFailure(t, frames, 1009);
});

test('a flood of empty fragments over maxFragments → 1009', T, async (t) => {
  const frames = [buildFrame({ opcode: OP.BINARY, fin: false })];
  for (let i = 0; i < 1000; i++) frames.push(buildFrame({ opcode: OP.CONT, fin: false }));
  await expectFailure(t, frames, 1009);
});

test('close handler receives the code the server sent for protocol errors (1002, 1007, 1009)', T, async (t) => {
  // index.d.ts: "`code` is the close frame received or sent; 1006 if none".
  const s = scope(t);
  const closes = [];
  const { port } = await s.app({
    maxPayloadLength: MAX_PAYLOAD,
    idleTimeout: 0,
    close(ws, code) { closes.push({ url: ws.getUrl(), code }); },
  });
  const cases = [
    ['/p1002', textFrame('x', { mask: false })],
    ['/p1007', buildFrame({ opcode: OP.TEXT, payload: BAD_UTF8 })],
    ['/p1009', binaryFrame(Buffer.alloc(MAX_PAYLOAD + 1))],
  ];
  const sent = {};
  for (const [path, frame] of cases) {
    const c = await connectRaw(port, { path });
    s.trackSocket(c.socket);
    c.socket.write(frame);
    sent[path] = (await c.reader.waitClose(10000)).code;
    await c.reader.waitEnd(10000);
  }
  await waitFor(() => closes.length === 3, { label: '3 close handlers', describe: () => JSON.stringify(closes) });
  for (const c of closes) assert.equal(c.code, sent[c.url], `${c.url}: handler code ${c.code}, close frame sent ${sent[c.url]}`);
  assert.deepEqual(closes.map((c) => c.code).sort(), [1002, 1007, 1009]);
});
