'use strict';
// Issue #20, fairness: the JS work the bridge delivers is bounded per event-loop turn (src/bridge.rs,
// crates/native-ws/src/pacing.rs), so timers, other I/O and setImmediate run between batches at
// any load, and no event is lost or reordered by the yielding.
//
// The saturation tests run the server in a child process (helpers/fairness-server.js) offered more
// echo load than one core serves (helpers/fairness-load.js, 50 `ws` clients × 4 in flight, each
// message costing the server 50 µs of synchronous JS, 250 µs compressed), and probe it for 4 s:
// a 10 ms setInterval's lateness inside the server, and a plain HTTP GET every 50 ms from here.
// Before the fix the interval fired up to 3.2 s late (own listener, no compression) on this box.
// Bounds (issue #20): lateness p99 < 50 ms and max < 200 ms; HTTP answered, p95 < 100 ms, max
// < 300 ms. Each bound is widened by what an idle control process running the same 10 ms
// interval saw late in the same window (helpers/fairness.js controlProbe): on this 2-core box
// shared with other builds (load average up to 8 measured) a runnable process may wait that long
// for a core whatever its event loop does; on a quiet machine the control's lateness is ~1 ms and
// the bounds are the issue's. The server must really be saturated (event loop busy ≥ 80 % of the
// window), or the bounds would prove nothing.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { scope, waitFor } = require('./helpers/common');
const { measureFairness, controlProbe, gapMeter } = require('./helpers/fairness');

function busy(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test('a burst far larger than one turn is delivered complete and in order, with timers and setImmediate running between turns', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const seen = new Map(); // client tag → last sequence number seen
  let outOfOrder = 0;
  let handled = 0;
  const { port } = await s.app({
    message(ws, data) {
      const [tag, seq] = data.split(':');
      const last = seen.get(tag) ?? -1;
      if (Number(seq) !== last + 1) outOfOrder++;
      seen.set(tag, Number(seq));
      handled++;
      busy(0.2); // 200 µs per message: 4,000 messages are ~0.8 s of JS, ~160 turns of 5 ms
      ws.send(data);
    },
  });
  const CLIENTS = 4;
  const PER = 1000;
  const clients = [];
  for (let c = 0; c < CLIENTS; c++) clients.push(await s.ws(`ws://127.0.0.1:${port}/`));
  const gaps = gapMeter(10);
  let immediates = 0;
  let spinning = true;
  const spin = () => { immediates++; if (spinning) setImmediate(spin); };
  setImmediate(spin);
  t.after(() => { gaps.stop(); spinning = false; });
  const control = controlProbe();
  t.after(() => control.kill());
  await control.ready;
  const echoed = clients.map(() => []);
  clients.forEach((c, i) => c.ws.on('message', (d) => echoed[i].push(d.toString())));
  const t0 = performance.now();
  for (let k = 0; k < PER; k++) clients.forEach((c, i) => c.ws.send(`c${i}:${k}`));
  // The 4,000 client sends above ran synchronously in this process (the clients live here): the
  // gaps measured from now on are the server's deliveries.
  gaps.reset();
  await waitFor(() => handled === CLIENTS * PER && echoed.every((e) => e.length === PER), {
    timeout: 45000, label: 'every message handled and echoed', describe: () => `handled ${handled}`,
  });
  const took = performance.now() - t0;
  spinning = false;
  gaps.stop();
  assert.equal(outOfOrder, 0, 'each client\'s messages reach the handler in order');
  echoed.forEach((e, i) => assert.deepEqual(e, Array.from({ length: PER }, (_, k) => `c${i}:${k}`)));
  // ~0.8 s of handler work: a 10 ms interval fires many times during it, never starved for long
  assert.ok(took > 500, `the burst took ${took.toFixed(0)} ms (expected ≥ 0.8 s of handler work)`);
  assert.ok(gaps.ticks >= took / 10 / 4, `interval fired ${gaps.ticks} times in ${took.toFixed(0)} ms`);
  const machine = await control.report();
  assert.ok(gaps.maxGap < 200 + machine.max, `longest gap between interval ticks ${gaps.maxGap.toFixed(1)} ms (an idle process's max lateness meanwhile: ${machine.max.toFixed(1)} ms)`);
  assert.ok(immediates >= 50, `setImmediate ran ${immediates} times during the burst`);
});

// Plus the Meteor adapter with its work in promise jobs, as Meteor 3's async method handlers run:
// Node runs a delivery's promise jobs before it calls the bridge again in the same wakeup, so the
// turn's budget must count them (before the fix: timers up to 457 ms late on Meteor's livedata).
const SATURATED = [
  ...['listen', 'meteor'].flatMap((mode) => [false, true].map((compress) => ({ mode, compress, deferred: false }))),
  { mode: 'meteor', compress: false, deferred: true },
];
for (const { mode, compress, deferred } of SATURATED) {
  const name = `${mode === 'listen' ? 'own listener' : 'Meteor adapter (attach)'}, ${compress ? 'permessage-deflate' : 'no compression'}${deferred ? ', work in promise jobs' : ''}`;
  test(`saturated ${name}: a 10 ms timer stays on time and a plain HTTP GET is answered`, { timeout: 90000 }, async () => {
    const m = await measureFairness({ mode, compress, deferred, seconds: 4 });
    const l = m.lateness;
    const h = m.http;
    const info = JSON.stringify(m);
    assert.ok(m.utilization >= 0.8, `the server was not saturated (event loop busy ${(m.utilization * 100).toFixed(0)}%): ${info}`);
    assert.ok(l.n >= 50, `the interval fired ${l.n} times in 4 s: ${info}`);
    const noise = m.machine; // an idle process's lateness in the same window
    assert.ok(l.p99 < 50 + noise.p99, `timer lateness p99 ${l.p99.toFixed(1)} ms: ${info}`);
    assert.ok(l.max < 200 + noise.max, `timer lateness max ${l.max.toFixed(1)} ms: ${info}`);
    assert.equal(h.failed, 0, `every HTTP GET answered: ${info}`);
    assert.ok(h.n >= 20, `HTTP probes ${h.n}: ${info}`);
    assert.ok(h.p95 < 100 + noise.p99, `HTTP GET p95 ${h.p95.toFixed(1)} ms: ${info}`);
    assert.ok(h.max < 300 + noise.max, `HTTP GET max ${h.max.toFixed(1)} ms: ${info}`);
  });
}

test('expensive handlers inside one read (40 pipelined messages × 5 ms of JS): the turn stops inside the batch, timers run every ~5 ms, every message is handled in order', { timeout: 60000 }, async (t) => {
  const { connectRaw, textFrame } = require('./helpers/raw');
  const s = scope(t);
  const seen = [];
  const { port } = await s.app({
    message(ws, data) {
      busy(5); // a DDP login, say
      seen.push(data);
    },
  });
  const c = await connectRaw(port);
  s.trackSocket(c.socket);
  const control = controlProbe();
  t.after(() => control.kill());
  await control.ready;
  const gaps = gapMeter(5);
  t.after(() => gaps.stop());
  // one write: the server reads them in one read, and the bridge delivers them as one batch
  c.socket.write(Buffer.concat(Array.from({ length: 40 }, (_, i) => textFrame(`m${i}`))));
  await waitFor(() => seen.length === 40, { timeout: 30000, label: '40 messages handled' });
  gaps.stop();
  const machine = await control.report();
  assert.deepEqual(seen, Array.from({ length: 40 }, (_, i) => `m${i}`));
  t.diagnostic(`longest gap ${gaps.maxGap.toFixed(1)} ms; control ${machine.max.toFixed(1)} ms`);
  // 200 ms of handlers: without the in-batch stop the interval would wait for all of them
  assert.ok(gaps.maxGap < 60 + machine.max, `longest gap between 5 ms ticks ${gaps.maxGap.toFixed(1)} ms (an idle process's max lateness meanwhile: ${machine.max.toFixed(1)} ms)`);
});
