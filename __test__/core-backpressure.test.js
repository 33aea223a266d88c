'use strict';
// Backpressure: SendStatus sequence, getBufferedAmount bounds, DROPPED, closeOnBackpressureLimit
// (1013), drain, in-order delivery of everything accepted, and bounded server memory.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { scope, waitFor, sleep } = require('./helpers/common');
const { connectRaw, OP } = require('./helpers/raw');
const { runNode, procStats, CHILD_PRELUDE } = require('./helpers/proc');

const T = { timeout: 40000 };
const MSG = 64 * 1024;
const MAXBP = 1024 * 1024;
const FRAME_OVERHEAD = 14; // largest server frame header
const SUCCESS = 1;
const BACKPRESSURE = 0;
const DROPPED = 2;

const tick = () => new Promise((resolve) => setImmediate(resolve));

function seqMessage(seq) {
  const b = Buffer.alloc(MSG, seq & 0xff);
  b.writeUInt32BE(seq, 0);
  return b;
}

/** Check a received binary frame carries `seq` and is complete. */
function checkSeqFrame(f, seq) {
  assert.equal(f.opcode, OP.BINARY, `frame for seq ${seq} should be binary`);
  assert.equal(f.fin, true);
  assert.equal(f.payload.length, MSG, `frame for seq ${seq} should be complete`);
  assert.equal(f.payload.readUInt32BE(0), seq, 'frames out of order / missing');
  assert.equal(f.payload[MSG - 1], seq & 0xff, `payload of seq ${seq} corrupted`);
}

/**
 * Send 64 KiB sequence-numbered messages to a non-reading client, one per event-loop turn, until
 * `stop(status)` says so. Bounded: 2,000 iterations and 20 s.
 */
async function pump(ws, stop) {
  const log = []; // {seq, status, before, after}
  const end = Date.now() + 20000;
  for (let seq = 0; seq < 2000 && Date.now() < end; seq++) {
    const before = ws.getBufferedAmount();
    const status = ws.send(seqMessage(seq), true);
    const after = ws.getBufferedAmount();
    log.push({ seq, status, before, after });
    if (stop(status, log)) break;
    await tick();
  }
  return log;
}

test('send: SUCCESS first, then BACKPRESSURE, then DROPPED past maxBackpressure; drain; accepted frames arrive in order', T, async (t) => {
  const s = scope(t);
  let server;
  const drains = [];
  const closes = [];
  const { app, port } = await s.app({
    maxBackpressure: MAXBP,
    idleTimeout: 0,
    open(ws) { server = ws; },
    drain(ws) { drains.push(ws.getBufferedAmount()); },
    close(ws, code) { closes.push(code); },
  });
  const raw = await connectRaw(port, { path: '/bp' });
  s.trackSocket(raw.socket);
  raw.reader.pause();
  await waitFor(() => server, { label: 'open handler' });

  const log = await pump(server, (status) => status === DROPPED);
  const statuses = log.map((e) => e.status);
  const summary = `statuses: ${JSON.stringify(statuses.slice(0, 5))}... (${statuses.length} sends; first0=${statuses.indexOf(0)}, first2=${statuses.indexOf(2)})`;
  assert.equal(statuses[0], SUCCESS, summary);
  const first0 = statuses.indexOf(BACKPRESSURE);
  const first2 = statuses.indexOf(DROPPED);
  assert.ok(first0 > 0, `never saw BACKPRESSURE; ${summary}`);
  assert.ok(first2 > first0, `DROPPED must come after BACKPRESSURE; ${summary}`);
  for (const e of log) {
    assert.ok([0, 1, 2].includes(e.status), `unexpected status ${e.status}`);
    assert.ok(e.after <= MAXBP + MSG + FRAME_OVERHEAD,
      `buffered ${e.after} exceeds maxBackpressure + one message at seq ${e.seq}`);
    if (e.status === BACKPRESSURE) assert.ok(e.after > 0, `getBufferedAmount() must be > 0 after BACKPRESSURE (seq ${e.seq})`);
  }
  t.diagnostic(`sends: ${statuses.length}; first BACKPRESSURE at #${first0}, first DROPPED at #${first2}; max buffered ${Math.max(...log.map((e) => e.after))}`);
  const dropped = log[first2];
  assert.ok(dropped.before > MAXBP, `DROPPED while only ${dropped.before} bytes were buffered (max ${MAXBP})`);
  assert.ok(dropped.after > 0);
  const accepted = log.filter((e) => e.status !== DROPPED).map((e) => e.seq);
  assert.deepEqual(accepted, Array.from({ length: first2 }, (_, i) => i), 'every send before the first DROPPED was accepted');

  // Still not reading: further sends are dropped too, and nothing closed the socket.
  for (let i = 0; i < 3; i++) assert.equal(server.send(seqMessage(100000 + i), true), DROPPED);
  assert.equal(server.closed, false);
  assert.deepEqual(drains, [], 'no drain while the client does not read');

  // Start reading: drain fires once buffered bytes are back to 0.
  raw.reader.resume();
  await waitFor(() => drains.length > 0, { timeout: 15000, label: 'drain handler' });
  assert.equal(drains[0], 0, 'getBufferedAmount() inside drain should be 0');
  assert.equal(server.getBufferedAmount(), 0);
  assert.equal(server.send('END', false), SUCCESS);

  const frames = await raw.reader.readUntil((f) => f.opcode === OP.TEXT, 20000);
  const data = frames.slice(0, -1);
  assert.equal(frames[frames.length - 1].payload.toString(), 'END');
  assert.equal(data.length, accepted.length, `received ${data.length} data frames, ${accepted.length} were accepted`);
  data.forEach((f, i) => checkSeqFrame(f, accepted[i]));
  assert.deepEqual(closes, []);
  const st = app.stats();
  assert.ok(st.dropped >= 4, `stats.dropped ${st.dropped} should count the 4 dropped sends`);
  assert.ok(st.backpressureEvents >= 1, 'stats.backpressureEvents should count the backpressure');
});

test('closeOnBackpressureLimit: the socket is closed (1013) instead of dropping; send afterwards returns DROPPED', T, async (t) => {
  const s = scope(t);
  let server;
  const closes = [];
  const drains = [];
  const { port } = await s.app({
    maxBackpressure: MAXBP,
    closeOnBackpressureLimit: true,
    idleTimeout: 0,
    open(ws) { server = ws; },
    drain() { drains.push(1); },
    close(ws, code, reason) { closes.push({ code, reason, closed: ws.closed }); },
  });
  const raw = await connectRaw(port, { path: '/bp-close' });
  s.trackSocket(raw.socket);
  raw.reader.pause();
  await waitFor(() => server, { label: 'open handler' });

  const log = await pump(server, (status) => status === DROPPED || closes.length > 0 || server.closed);
  const statuses = log.map((e) => e.status);
  assert.equal(statuses[0], SUCCESS);
  assert.ok(statuses.includes(BACKPRESSURE), 'BACKPRESSURE expected before the limit');
  for (const e of log) {
    assert.ok(e.after <= MAXBP + MSG + FRAME_OVERHEAD, `buffered ${e.after} exceeds the bound at seq ${e.seq}`);
  }
  await waitFor(() => closes.length > 0, { timeout: 10000, label: 'close handler after the backpressure limit' });
  assert.equal(closes[0].code, 1013, `close handler code ${closes[0].code}, expected 1013`);
  assert.equal(closes[0].closed, true);
  assert.equal(server.closed, true);
  assert.equal(server.send(seqMessage(9999), true), DROPPED);
  assert.equal(server.send('text after close'), DROPPED);
  assert.equal(server.getBufferedAmount(), 0);

  // The client, reading now, gets an in-order prefix of what was accepted and then the end.
  const accepted = log.filter((e) => e.status !== DROPPED).map((e) => e.seq);
  t.diagnostic(`sends: ${statuses.length}, statuses ${JSON.stringify(statuses.slice(-5))} at the end`);
  raw.reader.resume();
  const ci = await raw.reader.waitClose(20000);
  const data = ci.frames.filter((f) => f.opcode === OP.BINARY);
  assert.ok(data.length <= accepted.length);
  data.forEach((f, i) => checkSeqFrame(f, accepted[i]));
  if (ci.code !== null) assert.equal(ci.code, 1013, 'a close frame, if any, carries 1013');
  await raw.reader.waitEnd(10000);
  await sleep(100);
  assert.equal(closes.length, 1, 'close handler exactly once');
  assert.deepEqual(drains, []);
});

test('getBufferedAmount is 0 for a reading client after its sends are flushed', T, async (t) => {
  const s = scope(t);
  let server;
  const { port } = await s.app({ idleTimeout: 0, open(ws) { server = ws; } });
  const raw = await connectRaw(port);
  s.trackSocket(raw.socket);
  await waitFor(() => server, { label: 'open handler' });
  assert.equal(server.getBufferedAmount(), 0);
  for (let i = 0; i < 10; i++) assert.equal(server.send(seqMessage(i), true), SUCCESS);
  const frames = await raw.reader.readUntil((f) => f.opcode === OP.BINARY && f.payload.readUInt32BE(0) === 9, 10000);
  frames.forEach((f, i) => checkSeqFrame(f, i));
  await waitFor(() => server.getBufferedAmount() === 0, { label: 'buffered back to 0' });
});

const RSS_CHILD = `${CHILD_PRELUDE}
const MSG = 64 * 1024, N = 1600; // 100 MiB per client
const msg = Buffer.alloc(MSG, 0x61);
const app = App();
const report = {};
function behavior(closeOnLimit) {
  return {
    maxBackpressure: 1024 * 1024, closeOnBackpressureLimit: closeOnLimit, idleTimeout: 0,
    open(ws) {
      const url = ws.getUrl();
      const r = report[url] = { counts: [0, 0, 0], close: null, done: false };
      const finish = () => { r.done = true; out({ type: 'done', url, counts: r.counts }); };
      if (url.endsWith('/sync')) {
        for (let i = 0; i < N; i++) r.counts[ws.send(msg, true)]++; // one JS tick: all corked
        finish();
      } else {
        let i = 0;
        const step = () => {
          for (let k = 0; k < 16 && i < N; k++, i++) r.counts[ws.send(msg, true)]++;
          if (i < N) setImmediate(step); else finish();
        };
        step();
      }
    },
    close(ws, code) { out({ type: 'close', url: ws.getUrl(), code }); },
  };
}
app.ws('/close/*', behavior(true));
app.ws('/drop/*', behavior(false));
app.listen('127.0.0.1', 0, (tok) => out({ type: 'listening', port: tok && tok.port, rss: process.memoryUsage().rss }));
onCommand((m) => { if (m.cmd === 'exit') { app.close(); out({ type: 'bye', id: m.id }); setImmediate(() => process.exit(0)); } });
`;

test('server RSS stays bounded (< 200 MiB) while 4 × 100 MiB go to non-reading clients', { timeout: 60000 }, async (t) => {
  const s = scope(t);
  const child = s.trackChild(runNode(RSS_CHILD, { timeoutMs: 55000 }));
  const ready = await child.waitMessage((m) => m.type === 'listening', 10000, 'child listening');
  assert.ok(ready.port > 0, `child failed to listen: ${JSON.stringify(ready)}`);
  let peak = procStats(child.pid).rss;
  const sampler = setInterval(() => {
    try { peak = Math.max(peak, procStats(child.pid).rss); } catch { /* exited */ }
  }, 20);
  t.after(() => clearInterval(sampler));
  const paths = ['/close/sync', '/close/async', '/drop/sync', '/drop/async'];
  const raws = [];
  for (const p of paths) {
    const r = await connectRaw(ready.port, { path: p });
    s.trackSocket(r.socket);
    r.reader.pause();
    raws.push(r);
  }
  for (const p of paths) await child.waitMessage((m) => m.type === 'done' && m.url === p, 30000, `done ${p}`);
  for (const p of ['/close/sync', '/close/async']) {
    const c = await child.waitMessage((m) => m.type === 'close' && m.url === p, 10000, `close ${p}`);
    assert.equal(c.code, 1013, `${p}: close code`);
  }
  await sleep(200);
  const now = procStats(child.pid).rss;
  peak = Math.max(peak, now);
  clearInterval(sampler);
  const MiB = 1024 * 1024;
  for (const p of ['/drop/sync', '/drop/async']) {
    const d = child.messages.find((m) => m.type === 'done' && m.url === p);
    assert.ok(d.counts[2] > 0, `${p}: some sends must be DROPPED (${d.counts})`);
    const queued = (d.counts[0] + d.counts[1]) * 64 * 1024;
    assert.ok(queued < 64 * MiB, `${p}: ${queued} bytes accepted for a client that never reads`);
  }
  t.diagnostic(`child RSS: baseline ${(ready.rss / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB; `
    + paths.map((p) => `${p} ${JSON.stringify(child.messages.find((m) => m.type === 'done' && m.url === p).counts)}`).join(', '));
  assert.ok(peak < 200 * MiB, `peak RSS ${(peak / MiB).toFixed(1)} MiB (baseline ${(ready.rss / MiB).toFixed(1)} MiB)`);
  for (const r of raws) r.socket.destroy();
  await child.request({ cmd: 'exit' }, 10000).catch(() => {});
  await child.kill();
});
