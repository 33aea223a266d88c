'use strict';
// Issue #20, item 5: app.metrics() in the Prometheus text exposition format, read back with a real
// Prometheus text parser (parse-prometheus-text-format, a port of Prometheus's own Go parser), and
// the OpenTelemetry helper against a meter implementing the @opentelemetry/api Meter surface.
// Same for the Meteor adapter.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const parse = require('parse-prometheus-text-format');
const { scope, waitFor } = require('./helpers/common');
const { metricsContentType } = require('..');

const T = { timeout: 20000 };

function families(text) {
  const out = {};
  for (const f of parse(text)) out[f.name] = f;
  return out;
}

test('app.metrics(): Prometheus text format with HELP and TYPE, counters and gauges that follow stats(), closes by code as a label', T, async (t) => {
  const s = scope(t);
  const { app, port } = await s.app({ message: (ws, d) => ws.send(d) });
  const a = await s.ws(`ws://127.0.0.1:${port}/`);
  const b = await s.ws(`ws://127.0.0.1:${port}/`);
  a.send('hello');
  assert.equal((await a.next()).text, 'hello');
  b.ws.close(4001, 'bye');
  await waitFor(() => app.stats().closesByCode['4001'] === 1, { label: 'close 4001 counted' });
  const text = app.metrics();
  assert.match(text, /^# HELP ddp_transport_native_connections /m);
  const f = families(text);
  const p = 'ddp_transport_native_';
  const stats = app.stats();
  const one = (name) => Number(f[p + name].metrics[0].value);
  assert.equal(f[p + 'connections'].type, 'GAUGE');
  assert.equal(one('connections'), 1);
  assert.equal(f[p + 'messages_in_total'].type, 'COUNTER');
  assert.equal(one('messages_in_total'), 1);
  assert.equal(one('messages_out_total'), 1);
  assert.equal(one('payload_bytes_in_total'), 5);
  assert.equal(one('upgrades_accepted_total'), 2);
  assert.equal(one('wire_bytes_in_total'), stats.wireBytesIn);
  assert.equal(one('admission_enabled'), 1);
  assert.equal(one('admission_admitted_total'), 2);
  assert.equal(one('admission_refused_total'), 0);
  assert.ok(f[p + 'upgrades_rejected_total'].help.length > 0, 'every family has a HELP text');
  for (const fam of Object.values(f)) {
    assert.ok(fam.help, `${fam.name} has HELP`);
    if (fam.type === 'COUNTER') assert.match(fam.name, /_total$/);
  }
  const closes = f[p + 'closes_total'];
  assert.equal(closes.type, 'COUNTER');
  assert.deepEqual(closes.metrics.map((m) => [m.labels.code, Number(m.value)]), [['4001', 1]]);
  // a custom prefix, and a bad one named
  assert.ok(families(app.metrics({ prefix: 'ws_' })).ws_connections);
  assert.throws(() => app.metrics({ prefix: 'bad prefix' }), /metrics: prefix must be a metric name prefix/);
  assert.equal(metricsContentType, 'text/plain; version=0.0.4; charset=utf-8');
});

test('the Meteor adapter exposes the same metrics and OpenTelemetry helper', T, async (t) => {
  const { createNativeTransport } = require('../meteor');
  const server = http.createServer();
  const events = createNativeTransport({ settings: {} }).setup(server, '', {});
  t.after(() => events._app.close());
  const f = families(events.metrics());
  assert.equal(Number(f.ddp_transport_native_connections.metrics[0].value), 0);
  assert.equal(typeof events.registerOpenTelemetry, 'function');
  assert.deepEqual(Object.keys(events).filter((k) => k === 'metrics'), [], 'not enumerable');
});

/** A meter with the @opentelemetry/api surface the helper uses; `collect()` runs the callbacks. */
function fakeMeter({ batch }) {
  const instruments = [];
  const batchCbs = [];
  const make = (kind) => (name, opts) => {
    const inst = { kind, name, opts, cbs: [], addCallback(cb) { this.cbs.push(cb); }, removeCallback(cb) { this.cbs = this.cbs.filter((c) => c !== cb); } };
    instruments.push(inst);
    return inst;
  };
  const meter = {
    createObservableCounter: make('counter'),
    createObservableGauge: make('gauge'),
    instruments,
    collect() {
      const seen = [];
      for (const inst of instruments) {
        for (const cb of inst.cbs) cb({ observe: (v, attrs) => seen.push([inst.name, v, attrs]) });
      }
      for (const { cb } of batchCbs) cb({ observe: (inst, v, attrs) => seen.push([inst.name, v, attrs]) });
      return seen;
    },
  };
  if (batch) {
    meter.addBatchObservableCallback = (cb, insts) => batchCbs.push({ cb, insts });
    meter.removeBatchObservableCallback = (cb) => { const i = batchCbs.findIndex((b) => b.cb === cb); if (i >= 0) batchCbs.splice(i, 1); };
  }
  return meter;
}

for (const batch of [true, false]) {
  test(`registerOpenTelemetry (${batch ? 'batch callback' : 'per-instrument callbacks'}): observable counters and gauges read from stats(), closes with a code attribute; unregister removes them`, T, async (t) => {
    const s = scope(t);
    const { app, port } = await s.app({ message: (ws, d) => ws.send(d) });
    const c = await s.ws(`ws://127.0.0.1:${port}/`);
    c.send('x');
    await c.next();
    c.ws.close(1000);
    await waitFor(() => app.stats().closesByCode['1000'] === 1, { label: 'close counted' });
    const meter = fakeMeter({ batch });
    const off = app.registerOpenTelemetry(meter);
    const byName = Object.fromEntries(meter.instruments.map((i) => [i.name, i]));
    assert.equal(byName['ddp_transport_native.connections'].kind, 'gauge');
    assert.equal(byName['ddp_transport_native.messages.in'].kind, 'counter');
    assert.equal(byName['ddp_transport_native.wire.bytes.out'].opts.unit, 'By');
    const seen = meter.collect();
    const value = (n) => seen.find(([name]) => name === n)[1];
    assert.equal(value('ddp_transport_native.messages.in'), 1);
    assert.equal(value('ddp_transport_native.upgrades.accepted'), 1);
    assert.deepEqual(seen.filter(([n]) => n === 'ddp_transport_native.closes').map(([, v, a]) => [v, a]), [[1, { code: 1000 }]]);
    off();
    assert.deepEqual(meter.collect(), []);
    assert.throws(() => app.registerOpenTelemetry({}), /meter must be an OpenTelemetry Meter/);
  });
}

test('app.metrics() also parses with Python prometheus_client\'s parser (when python3 has it)', T, async (t) => {
  const { spawnSync } = require('node:child_process');
  const probe = spawnSync('python3', ['-c', 'import prometheus_client'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    t.skip('python3 with prometheus_client not available (pip install prometheus_client)');
    return;
  }
  const s = scope(t);
  const { app, port } = await s.app({ message: (ws, d) => ws.send(d) });
  const c = await s.ws(`ws://127.0.0.1:${port}/`);
  c.ws.close(4002);
  await waitFor(() => app.stats().closesByCode['4002'] === 1, { label: 'close counted' });
  const text = app.metrics();
  const py = `import sys, json
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "help": f.documentation, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(out))`;
  const r = spawnSync('python3', ['-c', py], { input: text, encoding: 'utf8', timeout: 15000 });
  assert.equal(r.status, 0, r.stderr);
  const f = JSON.parse(r.stdout);
  // prometheus_client names a counter family without its _total suffix
  assert.equal(f.ddp_transport_native_connections.type, 'gauge');
  assert.equal(f.ddp_transport_native_upgrades_accepted.type, 'counter');
  assert.deepEqual(f.ddp_transport_native_upgrades_accepted.samples, [['ddp_transport_native_upgrades_accepted_total', {}, 1]]);
  assert.deepEqual(f.ddp_transport_native_closes.samples, [['ddp_transport_native_closes_total', { code: '4002' }, 1]]);
  for (const [name, fam] of Object.entries(f)) assert.ok(fam.help, `${name} has HELP`);
});
