'use strict';
// What the runner runs: the transports (server commands, availability) and the workloads (load
// generator command lines, derived metrics), plus the headline columns the report shows.

const fs = require('node:fs');
const path = require('node:path');

const NODE = process.execPath;

function nativeAddonMissing(root) {
  const hasNode = fs.readdirSync(root).some((f) => f.endsWith('.node'));
  if (!hasNode || !fs.existsSync(path.join(root, 'index.js'))) return 'addon not built (npm run build)';
  return null;
}

function ddpMissing(root) {
  return fs.existsSync(path.join(root, 'demo', 'ddp-session.js')) ? null : 'demo/ddp-session.js missing';
}

function uwsMissing(root) {
  return fs.existsSync(path.join(root, 'node_modules', 'uws-pack', 'package.json')) ? null : 'uws-pack not installed';
}

// --expose-gc: the runner asks for one full GC before its last RSS sample (see bench/run.js).
const nodeServer = (file, ...args) => () => [NODE, '--expose-gc', path.join('bench', 'servers', file), ...args];

const TRANSPORTS = [
  { name: 'sockjs', description: "sockjs 0.3.24 + faye-websocket + permessage-deflate2 (Meteor's default transport; /websocket rewritten to /sockjs/websocket)",
    command: nodeServer('sockjs.js'), unavailable: ddpMissing, compression: true },
  { name: 'ws', description: 'ws 8 WebSocketServer on a Node http.Server at /websocket',
    command: nodeServer('ws.js'), unavailable: ddpMissing, compression: true },
  { name: 'uws-direct', description: 'uWebSockets.js (uws-pack 20.0.8) listening on the port itself',
    command: nodeServer('uws-direct.js'), unavailable: (r) => ddpMissing(r) || uwsMissing(r), compression: true },
  { name: 'uws-raw', description: 'uWebSockets.js (uws-pack 20.0.8) listening on the port itself, its handlers calling the DDP session directly (ddp.open / session.receive / session.closed: no Meteor-contract shim)',
    command: nodeServer('uws-raw.js'), unavailable: (r) => ddpMissing(r) || uwsMissing(r), compression: true },
  { name: 'http-floor', description: "Node's http.Server with a hand-written minimal upgrade (101, one `connected` frame; no WebSocket library, no DDP): Node's own per-connection work, the floor of any transport attached to the app's http.Server",
    command: nodeServer('http-floor.js'), unavailable: () => null, workloads: ['burst'] },
  { name: 'uws-publish', description: "uWebSockets.js direct, the fan-out through uWS's own pub/sub: one app.publish per message (compressed once), not per-socket sends",
    command: nodeServer('uws-publish.js'), unavailable: (r) => ddpMissing(r) || uwsMissing(r), compression: true,
    workloads: ['fanout', 'fan-out-4k', 'compressed-fan-out'] },
  { name: 'native-publish', description: "the same uWS.js program as uws-publish on ddp-transport-native's uWS.js compat surface (require('ddp-transport-native/uws')): one app.publish per message, encoded once",
    command: nodeServer('uws-publish.js', '--native'), unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true,
    workloads: ['fanout', 'fan-out-4k', 'compressed-fan-out'] },
  { name: 'uws-proxied', description: "Meteor 3.5's uws design: uWS on an internal loopback port, Node's http.Server piping /websocket upgrades to it",
    command: nodeServer('uws-proxied.js'), unavailable: (r) => ddpMissing(r) || uwsMissing(r), compression: true },
  { name: 'native-attach', description: "ddp-transport-native through its Meteor adapter (meteor/index.js), attached to a Node http.Server (same port)",
    command: nodeServer('native-attach.js'),
    unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r) || (fs.existsSync(path.join(r, 'meteor', 'index.js')) ? null : 'meteor/index.js missing'),
    compression: true },
  // `env`: set for the server process. The pipe path is what Windows runs (Node has no socket fd
  // there) and TLS everywhere: the ratio to native-attach is its cost (docs/windows.md).
  { name: 'native-attach-pipe', description: "native-attach with DDP_TRANSPORT_NATIVE_SAME_PORT=pipe: every upgrade piped through Node to the core's internal loopback listener (Windows' path) instead of adopting the fd",
    command: nodeServer('native-attach.js'), env: { DDP_TRANSPORT_NATIVE_SAME_PORT: 'pipe' },
    unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true,
    workloads: ['burst', 'rtt', 'throughput', 'throughput-coalesced', 'fanout', 'idle', 'app-rate'] },
  // Upgrades through Node's HTTP parser and the server's upgrade event (no first look at new
  // connections): the ratio to native-attach is what the first look saves.
  { name: 'native-attach-upgrade', description: "native-attach with DDP_TRANSPORT_NATIVE_SAME_PORT=upgrade: every upgrade parsed by Node's HTTP layer and handed over in the server's upgrade event, instead of taken at the core's first look at the connection",
    command: nodeServer('native-attach.js'), env: { DDP_TRANSPORT_NATIVE_SAME_PORT: 'upgrade' },
    unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true,
    workloads: ['burst', 'rtt', 'idle', 'app-rate'] },
  { name: 'native-listen', description: "ddp-transport-native's own listener: App().ws('/*') + a thin socket shim",
    command: nodeServer('native-listen.js'), unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true },
  // The native rows run the default I/O mode (inline, on Linux); these run the threaded one (an I/O
  // thread reads the sockets), side by side (docs/benchmarks.md, the I/O modes).
  { name: 'native-listen-threads', description: 'native-listen with DDP_TRANSPORT_NATIVE_IO=threads: the sockets read on an I/O thread, messages handed to the JS thread in batches',
    command: nodeServer('native-listen.js'), env: { DDP_TRANSPORT_NATIVE_IO: 'threads' },
    unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true },
  { name: 'native-attach-threads', description: 'native-attach with DDP_TRANSPORT_NATIVE_IO=threads',
    command: nodeServer('native-attach.js'), env: { DDP_TRANSPORT_NATIVE_IO: 'threads' },
    unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true },
  { name: 'native-raw', description: "ddp-transport-native's own listener wired as uws-raw wires uWS.js: its handlers call the DDP session directly (no shim); the like-for-like row for uws-raw",
    command: nodeServer('native-raw.js'), unavailable: (r) => ddpMissing(r) || nativeAddonMissing(r), compression: true },
  // Before/after comparisons: with BENCH_BASE_PKG=<another checkout, built>, the native servers run
  // that checkout's addon too (`native-attach@base`, `native-listen@base`, `native-publish@base`),
  // interleaved with this one's in every round.
  ...(process.env.BENCH_BASE_PKG ? [
    { name: 'native-attach@base', description: `native-attach with the addon and adapter of ${process.env.BENCH_BASE_PKG}`,
      command: nodeServer('native-attach.js', '--pkg', process.env.BENCH_BASE_PKG), unavailable: ddpMissing, compression: true },
    { name: 'native-listen@base', description: `native-listen with the addon of ${process.env.BENCH_BASE_PKG}`,
      command: nodeServer('native-listen.js', '--pkg', process.env.BENCH_BASE_PKG), unavailable: ddpMissing, compression: true },
    { name: 'native-publish@base', description: `native-publish with the addon and uWS.js surface of ${process.env.BENCH_BASE_PKG}`,
      command: nodeServer('uws-publish.js', '--native', '--pkg', process.env.BENCH_BASE_PKG), unavailable: ddpMissing, compression: true,
      workloads: ['fanout', 'fan-out-4k', 'compressed-fan-out'] },
  ] : []),
  // `compression`: the server turns permessage-deflate on (Meteor's defaults) under BENCH_COMPRESS=1.
  // rust-echo ignores that variable; `compressArgs` is what it needs instead (its --compress is the
  // core's DeflateConfig::default(), i.e. Meteor's defaults). Only idle_deflate uses it: the
  // `compressed` workload keeps native-rust n/a, as before.
  { name: 'native-rust', description: 'a pure-Rust DDP responder on the same core (no JS): the ceiling',
    command: (root) => [path.join(root, 'target', 'release', 'rust-echo')],
    unavailable: (r) => (fs.existsSync(path.join(r, 'target', 'release', 'rust-echo')) ? null : 'target/release/rust-echo not built'),
    compression: false, compressArgs: ['--compress'] },
];

/** Workload sizes: full run, or --smoke (seconds long; proves every server and workload works). */
function config(opts) {
  const smoke = !!opts.smoke;
  const seconds = opts.seconds || (smoke ? 1 : 10);
  return {
    smoke,
    burstClients: 100,
    rttCalls: smoke ? 50 : 1000,
    tpClients: 50,
    tpInflight: 4,
    tpSeconds: seconds,
    idleClients: smoke ? 20 : 5000,
    // the idle workload's clients connect this many at a time (a reconnect storm's pace)
    idleConcurrency: 200,
    fanoutSubscribers: smoke ? 20 : 500,
    fanoutWrites: smoke ? 20 : 200,
    compClients: smoke ? 10 : 50,
    compInflight: 4,
    compSeconds: seconds,
    compPayload: 2048,
    docBytes: 4096,
    rssAfterS: smoke ? 0.5 : 5,
    appRateClients: 150,
    appRate: 311,
    appSatClients: 50,
    appSatInflight: 4,
    appSeconds: seconds,
  };
}

const r1 = (x) => Math.round(x * 10) / 10;
const r3 = (x) => Math.round(x * 1000) / 1000;
const fmtInt = (x) => Math.round(x).toLocaleString('en-US');
const perUnit = (rec, n) => (rec.window && n ? r3((rec.window.server_cpu_s * 1e6) / n) : null);
const lg = (cfg, ...args) => [cfg.loadgen, args.map(String)];

/** idle and idle_deflate: (server RSS held − RSS before) / connections; RSS `rssAfterS` after they left. */
function idleMetrics(rec) {
  const { before_kib: a, held_kib: b, after_kib: c, after_gc_kib: g, v8_heap_after_gc_kib: h,
    held_gc_kib: hg, v8_used_held_gc_kib: uh, v8_used_before_kib: ub, v8_total_held_gc_kib: th, v8_total_before_kib: tb } = rec.rss || {};
  const n = rec.loadgen.connected;
  return {
    kib_per_conn: a != null && b != null && n ? r3((b - a) / n) : null,
    kib_per_conn_gc: a != null && hg != null && n ? r3((hg - a) / n) : null,
    // V8's share, both after a full GC: its heap in use per connection (live JS objects), and its
    // heap's growth per connection (committed: pages the set-up's garbage made V8 take, which it
    // keeps until its memory reducer runs); the rest of kib_per_conn_gc is native memory (Rust,
    // Node's C++ objects, the allocator)
    v8_kib_per_conn: ub != null && uh != null && n ? r3((uh - ub) / n) : null,
    v8_committed_kib_per_conn: tb != null && th != null && n ? r3((th - tb) / n) : null,
    rss_before_mib: a != null ? r1(a / 1024) : null,
    rss_held_mib: b != null ? r1(b / 1024) : null,
    rss_after_mib: c != null ? r1(c / 1024) : null,
    after_vs_before: a && c != null ? r3(c / a) : null,
    rss_after_gc_mib: g != null ? r1(g / 1024) : null,
    after_gc_vs_before: a && g != null ? r3(g / a) : null,
    v8_heap_after_gc_mib: h != null ? r1(h / 1024) : null,
    connect_s: rec.loadgen.connect_s,
    // accepted connections per second: every client upgraded and DDP-connected, over the time
    // from the first connect to the last `connected`
    accepted_per_s: n && rec.loadgen.connect_s ? Math.round(n / rec.loadgen.connect_s) : null,
  };
}
const idleBrief = (m) => `${m.kib_per_conn} KiB/conn (RSS ${m.rss_before_mib} → ${m.rss_held_mib} → ${m.rss_after_mib} MiB after` +
  `${m.rss_after_gc_mib != null ? `, ${m.rss_after_gc_mib} after a GC, V8 heap ${m.v8_heap_after_gc_mib}` : ''})`;

/** Metrics of the 4 KiB fan-outs (compressed or not): first/last delivery, CPU and bytes per delivery. */
const FAN_OUT_4K = {
  metrics: (rec) => ({
    first_p50_ms: rec.loadgen.first_p50_ms,
    p50_ms: rec.loadgen.p50_ms,
    p99_ms: rec.loadgen.p99_ms,
    server_cpu_us_per_delivery: perUnit(rec, rec.loadgen.deliveries),
    wire_bytes_per_delivery: Math.round(rec.loadgen.wire_bytes_per_delivery),
  }),
  brief: (m) => `first p50 ${m.first_p50_ms} ms, last p50 ${m.p50_ms} ms, ${m.server_cpu_us_per_delivery} µs server CPU/delivery, ` +
    `${m.wire_bytes_per_delivery} B/delivery`,
};

/** The app workloads' metrics: calls/s, process CPU and JS-thread time per call, latency, RSS. */
function appMetrics(rec) {
  const l = rec.loadgen;
  const calls = l.calls;
  return {
    calls_per_s: Math.round(l.calls_per_s),
    server_cpu_us_per_call: perUnit(rec, calls),
    // the JS thread's busy time (event-loop utilization × the interval between the two `elu`
    // samples, taken at MARK start and MARK end) per call
    js_us_per_call: rec.elu && calls ? r3((rec.elu.active_ms * 1000) / calls) : null,
    elu: rec.elu ? r3(rec.elu.utilization) : null,
    lat_p50_ms: r3(l.lat_p50_us / 1000),
    lat_p95_ms: r3(l.lat_p95_us / 1000),
    lat_p99_ms: r3(l.lat_p99_us / 1000),
    rss_end_mib: rec.rss_end_kib != null ? r1(rec.rss_end_kib / 1024) : null,
    added_per_call: calls ? r3(l.added / (l.sent || calls)) : null,
    server_cores: rec.window ? rec.window.server_cores : null,
    loadgen_cores: rec.window ? rec.window.loadgen_cores : null,
    other_cores: rec.window ? rec.window.other_cores : null,
  };
}
const appBrief = (m) => `${fmtInt(m.calls_per_s)} calls/s, ${m.server_cpu_us_per_call} µs CPU/call, ${m.js_us_per_call} µs JS/call ` +
  `(ELU ${m.elu}), p50 ${m.lat_p50_ms} ms, p95 ${m.lat_p95_ms} ms, RSS ${m.rss_end_mib} MiB`;
// rust-echo has no tasks app; the other transports all run the app workloads (compression off).
const appNotApplicable = (t) => (t.name === 'native-rust' ? 'no tasks app in rust-echo' : null);

const WORKLOADS = [
  {
    name: 'burst',
    description: 'N connections opened at once, each does the DDP connect; time until all are connected',
    command: (cfg, url) => lg(cfg, 'burst', '--url', url, '--clients', cfg.burstClients),
    timeoutS: () => 90,
    notApplicable: () => null,
    metrics: (rec) => ({
      total_ms: rec.loadgen.total_ms,
      connect_p50_ms: rec.loadgen.connect_p50_ms,
      connect_p99_ms: rec.loadgen.connect_p99_ms,
      server_cpu_us_per_conn: perUnit(rec, rec.loadgen.connected),
    }),
    brief: (m) => `${m.total_ms} ms to connect all, ${m.server_cpu_us_per_conn} µs server CPU/conn`,
  },
  {
    name: 'rtt',
    description: 'one client, sequential echo calls; round-trip percentiles (server pinned to CPU 0, load generator to CPU 1)',
    // Every server (all its threads) on CPU 0 and the client on CPU 1, the same for every transport:
    // without it a round trip's latency is mostly the VM waking an idle vCPU, whichever vCPU the
    // scheduler picked, and the medians wander by 3× between rounds.
    pin: { server: '0', loadgen: '1' },
    command: (cfg, url) => lg(cfg, 'rtt', '--url', url, '--calls', cfg.rttCalls),
    timeoutS: () => 90,
    notApplicable: () => null,
    metrics: (rec) => ({
      p50_us: rec.loadgen.p50_us,
      p90_us: rec.loadgen.p90_us,
      p99_us: rec.loadgen.p99_us,
      server_cpu_us_per_call: perUnit(rec, rec.loadgen.calls),
      loadgen_cpu_us_per_call: rec.loadgen.loadgen_cpu_us_per_call,
    }),
    brief: (m) => `p50 ${m.p50_us} µs, p99 ${m.p99_us} µs`,
  },
  ...[false, true].map((coalesce) => ({
    name: coalesce ? 'throughput-coalesced' : 'throughput',
    description: coalesce
      ? "N clients × K echo calls in flight; each connection's queued calls written with one write (server reads several frames at once)"
      : 'N clients × K echo calls in flight; every call its own write (one frame per server read)',
    command: (cfg, url) => lg(cfg, 'throughput', '--url', url, '--clients', cfg.tpClients, '--inflight', cfg.tpInflight,
      '--seconds', cfg.tpSeconds, ...(coalesce ? ['--coalesce'] : [])),
    timeoutS: (cfg) => cfg.tpSeconds + 120,
    notApplicable: () => null,
    metrics: (rec) => ({
      calls_per_s: Math.round(rec.loadgen.calls_per_s),
      lat_p50_us: rec.loadgen.lat_p50_us,
      lat_p99_us: rec.loadgen.lat_p99_us,
      server_cpu_us_per_call: perUnit(rec, rec.loadgen.calls),
      server_cores: rec.window ? rec.window.server_cores : null,
      loadgen_cpu_us_per_call: rec.loadgen.loadgen_cpu_us_per_call,
      loadgen_cores: rec.window ? rec.window.loadgen_cores : null,
      other_cores: rec.window ? rec.window.other_cores : null,
    }),
    brief: (m) => `${fmtInt(m.calls_per_s)} calls/s, ${m.server_cpu_us_per_call} µs server CPU/call, loadgen ${m.loadgen_cpu_us_per_call} µs/call`,
  })),
  {
    name: 'fanout',
    description: 'M subscribers of `fanout`, one writer publishing sequentially; send → last subscriber received',
    command: (cfg, url) => lg(cfg, 'fanout', '--url', url, '--subscribers', cfg.fanoutSubscribers, '--writes', cfg.fanoutWrites),
    timeoutS: () => 150,
    notApplicable: () => null,
    metrics: (rec) => ({
      p50_ms: rec.loadgen.p50_ms,
      p99_ms: rec.loadgen.p99_ms,
      server_cpu_us_per_delivery: perUnit(rec, rec.loadgen.deliveries),
    }),
    brief: (m) => `p50 ${m.p50_ms} ms, p99 ${m.p99_ms} ms, ${m.server_cpu_us_per_delivery} µs server CPU/delivery`,
  },
  {
    name: 'idle',
    rss: true, // the runner samples the server's RSS before and while the clients are held
    cpuSensitive: false, // RSS, not time: other processes' CPU does not disturb it
    description: 'N DDP-connected idle clients held; server RSS growth per connection',
    command: (cfg, url) => lg(cfg, 'idle', '--url', url, '--clients', cfg.idleClients, '--concurrency', cfg.idleConcurrency, '--hold-seconds', 120),
    timeoutS: () => 180,
    notApplicable: () => null,
    metrics: idleMetrics,
    brief: idleBrief,
  },
  {
    name: 'idle_deflate',
    compress: true,
    rss: true,
    rssAfter: true, // RSS also sampled cfg.rssAfterS after the clients left
    cpuSensitive: false,
    description: 'as idle, but every client offers permessage-deflate exactly as Chromium does ' +
      '(`permessage-deflate; client_max_window_bits`) to a server with compression on (Meteor\'s defaults), ' +
      'sends its DDP connect compressed (RSV1; 15-bit window, context takeover unless the server answers otherwise) ' +
      'and inflates compressed replies; server RSS growth per connection',
    command: (cfg, url) => lg(cfg, 'idle', '--url', url, '--clients', cfg.idleClients, '--hold-seconds', 120, '--deflate'),
    timeoutS: () => 180,
    notApplicable: (t) => (t.compression || t.compressArgs ? null : 'no permessage-deflate'),
    metrics: idleMetrics,
    brief: idleBrief,
  },
  {
    name: 'compressed',
    compress: true,
    description: 'permessage-deflate on (Meteor defaults); Node ws client, N × K echo calls of a ~2 KiB JSON document',
    command: (cfg, url) => [NODE, [path.join('bench', 'compressed-client.js'), '--url', url, '--clients', String(cfg.compClients),
      '--inflight', String(cfg.compInflight), '--seconds', String(cfg.compSeconds), '--payload', String(cfg.compPayload)]],
    timeoutS: (cfg) => cfg.compSeconds + 120,
    notApplicable: (t) => (t.compression ? null : 'no permessage-deflate'),
    metrics: (rec) => ({
      calls_per_s: Math.round(rec.loadgen.calls_per_s),
      lat_p50_us: r1(rec.loadgen.lat_p50_us),
      server_cpu_us_per_call: perUnit(rec, rec.loadgen.calls),
      server_cores: rec.window ? rec.window.server_cores : null,
      client_cores: rec.window ? rec.window.loadgen_cores : null,
      wire_ratio: r3(rec.loadgen.wire_ratio),
    }),
    brief: (m) => `${fmtInt(m.calls_per_s)} calls/s, ${m.server_cpu_us_per_call} µs server CPU/call, wire/payload ${m.wire_ratio}`,
  },
  {
    name: 'compressed-methods',
    compress: true,
    description: 'permessage-deflate on (Meteor defaults); Rust clients offering it as Chromium does (client keeps its context, ' +
      'inflates replies); N × K calls of `doc(4096)`, each returning a 4 KiB realistic document (bench/ddp-doc.js)',
    command: (cfg, url) => lg(cfg, 'throughput', '--url', url, '--clients', cfg.compClients, '--inflight', cfg.compInflight,
      '--seconds', cfg.compSeconds, '--deflate', '--doc', cfg.docBytes),
    timeoutS: (cfg) => cfg.compSeconds + 120,
    notApplicable: (t) => (t.compression ? null : 'no permessage-deflate'),
    metrics: (rec) => ({
      calls_per_s: Math.round(rec.loadgen.calls_per_s),
      lat_p50_us: rec.loadgen.lat_p50_us,
      server_cpu_us_per_call: perUnit(rec, rec.loadgen.calls),
      wire_bytes_per_call: Math.round(rec.loadgen.wire_bytes_per_call),
      server_cores: rec.window ? rec.window.server_cores : null,
      loadgen_cores: rec.window ? rec.window.loadgen_cores : null,
    }),
    brief: (m) => `${fmtInt(m.calls_per_s)} calls/s, ${m.server_cpu_us_per_call} µs server CPU/call, ${m.wire_bytes_per_call} B on the wire/result`,
  },
  {
    name: 'compressed-fan-out',
    compress: true,
    description: 'permessage-deflate on (Meteor defaults), Chromium-style clients; M subscribers of `fanout`, one writer calls ' +
      '`publishDoc` sequentially: a 4 KiB `added` sent per socket as the same string (as mergebox does; uws-publish: app.publish); ' +
      'send → first and last subscriber received',
    command: (cfg, url) => lg(cfg, 'fanout', '--url', url, '--subscribers', cfg.fanoutSubscribers, '--writes', cfg.fanoutWrites,
      '--deflate', '--doc', cfg.docBytes),
    timeoutS: () => 180,
    notApplicable: (t) => (t.compression ? null : 'no permessage-deflate'),
    ...FAN_OUT_4K,
  },
  {
    name: 'fan-out-4k',
    description: 'the same 4 KiB fan-out without compression: M subscribers of `fanout`, one writer calls `publishDoc` ' +
      'sequentially (per-socket sends of the same string; uws-publish/native-publish: app.publish); send → first and last subscriber received',
    command: (cfg, url) => lg(cfg, 'fanout', '--url', url, '--subscribers', cfg.fanoutSubscribers, '--writes', cfg.fanoutWrites,
      '--doc', cfg.docBytes),
    timeoutS: () => 180,
    // rust-echo has no `publishDoc` (its documents are the JS servers' bench/ddp-doc.js).
    notApplicable: (t) => (t.name === 'native-rust' ? 'no publishDoc in rust-echo' : null),
    ...FAN_OUT_4K,
  },
  {
    name: 'app-rate',
    elu: true, // the runner asks the server for its event-loop utilization at both marks
    rssEnd: true, // and samples its RSS at MARK end
    description: 'the tasks app at a fixed rate: N clients (connect, sub `tasks`) calling `addTask` at R calls/s in all, ' +
      'each on its own schedule with a random phase (open-loop); call → `result` latency, process CPU and JS-thread time per call',
    command: (cfg, url) => lg(cfg, 'app-rate', '--url', url, '--clients', cfg.appRateClients, '--rate', cfg.appRate,
      '--seconds', cfg.appSeconds),
    timeoutS: (cfg) => cfg.appSeconds + 120,
    notApplicable: appNotApplicable,
    metrics: appMetrics,
    brief: appBrief,
  },
  {
    name: 'app-saturated',
    elu: true,
    rssEnd: true,
    description: 'the tasks app saturated: N clients (connect, sub `tasks`) × K `addTask` calls in flight, every call its own write; ' +
      'calls/s, latency, process CPU and JS-thread time per call',
    command: (cfg, url) => lg(cfg, 'throughput', '--app', '--url', url, '--clients', cfg.appSatClients, '--inflight', cfg.appSatInflight,
      '--seconds', cfg.appSeconds),
    timeoutS: (cfg) => cfg.appSeconds + 120,
    notApplicable: appNotApplicable,
    metrics: appMetrics,
    brief: appBrief,
  },
];

// A transport listing `workloads` runs only those.
for (const w of WORKLOADS) {
  const own = w.notApplicable;
  w.notApplicable = (t) => (t.workloads && !t.workloads.includes(w.name) ? `runs only ${t.workloads.join(', ')}` : own(t));
}

/** The report's headline columns: [workload, metric, label, better]. */
function columns(cfg) {
  return [
    { workload: 'burst', key: 'total_ms', label: `connect burst ×${cfg.burstClients} (ms)`, better: 'lower', digits: 1 },
    { workload: 'burst', key: 'connect_p50_ms', label: 'connect p50 in the burst (ms)', better: 'lower', digits: 1 },
    { workload: 'rtt', key: 'p50_us', label: 'RTT p50 (µs)', better: 'lower', digits: 0 },
    { workload: 'rtt', key: 'p99_us', label: 'RTT p99 (µs)', better: 'lower', digits: 0 },
    { workload: 'throughput', key: 'calls_per_s', label: `echo calls/s (${cfg.tpClients}×${cfg.tpInflight})`, better: 'higher', digits: 0 },
    { workload: 'throughput', key: 'server_cpu_us_per_call', label: 'server CPU µs/call', better: 'lower', digits: 1 },
    { workload: 'throughput-coalesced', key: 'calls_per_s', label: 'calls/s, coalesced', better: 'higher', digits: 0 },
    { workload: 'throughput-coalesced', key: 'server_cpu_us_per_call', label: 'server CPU µs/call, coalesced', better: 'lower', digits: 1 },
    { workload: 'fanout', key: 'p50_ms', label: `fanout ×${cfg.fanoutSubscribers} p50 (ms)`, better: 'lower', digits: 2 },
    { workload: 'fanout', key: 'p99_ms', label: 'fanout p99 (ms)', better: 'lower', digits: 2 },
    { workload: 'idle', key: 'accepted_per_s', label: `accepted connections/s (${cfg.idleClients} DDP clients, ${cfg.idleConcurrency} at a time)`, better: 'higher', digits: 0 },
    { workload: 'idle', key: 'kib_per_conn', label: `RSS KiB per idle conn (×${cfg.idleClients})`, better: 'lower', digits: 1 },
    { workload: 'idle', key: 'kib_per_conn_gc', label: 'RSS KiB per idle conn, held, after a GC', better: 'lower', digits: 1 },
    { workload: 'idle', key: 'v8_kib_per_conn', label: 'of which live JS objects (V8 heap used) KiB per conn', better: 'lower', digits: 1 },
    { workload: 'idle', key: 'v8_committed_kib_per_conn', label: 'V8 heap growth (committed) KiB per conn', better: 'lower', digits: 1 },
    { workload: 'idle_deflate', key: 'kib_per_conn', label: `RSS KiB per idle conn, deflate (×${cfg.idleClients})`, better: 'lower', digits: 1 },
    { workload: 'idle_deflate', key: 'rss_after_mib', label: `RSS MiB ${cfg.rssAfterS} s after the deflate clients left`, better: 'lower', digits: 1 },
    { workload: 'idle_deflate', key: 'rss_after_gc_mib', label: 'RSS MiB after that and one full JS GC', better: 'lower', digits: 1 },
    { workload: 'compressed-methods', key: 'server_cpu_us_per_call', label: 'compressed 4 KiB doc: server CPU µs/call', better: 'lower', digits: 1 },
    { workload: 'compressed-methods', key: 'wire_bytes_per_call', label: 'compressed 4 KiB doc: wire bytes/result', better: 'lower', digits: 0 },
    { workload: 'fan-out-4k', key: 'server_cpu_us_per_delivery', label: `4 KiB fan-out ×${cfg.fanoutSubscribers}: server CPU µs/delivery`, better: 'lower', digits: 2 },
    { workload: 'fan-out-4k', key: 'first_p50_ms', label: '4 KiB fan-out: first delivery p50 (ms)', better: 'lower', digits: 2 },
    { workload: 'compressed-fan-out', key: 'server_cpu_us_per_delivery', label: `compressed fan-out ×${cfg.fanoutSubscribers}: server CPU µs/delivery`, better: 'lower', digits: 2 },
    { workload: 'compressed-fan-out', key: 'first_p50_ms', label: 'compressed fan-out: first delivery p50 (ms)', better: 'lower', digits: 2 },
    { workload: 'compressed-fan-out', key: 'p50_ms', label: 'compressed fan-out: last delivery p50 (ms)', better: 'lower', digits: 2 },
    { workload: 'compressed', key: 'calls_per_s', label: 'compressed calls/s', better: 'higher', digits: 0 },
    { workload: 'compressed', key: 'server_cpu_us_per_call', label: 'compressed server CPU µs/call', better: 'lower', digits: 1 },
    { workload: 'app-rate', key: 'server_cpu_us_per_call', label: `app ${cfg.appRate}/s: process CPU µs/call`, better: 'lower', digits: 1 },
    { workload: 'app-rate', key: 'js_us_per_call', label: `app ${cfg.appRate}/s: JS-thread µs/call`, better: 'lower', digits: 1 },
    { workload: 'app-saturated', key: 'calls_per_s', label: `app saturated (${cfg.appSatClients}×${cfg.appSatInflight}) calls/s`, better: 'higher', digits: 0 },
  ];
}

module.exports = { TRANSPORTS, WORKLOADS, config, columns };
