// The Meteor-app benchmark's server module (server/bench.js of the app made with `meteor create`,
// imported from server/main.js; scripts/bench-meteor-app.js). The tasks of Meteor's performance
// harness (tasks-3.x: insertTask({description}), removeTask({taskId}), a publication of tasks) kept
// in memory — no MongoDB here — and sent through Meteor's real livedata: Meteor.methods, and
// publications whose this.added/this.removed go through the session's mergebox.
//
// What differs from the harness's app: no database round trip (an insert is a Map.set), no
// oplog/change-stream observer (the method itself calls added/removed on the subscriptions that
// see the task), and the `tasks` publication publishes the caller's own tasks (owner = the DDP
// connection; the harness's fetchTasks publishes every task to every subscriber). The fan-out to
// many subscribers is the `fanout` publication, driven by `publish(doc)`.
//
// GET /bench-stats: GC pauses (PerformanceObserver 'gc'), event-loop delay
// (monitorEventLoopDelay), event-loop utilization and memory; `?reset=1` starts a new window.
import { Meteor } from 'meteor/meteor';
import { WebApp } from 'meteor/webapp';
import { randomBytes } from 'node:crypto';
import { performance, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

const UNMISTAKABLE = '23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz';
/** A 17-character Meteor-style random id (Random.id()'s alphabet). */
function newId() {
  const bytes = randomBytes(17);
  let id = '';
  for (let i = 0; i < 17; i++) id += UNMISTAKABLE[bytes[i] % UNMISTAKABLE.length];
  return id;
}

const tasks = new Map(); // id -> { description, createdAt, owner }
const taskSubs = new Map(); // owner (DDP connection id) -> Set of `tasks` subscriptions
const fanoutSubs = new Set();

Meteor.publish('tasks', function () {
  const owner = this.connection ? this.connection.id : null;
  for (const [id, task] of tasks) if (task.owner === owner) this.added('tasks', id, task);
  let subs = taskSubs.get(owner);
  if (!subs) taskSubs.set(owner, (subs = new Set()));
  subs.add(this);
  this.onStop(() => {
    subs.delete(this);
    if (!subs.size) {
      taskSubs.delete(owner);
      for (const [id, task] of tasks) if (task.owner === owner) tasks.delete(id);
    }
  });
  this.ready();
});

Meteor.publish('fanout', function () {
  fanoutSubs.add(this);
  this.onStop(() => fanoutSubs.delete(this));
  this.ready();
});

const methods = {
  insertTask(arg) {
    const description = typeof arg === 'string' ? arg : arg && arg.description;
    if (typeof description !== 'string') throw new Meteor.Error('bad-request', 'insertTask({ description })');
    const owner = this.connection ? this.connection.id : null;
    const id = newId();
    const task = { description, createdAt: new Date(), owner };
    tasks.set(id, task);
    const subs = taskSubs.get(owner);
    if (subs) for (const sub of subs) sub.added('tasks', id, task);
    return id;
  },
  removeTask(arg) {
    const id = typeof arg === 'string' ? arg : arg && arg.taskId;
    const task = tasks.get(id);
    if (!task) return 0;
    tasks.delete(id);
    const subs = taskSubs.get(task.owner);
    if (subs) for (const sub of subs) sub.removed('tasks', id);
    return 1;
  },
  /** The fan-out: doc ({ _id, fseq, text }) to every `fanout` subscriber; returns how many. */
  publish(doc) {
    const { _id, ...fields } = doc || {};
    if (typeof _id !== 'string') throw new Meteor.Error('bad-request', 'publish({ _id, ... })');
    for (const sub of fanoutSubs) sub.added('fanout', _id, fields);
    return fanoutSubs.size;
  },
};
// The real-app suite's server module (server/e2e.js, in every app createApp makes) defines echo.
if (!Meteor.server.method_handlers.echo) methods.echo = (value) => value;
Meteor.methods(methods);

const eld = monitorEventLoopDelay({ resolution: 10 });
eld.enable();
let gcMs = 0;
let gcCount = 0;
let gcMaxMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcCount++;
    if (e.duration > gcMaxMs) gcMaxMs = e.duration;
  }
}).observe({ entryTypes: ['gc'] });

WebApp.connectHandlers.use('/bench-stats', (req, res) => {
  const elu = performance.eventLoopUtilization();
  const out = {
    pid: process.pid,
    gc_ms: gcMs,
    gc_count: gcCount,
    gc_max_ms: gcMaxMs,
    eld_p50_ms: eld.percentile(50) / 1e6,
    eld_p99_ms: eld.percentile(99) / 1e6,
    eld_max_ms: eld.max / 1e6,
    eld_mean_ms: eld.mean / 1e6,
    elu_active_ms: elu.active,
    elu_idle_ms: elu.idle,
    memory: process.memoryUsage(),
    sessions: Meteor.server.sessions.size,
    tasks: tasks.size,
    transport: process.env.DDP_TRANSPORT || null,
  };
  if (/[?&]reset=1/.test(req.url)) {
    eld.reset();
    gcMs = 0;
    gcCount = 0;
    gcMaxMs = 0;
  }
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(out));
});
