'use strict';
// node:cluster with N workers sharing one port, each running the demo server (native transport on
// the http.Server's own port) plus a `whoami` method returning the worker's pid.
// Prints `READY <port> <pid,pid,...>` when every worker listens; SIGTERM stops everything.

const cluster = require('node:cluster');

const WORKERS = Number(process.env.CLUSTER_WORKERS || 2);

if (cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR;
  const ready = new Map(); // pid -> port
  let stopping = false;
  for (let i = 0; i < WORKERS; i++) cluster.fork();
  cluster.on('message', (worker, msg) => {
    if (!msg || msg.type !== 'listening') return;
    ready.set(msg.pid, msg.port);
    if (ready.size === WORKERS) {
      const ports = new Set(ready.values());
      if (ports.size !== 1) {
        console.log(`ERROR workers listen on different ports: ${[...ports].join(',')}`);
        process.exit(2);
      }
      console.log(`READY ${[...ports][0]} ${[...ready.keys()].join(',')}`);
    }
  });
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) {
      console.log(`ERROR worker ${worker.process.pid} exited (${code}, ${signal})`);
      process.exit(3);
    }
  });
  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
    const t = setTimeout(() => process.exit(0), 3000);
    t.unref();
    cluster.on('exit', () => { if (Object.keys(cluster.workers).length === 0) process.exit(0); });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Never outlive the test that started us.
  setTimeout(() => { console.log('ERROR cluster helper lifetime exceeded'); stop(); }, 120000).unref();
} else {
  const { start } = require('../../demo/server');
  start({ port: 0, host: '127.0.0.1', methods: { whoami: () => process.pid } }).then((demo) => {
    process.send({ type: 'listening', pid: process.pid, port: demo.port });
    const stop = () => demo.close().then(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('disconnect', () => process.exit(0));
  }, (err) => {
    console.log(`ERROR worker ${process.pid}: ${err && err.stack}`);
    process.exit(1);
  });
}
