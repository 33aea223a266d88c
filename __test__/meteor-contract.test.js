'use strict';
// Meteor's transport contract (see shared meteor-contract.md), replayed against the `native`
// adapter on a plain http.Server: what stream_server.js and livedata_server.js do with a socket.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { WebSocketServer } = require('ws');

const meteor = require('../meteor');
const { createNativeTransport, compressionFromEnv, validateSettings, HEADER_WHITELIST, DEFAULT_COMPRESSION } = meteor;
const { DdpServer } = require('../demo/ddp-session');
const {
  delay, withTimeout, waitFor, httpGet, rawExchange, rawUpgrade, maskedFrame, wsOpen, wsClose,
  ddpConnect, ddpCall, closeServer,
} = require('./helpers/meteor-util');
const { makeServer, closeAllServers } = require('./helpers/meteor-server');

const T = { timeout: 20000 };
const savedCompression = process.env.SERVER_WEBSOCKET_COMPRESSION;

function setCompressionEnv(value) {
  if (value === undefined) delete process.env.SERVER_WEBSOCKET_COMPRESSION;
  else process.env.SERVER_WEBSOCKET_COMPRESSION = value;
}

before(() => setCompressionEnv(undefined));
after(async () => {
  setCompressionEnv(savedCompression);
  await closeAllServers();
});

describe('transport object', () => {
  test('factory shape: { name: "native", setup }', T, () => {
    const t = createNativeTransport();
    assert.equal(t.name, 'native');
    assert.equal(typeof t.setup, 'function');
    assert.equal(meteor.name, 'native');
  });

  test('setup returns an EventEmitter emitting "connection"', T, async () => {
    const s = await makeServer();
    try {
      assert.equal(typeof s.transport.on, 'function');
      assert.equal(typeof s.transport.emit, 'function');
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      assert.ok(socket);
      await wsClose(c);
    } finally {
      await s.close();
    }
  });
});

describe('socket: livedata send(failed) + close() in one tick', () => {
  test('the client receives the frame, then the close', T, async () => {
    const s = await makeServer({
      onConnection(socket) {
        socket.send(JSON.stringify({ msg: 'failed', version: '1' }));
        socket.close();
        assert.ok(socket.isClosed, 'isClosed is truthy right after close()');
      },
    });
    try {
      const c = await wsOpen(s.port);
      const closed = await withTimeout(c.queue.closedPromise, 5000, 'close');
      assert.deepEqual(c.queue.items.map((m) => JSON.parse(m)), [{ msg: 'failed', version: '1' }]);
      assert.notEqual(closed.code, 1006, 'graceful close sends a close frame');
    } finally {
      await s.close();
    }
  });

  test('through the DDP session: bad version → failed then close', T, async () => {
    const ddp = new DdpServer();
    const s = await makeServer({ onConnection: (socket) => ddp.handle(socket) });
    try {
      const c = await wsOpen(s.port);
      c.ws.send(JSON.stringify({ msg: 'connect', version: '0.9', support: ['0.9'] }));
      await withTimeout(c.queue.closedPromise, 5000, 'close');
      assert.deepEqual(c.queue.items.map((m) => JSON.parse(m)), [{ msg: 'failed', version: '1' }]);
    } finally {
      await s.close();
    }
  });

  test('many frames then close(): all arrive in order before the close', T, async () => {
    const s = await makeServer({
      onConnection(socket) {
        for (let i = 0; i < 200; i++) socket.send(JSON.stringify({ i }));
        socket.close();
      },
    });
    try {
      const c = await wsOpen(s.port);
      await withTimeout(c.queue.closedPromise, 5000, 'close');
      assert.equal(c.queue.items.length, 200);
      c.queue.items.forEach((m, i) => assert.equal(JSON.parse(m).i, i));
    } finally {
      await s.close();
    }
  });
});

describe('socket: close listeners', () => {
  async function closeScenario(trigger) {
    const s = await makeServer();
    try {
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      const counts = [0, 0, 0];
      for (let i = 0; i < 3; i++) socket.on('close', () => { counts[i]++; });
      await trigger(c, socket);
      await waitFor(() => counts.every((n) => n >= 1), 5000, 'all close listeners called');
      assert.ok(socket.isClosed, 'isClosed after close');
      await delay(300);
      // Late calls are harmless no-ops.
      socket.send('late');
      socket.close();
      socket.setWebsocketTimeout(1000);
      await delay(100);
      assert.deepEqual(counts, [1, 1, 1], 'each close listener called exactly once');
      await wsClose(c);
    } finally {
      await s.close();
    }
  }

  test('client closes', T, () => closeScenario(async (c) => { c.ws.close(1000, 'bye'); }));
  test('server closes', T, () => closeScenario(async (c, socket) => { socket.close(); }));
  test('client destroyed abruptly', T, () => closeScenario(async (c) => { c.ws._socket.destroy(); }));
});

describe('socket: setWebsocketTimeout', () => {
  test('setWebsocketTimeout(300) closes a silent socket', T, async () => {
    const s = await makeServer({ onConnection: (socket) => socket.setWebsocketTimeout(300) });
    try {
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      const closedAt = Date.now();
      await withTimeout(c.queue.closedPromise, 4000, 'idle close seen by the client');
      assert.ok(Date.now() - closedAt < 4000);
      await waitFor(() => socket.isClosed, 2000, 'server socket closed');
    } finally {
      await s.close();
    }
  });

  test('setWebsocketTimeout(0) after 45000 keeps a silent socket open (what livedata does)', T, async () => {
    const s = await makeServer({
      onConnection(socket) {
        socket.setWebsocketTimeout(300);
        socket.setWebsocketTimeout(45000);
        socket.setWebsocketTimeout(0);
      },
    });
    try {
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      await delay(1200);
      assert.equal(c.queue.closed, null, 'client still open');
      assert.ok(!socket.isClosed);
      c.ws.send('still here');
      const got = await withTimeout(new Promise((r) => socket.once('data', r)), 3000, 'data');
      assert.equal(got, 'still here');
      await wsClose(c);
    } finally {
      await s.close();
    }
  });

  test('settings.timeout (s) is the fallback when setWebsocketTimeout is never called', T, async () => {
    const s = await makeServer({ settings: { timeout: 0.3 } });
    try {
      const c = await wsOpen(s.port);
      await s.nextSocket();
      await withTimeout(c.queue.closedPromise, 4000, 'fallback idle close');
    } finally {
      await s.close();
    }
    const s2 = await makeServer({ settings: { timeout: 0.3 }, onConnection: (socket) => socket.setWebsocketTimeout(0) });
    try {
      const c = await wsOpen(s2.port);
      await s2.nextSocket();
      await delay(1000);
      assert.equal(c.queue.closed, null, 'setWebsocketTimeout(0) overrides the fallback');
      await wsClose(c);
    } finally {
      await s2.close();
    }
  });

  test('the DDP session sets 45000 on handle and 0 on connect', T, async () => {
    const calls = [];
    const s = await makeServer({
      onConnection(socket) {
        const orig = socket.setWebsocketTimeout.bind(socket);
        socket.setWebsocketTimeout = (ms) => { calls.push(ms); orig(ms); };
        new DdpServer().handle(socket);
      },
    });
    try {
      const c = await wsOpen(s.port);
      await ddpConnect(c);
      assert.deepEqual(calls, [45000, 0]);
      await wsClose(c);
    } finally {
      await s.close();
    }
  });
});

describe('socket: properties', () => {
  test('headers are the whitelist only', T, async () => {
    const s = await makeServer();
    try {
      const c = await wsOpen(s.port, '/websocket', {
        headers: {
          'x-secret': 'do-not-leak',
          'User-Agent': 'meteor-contract-test/1.0',
          Cookie: 'a=b; c=d',
          'X-Forwarded-For': '203.0.113.7',
          'Accept-Language': 'fr',
          Authorization: 'Bearer nope',
        },
      });
      const socket = await s.nextSocket();
      const keys = Object.keys(socket.headers);
      for (const k of keys) assert.ok(HEADER_WHITELIST.includes(k), `header ${k} is whitelisted`);
      assert.equal(socket.headers['x-secret'], undefined);
      assert.equal(socket.headers.authorization, undefined);
      assert.equal(socket.headers['sec-websocket-key'], undefined);
      assert.equal(socket.headers['user-agent'], 'meteor-contract-test/1.0');
      assert.equal(socket.headers.cookie, 'a=b; c=d');
      assert.equal(socket.headers['x-forwarded-for'], '203.0.113.7');
      assert.equal(socket.headers['accept-language'], 'fr');
      assert.equal(socket.headers.host, `127.0.0.1:${s.port}`);
      await wsClose(c);
    } finally {
      await s.close();
    }
  });

  test('remoteAddress/remotePort are the real peer; url, id, protocol; expandos stick', T, async () => {
    const s = await makeServer();
    try {
      const c1 = await wsOpen(s.port, '/websocket?x=1');
      const s1 = await s.nextSocket();
      const c2 = await wsOpen(s.port, '/websocket/');
      const s2 = await s.nextSocket();
      assert.equal(s1.remoteAddress, '127.0.0.1');
      assert.equal(s1.remotePort, c1.ws._socket.localPort);
      assert.equal(s2.remotePort, c2.ws._socket.localPort);
      assert.equal(s1.url, '/websocket?x=1');
      assert.equal(s2.url, '/websocket/');
      assert.equal(typeof s1.id, 'string');
      assert.ok(s1.id.length > 0);
      assert.notEqual(s1.id, s2.id);
      assert.equal(s1.protocol, 'websocket-raw');
      s1._meteorSession = {};
      const session = s1._meteorSession;
      assert.equal(s1._meteorSession, session);
      c1.ws.send('ping');
      await withTimeout(new Promise((r) => s1.once('data', r)), 3000, 'data');
      assert.equal(s1._meteorSession, session, 'expando survives traffic');
      await wsClose(c1);
      await wsClose(c2);
    } finally {
      await s.close();
    }
  });

  test('send() queues one text frame; data is one string per text frame; binary frames ignored', T, async () => {
    const s = await makeServer();
    try {
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      const got = [];
      socket.on('data', (d) => got.push(d));
      c.ws.send(Buffer.from([1, 2, 3]), { binary: true });
      c.ws.send('text-1');
      c.ws.send(Buffer.from('binary-as-text'), { binary: true });
      c.ws.send('text-2 ✓');
      await waitFor(() => got.length >= 2, 3000, 'two text frames');
      await delay(150);
      assert.deepEqual(got, ['text-1', 'text-2 ✓']);
      for (const d of got) assert.equal(typeof d, 'string');
      socket.send('{"msg":"x"}');
      assert.equal(await c.queue.next(), '{"msg":"x"}');
      await wsClose(c);
    } finally {
      await s.close();
    }
  });

  test('no data is delivered before the connection handler returns (frame in the upgrade packet)', T, async () => {
    const events = [];
    let inHandler = false;
    const s = await makeServer({
      onConnection(socket) {
        inHandler = true;
        events.push('connection');
        const end = Date.now() + 150;
        while (Date.now() < end) { /* busy: give the I/O thread time to deliver the frame */ }
        socket.on('data', (d) => events.push(inHandler ? `EARLY:${d}` : `data:${d}`));
        inHandler = false;
      },
    });
    try {
      const frame = maskedFrame(0x1, 'first-frame');
      const { sock, head } = await rawUpgrade(s.port, '/websocket', { after: frame });
      assert.match(head, /^HTTP\/1\.1 101/);
      await waitFor(() => events.length >= 2, 3000, 'data after connection');
      assert.deepEqual(events, ['connection', 'data:first-frame']);
      sock.destroy();
    } finally {
      await s.close();
    }
  });
});

describe('HTTP paths', () => {
  test('plain GET on /websocket and /websocket/?a=b → 400 text/plain', T, async () => {
    const s = await makeServer();
    try {
      for (const path of ['/websocket', '/websocket/', '/websocket/?a=b', '/websocket?x=1']) {
        const r = await httpGet(s.port, path);
        assert.equal(r.status, 400, path);
        assert.match(r.headers['content-type'], /^text\/plain/, path);
        assert.equal(r.body, 'Not a valid websocket request', path);
      }
    } finally {
      await s.close();
    }
  });

  test('other paths reach the app request listeners, in order', T, async () => {
    const order = [];
    const s = await makeServer({
      beforeSetup(server) {
        server.prependListener('request', (req) => order.push(`first:${req.url}`));
      },
    });
    try {
      for (const path of ['/websockets', '/', '/websocket-x', '/a/websocket']) {
        const r = await httpGet(s.port, path);
        assert.equal(r.status, 200, path);
        assert.equal(r.body, `app:${path}`);
      }
      assert.deepEqual(order, ['first:/websockets', 'first:/', 'first:/websocket-x', 'first:/a/websocket']);
    } finally {
      await s.close();
    }
  });

  test('HMR-style upgrade listener (ws noServer) on /hmr still works next to native /websocket', T, async () => {
    const wss = new WebSocketServer({ noServer: true });
    wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`hmr:${m}`)));
    const s = await makeServer({
      beforeSetup(server) {
        server.on('upgrade', (req, socket, head) => {
          if (req.url === '/hmr') wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
        });
      },
    });
    try {
      const hmr = await wsOpen(s.port, '/hmr');
      hmr.ws.send('reload');
      assert.equal(await hmr.queue.next(), 'hmr:reload');
      const c = await wsOpen(s.port, '/websocket');
      const socket = await s.nextSocket();
      socket.send('native');
      assert.equal(await c.queue.next(), 'native');
      await wsClose(hmr);
      await wsClose(c);
    } finally {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await s.close();
    }
  });

  test('malformed URLs do not throw; the server keeps serving', T, async () => {
    const s = await makeServer();
    const errors = [];
    const onErr = (e) => errors.push(e);
    process.on('uncaughtException', onErr);
    try {
      await rawExchange(s.port, 'GET /%%% HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 800);
      await rawExchange(s.port, 'GET http://[bad HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 800);
      await rawExchange(s.port, 'GET /websocket/%%%?%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 800);
      await rawExchange(s.port, 'GET /%%% HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n', 500);
      const r = await httpGet(s.port, '/websockets');
      assert.equal(r.status, 200);
      const c = await wsOpen(s.port);
      await s.nextSocket();
      await wsClose(c);
      assert.deepEqual(errors, []);
    } finally {
      process.removeListener('uncaughtException', onErr);
      await s.close();
    }
  });

  test('pathPrefix /app serves /app/websocket', T, async () => {
    const s = await makeServer({ prefix: '/app' });
    try {
      const c = await wsOpen(s.port, '/app/websocket');
      const socket = await s.nextSocket();
      assert.equal(socket.url, '/app/websocket');
      socket.send('hi');
      assert.equal(await c.queue.next(), 'hi');
      const c2 = await wsOpen(s.port, '/app/websocket/?q=1');
      await s.nextSocket();
      assert.equal((await httpGet(s.port, '/app/websocket')).status, 400);
      assert.equal((await httpGet(s.port, '/websocket')).status, 200, 'unprefixed path belongs to the app');
      await wsClose(c);
      await wsClose(c2);
    } finally {
      await s.close();
    }
  });
});

describe('settings', () => {
  const server = http.createServer();
  after(() => server.close());

  function setupThrows(settings, re) {
    assert.throws(() => createNativeTransport({ settings }).setup(server, '', { websocketExtensions: () => [] }), re);
  }

  test('invalid values throw at setup, naming the key and the valid values', T, () => {
    setupThrows({ payloadLength: 'x' }, /ddp-server\.native\.payloadLength must be a positive number of KiB.*got "x"/);
    setupThrows({ payloadLength: 0 }, /payloadLength/);
    setupThrows({ payloadLength: -5 }, /payloadLength/);
    setupThrows({ timeout: '45' }, /ddp-server\.native\.timeout .*seconds/);
    setupThrows({ timeout: -1 }, /timeout/);
    setupThrows({ maxBackpressure: 1.5 }, /ddp-server\.native\.maxBackpressure/);
    setupThrows({ maxBackpressure: 0 }, /maxBackpressure/);
    setupThrows({ threads: 0 }, /ddp-server\.native\.threads must be an integer 1\.\.16, got 0/);
    setupThrows({ threads: 17 }, /threads.*1\.\.16/);
    setupThrows({ threads: 2.5 }, /threads/);
    setupThrows({ drainOnSigterm: 'yes' }, /ddp-server\.native\.drainOnSigterm must be true or false, got "yes"/);
    setupThrows({ io: 'fast' }, /ddp-server\.native\.io must be 'inline' or 'threads', got "fast"/);
    setupThrows('fast', /ddp-server\.native must be an object/);
  });

  test('unknown keys throw, naming the valid keys', T, () => {
    setupThrows({ port: 5001 }, /unknown key "port"; valid keys: payloadLength, timeout, maxBackpressure, threads, io, drainOnSigterm/);
  });

  test('validateSettings fills in the defaults', T, () => {
    assert.deepEqual(validateSettings(undefined), {
      payloadLength: 16384, timeout: 0, maxBackpressure: 16 * 1024 * 1024, threads: null, io: null, drainOnSigterm: false, admission: true, proxyProtocol: false,
    });
    assert.deepEqual(validateSettings({ payloadLength: 48, threads: 2, drainOnSigterm: true }), {
      payloadLength: 48, timeout: 0, maxBackpressure: 16 * 1024 * 1024, threads: 2, io: null, drainOnSigterm: true, admission: true, proxyProtocol: false,
    });
  });

  test('failed setup leaves the server untouched (no listeners added)', T, () => {
    const srv = http.createServer(() => {});
    const before = srv.listenerCount('request');
    const beforeUp = srv.listenerCount('upgrade');
    assert.throws(() => createNativeTransport({ settings: { threads: 99 } }).setup(srv, '', {}));
    setCompressionEnv('not json');
    try {
      assert.throws(() => createNativeTransport().setup(srv, '', {}));
    } finally {
      setCompressionEnv(undefined);
    }
    assert.equal(srv.listenerCount('request'), before);
    assert.equal(srv.listenerCount('upgrade'), beforeUp);
  });

  test('Meteor.settings.packages["ddp-server"].native is read inside Meteor', T, () => {
    const saved = globalThis.Meteor;
    globalThis.Meteor = { settings: { packages: { 'ddp-server': { native: { threads: 'many' } } } } };
    try {
      assert.throws(() => createNativeTransport().setup(server, '', {}), /ddp-server\.native\.threads/);
    } finally {
      if (saved === undefined) delete globalThis.Meteor; else globalThis.Meteor = saved;
    }
  });

  test('payloadLength (KiB) caps inbound messages', T, async () => {
    const s = await makeServer({ settings: { payloadLength: 1 } });
    try {
      const c = await wsOpen(s.port);
      const socket = await s.nextSocket();
      const got = [];
      socket.on('data', (d) => got.push(d.length));
      c.ws.send('a'.repeat(1000));
      await waitFor(() => got.length === 1, 3000, 'small message');
      c.ws.send('b'.repeat(2048));
      const closed = await withTimeout(c.queue.closedPromise, 3000, 'close on oversize');
      assert.equal(closed.code, 1009);
      assert.deepEqual(got, [1000]);
    } finally {
      await s.close();
    }
  });
});

describe('SERVER_WEBSOCKET_COMPRESSION', () => {
  test('compressionFromEnv mapping table', T, () => {
    const D = { threshold: 1024, level: 1, memLevel: 1, noContextTakeover: true, maxWindowBits: 8 };
    assert.deepEqual(DEFAULT_COMPRESSION, D);
    const table = [
      [undefined, D],
      ['', D],
      ['false', false],
      ['0', false],
      ['null', false],
      ['true', D],
      ['{}', D],
      ['{"threshold":0}', { ...D, threshold: 0 }],
      ['{"level":6,"maxWindowBits":15,"noContextTakeover":false}', { ...D, level: 6, maxWindowBits: 15, noContextTakeover: false }],
      ['{"requestNoContextTakeover":true,"requestMaxWindowBits":10,"strategy":2,"memLevel":9}',
        { ...D, requestNoContextTakeover: true, requestMaxWindowBits: 10, strategy: 2, memLevel: 9 }],
    ];
    for (const [input, expected] of table) assert.deepEqual(compressionFromEnv(input), expected, String(input));
    const throwing = [
      ['not json', /SERVER_WEBSOCKET_COMPRESSION must be JSON/],
      ['{"level":10}', /SERVER_WEBSOCKET_COMPRESSION\.level must be an integer from 0 to 9, got 10/],
      ['{"maxWindowBits":7}', /SERVER_WEBSOCKET_COMPRESSION\.maxWindowBits/],
      ['{"threshold":-1}', /SERVER_WEBSOCKET_COMPRESSION\.threshold/],
      ['{"noContextTakeover":"yes"}', /SERVER_WEBSOCKET_COMPRESSION\.noContextTakeover must be a boolean/],
      ['{"windowBits":9}', /Unknown SERVER_WEBSOCKET_COMPRESSION option "windowBits"\. Valid options: threshold/],
      ['"on"', /SERVER_WEBSOCKET_COMPRESSION must be false, true or a JSON object/],
      ['[1]', /SERVER_WEBSOCKET_COMPRESSION must be false, true or a JSON object/],
    ];
    for (const [input, re] of throwing) assert.throws(() => compressionFromEnv(input), re, input);
    // A returned object never aliases the frozen defaults.
    const a = compressionFromEnv(undefined);
    a.level = 9;
    assert.equal(compressionFromEnv(undefined).level, 1);
  });

  async function negotiated(envValue, options, opts = {}) {
    setCompressionEnv(envValue);
    let s;
    try {
      s = await makeServer({ options });
    } finally {
      setCompressionEnv(undefined);
    }
    try {
      const c = await wsOpen(s.port, '/websocket', { perMessageDeflate: true });
      const socket = await s.nextSocket();
      const header = c.upgrade.headers['sec-websocket-extensions'];
      if (opts.roundTrip) {
        const big = JSON.stringify({ msg: 'added', fields: { text: 'x'.repeat(4000) } });
        socket.send(big);
        assert.equal(await c.queue.next(), big);
        socket.send('small');
        assert.equal(await c.queue.next(), 'small');
        c.ws.send(big);
        assert.equal(await withTimeout(new Promise((r) => socket.once('data', r)), 3000, 'inflated data'), big);
      }
      await wsClose(c);
      return header;
    } finally {
      await s.close();
    }
  }

  test('unset → permessage-deflate negotiated (Meteor default), messages round-trip', T, async () => {
    const h = await negotiated(undefined, {}, { roundTrip: true });
    assert.match(h || '', /permessage-deflate/);
  });

  test('"false" → no extension', T, async () => {
    assert.equal(await negotiated('false', {}), undefined);
  });

  test('websocketExtensions() → [] turns compression off', T, async () => {
    assert.equal(await negotiated(undefined, { websocketExtensions: () => [] }), undefined);
  });

  test('{"threshold":0} accepted; small messages compressed and still readable', T, async () => {
    const h = await negotiated('{"threshold":0}', { websocketExtensions: () => [{}] }, { roundTrip: true });
    assert.match(h || '', /permessage-deflate/);
  });

  test('"not json" → setup throws naming SERVER_WEBSOCKET_COMPRESSION', T, () => {
    setCompressionEnv('not json');
    try {
      assert.throws(() => createNativeTransport().setup(http.createServer(), '', {}), /SERVER_WEBSOCKET_COMPRESSION/);
    } finally {
      setCompressionEnv(undefined);
    }
  });
});

describe('slow client', () => {
  test('a client that never reads is closed (not frames dropped) past maxBackpressure', { timeout: 60000 }, async () => {
    const warnings = [];
    const logger = { warn: (m) => warnings.push(m) };
    const s = await makeServer({ settings: { maxBackpressure: 262144 }, logger });
    try {
      const { sock, head } = await rawUpgrade(s.port, '/websocket');
      assert.match(head, /^HTTP\/1\.1 101/);
      sock.pause(); // never read again: the kernel buffers fill, then the server's queue
      const socket = await s.nextSocket();
      let closed = 0;
      socket.on('close', () => { closed++; });
      const chunk = 'x'.repeat(64 * 1024);
      let sent = 0;
      const limit = 256 * 1024 * 1024; // bytes; bounded
      const deadline = Date.now() + 40000;
      while (!closed && sent < limit && Date.now() < deadline) {
        for (let i = 0; i < 16 && !socket.isClosed; i++) { socket.send(chunk); sent += chunk.length; }
        await delay(5);
      }
      await waitFor(() => closed > 0, 5000, 'close event on the slow socket');
      assert.equal(closed, 1);
      assert.ok(socket.isClosed);
      assert.equal(warnings.length, 1, `one warning per socket: ${JSON.stringify(warnings)}`);
      assert.match(warnings[0], /slow client|queued/);
      const app = s.transport._app;
      assert.ok(app, 'adapter exposes the core app as _app');
      const stats = app.stats();
      assert.equal(stats.dropped, 0, `no frame dropped: ${JSON.stringify(stats)}`);
      sock.destroy();
    } finally {
      await s.close();
    }
  });
});

describe('lifecycle', () => {
  test('closing the http.Server closes the app and its sockets', T, async () => {
    const s = await makeServer();
    const c = await wsOpen(s.port);
    const socket = await s.nextSocket();
    let closes = 0;
    socket.on('close', () => { closes++; });
    try {
      await closeServer(s.server); // not s.close(): only the http.Server, the adapter must follow
      await withTimeout(c.queue.closedPromise, 5000, 'client sees close after server.close()');
      await waitFor(() => closes === 1, 3000, 'close event');
    } finally {
      await s.close();
    }
  });

  test('two setups on two servers in one process are independent', T, async () => {
    const a = await makeServer();
    const b = await makeServer();
    try {
      const ca = await wsOpen(a.port);
      const cb = await wsOpen(b.port);
      const sa = await a.nextSocket();
      const sb = await b.nextSocket();
      assert.equal(a.sockets.length, 1);
      assert.equal(b.sockets.length, 1);
      sa.send('to-a');
      sb.send('to-b');
      assert.equal(await ca.queue.next(), 'to-a');
      assert.equal(await cb.queue.next(), 'to-b');
      await wsClose(ca);
      await wsClose(cb);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('DDP echo through the adapter', T, async () => {
    const ddp = new DdpServer();
    const s = await makeServer({ onConnection: (socket) => ddp.handle(socket) });
    try {
      const c = await wsOpen(s.port);
      const session = await ddpConnect(c);
      assert.equal(typeof session, 'string');
      const r = await ddpCall(c, 'echo', [{ a: [1, 'two'] }]);
      assert.deepEqual(r.result, { a: [1, 'two'] });
      await wsClose(c);
    } finally {
      await s.close();
    }
  });
});
