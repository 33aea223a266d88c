'use strict';
// Shared plumbing of the benchmark servers: port and flags, READY line, exit rules, the DDP server
// they all run, and Meteor's permessage-deflate defaults in each library's spelling.
//
// Every server: `node bench/servers/<name>.js [--port P]` (or env PORT; 0 = any free port), binds
// 127.0.0.1, prints `READY <port>` once listening, exits on SIGTERM/SIGINT, and (when
// BENCH_EXIT_ON_STDIN_END=1, as the runner sets it) when its stdin closes, so that it can never
// outlive the runner. BENCH_COMPRESS=1 turns permessage-deflate on with Meteor's defaults.

const cluster = require('node:cluster');
const EventEmitter = require('node:events');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const COMPRESS = process.env.BENCH_COMPRESS === '1';
const MAX_PAYLOAD = 16 * 1024 * 1024;

/** Meteor's SERVER_WEBSOCKET_COMPRESSION defaults (faye / permessage-deflate spelling). */
const METEOR_DEFLATE = Object.freeze({
  threshold: 1024, level: 1, memLevel: 1, noContextTakeover: true, maxWindowBits: 8,
});

/** The ddp-transport-native checkout a native server loads: `--pkg DIR` (a before/after run), else this one. */
function pkgArg() {
  const i = process.argv.indexOf('--pkg');
  return i >= 0 ? path.resolve(process.argv[i + 1]) : ROOT;
}

function portArg() {
  const i = process.argv.indexOf('--port');
  const raw = i >= 0 ? process.argv[i + 1] : process.env.PORT;
  const port = raw === undefined ? 0 : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`bad port ${raw}`);
    process.exit(2);
  }
  return port;
}

function ready(port) {
  process.stdout.write(`READY ${port}\n`);
}

let exiting = false;
function exitRules(onExit) {
  const bye = (code) => {
    if (exiting) return;
    exiting = true;
    try { if (onExit) onExit(); } catch (e) { /* exiting anyway */ }
    process.exit(code);
  };
  process.on('SIGTERM', () => bye(0));
  process.on('SIGINT', () => bye(0));
  if (cluster.isWorker) process.on('disconnect', () => bye(0)); // the primary went away
  if (process.env.BENCH_EXIT_ON_STDIN_END === '1') {
    process.stdin.on('end', () => bye(0));
    process.stdin.on('error', () => bye(0));
    // `gc` on stdin: one full garbage collection (the runner starts servers with --expose-gc), so
    // the runner can tell memory the process holds from JS garbage an idle process never collects.
    process.stdin.on('data', (d) => {
      const lines = String(d).split('\n');
      // `lateness`: the 10 ms timer probe's figures since the last `lateness` (BENCH_LATENESS=1)
      if (lines.includes('lateness')) process.stdout.write(`LATENESS ${JSON.stringify(latenessReport())}\n`);
      // `elu`: the event loop's utilization since the previous `elu` (or the start)
      if (lines.includes('elu')) process.stdout.write(`ELU ${JSON.stringify(eluReport())}\n`);
      if (lines.includes('gc') && typeof global.gc === 'function') {
        global.gc();
        const m = process.memoryUsage();
        process.stdout.write(`GC done ${m.heapTotal} ${m.heapUsed}\n`);
      }
    });
    process.stdin.resume();
  }
  process.on('uncaughtException', (e) => {
    console.error(e && e.stack || e);
    bye(1);
  });
}

// BENCH_LATENESS=1: a 10 ms setInterval whose lateness (gap − 10 ms) is kept until `lateness`
// on stdin prints and resets it: how long the event loop left timers waiting.
let late = [];
if (process.env.BENCH_LATENESS === '1') {
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    late.push(Math.max(0, now - last - 10));
    last = now;
  }, 10).unref();
}

function latenessReport() {
  const s = late.sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : 0);
  const out = { n: s.length, p50_ms: q(0.5), p99_ms: q(0.99), max_ms: s.length ? s[s.length - 1] : 0 };
  late = [];
  return out;
}

// The event loop's utilization (performance.eventLoopUtilization) between two `elu` lines: the
// share of the interval the JS thread spent outside the event provider (epoll), i.e. running JS
// and whatever native code runs on that thread (uWS.js parses and writes there; the native core's
// I/O threads are not counted). active_ms ÷ calls = the JS-thread time per call.
let eluLast = performance.eventLoopUtilization();
function eluReport() {
  const now = performance.eventLoopUtilization();
  const d = performance.eventLoopUtilization(now, eluLast);
  eluLast = now;
  return { utilization: d.utilization, active_ms: d.active, idle_ms: d.idle };
}

/** BENCH_CONNECT_COST_MS: synchronous JS each DDP `connect` costs (a Meteor login + subscription
 *  stand-in for the storm workload), 0 by default. */
const CONNECT_COST_MS = Number(process.env.BENCH_CONNECT_COST_MS || 0);

function busy(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** Tasks each session keeps (the oldest is dropped beyond it). */
const TASKS_KEPT = 100;

/** A session's tasks, oldest first (the app's per-session collection). */
function tasksOf(session) {
  if (session.data === null) session.data = { tasks: [] };
  return session.data.tasks;
}

/** A task's fields as DDP sends them (EJSON: a Date is `{ $date: ms }`). */
function taskFields(task) {
  return { text: task.text, createdAt: { $date: task.createdAt.getTime() }, owner: task.owner };
}

/**
 * The DDP server every benchmark server runs: the demo's (`echo`, `publish`, the `fanout`
 * publication) plus the compressed workloads' methods: `doc(size)` returns a realistic document of
 * about `size` bytes (bench/ddp-doc.js; one object per size, stringified per call as Meteor does),
 * and `publishDoc(fseq, size)` publishes one (`fseq` first among its fields) to `fanout`.
 *
 * And a small tasks app, the app-level workloads' stand-in for a Meteor method with its per-call JS
 * work: the publication `tasks` (the session's own tasks: `added` for each it has, then `ready`)
 * and the method `addTask(text)`, which builds a task document (a Meteor-style random id, `text`,
 * `createdAt`, `owner` = the DDP session id), keeps it in the session's collection (the last
 * TASKS_KEPT), sends `added` for it when the caller is subscribed to `tasks` (the session keeping a
 * copy of the fields sent, as mergebox does) and returns its id; the session then sends `result`
 * and `updated`, as Meteor does. A task dropped beyond TASKS_KEPT leaves the collection and the
 * session's copy without a `removed` (a memory bound of the benchmark, not app behaviour).
 */
function loadDdp() {
  const { DdpServer, randomId } = require(path.join(ROOT, 'demo', 'ddp-session'));
  const { makeDoc } = require(path.join(ROOT, 'bench', 'ddp-doc'));
  const docs = new Map();
  const docOf = (size) => {
    const n = Math.min(Math.max(Number(size) | 0, 64), 1 << 20);
    if (!docs.has(n)) docs.set(n, makeDoc(1, n));
    return docs.get(n);
  };
  const server = new DdpServer({
    methods: {
      doc(size) { return docOf(size); },
      publishDoc(fseq, size) { return server.publish({ fseq, ...docOf(size) }); },
      addTask(text) {
        if (typeof text !== 'string' || text.length === 0 || text.length > 1000) {
          throw { error: 400, reason: 'text must be a string of 1 to 1000 characters' };
        }
        const task = { _id: randomId(), text, createdAt: new Date(), owner: this.id };
        const tasks = tasksOf(this);
        tasks.push(task);
        if (tasks.length > TASKS_KEPT) {
          const old = tasks.shift();
          const view = this.views !== null ? this.views.get('tasks') : undefined;
          if (view !== undefined) view.delete(old._id);
        }
        if (this.hasSub('tasks')) this.added('tasks', task._id, taskFields(task));
        return task._id;
      },
    },
    publications: {
      tasks() {
        for (const task of tasksOf(this)) this.added('tasks', task._id, taskFields(task));
      },
    },
  });
  if (cluster.isWorker) {
    // A worker of bench/servers/cluster.js: the primary asks every worker to broadcast document k
    // to its own `fanout` subscribers (`added` with fseq k; scripts/many-connections.js).
    process.on('message', (m) => {
      if (m && Number.isInteger(m.broadcast)) {
        const sessions = server.publish({ fseq: m.broadcast, text: `broadcast ${m.broadcast}` });
        process.send({ broadcasted: m.broadcast, sessions });
      }
    });
  }
  if (CONNECT_COST_MS > 0) {
    // On the direct entry, so that it applies through handle() (a user of open) and without it.
    const open = server.open.bind(server);
    server.open = (...args) => {
      const session = open(...args);
      const receive = session.receive;
      session.receive = (d) => {
        if (typeof d === 'string' && d.includes('"msg":"connect"')) busy(CONNECT_COST_MS);
        receive.call(session, d);
      };
      return session;
    };
  }
  return server;
}

/** `/websocket` or `/websocket/`, query allowed (Meteor's path rule). */
function isWebsocketPath(url) {
  if (typeof url !== 'string') return false;
  const q = url.indexOf('?');
  const p = q < 0 ? url : url.slice(0, q);
  return p === '/websocket' || p === '/websocket/';
}

/**
 * A Meteor-contract socket over a transport that has no EventEmitter of its own (uWS, the native
 * core): `on('data'|'close')`, `send(str)`, `close()`, `isClosed`.
 */
class ShimSocket extends EventEmitter {
  constructor(sendFn, closeFn) {
    super();
    this._send = sendFn;
    this._close = closeFn;
    this.isClosed = false;
    this.protocol = 'websocket-raw';
  }

  send(str) {
    if (!this.isClosed) this._send(str);
  }

  close() {
    if (!this.isClosed) this._close();
  }

  setWebsocketTimeout() { /* the transports' own idle timeouts apply */ }

  _closed() {
    if (this.isClosed) return;
    this.isClosed = true;
    this.emit('close');
  }
}

/** The own-listener bench servers (native-listen, native-raw): ddp-transport-native's App with one
 *  I/O thread (BENCH_ADMISSION=0: admission control off), route '/*' with the bench's settings and
 *  `handlers` (open, message, close), listening on the bench port; exits as exitRules says. */
function serveNative(handlers) {
  const { App } = require(pkgArg());
  // The default I/O mode (DDP_TRANSPORT_NATIVE_IO, set by the *-threads rows, chooses another).
  const app = App(process.env.BENCH_ADMISSION === '0' ? { admission: false } : {});
  app.ws('/*', {
    compression: COMPRESS ? { ...METEOR_DEFLATE } : false,
    maxPayloadLength: MAX_PAYLOAD,
    idleTimeout: 0,
    sendPingsAutomatically: false,
    ...handlers,
  });
  exitRules(() => app.close());
  app.listen('127.0.0.1', portArg(), (token, error) => {
    if (!token) { console.error(`listen failed: ${error && error.message}`); process.exit(1); }
    ready(token.port);
  });
}

module.exports = {
  ROOT, COMPRESS, MAX_PAYLOAD, METEOR_DEFLATE,
  portArg, pkgArg, ready, exitRules, loadDdp, isWebsocketPath, ShimSocket, serveNative,
};
