'use strict';
// app.stats() after a known exchange.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { scope, waitFor, wsExpectRejected } = require('./helpers/common');

const T = { timeout: 20000 };

const FIELDS = ['connections', 'upgradesAccepted', 'upgradesRejected', 'messagesIn', 'messagesOut', 'bytesIn',
  'bytesOut', 'wireBytesIn', 'wireBytesOut', 'backpressureEvents', 'dropped', 'compressions', 'compressionsReused', 'admission', 'closesByCode'];

test('a fresh app reports all-zero stats with every field present', T, async (t) => {
  const s = scope(t);
  const { app } = await s.app({});
  const st = app.stats();
  assert.deepEqual(Object.keys(st).sort(), [...FIELDS].sort());
  for (const f of FIELDS) {
    if (f === 'closesByCode') assert.deepEqual(st[f], {});
    else if (f === 'admission') assert.deepEqual(st[f], { on: true, admitted: 0, deferred: 0, refused: 0, waiting: 0, window: 16, inFlight: 0 });
    else assert.equal(st[f], 0, f);
  }
});

test('stats count connections, messages and bytes of a known exchange exactly', T, async (t) => {
  const s = scope(t);
  const { app, port } = await s.app({
    upgrade(req, res) {
      if (req.url === '/deny') res.reject(403, 'no'); else res.accept({});
    },
    message(ws, data, isBinary) { ws.send(data, isBinary); },
  });
  // One rejected upgrade.
  const r = await wsExpectRejected(`ws://127.0.0.1:${port}/deny`);
  assert.equal(r.status, 403);

  const c = await s.ws(`ws://127.0.0.1:${port}/ok`, { perMessageDeflate: false });
  // 3 text messages of 3 bytes and 2 binary messages of 10 bytes (all under 126 bytes: 2-byte
  // header, + 4-byte mask from the client).
  for (const m of ['abc', 'def', 'ghi']) await c.send(m);
  for (let i = 0; i < 2; i++) await c.send(Buffer.alloc(10, i));
  const echoes = await c.take(5);
  assert.equal(echoes.length, 5);
  const payload = 3 * 3 + 2 * 10;

  const st = await waitFor(() => {
    const x = app.stats();
    return x.messagesOut === 5 && x.messagesIn === 5 ? x : false;
  }, { label: 'messages counted', describe: () => JSON.stringify(app.stats()) });
  assert.equal(st.connections, 1);
  assert.equal(st.upgradesAccepted, 1);
  assert.equal(st.upgradesRejected, 1);
  assert.equal(st.messagesIn, 5);
  assert.equal(st.messagesOut, 5);
  assert.equal(st.bytesIn, payload);
  assert.equal(st.bytesOut, payload);
  assert.equal(st.wireBytesIn, payload + 5 * 6, 'client frames: 2-byte header + 4-byte mask each');
  assert.equal(st.wireBytesOut, payload + 5 * 2, 'server frames: 2-byte header each');
  assert.equal(st.dropped, 0);
  assert.equal(st.backpressureEvents, 0);
  assert.deepEqual(st.closesByCode, {});

  c.close(1000, 'done');
  await c.waitClose();
  const after = await waitFor(() => {
    const x = app.stats();
    return x.connections === 0 && x.closesByCode['1000'] === 1 ? x : false;
  }, { label: 'close counted', describe: () => JSON.stringify(app.stats()) });
  assert.equal(after.connections, 0);
  assert.deepEqual(after.closesByCode, { 1000: 1 });
  assert.equal(after.messagesIn, 5, 'close frames are not messages');
  assert.equal(after.messagesOut, 5);
  assert.equal(after.dropped, 0);
  assert.equal(after.upgradesAccepted, 1);
});

test('closesByCode counts each code; stats are per app', T, async (t) => {
  const s = scope(t);
  const { app, port } = await s.app({
    message(ws, d) {
      if (d === 'end') ws.end(4005, 'x');
      else if (d === 'kill') ws.close();
    },
  });
  const { app: other } = await s.app({});
  const a = await s.ws(`ws://127.0.0.1:${port}/`);
  const b = await s.ws(`ws://127.0.0.1:${port}/`);
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  const d = await s.ws(`ws://127.0.0.1:${port}/`);
  a.close(1000);
  b.close(4000);
  c.ws.send('end');
  d.ws.send('kill');
  await Promise.all([a, b, c, d].map((x) => x.waitClose()));
  const st = await waitFor(() => {
    const x = app.stats();
    return x.connections === 0 && Object.values(x.closesByCode).reduce((p, q) => p + q, 0) === 4 ? x : false;
  }, { label: 'four closes counted', describe: () => JSON.stringify(app.stats()) });
  assert.deepEqual(st.closesByCode, { 1000: 1, 4000: 1, 4005: 1, 1006: 1 });
  assert.equal(st.upgradesAccepted, 4);
  assert.equal(st.messagesIn, 2);
  assert.equal(st.messagesOut, 0);
  const o = other.stats();
  assert.equal(o.upgradesAccepted, 0);
  assert.deepEqual(o.closesByCode, {});
});
