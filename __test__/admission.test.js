'use strict';
// Issue #20, admission control for reconnect storms (crates/native-ws/src/admission.rs): before
// any JS runs, the core bounds the upgrades handed to JS per second and the admitted sockets whose
// open event JS has not taken yet; over the bounds an upgrade is held, and one that cannot fit
// within the hold time is answered 503 with Retry-After. On by default; counted in stats().
// Never refuses when the server is idle. Real sockets throughout.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { scope, waitFor, sleep } = require('./helpers/common');
const { connectSocket, upgradeRequestText, parseHead } = require('./helpers/raw');
const { ADMISSION_DEFAULTS } = require('../lib/constants');

const T = { timeout: 30000 };

function busy(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** Send a WebSocket upgrade on a connected socket; resolves the response head ({status, headers}). */
function answerOf(socket) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const i = buf.indexOf('\r\n\r\n');
      if (i >= 0) { socket.removeAllListeners('data'); resolve(parseHead(buf.subarray(0, i).toString('latin1'))); }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before an answer')));
  });
}

async function storm(port, n) {
  const sockets = await Promise.all(Array.from({ length: n }, () => connectSocket(port)));
  const answers = sockets.map((s) => answerOf(s));
  for (const s of sockets) s.write(upgradeRequestText({ key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
  return { sockets, answers };
}

test('defaults: admission control is on with the core\'s limits, counted in stats(); a quiet server admits a burst of 100, none refused', T, async (t) => {
  assert.deepEqual(ADMISSION_DEFAULTS, { upgradesPerSecond: 0, burst: 1000, maxPendingOpens: 256, maxLagMs: 10, holdMs: 5000, retryAfterSeconds: 2 });
  const s = scope(t);
  const { app, port } = await s.app({ message: (ws, d) => ws.send(d) });
  const t0 = performance.now();
  const { sockets, answers } = await storm(port, 100);
  for (const so of sockets) s.trackSocket(so);
  const heads = await Promise.all(answers);
  assert.ok(heads.every((h) => h.status === 101), 'every upgrade answered 101');
  assert.ok(performance.now() - t0 < 3000, 'none was held for long');
  await waitFor(() => app.stats().connections === 100 && app.stats().admission.waiting === 0 && app.stats().admission.inFlight === 0,
    { label: '100 open, none waiting, none in flight' });
  const a = app.stats().admission;
  // none refused; some may have waited a few ms at the door while this process (the clients live
  // here too) lagged behind its 100 open events
  assert.deepEqual({ ...a, deferred: undefined, window: undefined }, { on: true, admitted: 100, deferred: undefined, refused: 0, waiting: 0, window: undefined, inFlight: 0 });
  // the window is reported; its size depends on how calm this process stayed (it halves when the
  // JS thread lags): how it grows and shrinks is tested in admission/window_tests.rs
  assert.ok(Number.isInteger(a.window) && a.window >= 1, `window ${a.window}`);
});

test('a storm over the rate: a burst passes, then upgrades are held and admitted at the rate, the rest answered 503 with Retry-After; the next quiet upgrade passes at once', T, async (t) => {
  const s = scope(t);
  const opened = [];
  const { app, port } = await s.app({ open: (ws) => opened.push(ws), message: (ws, d) => ws.send(d) }, {
    appOptions: { admission: { upgradesPerSecond: 20, burst: 5, maxPendingOpens: 0, maxLagMs: 0, holdMs: 500, retryAfterSeconds: 7 } },
  });
  // an existing client, connected before the storm, keeps being served
  const old = await s.ws(`ws://127.0.0.1:${port}/`);
  await sleep(300); // its slot is behind us: the bucket is full again
  const { sockets, answers } = await storm(port, 40);
  for (const so of sockets) s.trackSocket(so);
  old.send('still here');
  assert.equal((await old.next()).text, 'still here');
  const heads = await Promise.all(answers);
  const ok = heads.filter((h) => h.status === 101).length;
  const refused = heads.filter((h) => h.status === 503);
  assert.equal(ok + refused.length, 40, `every upgrade answered 101 or 503: ${heads.map((h) => h.status)}`);
  // 5 at once + 20/s over a 500 ms hold ≈ 15 admitted (a slot booked just in time may make 16)
  assert.ok(ok >= 12 && ok <= 17, `admitted ${ok}`);
  assert.ok(refused.every((h) => h.headers['retry-after'] === '7'), 'every refusal says Retry-After: 7');
  const a = app.stats().admission;
  assert.equal(a.refused, refused.length);
  assert.equal(a.admitted, ok + 1);
  assert.ok(a.deferred >= ok - 5, `held before admission: ${a.deferred}`);
  // the storm is over: after a quiet moment the next upgrade is admitted at once
  await sleep(400);
  const t0 = performance.now();
  const late = await s.ws(`ws://127.0.0.1:${port}/`);
  assert.ok(performance.now() - t0 < 200, 'a quiet server admits without holding');
  late.send('hi');
  assert.equal((await late.next()).text, 'hi');
  assert.equal(app.stats().admission.refused, refused.length, 'nothing refused when quiet');
});

test('JS lagging: admitted sockets whose open event waits hold new upgrades until JS takes them; none refused within the hold', T, async (t) => {
  const s = scope(t);
  const { app, port } = await s.app({ message: (ws, d) => ws.send(d) }, {
    appOptions: { admission: { upgradesPerSecond: 0, maxPendingOpens: 2, maxLagMs: 0, holdMs: 5000 } },
  });
  const sockets = await Promise.all(Array.from({ length: 6 }, () => connectSocket(port)));
  for (const so of sockets) s.trackSocket(so);
  const answers = sockets.map((so) => answerOf(so));
  for (const so of sockets) so.write(upgradeRequestText({ key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
  busy(500); // JS takes no open event meanwhile: two are admitted, four held
  const heads = await Promise.all(answers);
  assert.ok(heads.every((h) => h.status === 101), `all admitted once JS caught up: ${heads.map((h) => h.status)}`);
  await waitFor(() => app.stats().connections === 6 && app.stats().admission.waiting === 0, { label: 'six open' });
  const a = app.stats().admission;
  assert.equal(a.admitted, 6);
  assert.equal(a.refused, 0);
  assert.ok(a.deferred >= 3, `held while JS lagged: ${a.deferred}`);
});

test('JS stuck longer than the hold: the held upgrades are answered 503 with Retry-After, the admitted ones open', T, async (t) => {
  const s = scope(t);
  let opened = 0;
  const { app, port } = await s.app({ open: () => opened++, message: (ws, d) => ws.send(d) }, {
    appOptions: { admission: { upgradesPerSecond: 0, maxPendingOpens: 2, maxLagMs: 0, holdMs: 200, retryAfterSeconds: 3 } },
  });
  const sockets = await Promise.all(Array.from({ length: 5 }, () => connectSocket(port)));
  for (const so of sockets) s.trackSocket(so);
  const answers = sockets.map((so) => answerOf(so));
  for (const so of sockets) so.write(upgradeRequestText({ key: 'dGhlIHNhbXBsZSBub25jZQ==' }));
  busy(1000);
  const heads = await Promise.all(answers);
  const statuses = heads.map((h) => h.status).sort();
  assert.deepEqual(statuses, [101, 101, 503, 503, 503]);
  assert.ok(heads.filter((h) => h.status === 503).every((h) => h.headers['retry-after'] === '3'));
  // the open handlers ran (JS took both sockets' first event)
  await waitFor(() => opened === 2, { label: 'two open' });
  assert.equal(app.stats().connections, 2);
  assert.deepEqual({ ...app.stats().admission, deferred: undefined }, { on: true, admitted: 2, deferred: undefined, refused: 3, waiting: 0, window: 16, inFlight: 0 });
});

test('admission: false turns it off (App and the Meteor adapter settings); the uWS surface has none', T, async (t) => {
  const s = scope(t);
  const { app, port } = await s.app({ message: (ws, d) => ws.send(d) }, {
    appOptions: { admission: false },
  });
  const { sockets, answers } = await storm(port, 50);
  for (const so of sockets) s.trackSocket(so);
  assert.ok((await Promise.all(answers)).every((h) => h.status === 101));
  const a = app.stats().admission;
  assert.deepEqual({ on: a.on, admitted: a.admitted, deferred: a.deferred, refused: a.refused }, { on: false, admitted: 50, deferred: 0, refused: 0 });
  // uWS surface: constructed with admission off (uWS.js has none)
  const uWS = require('../lib/uws');
  const u = uWS.App();
  t.after(() => u.close());
  assert.equal(u._inner.stats().admission.on, false);
  // Meteor adapter: on by default, `admission: false` in the settings turns it off
  const { createNativeTransport } = require('../meteor');
  for (const [settings, on] of [[{}, true], [{ admission: false }, false], [{ admission: { upgradesPerSecond: 50 } }, true]]) {
    const server = http.createServer();
    const events = createNativeTransport({ settings }).setup(server, '', {});
    assert.equal(events._app.stats().admission.on, on, JSON.stringify(settings));
    events._app.close();
  }
});

test('bad admission options throw at setup, naming the key', T, async (t) => {
  const { App } = require('..');
  assert.throws(() => App({ admission: { upgradesPerSecond: -1 } }), /App\.admission\.upgradesPerSecond must be an integer from 0 to 1000000, got -1/);
  assert.throws(() => App({ admission: { holdMs: 60000 } }), /App\.admission\.holdMs must be an integer from 0 to 8000/);
  assert.throws(() => App({ admission: { burst: 0 } }), /App\.admission\.burst must be an integer from 1/);
  assert.throws(() => App({ admission: { rate: 5 } }), /Unknown App\.admission option "rate"\. Valid options: upgradesPerSecond, burst, maxPendingOpens, maxLagMs, holdMs, retryAfterSeconds/);
  assert.throws(() => App({ admission: 'on' }), /App\.admission must be true, false or an object/);
  const { createNativeTransport } = require('../meteor');
  const server = http.createServer();
  t.after(() => server.close());
  assert.throws(() => createNativeTransport({ settings: { admission: { holdMs: 'long' } } }).setup(server, '', {}),
    /ddp-server\.native\.admission\.holdMs must be an integer/);
  assert.throws(() => createNativeTransport({ settings: { admission: 5 } }).setup(server, '', {}),
    /ddp-server\.native\.admission must be true, false or an object/);
});
