'use strict';
// The no-patch Meteor takeover (meteor/takeover.js, `import 'ddp-transport-native/meteor/auto'`,
// the Atmosphere package) against a Meteor 3.0–3.4-style and a 3.5-style server process
// (helpers/meteor-fake.js: real sockjs mounted on an http.Server, Meteor's /websocket rewrite,
// the stream server of each line, a DDP server on its registration callbacks). Real clients:
// `ws` with and without permessage-deflate, simpleddp, the SockJS client on /sockjs. Then the
// stand-down cases, the missing binary, unexpected internals, the registry path, and the real
// `meteor/auto` entry in a child process.

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const SimpleDDP = require('simpleddp');
const IsomorphicWs = require('isomorphic-ws');
const SockJS = require('sockjs-client');
const { fakeMeteor, removeGlobals } = require('./helpers/meteor-fake');
const {
  withTimeout, waitFor, httpGet, wsOpen, ddpConnect, ddpCall, wsClose,
} = require('./helpers/meteor-util');
const { takeOver, fromAtmospherePackage, SETTINGS_LABEL } = require('../meteor/takeover');
const { createNativeTransport } = require('../meteor');
const pkg = require('../package.json');
const { platformName, platformOf } = require('../lib/platform');

const T = { timeout: 30000 };
const ROOT = path.join(__dirname, '..');
const ENV_KEYS = ['DDP_TRANSPORT', 'DISABLE_SOCKJS', 'DDP_TRANSPORT_NATIVE', 'TEST_METADATA', 'SERVER_WEBSOCKET_COMPRESSION'];
const savedEnv = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
const open = []; // fakes and clients to close

function restoreEnv() {
  for (const k of ENV_KEYS) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
}

function capture() {
  const lines = [];
  return { lines, info: (m) => lines.push(`info ${m}`), warn: (m) => lines.push(`warn ${m}`) };
}

function make(o) {
  const m = fakeMeteor(o);
  open.push(m);
  return m;
}

async function client(port, pathname = '/websocket', options) {
  const c = await wsOpen(port, pathname, options);
  open.push({ close: () => wsClose(c) });
  return c;
}

const isNative = (socket) => socket.constructor.name === 'NativeSocket';

/** DDP over a raw ws client; returns the stream server's socket for it. */
async function ddpOverWs(m, pathname = '/websocket', options) {
  const before = new Set(m.streamServer.open_sockets);
  const c = await client(m.port, pathname, options);
  await ddpConnect(c);
  assert.deepEqual((await ddpCall(c, 'echo', ['hi'])).result, 'hi');
  const socket = m.streamServer.open_sockets.find((s) => !before.has(s));
  assert.ok(socket, 'the stream server has the socket');
  return { c, socket };
}

/** DDP over the SockJS client (xhr-polling: what a network that blocks WebSockets gets). */
function ddpOverSockjs(port, prefix = '') {
  return withTimeout(new Promise((resolve, reject) => {
    const s = new SockJS(`http://127.0.0.1:${port}${prefix}/sockjs`, null, { transports: ['xhr-polling'] });
    open.push({ close: () => s.close() });
    s.onopen = () => s.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
    s.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.msg === 'connected') s.send(JSON.stringify({ msg: 'method', id: 's1', method: 'echo', params: ['via sockjs'] }));
      if (m.msg === 'result' && m.id === 's1') resolve({ result: m.result, transport: s.transport });
    };
    s.onclose = (e) => reject(new Error(`sockjs closed ${e.code} ${e.reason}`));
  }), 15000, 'DDP over the SockJS client');
}

after(async () => {
  for (const x of open.reverse()) {
    try { await x.close(); } catch (e) { /* already closed */ }
  }
  removeGlobals();
  restoreEnv();
});

for (const line of ['3.4', '3.5']) {
  describe(`Meteor ${line}: import 'ddp-transport-native/meteor/auto' takes over /websocket`, () => {
    let m;
    let status;
    const log = capture();

    before(async () => {
      restoreEnv();
      delete process.env.SERVER_WEBSOCKET_COMPRESSION; // Meteor's default: compression on
      m = make({ line });
      status = takeOver(m.ctx({ logger: log, source: 'test' }));
      await m.listen();
    });

    test('serving; one startup line; browsers told to open a raw WebSocket', T, () => {
      assert.equal(status.state, 'serving');
      assert.equal(log.lines.length, 1, log.lines.join('\n'));
      // the I/O mode the app runs: the one the test run names, else the default (inline on Linux)
      const io = (process.env.DDP_TRANSPORT_NATIVE_IO || 'inline') === 'inline' && process.platform === 'linux' ? 'inline' : 'threads';
      assert.equal(log.lines[0], "info ddp-transport-native: native serves /websocket on the app's own port (permessage-deflate " +
        `(threshold 1024 B, level 1), payloadLength 16384 KiB, maxBackpressure 16777216 B, io ${io}); SockJS stays at /sockjs. ` +
        'Off: DDP_TRANSPORT_NATIVE=0.');
      assert.equal(m.runtimeConfig.DISABLE_SOCKJS, true);
      assert.equal(m.runtimeConfig.DDP_TRANSPORT, 'native');
    });

    test('raw WebSocket DDP client, no extension: a native socket with the real peer address', T, async () => {
      const { c, socket } = await ddpOverWs(m, '/websocket?x=1');
      assert.equal(c.upgrade.headers['sec-websocket-extensions'], undefined);
      assert.ok(isNative(socket), 'the socket is ours');
      assert.equal(socket.protocol, 'websocket-raw');
      assert.equal(socket.remoteAddress, '127.0.0.1');
      assert.equal(socket.url, '/websocket?x=1');
      assert.ok(status.transport._app.stats().connections >= 1);
    });

    test('raw WebSocket DDP client with permessage-deflate: a 4 KiB result compressed and back', T, async () => {
      const c = await client(m.port, '/websocket/', { perMessageDeflate: true });
      assert.match(c.upgrade.headers['sec-websocket-extensions'], /^permessage-deflate/);
      await ddpConnect(c);
      const big = 'x'.repeat(4096);
      assert.equal((await ddpCall(c, 'echo', [big])).result, big);
      assert.ok(status.transport._app.stats().compressions >= 1);
    });

    test('simpleddp connects and calls', T, async () => {
      const s = new SimpleDDP({
        endpoint: `ws://127.0.0.1:${m.port}/websocket`, SocketConstructor: IsomorphicWs, autoReconnect: false, maxTimeout: 10000,
      });
      open.push({ close: () => withTimeout(s.disconnect(), 3000, 'simpleddp disconnect') });
      await withTimeout(s.connect(), 10000, 'simpleddp connect');
      assert.equal(await withTimeout(s.call('echo', 'simple'), 5000, 'echo'), 'simple');
      assert.ok(m.streamServer.open_sockets.some(isNative));
    });

    test('the SockJS client on /sockjs still gets DDP (tabs opened before, blocked WebSockets)', T, async () => {
      const r = await ddpOverSockjs(m.port);
      assert.equal(r.result, 'via sockjs');
      assert.equal(r.transport, 'xhr-polling');
      assert.ok(m.streamServer.open_sockets.some((s) => !isNative(s)), 'a sockjs socket on the stream server');
    });

    test('/sockjs/info answers; plain GET /websocket → 400; other paths reach the app', T, async () => {
      const info = await httpGet(m.port, '/sockjs/info');
      assert.equal(info.status, 200);
      assert.equal(JSON.parse(info.body).websocket, true);
      for (const p of ['/websocket', '/websocket/', '/websocket?a=1']) {
        const r = await httpGet(m.port, p);
        assert.equal(r.status, 400, p);
        assert.equal(r.body, 'Not a valid websocket request');
      }
      assert.equal((await httpGet(m.port, '/websockets')).body, 'app:/websockets');
    });

    test('a closed socket leaves the stream server\'s list', T, async () => {
      const { c, socket } = await ddpOverWs(m);
      assert.ok(m.streamServer.open_sockets.includes(socket));
      await wsClose(c);
      await waitFor(() => !m.streamServer.open_sockets.includes(socket), 5000, 'socket removed');
      assert.equal(socket.isClosed, true);
    });

    test('the stream server\'s steps: 45 s websocket timeout before the registration callbacks run', T, async () => {
      const { NativeSocket } = require('../meteor');
      const original = NativeSocket.prototype.setWebsocketTimeout;
      const calls = new Map();
      NativeSocket.prototype.setWebsocketTimeout = function record(ms) {
        calls.set(this, [...(calls.get(this) || []), ms]);
        return original.call(this, ms);
      };
      let seen = null;
      m.streamServer.registration_callbacks.unshift((socket) => { seen = [...(calls.get(socket) || [])]; });
      try {
        await ddpOverWs(m);
      } finally {
        m.streamServer.registration_callbacks.shift();
        NativeSocket.prototype.setWebsocketTimeout = original;
      }
      assert.deepEqual(seen, [45000]);
    });

    test('TEST_METADATA: the first message is { testMessageOnConnect: true }', T, async () => {
      process.env.TEST_METADATA = '{"run":1}';
      try {
        const c = await client(m.port);
        assert.deepEqual(JSON.parse(await c.queue.next()), { testMessageOnConnect: true });
      } finally {
        delete process.env.TEST_METADATA;
      }
    });
  });
}

describe('settings, prefix and the one owner', () => {
  test('ROOT_URL_PATH_PREFIX: <prefix>/websocket is native, <prefix>/sockjs stays', T, async () => {
    restoreEnv();
    const m = make({ line: '3.4', prefix: '/app' });
    const log = capture();
    const settings = { threads: 2, payloadLength: 64, maxBackpressure: 1 << 20 };
    m.Meteor.settings = { packages: { 'ddp-transport-native': settings } };
    const status = takeOver(m.ctx({ logger: log }));
    await m.listen();
    assert.equal(status.state, 'serving');
    assert.deepEqual(status.transport._settings, { ...settings, io: null, timeout: 0, drainOnSigterm: false, admission: true, proxyProtocol: false });
    const io = process.env.DDP_TRANSPORT_NATIVE_IO === 'inline' && process.platform === 'linux' ? 'inline' : 'threads';
    assert.ok(log.lines[0].includes(`/app/websocket on the app's own port (permessage-deflate (threshold 1024 B, level 1), payloadLength 64 KiB, ` +
      `maxBackpressure 1048576 B, io ${io}, threads 2); SockJS stays at /app/sockjs`), log.lines[0]);
    const { socket } = await ddpOverWs(m, '/app/websocket');
    assert.ok(isNative(socket));
    assert.equal((await httpGet(m.port, '/app/sockjs/info')).status, 200);
    assert.equal((await ddpOverSockjs(m.port, '/app')).result, 'via sockjs');
  });

  test('settings errors throw naming the key; nothing is attached', T, () => {
    const m = make({ line: '3.4' });
    const upgrade = m.httpServer.listeners('upgrade');
    for (const [value, re] of [
      [{ port: 5001 }, /Meteor\.settings\.packages\["ddp-transport-native"\] has an unknown key "port"; valid keys: payloadLength, timeout, maxBackpressure, threads, io, drainOnSigterm, admission, proxyProtocol, enabled/],
      [{ admission: { nope: 1 } }, /Meteor\.settings\.packages\["ddp-transport-native"\]\.admission/],
      [{ threads: 0 }, /Meteor\.settings\.packages\["ddp-transport-native"\]\.threads must be an integer 1\.\.16, got 0/],
      [{ enabled: 'no' }, /\.enabled must be true or false/],
      ['on', /must be an object/],
    ]) {
      m.Meteor.settings = { packages: { 'ddp-transport-native': value } };
      assert.throws(() => takeOver(m.ctx({ logger: capture() })), re);
    }
    assert.ok(SETTINGS_LABEL.includes('ddp-transport-native'));
    m.Meteor.settings = {};
    process.env.DDP_TRANSPORT_NATIVE = 'maybe';
    try {
      assert.throws(() => takeOver(m.ctx({ logger: capture() })), /DDP_TRANSPORT_NATIVE must be 0 or 1/);
    } finally {
      delete process.env.DDP_TRANSPORT_NATIVE;
    }
    process.env.SERVER_WEBSOCKET_COMPRESSION = '{"level":42}';
    try {
      assert.throws(() => takeOver(m.ctx({ logger: capture() })), /SERVER_WEBSOCKET_COMPRESSION/);
    } finally {
      delete process.env.SERVER_WEBSOCKET_COMPRESSION;
    }
    assert.deepEqual(m.httpServer.listeners('upgrade'), upgrade);
    assert.equal(m.runtimeConfig.DISABLE_SOCKJS, undefined);
  });

  test('a second takeover (the import and the Atmosphere package) changes nothing', T, () => {
    const m = make({ line: '3.5' });
    const first = takeOver(m.ctx({ logger: capture() }));
    const upgrade = m.httpServer.listeners('upgrade');
    const log = capture();
    const second = takeOver(m.ctx({ logger: log, load: () => { throw new Error('must not load again'); } }));
    assert.equal(second, first);
    assert.deepEqual(log.lines, []);
    assert.deepEqual(m.httpServer.listeners('upgrade'), upgrade);
  });
});

describe('standing down: Meteor\'s transport keeps /websocket', () => {
  /** sockjs (through Meteor's rewrite) answers DDP on /websocket, and the socket is not ours. */
  async function sockjsServes(m) {
    await m.listen();
    const { socket } = await ddpOverWs(m);
    assert.ok(!isNative(socket), 'sockjs owns the socket');
    assert.equal(m.runtimeConfig.DISABLE_SOCKJS, undefined);
  }

  test('an explicit Meteor transport wins: settings ddp-server.transport = "sockjs"', T, async () => {
    restoreEnv();
    const m = make({ line: '3.4', settings: { packages: { 'ddp-server': { transport: 'sockjs' } } } });
    const log = capture();
    const s = takeOver(m.ctx({ logger: log }));
    assert.equal(s.state, 'stood-down');
    assert.deepEqual(log.lines, ['info ddp-transport-native: stands down: Meteor.settings.packages["ddp-server"].transport selects "sockjs"; Meteor\'s "sockjs" transport serves /websocket.']);
    await sockjsServes(m);
  });

  test('DDP_TRANSPORT=uws (3.5): stands down with one line', T, () => {
    process.env.DDP_TRANSPORT = 'uws';
    try {
      const m = make({ line: '3.5' });
      assert.equal(m.runtimeConfig.DDP_TRANSPORT, 'uws');
      const log = capture();
      assert.equal(takeOver(m.ctx({ logger: log })).state, 'stood-down');
      assert.equal(log.lines.length, 1);
      assert.match(log.lines[0], /DDP_TRANSPORT selects "uws"/);
      assert.equal(m.runtimeConfig.DDP_TRANSPORT, 'uws');
    } finally {
      delete process.env.DDP_TRANSPORT;
    }
  });

  test('DISABLE_SOCKJS=1 on 3.5 selects uws: stands down', T, () => {
    process.env.DISABLE_SOCKJS = '1';
    try {
      const m = make({ line: '3.5' });
      const log = capture();
      assert.equal(takeOver(m.ctx({ logger: log })).state, 'stood-down');
      assert.match(log.lines[0], /Meteor selected its "uws" transport/);
    } finally {
      delete process.env.DISABLE_SOCKJS;
    }
  });

  test('DDP_TRANSPORT_NATIVE=0, or enabled: false, turns it off', T, async () => {
    process.env.DDP_TRANSPORT_NATIVE = '0';
    try {
      const m = make({ line: '3.5' });
      const log = capture();
      assert.equal(takeOver(m.ctx({ logger: log })).state, 'off');
      assert.match(log.lines[0], /turned off \(DDP_TRANSPORT_NATIVE=0\); Meteor's own transport serves \/websocket\./);
      await sockjsServes(m);
    } finally {
      delete process.env.DDP_TRANSPORT_NATIVE;
    }
    const m = make({ line: '3.4', settings: { packages: { 'ddp-transport-native': { enabled: false } } } });
    const log = capture();
    assert.equal(takeOver(m.ctx({ logger: log })).state, 'off');
    assert.match(log.lines[0], /turned off \(Meteor\.settings\.packages\["ddp-transport-native"\]\.enabled is false\)/);
  });

  test('no usable binary: one line saying what to do; sockjs keeps /websocket', T, async () => {
    const m = make({ line: '3.4' });
    const log = capture();
    const s = takeOver(m.ctx({
      logger: log,
      load: () => { throw new Error('ddp-transport-native: no prebuilt binary for win32-x64-gnu was installed.\n  Reinstall ...'); },
    }));
    assert.equal(s.state, 'unavailable');
    assert.equal(log.lines.length, 1);
    assert.match(log.lines[0], /^warn ddp-transport-native: could not load its native binary; Meteor's own transport serves \/websocket \(SockJS\)\. ddp-transport-native: no prebuilt binary for win32-x64-gnu was installed\. Reinstall \.\.\.$/);
    await sockjsServes(m);
  });

  test('Meteor internals not as expected: one line, the app keeps its transport', T, async () => {
    const m = make({ line: '3.4' });
    const { stream_server: ss } = m.Meteor.server;
    for (const [server, re] of [
      [undefined, /Meteor\.server\.stream_server is missing/],
      [{ stream_server: { ...ss, registration_callbacks: null } }, /registration_callbacks is not an array/],
      [{ stream_server: { registration_callbacks: [] } }, /neither _onConnection \(Meteor 3\.5\+\) nor open_sockets/],
    ]) {
      m.Meteor.server = server;
      const log = capture();
      assert.equal(takeOver(m.ctx({ logger: log })).state, 'unavailable');
      assert.equal(log.lines.length, 1);
      assert.match(log.lines[0], re);
      assert.match(log.lines[0], /^warn .*Meteor's own transport serves \/websocket/);
    }
    m.Meteor.server = { stream_server: ss };
    await sockjsServes(m);
  });

  test('patched 3.5 with transport "native": the registry path serves, the takeover stands aside', T, async () => {
    const m = make({
      line: '3.5',
      patched: true,
      settings: { packages: { 'ddp-server': { transport: 'native' } } },
      register: (r) => r.register('native', () => createNativeTransport({ settings: {} })),
    });
    assert.equal(m.runtimeConfig.DDP_TRANSPORT, 'native');
    const upgrade = m.httpServer.listeners('upgrade');
    const log = capture();
    assert.equal(takeOver(m.ctx({ logger: log })).state, 'registry');
    assert.match(log.lines[0], /selected "native" through its transport registry; it serves \/websocket already/);
    assert.deepEqual(m.httpServer.listeners('upgrade'), upgrade, 'no second owner');
    await m.listen();
    const { socket } = await ddpOverWs(m);
    assert.ok(isNative(socket));
  });
});

describe('the Atmosphere package and the real entry point', () => {
  test('the package takes over when ddp-server has loaded, at startup when it has not; registers native on 3.5', T, () => {
    const m = make({ line: '3.5' });
    m.installGlobals();
    const server = m.Meteor.server;
    m.Meteor.server = undefined; // the package loaded before ddp-server
    const log = capture();
    try {
      assert.equal(fromAtmospherePackage(log).state, 'deferred');
      assert.equal(typeof m.registry.get('native'), 'function', 'native registered in the registry');
      assert.equal(m.Meteor.startupHooks.length, 1);
      m.Meteor.server = server;
      m.Meteor.startupHooks[0]();
      assert.match(log.lines[0], /native serves \/websocket/);
      assert.equal(m.runtimeConfig.DDP_TRANSPORT, 'native');
      assert.equal(fromAtmospherePackage(capture()).state, 'serving', 'loaded after ddp-server: at once');
    } finally {
      removeGlobals();
    }
  });

  /** Run helpers/meteor-auto-child.js; resolves with { port, output, child } once it listens. */
  function runChild(env) {
    return withTimeout(new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(__dirname, 'helpers', 'meteor-auto-child.js')], {
        env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      open.push({ close: () => child.kill('SIGKILL') });
      let output = '';
      const onData = (d) => {
        output += d;
        const port = /^LISTENING (\d+)$/m.exec(output);
        if (port) resolve({ port: Number(port[1]), output, child });
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('exit', (code) => reject(new Error(`child exited ${code}: ${output}`)));
    }), 20000, 'child listening');
  }

  test('import of meteor/auto in a Meteor 3.4-style process: startup line, DDP on /websocket', T, async () => {
    const { port, output } = await runChild({ LINE: '3.4' });
    assert.match(output, /ddp-transport-native: native serves \/websocket on the app's own port/);
    assert.match(output, /^STATE serving$/m);
    const c = await client(port, '/websocket', { perMessageDeflate: true });
    await ddpConnect(c);
    assert.equal((await ddpCall(c, 'echo', ['child'])).result, 'child');
  });

  test('an install without the platform package: the app starts and sockjs serves DDP', T, async () => {
    // The root package as published, without its optional platform package (as --omit=optional).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-takeover-'));
    open.push({ close: () => fs.rmSync(dir, { recursive: true, force: true }) });
    const at = path.join(dir, 'node_modules', pkg.name);
    fs.mkdirSync(at, { recursive: true });
    for (const f of ['binding.js', 'index.js', 'lib', 'meteor']) fs.cpSync(path.join(ROOT, f), path.join(at, f), { recursive: true });
    const optionalDependencies = Object.fromEntries(pkg.napi.targets.map((t) => [`${pkg.name}-${platformOf(t)}`, pkg.version]));
    fs.writeFileSync(path.join(at, 'package.json'), JSON.stringify({ ...pkg, optionalDependencies }));
    const env = { LINE: '3.4', AUTO_MODULE: path.join(at, 'meteor', 'auto.js'), NAPI_RS_NATIVE_LIBRARY_PATH: '' };
    const { port, output } = await runChild(env);
    assert.match(output, new RegExp(`could not load its native binary; Meteor's own transport serves /websocket \\(SockJS\\)\\. ${pkg.name}: no prebuilt binary for ${platformName()} was installed`));
    assert.match(output, /^STATE unavailable$/m);
    const c = await client(port);
    await ddpConnect(c);
    assert.equal((await ddpCall(c, 'echo', ['still sockjs'])).result, 'still sockjs');
  });
});
