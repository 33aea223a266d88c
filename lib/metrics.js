'use strict';
// app.stats() in the shapes operators scrape: the Prometheus text exposition format (version
// 0.0.4: HELP and TYPE per family, counters end in _total, closes by code as a label), and
// observable instruments on an OpenTelemetry meter the caller passes (no dependency on
// @opentelemetry/api: the meter's own methods are used).

/** The Content-Type of `metrics()`'s text (Prometheus text format 0.0.4). */
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * The families: [name (without prefix), type, help, read(stats)]. A counter's name ends in
 * `_total`. `closes_total` is labelled by close code; the others are single samples.
 */
const FAMILIES = [
  ['connections', 'gauge', 'Open WebSocket connections.', (s) => s.connections],
  ['upgrades_accepted_total', 'counter', 'WebSocket upgrades answered 101.', (s) => s.upgradesAccepted],
  ['upgrades_rejected_total', 'counter', 'WebSocket upgrades refused (4xx/5xx: bad requests, the upgrade hook, drain, admission control).', (s) => s.upgradesRejected],
  ['messages_in_total', 'counter', 'Messages received.', (s) => s.messagesIn],
  ['messages_out_total', 'counter', 'Messages sent.', (s) => s.messagesOut],
  ['payload_bytes_in_total', 'counter', 'Payload bytes received, after inflating.', (s) => s.bytesIn],
  ['payload_bytes_out_total', 'counter', 'Payload bytes sent, before compressing.', (s) => s.bytesOut],
  ['wire_bytes_in_total', 'counter', 'Bytes received on the wire (frames, compressed).', (s) => s.wireBytesIn],
  ['wire_bytes_out_total', 'counter', 'Bytes sent on the wire (frames, compressed).', (s) => s.wireBytesOut],
  ['backpressure_events_total', 'counter', 'Sends that left bytes buffered in user space (BACKPRESSURE).', (s) => s.backpressureEvents],
  ['dropped_total', 'counter', 'Sends refused on a socket that stayed open (DROPPED).', (s) => s.dropped],
  ['compressions_total', 'counter', 'Messages run through a deflater.', (s) => s.compressions],
  ['compressions_reused_total', 'counter', 'Compressed messages sent with a payload from the compress-once cache.', (s) => s.compressionsReused],
  ['admission_enabled', 'gauge', 'Whether admission control bounds upgrades (1) or not (0).', (s) => (s.admission.on ? 1 : 0)],
  ['admission_admitted_total', 'counter', 'Upgrades admission control let through.', (s) => s.admission.admitted],
  ['admission_deferred_total', 'counter', 'Upgrades admission control held before admitting or refusing them.', (s) => s.admission.deferred],
  ['admission_refused_total', 'counter', 'Upgrades admission control answered 503 with Retry-After.', (s) => s.admission.refused],
  ['admission_waiting', 'gauge', 'Admitted sockets whose first event JS has not taken yet.', (s) => s.admission.waiting],
  ['admission_window', 'gauge', 'New clients that may be in flight at once (admission window).', (s) => s.admission.window],
  ['admission_in_flight', 'gauge', 'New clients admitted that JS has not heard from yet.', (s) => s.admission.inFlight],
];
const CLOSES = ['closes_total', 'counter', 'Connections closed, by close code (1005: none given, 1006: abnormal).'];

const DEFAULT_PREFIX = 'ddp_transport_native_';
const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

function checkPrefix(prefix, where) {
  if (prefix === undefined) return DEFAULT_PREFIX;
  if (typeof prefix !== 'string' || !(prefix === '' || NAME_RE.test(prefix))) {
    throw new TypeError(`${where}: prefix must be a metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*), got ${JSON.stringify(prefix)}`);
  }
  return prefix;
}

/** Prometheus text exposition (0.0.4) of `stats` (the object app.stats() returns). */
function prometheusText(stats, { prefix } = {}) {
  const p = checkPrefix(prefix, 'metrics');
  const out = [];
  for (const [name, type, help, read] of FAMILIES) {
    out.push(`# HELP ${p}${name} ${help}`, `# TYPE ${p}${name} ${type}`, `${p}${name} ${Number(read(stats))}`);
  }
  const [name, type, help] = CLOSES;
  out.push(`# HELP ${p}${name} ${help}`, `# TYPE ${p}${name} ${type}`);
  for (const [code, n] of Object.entries(stats.closesByCode)) out.push(`${p}${name}{code="${Number(code)}"} ${Number(n)}`);
  return out.join('\n') + '\n';
}

/**
 * Observable instruments on an OpenTelemetry `meter` (from @opentelemetry/api's
 * `metrics.getMeter(...)`), read from `stats()` once per collection: counters as observable
 * counters, gauges as observable gauges, closes as one counter with a `code` attribute. Names
 * follow OpenTelemetry's style: `<prefix>connections`, `<prefix>messages.in`, ... (prefix
 * `ddp_transport_native.` by default). Returns a function that removes the callbacks.
 */
function registerOpenTelemetry(meter, stats, { prefix = 'ddp_transport_native.' } = {}) {
  if (!meter || typeof meter.createObservableCounter !== 'function' || typeof meter.createObservableGauge !== 'function') {
    throw new TypeError('registerOpenTelemetry: meter must be an OpenTelemetry Meter (createObservableCounter, createObservableGauge)');
  }
  if (typeof prefix !== 'string') throw new TypeError('registerOpenTelemetry: prefix must be a string');
  const otelName = (name) => prefix + name.replace(/_total$/, '').replace(/_/g, '.');
  const unitOf = (name) => (name.includes('bytes') ? 'By' : '{' + (name.startsWith('connections') || name.startsWith('admission_waiting') || name.startsWith('admission_in_flight') ? 'connection' : 'event') + '}');
  const instruments = FAMILIES.map(([name, type, help, read]) => {
    const opts = { description: help, unit: unitOf(name) };
    const inst = type === 'counter' ? meter.createObservableCounter(otelName(name), opts) : meter.createObservableGauge(otelName(name), opts);
    return { inst, read };
  });
  const closes = meter.createObservableCounter(otelName(CLOSES[0]), { description: CLOSES[2], unit: '{connection}' });
  const observe = (observer) => {
    const s = stats();
    if (!s) return;
    for (const { inst, read } of instruments) observer.observe(inst, Number(read(s)));
    for (const [code, n] of Object.entries(s.closesByCode)) observer.observe(closes, Number(n), { code: Number(code) });
  };
  const all = [...instruments.map((i) => i.inst), closes];
  if (typeof meter.addBatchObservableCallback === 'function') {
    meter.addBatchObservableCallback(observe, all);
    return () => meter.removeBatchObservableCallback(observe, all);
  }
  // A meter without batch callbacks: one callback per instrument, reading stats() once per collection each.
  const cbs = instruments.map(({ inst, read }) => {
    const cb = (r) => { const s = stats(); if (s) r.observe(Number(read(s))); };
    inst.addCallback(cb);
    return [inst, cb];
  });
  const closesCb = (r) => { const s = stats(); if (s) for (const [code, n] of Object.entries(s.closesByCode)) r.observe(Number(n), { code: Number(code) }); };
  closes.addCallback(closesCb);
  cbs.push([closes, closesCb]);
  return () => { for (const [inst, cb] of cbs) inst.removeCallback(cb); };
}

module.exports = { CONTENT_TYPE, prometheusText, registerOpenTelemetry };
