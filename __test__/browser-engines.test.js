'use strict';
// The browser engines Meteor apps run in — Chromium, Firefox, WebKit (Safari's engine, WKWebView
// on iOS) — each with its own WebSocket, against the App attached to a plain http.Server
// (Meteor's shape) and on its own listener (App().listen), permessage-deflate on and off:
// messages 0 B – 4 MiB (text, binary, UTF-8 with 4-byte characters, compressible and not) echoed
// whole, a burst that must come back in order, a server push of 3 MiB + 2.5 MiB, a server close
// with an application code and reason seen by the page, a page close seen by the server, and the
// Sec-WebSocket-Extensions each engine offers and what the server answers it.
// One browser per engine for the whole suite, one page reused; each case runs in the page
// (helpers/ws-page.js) and returns a small result. The I/O mode is the apps' default, so
// DDP_TRANSPORT_NATIVE_IO picks it (npm run test:all runs the suite in both); every test's name
// says which. Engines come from helpers/engines.js: Chromium from npm if the machine has none;
// Firefox (firefox-esr) and WebKit (webkit2gtk-driver, xvfb) from Debian packages, skipped with
// the reason where not installed.

const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const crypto = require('node:crypto');
const { App } = require('..');
const fs = require('node:fs');
const { ENGINES, MISSING, engineUnavailable, launchEngine } = require('./helpers/engines');
const { PAGE_HTML, digest } = require('./helpers/ws-page');
const { standinHtml } = require('./helpers/meteor-standin-page');
const { openPage } = require('../scripts/meteor-app-e2e/browser');

const MiB = 1024 * 1024;
const SIZES = [0, 1, 125, 126, 1023, 1024, 65535, 65536, MiB + 3, 4 * MiB];
const BURST = 1000;
const PUSH_BINARY = 3 * MiB;
const PUSH_TEXTS = 40; // × 64 KiB, compressible
const IO = process.env.DDP_TRANSPORT_NATIVE_IO || 'inline';
// Whether the page's ws.extensions carries the answer's parameters: Firefox reports the
// extension's name alone ("permessage-deflate"), Chromium and WebKit the header as answered.
const PAGE_SHOWS_PARAMS = { chromium: true, firefox: false, webkit: true };

// Where an engine cannot run, its tests skip with one of these reasons (helpers/engines.js's
// MISSING; the first test checks the two lists agree). .ci/run reads the packages from this file:
// it hides them for its first run, then installs them and runs this suite again, where none may skip.
const SKIP_REASONS = [
  'Firefox not installed: apt-get install -y firefox-esr',
  'WebKitWebDriver not installed: apt-get install -y webkit2gtk-driver',
  'MiniBrowser not installed: apt-get install -y libwebkit2gtk-4.1-0',
  'xvfb-run not installed: apt-get install -y xvfb',
];

// The four servers, each in the I/O mode of the run: Meteor's shape and the own listener, each
// with permessage-deflate on (the defaults) and off.
const CONFIGS = [];
for (const shape of ['attached', 'listen']) {
  for (const deflate of [true, false]) {
    CONFIGS.push({ shape, deflate, name: `${shape === 'attached' ? 'attach(http.Server)' : 'App().listen'}, deflate ${deflate ? 'on' : 'off'}` });
  }
}

/** One server: `shape` 'attached' (http.Server + attach) or 'listen'; deflate on or off. Records
 *  per socket (by its path /ws/<case>): the offer, the answer, a digest of every message, closes. */
async function startServer({ shape, deflate, name }) {
  const sockets = new Map(); // path -> record
  const app = App();
  app.ws('/ws/*', {
    compression: deflate,
    idleTimeout: 0,
    open(ws) {
      const headers = ws.getHeaders();
      sockets.set(ws.getUrl(), {
        offer: headers['sec-websocket-extensions'] || '', answer: ws.getExtensions(),
        received: [], burst: { n: 0, outOfOrder: -1 }, sendResults: [], close: null,
      });
    },
    message(ws, data, isBinary) {
      const rec = sockets.get(ws.getUrl());
      if (!isBinary && data.startsWith('burst ')) {
        const i = Number(data.split(' ')[1]);
        if (i !== rec.burst.n && rec.burst.outOfOrder < 0) rec.burst.outOfOrder = rec.burst.n;
        rec.burst.n++;
        ws.send(data, false);
        return;
      }
      if (!isBinary && data.startsWith('cmd:')) {
        const [, cmd, code, ...reason] = data.split(':');
        if (cmd === 'hello') ws.send('hello', false);
        if (cmd === 'end') ws.end(Number(code), reason.join(':'));
        if (cmd === 'push') {
          const bin = crypto.randomBytes(PUSH_BINARY);
          rec.pushBinary = digest(bin);
          rec.pushTexts = [];
          rec.sendResults.push(ws.send(bin, true));
          for (let i = 0; i < PUSH_TEXTS; i++) {
            const t = `push ${i} ${'{"msg":"changed","collection":"tasks","fields":{"n":1}} '.repeat(1200)}`.slice(0, 64 * 1024);
            rec.pushTexts.push(digest(Buffer.from(t)));
            rec.sendResults.push(ws.send(t, false));
          }
          rec.sendResults.push(ws.send('push-done', false));
        }
        return;
      }
      rec.received.push({ isBinary, ...digest(isBinary ? data : Buffer.from(data, 'utf8')) });
      ws.send(data, isBinary);
    },
    close(ws, code, reason) {
      const rec = sockets.get(ws.getUrl());
      if (rec) rec.close = { code, reason };
    },
  });
  let server = null;
  let port;
  if (shape === 'attached') {
    server = http.createServer((req, res) => {
      if (req.url.startsWith('/sockjs/')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{}');
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(req.url.startsWith('/meteor-standin') ? standinHtml('/ws/meteor-standin') : PAGE_HTML);
    });
    app.attach(server);
    await new Promise((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', resolve); });
    port = server.address().port;
  } else {
    port = await new Promise((resolve, reject) => app.listen('127.0.0.1', 0, (token, err) => (token ? resolve(token.port) : reject(err))));
  }
  return {
    shape, deflate, port, app, sockets, name,
    url: (path) => `ws://127.0.0.1:${port}/ws/${path}`,
    async close() {
      app.close();
      if (server) await new Promise((r) => server.close(r));
    },
  };
}

/** Waits (bounded) until fn() is truthy. */
async function until(fn, ms, what) {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** One extension header value as a name and a set of parameters: 'a; b=1' → { name, params }. */
function parseExtension(value) {
  const [name, ...params] = String(value).split(';').map((s) => s.trim()).filter(Boolean);
  return { name: name || '', params: params.map((p) => p.replace(/\s*=\s*/, '=')).sort() };
}

/** What the server should answer `offer` with the default compression (docs/compression.md):
 *  noContextTakeover → server_no_context_takeover; requestMaxWindowBits 10 →
 *  client_max_window_bits=10 to a client that offers client_max_window_bits, else
 *  client_no_context_takeover. Deflate off: no extension at all. */
function expectedAnswer(offer, deflate) {
  if (!deflate) return { name: '', params: [] };
  const first = String(offer).split(',')[0];
  const o = parseExtension(first);
  assert.equal(o.name, 'permessage-deflate', `the engine offers permessage-deflate first: "${offer}"`);
  const unknown = o.params.filter((p) => !/^client_max_window_bits(=\d+)?$/.test(p));
  assert.deepEqual(unknown, [], `offer parameters this test has no prediction for: "${offer}"`);
  const offersClientBits = o.params.some((p) => p.startsWith('client_max_window_bits'));
  const params = ['server_no_context_takeover', offersClientBits ? 'client_max_window_bits=10' : 'client_no_context_takeover'];
  return { name: 'permessage-deflate', params: params.sort() };
}

let servers = [];
let pageUrl;
const negotiated = []; // [engine, server, offer, answer, page's ws.extensions]

before(async () => {
  servers = [];
  for (const config of CONFIGS) servers.push(await startServer(config));
  for (const s of servers) assert.equal(s.app.ioMode, IO, `${s.name}: the app runs io ${s.app.ioMode}`);
  pageUrl = `http://127.0.0.1:${servers[0].port}/`;
});

after(async () => {
  for (const s of servers) await s.close();
});

test('the skip reasons here are the ones helpers/engines.js gives', () => {
  assert.deepEqual(Object.values(MISSING).sort(), [...SKIP_REASONS].sort());
  const source = fs.readFileSync(__filename, 'utf8');
  for (const why of SKIP_REASONS) assert.ok(source.includes(`'${why}'`));
});

for (const engine of ENGINES) {
  const why = engineUnavailable(engine);
  describe(`${engine} (io ${IO})`, { skip: why || false, timeout: 240000 }, () => {
    let driver = null;
    let caseNo = 0;
    const run = (fn, arg) => driver.evaluate(fn, arg);

    before(async () => {
      driver = await launchEngine(engine, { timeout: 60000 });
      await driver.goto(pageUrl);
      assert.equal(await run(() => !!(window.h && window.h.ready)), true, 'the page\'s harness loaded');
    });
    after(async () => {
      if (driver) await driver.close();
    });

    test(`${engine}, io ${IO}: the engine`, (t) => {
      t.diagnostic(`${driver.version} from ${driver.source}; ${driver.userAgent}`);
      assert.ok(driver.version);
    });

    CONFIGS.forEach(({ name }, si) => {
      const label = () => `${engine}, io ${IO}, ${name}`;

      test(`${engine}, io ${IO}, ${name}: echo 0 B – 4 MiB (text, binary, 4-byte UTF-8, compressible and not) and the negotiated extension`, async (t) => {
        const s = servers[si];
        const id = `${engine}-echo-${caseNo++}`;
        const started = Date.now();
        const before = s.app.stats();
        const r = await run((a) => window.h.echo(a.url, a), { url: s.url(id), sizes: SIZES, tag: id });
        const st = s.app.stats();
        const rec = s.sockets.get(`/ws/${id}`);
        assert.ok(rec, 'the server saw the socket');
        // The negotiated extension: the server's answer is what its config gives this engine's
        // offer, and the page sees exactly that answer.
        const want = expectedAnswer(rec.offer, s.deflate);
        assert.deepEqual(parseExtension(rec.answer), want, `answer to "${rec.offer}"`);
        const pageView = PAGE_SHOWS_PARAMS[engine] ? want : { name: want.name, params: [] };
        assert.deepEqual(parseExtension(r.extensions), pageView, `the page's ws.extensions "${r.extensions}"`);
        // Compression happened (or not) on the wire, both ways: half the bytes are compressible.
        const d = (k) => st[k] - before[k];
        const ratio = (wire, bytes) => (d(bytes) ? d(wire) / d(bytes) : 1);
        if (s.deflate) {
          assert.ok(d('compressions') > 0, 'the server compressed');
          assert.ok(ratio('wireBytesOut', 'bytesOut') < 0.75, `server → page wire/payload ${ratio('wireBytesOut', 'bytesOut').toFixed(3)}`);
          assert.ok(ratio('wireBytesIn', 'bytesIn') < 0.75, `page → server wire/payload ${ratio('wireBytesIn', 'bytesIn').toFixed(3)}: the engine compressed`);
        } else {
          assert.equal(d('compressions'), 0);
          assert.ok(ratio('wireBytesOut', 'bytesOut') >= 1 && ratio('wireBytesIn', 'bytesIn') >= 1, 'nothing compressed');
        }
        t.diagnostic(`${label()}: wire/payload server → page ${ratio('wireBytesOut', 'bytesOut').toFixed(3)}, page → server ${ratio('wireBytesIn', 'bytesIn').toFixed(3)}`);
        negotiated.push([engine, s.name, rec.offer, rec.answer, r.extensions]);
        t.diagnostic(`${label()}: offer "${rec.offer}" → answer "${rec.answer}"; page ws.extensions "${r.extensions}"`);
        // Every message came back whole, and the server received exactly what the page sent.
        assert.equal(r.rows.length, SIZES.length * 4);
        assert.equal(rec.received.length, r.rows.length, 'messages the server received');
        r.rows.forEach((row, i) => {
          const what = `${row.kind} ${row.size} B`;
          assert.equal(row.sent.len, row.size, `${what}: generated size`);
          assert.equal(row.equal, true, `${what}: echo equals what was sent (got ${JSON.stringify(row.got)}, sent ${JSON.stringify(row.sent)})`);
          assert.deepEqual(row.got, row.sent, `${what}: echo digest`);
          assert.equal(row.gotType, row.kind.startsWith('text') ? 'text' : 'binary', `${what}: frame type`);
          const { isBinary, ...got } = rec.received[i];
          assert.equal(isBinary, !row.kind.startsWith('text'), `${what}: the server's isBinary`);
          assert.deepEqual(got, row.sent, `${what}: what the server received`);
        });
        const big = r.rows.filter((x) => x.size === 4 * MiB).map((x) => `${x.kind} ${x.ms} ms`).join(', ');
        t.diagnostic(`${label()}: ${r.rows.length} echoes in ${Date.now() - started} ms (4 MiB: ${big})`);
        await until(() => rec.close, 5000, 'the server\'s close handler');
        assert.deepEqual(rec.close, { code: 1000, reason: id });
      });

      test(`${engine}, io ${IO}, ${name}: a burst of ${BURST} arrives in order both ways`, async (t) => {
        const s = servers[si];
        const id = `${engine}-burst-${caseNo++}`;
        const r = await run((a) => window.h.burst(a.url, a), { url: s.url(id), n: BURST });
        const rec = s.sockets.get(`/ws/${id}`);
        assert.deepEqual({ received: r.received, outOfOrder: r.outOfOrder }, { received: BURST, outOfOrder: -1 }, 'echoes on the page');
        assert.deepEqual(rec.burst, { n: BURST, outOfOrder: -1 }, 'messages at the server');
        t.diagnostic(`${label()}: ${BURST} messages round trip in ${r.ms} ms`);
      });

      test(`${engine}, io ${IO}, ${name}: a server push of 3 MiB binary + ${PUSH_TEXTS} × 64 KiB text`, async (t) => {
        const s = servers[si];
        const id = `${engine}-push-${caseNo++}`;
        const r = await run((a) => window.h.push(a.url), { url: s.url(id) });
        const rec = s.sockets.get(`/ws/${id}`);
        assert.ok(!rec.sendResults.includes(2), `no send dropped: ${rec.sendResults.join(',')}`);
        assert.deepEqual(r.bin && { len: r.bin.len, fnv: r.bin.fnv }, { len: rec.pushBinary.len, fnv: rec.pushBinary.fnv }, 'the binary push');
        assert.deepEqual(r.texts.map((x) => x.n), [...Array(PUSH_TEXTS).keys()], 'the texts, in order');
        assert.deepEqual(r.texts.map((x) => ({ len: x.len, fnv: x.fnv })), rec.pushTexts.map((x) => ({ len: x.len, fnv: x.fnv })), 'the texts, whole');
        t.diagnostic(`${label()}: ${(PUSH_BINARY + PUSH_TEXTS * 65536) / MiB} MiB pushed in ${r.ms} ms`);
      });

      test(`${engine}, io ${IO}, ${name}: the server's close code and reason reach the page; the page's reach the server`, async () => {
        const s = servers[si];
        const id1 = `${engine}-end-${caseNo++}`;
        const reason = 'server says bye ✓ 😀';
        const seen = await run((a) => window.h.serverClose(a.url, a), { url: s.url(id1), code: 4321, reason });
        assert.deepEqual(seen, { code: 4321, reason, wasClean: true }, 'the page\'s close event');
        const rec1 = s.sockets.get(`/ws/${id1}`);
        await until(() => rec1.close, 5000, 'the server\'s close handler');
        assert.equal(rec1.close.code, 4321);

        const id2 = `${engine}-bye-${caseNo++}`;
        const pageReason = 'page says bye ✓ 😀';
        const own = await run((a) => window.h.clientClose(a.url, a), { url: s.url(id2), code: 4001, reason: pageReason });
        assert.equal(own.code, 4001, `the page's own close event: ${JSON.stringify(own)}`);
        assert.equal(own.wasClean, true);
        const rec2 = s.sockets.get(`/ws/${id2}`);
        await until(() => rec2.close, 5000, 'the server\'s close handler');
        assert.deepEqual(rec2.close, { code: 4001, reason: pageReason }, 'the server\'s close handler');
      });
    });

    // Last: it navigates the page away. The real-app suite drives Meteor's client in each engine
    // through this driver (npm run test:meteor-app); here on a stand-in of its page.
    test(`${engine}, io ${IO}: the real-app suite's page driver (scripts/meteor-app-e2e/browser.js) on a stand-in page`, async (t) => {
      const s = servers[0];
      const base = `http://127.0.0.1:${s.port}/meteor-standin`;
      const p = await openPage(driver, base);
      const wsUrl = `ws://127.0.0.1:${s.port}/ws/meteor-standin`;
      assert.deepEqual(p.sockets.map((x) => [x.url, x.status]), [[wsUrl, 101]], 'the page\'s sockets');
      assert.match(p.sockets[0].extensions, /^permessage-deflate\b/);
      assert.deepEqual(await p.call('echo', 'héllo ✓ 😀'), { via: 'websocket', name: 'echo', args: ['héllo ✓ 😀'] });
      assert.deepEqual((await p.state()).config, { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' });
      assert.deepEqual(p.requests.filter((u) => /\/sockjs\//.test(u)), []);
      // A reload (as a hot code push makes): the sockets of both loads are kept.
      await p.evaluate(() => { window.e2eOld = true; setTimeout(() => location.reload(), 0); return true; });
      await p.waitFor(() => !window.e2eOld && window.e2e && window.e2e.status().connected, null, 'reloaded and connected', 20000);
      assert.deepEqual(p.sockets.map((x) => [x.url, x.status]), [[wsUrl, 101], [wsUrl, 101]], 'sockets across two loads');
      await p.close();
      // The WebSocket constructor throws: ddp-transport-native's fallback script hands over to SockJS.
      const q = await openPage(driver, base, { breakWebSocket: true });
      assert.deepEqual(q.sockets, []);
      const warned = q.consoleLines.find((l) => l.startsWith('ddp-transport-native: new WebSocket() failed'));
      assert.ok(warned, `the fallback's console line: ${JSON.stringify(q.consoleLines)}`);
      assert.ok(q.requests.some((u) => u === `http://127.0.0.1:${s.port}/sockjs/info?cb=standin`), `requests ${JSON.stringify(q.requests)}`);
      assert.deepEqual((await q.state()).config, { DISABLE_SOCKJS: false, DDP_TRANSPORT: 'sockjs' });
      assert.deepEqual(await q.call('echo', 1), { via: 'sockjs', name: 'echo', args: [1] });
      await q.close();
      t.diagnostic(`${engine}: "${warned}"`);
    });
  });
}

test(`negotiated extensions, every engine (io ${IO})`, (t) => {
  for (const [engine, server, offer, answer, page] of negotiated) {
    t.diagnostic(`${engine} | ${server} | offer "${offer}" | answer "${answer}" | page "${page}"`);
  }
});
