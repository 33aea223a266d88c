'use strict';
// Core echo behaviour with the `ws` client, request getters, the `upgrade` hook and HTTP errors.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { scope, waitFor, wsExpectRejected, deadline } = require('./helpers/common');
const { rawHttp, connectRaw, upgradeRequestText, textFrame } = require('./helpers/raw');

const T = { timeout: 20000 };

function echoBehavior(extra = {}) {
  const seen = [];
  return {
    seen,
    behavior: {
      message(ws, data, isBinary) {
        seen.push({ type: typeof data, isBuffer: Buffer.isBuffer(data), isBinary, data });
        ws.send(data, isBinary);
      },
      ...extra,
    },
  };
}

test('require(..) exports App as a function', T, () => {
  const mod = require('..');
  assert.equal(typeof mod.App, 'function');
});

test('text echo: server gets a string with isBinary false; client gets text back', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const text = 'héllo wörld ☃ 𝄞';
  await c.send(text);
  const m = await c.next();
  assert.equal(m.isBinary, false);
  assert.equal(m.text, text);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].type, 'string');
  assert.equal(seen[0].isBinary, false);
  assert.equal(seen[0].data, text);
});

test('binary echo: server gets a Buffer with isBinary true; client gets the same bytes', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const bytes = Buffer.from([0, 1, 2, 127, 128, 254, 255, 0xc3, 0x28]);
  await c.send(bytes);
  const m = await c.next();
  assert.equal(m.isBinary, true);
  assert.deepEqual(Buffer.from(m.data), bytes);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].isBuffer, true);
  assert.equal(seen[0].isBinary, true);
  assert.deepEqual(Buffer.from(seen[0].data), bytes);
});

test('empty text and empty binary messages round-trip', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await c.send('');
  await c.send(Buffer.alloc(0));
  const [a, b] = await c.take(2);
  assert.equal(a.isBinary, false);
  assert.equal(a.text, '');
  assert.equal(b.isBinary, true);
  assert.equal(b.data.length, 0);
  assert.equal(seen[0].data, '');
  assert.equal(seen[1].isBuffer, true);
  assert.equal(seen[1].data.length, 0);
});

test('send() accepts ArrayBuffer and typed-array views (binary by default) and string with isBinary=true', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({
    open(ws) {
      const u8 = Uint8Array.from([1, 2, 3, 4, 5, 6]);
      ws.send(u8.buffer); // ArrayBuffer
      ws.send(u8.subarray(2, 5)); // view with an offset: only bytes 3,4,5
      ws.send(new DataView(u8.buffer, 1, 2)); // 2,3
      ws.send('as-binary', true);
      ws.send(Buffer.from('as-text'), false);
    },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const ms = await c.take(5);
  assert.deepEqual(ms.map((m) => m.isBinary), [true, true, true, true, false]);
  assert.deepEqual([...ms[0].data], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual([...ms[1].data], [3, 4, 5]);
  assert.deepEqual([...ms[2].data], [2, 3]);
  assert.equal(Buffer.from(ms[3].data).toString(), 'as-binary');
  assert.equal(ms[4].text, 'as-text');
});

test('a 5 MiB binary message echoes intact', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`, { maxPayload: 64 * 1024 * 1024 });
  const big = crypto.randomBytes(5 * 1024 * 1024);
  await c.send(big);
  const m = await c.next(15000);
  assert.equal(m.isBinary, true);
  assert.equal(m.data.length, big.length);
  assert.ok(Buffer.from(m.data).equals(big), 'echoed bytes differ');
  assert.equal(seen.length, 1, 'message handler must be called once for the whole message');
  assert.equal(seen[0].data.length, big.length);
});

test('a 5 MiB text message echoes intact', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`, { maxPayload: 64 * 1024 * 1024 });
  const big = 'é€'.repeat(Math.floor((5 * 1024 * 1024) / 5)); // 2+3 bytes each
  await c.send(big);
  const m = await c.next(15000);
  assert.equal(m.isBinary, false);
  assert.equal(m.text.length, big.length);
  assert.ok(m.text === big, 'echoed text differs');
  assert.equal(seen[0].type, 'string');
});

test('a fragmented text message is delivered once, whole', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await c.send('frag-', { fin: false });
  await c.send('ment-', { fin: false });
  await c.send('ed', { fin: true });
  const m = await c.next();
  assert.equal(m.text, 'frag-ment-ed');
  assert.equal(m.isBinary, false);
  // One more message proves no extra delivery happened for the fragments.
  await c.send('next');
  assert.equal((await c.next()).text, 'next');
  assert.deepEqual(seen.map((x) => x.data), ['frag-ment-ed', 'next']);
});

test('a fragmented binary message is delivered once, whole', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const parts = [crypto.randomBytes(1000), crypto.randomBytes(1), crypto.randomBytes(70000)];
  await c.send(parts[0], { fin: false, binary: true });
  await c.send(parts[1], { fin: false, binary: true });
  await c.send(parts[2], { fin: true, binary: true });
  const m = await c.next();
  assert.equal(m.isBinary, true);
  assert.ok(Buffer.from(m.data).equals(Buffer.concat(parts)));
  assert.equal(seen.length, 1);
  assert.equal(seen[0].isBinary, true);
});

test('1,000 messages arrive in order and each is echoed in order', T, async (t) => {
  const s = scope(t);
  const { seen, behavior } = echoBehavior();
  const { port } = await s.app(behavior);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const N = 1000;
  for (let i = 0; i < N; i++) c.ws.send(`m${i}`);
  const got = await c.take(N, 15000);
  assert.deepEqual(got.map((m) => m.text), Array.from({ length: N }, (_, i) => `m${i}`));
  assert.deepEqual(seen.map((x) => x.data), Array.from({ length: N }, (_, i) => `m${i}`));
});

test('open then close handlers, in that order, with the client close code and reason', T, async (t) => {
  const s = scope(t);
  const events = [];
  const { port } = await s.app({
    open(ws) { events.push(['open', ws.closed]); },
    message(ws, data) { events.push(['message', data]); ws.send(data); },
    close(ws, code, reason) { events.push(['close', code, reason, ws.closed]); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await c.send('x');
  await c.next();
  c.close(4000, 'bye');
  const ci = await c.waitClose();
  assert.notEqual(ci.code, 1006, 'client should have received a close frame');
  await waitFor(() => events.some((e) => e[0] === 'close'), { label: 'close handler' });
  assert.deepEqual(events, [['open', false], ['message', 'x'], ['close', 4000, 'bye', true]]);
});

test('remote address, remote port, user data, url, headers, protocol and extensions getters', T, async (t) => {
  const s = scope(t);
  let info;
  const { port } = await s.app({
    open(ws) {
      info = {
        addr: ws.getRemoteAddressAsText(),
        port: ws.getRemotePort(),
        userData: ws.getUserData(),
        url: ws.getUrl(),
        headers: ws.getHeaders(),
        protocol: ws.getProtocol(),
        extensions: ws.getExtensions(),
      };
    },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/chat/room?x=1&y=%20z`, {
    headers: { 'X-Test-Header': 'abc', Cookie: 'k=v' },
    perMessageDeflate: false,
  });
  await waitFor(() => info, { label: 'open handler' });
  assert.equal(info.addr, '127.0.0.1');
  assert.equal(info.port, c.localPort);
  assert.equal(typeof info.userData, 'object');
  assert.notEqual(info.userData, null);
  assert.equal(info.url, '/chat/room?x=1&y=%20z');
  assert.equal(info.headers['x-test-header'], 'abc');
  assert.equal(info.headers.cookie, 'k=v');
  assert.equal(info.headers.host, `127.0.0.1:${port}`);
  assert.equal(info.headers.upgrade.toLowerCase(), 'websocket');
  assert.equal(info.headers['sec-websocket-version'], '13');
  for (const k of Object.keys(info.headers)) assert.equal(k, k.toLowerCase(), `header name ${k} is not lower-case`);
  assert.equal(info.protocol, '');
  assert.equal(info.extensions, '');
});

test('upgrade hook: request fields, accept with user data visible in open/message/close', T, async (t) => {
  const s = scope(t);
  let req;
  const seen = [];
  const { port } = await s.app({
    upgrade(r, res) {
      req = r;
      res.accept({ user: 'alice', n: 42, url: r.url });
    },
    open(ws) { seen.push(['open', ws.getUserData()]); },
    message(ws, data) { seen.push(['message', ws.getUserData()]); ws.send(data); },
    close(ws) { seen.push(['close', ws.getUserData()]); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/u/path?a=b`, { headers: { 'X-Token': 'T1' } });
  assert.equal(req.method, 'GET');
  assert.equal(req.url, '/u/path?a=b');
  assert.equal(req.headers['x-token'], 'T1');
  assert.equal(req.remoteAddress, '127.0.0.1');
  assert.equal(req.remotePort, c.localPort);
  assert.deepEqual(req.protocols, []);
  assert.equal(typeof req.extensions, 'string');
  await c.send('m');
  await c.next();
  c.close(1000);
  await c.waitClose();
  await waitFor(() => seen.length === 3, { label: 'close handler' });
  const ud = { user: 'alice', n: 42, url: '/u/path?a=b' };
  assert.deepEqual(seen, [['open', ud], ['message', ud], ['close', ud]]);
  // The same object every time (uWS hands back the same user data object).
  assert.equal(seen[0][1], seen[1][1]);
});

test('upgrade hook may accept asynchronously', T, async (t) => {
  const s = scope(t);
  let opened = null;
  const { port } = await s.app({
    upgrade(r, res) { setTimeout(() => res.accept({ late: true }), 100); },
    open(ws) { opened = ws.getUserData(); },
    message(ws, d) { ws.send(d); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  await c.send('after-async-accept');
  assert.equal((await c.next()).text, 'after-async-accept');
  assert.deepEqual(opened, { late: true });
});

test('upgrade hook reject(401): client sees HTTP 401 with the body; no open/close handlers', T, async (t) => {
  const s = scope(t);
  const calls = [];
  const { port } = await s.app({
    upgrade(r, res) { res.reject(401, 'go away'); },
    open() { calls.push('open'); },
    close() { calls.push('close'); },
  });
  const r = await wsExpectRejected(`ws://127.0.0.1:${port}/`);
  assert.equal(r.status, 401);
  assert.equal(r.body, 'go away');
  assert.match(r.headers['content-type'] || '', /^text\/plain/);
  // Give a wrongly-fired handler a chance to show up, bounded by a round trip on a new socket.
  await rawHttp(port, 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').catch(() => {});
  assert.deepEqual(calls, []);
});

test('upgrade hook reject() without arguments is a 403', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({ upgrade(r, res) { res.reject(); } });
  const r = await wsExpectRejected(`ws://127.0.0.1:${port}/`);
  assert.equal(r.status, 403);
});

test('upgrade hook answers with headers: accept(…, { headers, extensions }) and reject(…, { headers, statusText })', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({
    compression: true,
    upgrade(r, res) {
      if (r.url === '/moved') return res.reject(307, '', { headers: { Location: '/there', 'Set-Cookie': ['a=1', 'b=2'] }, statusText: 'Go There' });
      if (r.url === '/bad') {
        assert.throws(() => res.accept({}, undefined, { headers: { 'Bad Name': 'x' } }), /"Bad Name" is not a valid HTTP header name/);
        assert.throws(() => res.accept({}, undefined, { headers: [['X-A', 'a\r\nX-B: b']] }), /the value of X-A contains CR, LF or NUL/);
        return res.reject(418);
      }
      res.accept({}, undefined, { headers: [['X-Hello', 'world']], extensions: r.url === '/plain' ? '' : undefined });
    },
    open(ws) { ws.send('open'); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`, { perMessageDeflate: true });
  assert.equal(c.upgrade.headers['x-hello'], 'world');
  assert.match(c.ws.extensions, /^permessage-deflate/);
  const plain = await s.ws(`ws://127.0.0.1:${port}/plain`, { perMessageDeflate: true });
  assert.equal(plain.ws.extensions, '', 'extensions "" negotiates nothing');
  const moved = await wsExpectRejected(`ws://127.0.0.1:${port}/moved`);
  assert.deepEqual([moved.status, moved.statusMessage, moved.headers.location, moved.headers['set-cookie']], [307, 'Go There', '/there', ['a=1', 'b=2']]);
  const bad = await wsExpectRejected(`ws://127.0.0.1:${port}/bad`);
  assert.equal(bad.status, 418);
});

test('subprotocol: offered list reaches the hook in order; the chosen one is echoed', T, async (t) => {
  const s = scope(t);
  let offered;
  let serverProto;
  const { port } = await s.app({
    upgrade(r, res) { offered = r.protocols; res.accept({}, 'ddp-b'); },
    open(ws) { serverProto = ws.getProtocol(); },
  });
  const c = await s.ws(`ws://127.0.0.1:${port}/`, { protocols: ['ddp-a', 'ddp-b', 'ddp-c'] });
  assert.deepEqual(offered, ['ddp-a', 'ddp-b', 'ddp-c']);
  assert.equal(c.ws.protocol, 'ddp-b');
  await waitFor(() => serverProto !== undefined, { label: 'open handler' });
  assert.equal(serverProto, 'ddp-b');
});

test('patterns: exact, prefix/* and /* route to their own behaviors; unmatched path is 404', T, async (t) => {
  const s = scope(t);
  const tag = (name) => ({ open(ws) { ws.send(name); } });
  const { port } = await s.app(null, {
    routes: [['/exact', tag('exact')], ['/pre/*', tag('prefix')]],
  });
  const a = await s.ws(`ws://127.0.0.1:${port}/exact`);
  assert.equal((await a.next()).text, 'exact');
  const b = await s.ws(`ws://127.0.0.1:${port}/pre/x/y?q=1`);
  assert.equal((await b.next()).text, 'prefix');
  const r = await wsExpectRejected(`ws://127.0.0.1:${port}/other`);
  assert.equal(r.status, 404);
});

test('wrong path gets HTTP 404 over raw HTTP', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({ open() {} }, { pattern: '/ws' });
  const req = upgradeRequestText({ path: '/nope', key: 'dGhlIHNhbXBsZSBub25jZQ==' });
  const r = await rawHttp(port, req);
  assert.equal(r.status, 404, r.statusLine);
  // And the right path on the same app upgrades.
  const ok = await connectRaw(port, { path: '/ws' });
  s.trackSocket(ok.socket);
  assert.equal(ok.status, 101);
  assert.equal(ok.headers['sec-websocket-accept'], ok.accept);
  assert.equal(ok.headers.upgrade.toLowerCase(), 'websocket');
});

test('a plain GET (no upgrade) gets 400 or 426', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({ open() {} }, { pattern: '/*' });
  const r = await rawHttp(port, 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.ok(r.status === 400 || r.status === 426, `got ${r.statusLine}`);
});

test('an upgrade with a bad Sec-WebSocket-Version or no key is refused (not 101)', T, async (t) => {
  const s = scope(t);
  let opens = 0;
  const { port } = await s.app({ open() { opens++; } });
  const noKey = 'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n';
  const r1 = await rawHttp(port, noKey);
  assert.ok(r1.status >= 400 && r1.status < 500, `no key: ${r1.statusLine}`);
  const badVer = 'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
    + 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n';
  const r2 = await rawHttp(port, badVer);
  assert.ok(r2.status >= 400 && r2.status < 500, `bad version: ${r2.statusLine}`);
  assert.equal(opens, 0);
});

test('the 101 response carries the RFC 6455 accept key', T, async (t) => {
  const s = scope(t);
  const { port } = await s.app({ open() {} });
  const r = await deadline(connectRaw(port, { path: '/' }), 5000, 'raw upgrade');
  s.trackSocket(r.socket);
  assert.equal(r.status, 101);
  assert.equal(r.headers['sec-websocket-accept'], r.accept);
  assert.match(r.headers.connection, /upgrade/i);
});

test('pipelined frames of one write reach JS in the same tick, even while other clients keep the I/O thread busy', T, async (t) => {
  // The I/O thread hands a read's messages to JS together: a client's pipelined calls are answered
  // from one JS tick (so their replies leave in one write), whatever else the server is doing.
  const s = scope(t);
  let tick = 0;
  let tickScheduled = false;
  const seen = new Map(); // round tag → Set of ticks it was handled in
  const { port } = await s.app({
    message(ws, data) {
      if (!tickScheduled) {
        tickScheduled = true;
        process.nextTick(() => { tickScheduled = false; tick++; });
      }
      const round = data.slice(0, data.indexOf(':'));
      if (round !== 'noise') {
        if (!seen.has(round)) seen.set(round, new Set());
        seen.get(round).add(tick);
      }
      ws.send(data);
    },
  });
  const noisy = [];
  for (let i = 0; i < 8; i++) noisy.push(await connectRaw(port));
  const pipelined = [];
  for (let i = 0; i < 4; i++) pipelined.push(await connectRaw(port));
  let stop = false;
  const noise = noisy.map(async (c) => {
    for (let i = 0; i < 50000 && !stop; i++) {
      c.socket.write(textFrame(`noise:${'n'.repeat(40)}`));
      if (!(await c.reader.next())) break;
    }
  });
  const ROUNDS = 150;
  try {
    await Promise.all(pipelined.map(async (c, ci) => {
      for (let r = 0; r < ROUNDS; r++) {
        const tag = `c${ci}r${r}`;
        c.socket.write(Buffer.concat([0, 1, 2, 3].map((k) => textFrame(`${tag}:${k}`))));
        for (let k = 0; k < 4; k++) assert.equal((await c.reader.next()).payload.toString(), `${tag}:${k}`);
      }
    }));
  } finally {
    stop = true;
    await Promise.all(noise);
  }
  assert.equal(seen.size, 4 * ROUNDS);
  const split = [...seen].filter(([, ticks]) => ticks.size !== 1).map(([tag]) => tag);
  assert.deepEqual(split, [], 'rounds whose 4 frames were handled over more than one JS tick');
});
