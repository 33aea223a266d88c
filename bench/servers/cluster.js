'use strict';
// One of the benchmark servers as node:cluster workers (scripts/many-connections.js):
//   node bench/servers/cluster.js <server> [--workers N] [--port P]
// forks N workers (default 4) each running bench/servers/<server>.js. Servers on a Node
// http.Server (native-attach, ws, sockjs) share the primary's port (round-robin); uws-direct
// listens on one fixed port in every worker (uSockets sets SO_REUSEPORT: the kernel spreads
// connections); the own listener (native-listen, native-raw) never shares a port (the core does
// not set SO_REUSEPORT), so each worker listens on a port of its own. Prints
// `READY <port>[,<port>...] <pid>,<pid>...` once every worker listens. On stdin:
//   `broadcast k`: every worker sends `added` with fseq k to its `fanout` subscribers; prints
//   `BROADCAST k <epoch µs>` just before asking the workers and `SENT k <pid> <sessions>` per worker.
// Ends with its workers on stdin's end, SIGTERM or SIGINT, or when a worker dies.

const cluster = require('node:cluster');
const path = require('node:path');
const readline = require('node:readline');
const { freePort } = require('../../__test__/helpers/common');

const a = process.argv.slice(2);
const SERVER = a[0];
const arg = (k, d) => (a.includes(k) ? a[a.indexOf(k) + 1] : d);
const WORKERS = Number(arg('--workers', '4'));
const OWN_PORT_EACH = SERVER === 'native-listen' || SERVER === 'native-raw';

async function main() {
  cluster.schedulingPolicy = cluster.SCHED_RR;
  const ports = new Map(); // pid → port
  const stop = (code) => {
    for (const w of Object.values(cluster.workers)) w.kill('SIGTERM');
    setTimeout(() => process.exit(code), 500).unref();
  };
  cluster.on('exit', (w, code, signal) => {
    console.error(`worker ${w.process.pid} exited (${code}, ${signal})`);
    stop(3);
  });
  /** A worker listening on `port` (0: any); resolves with the port it reports. */
  const fork = (port) => new Promise((resolve) => {
    cluster.setupPrimary({ exec: path.join(__dirname, `${SERVER}.js`), args: ['--port', String(port)], silent: true });
    const w = cluster.fork();
    w.process.stderr.pipe(process.stderr);
    readline.createInterface({ input: w.process.stdout }).on('line', (l) => {
      const m = /^READY (\d+)/.exec(l);
      if (!m) return;
      ports.set(w.process.pid, Number(m[1]));
      resolve(Number(m[1]));
    });
    w.on('message', (msg) => {
      if (msg && Number.isInteger(msg.broadcasted)) console.log(`SENT ${msg.broadcasted} ${w.process.pid} ${msg.sessions}`);
    });
  });
  // uws-direct: every worker on one port chosen here (uSockets sets SO_REUSEPORT on a given port)
  let port = OWN_PORT_EACH ? 0 : Number(arg('--port', 0));
  if (port === 0 && SERVER === 'uws-direct') port = await freePort();
  await Promise.all(Array.from({ length: WORKERS }, () => fork(port)));
  console.log(`READY ${[...new Set(ports.values())].join(',')} ${[...ports.keys()].join(',')}`);
  readline.createInterface({ input: process.stdin }).on('line', (l) => {
    const m = /^broadcast (\d+)$/.exec(l.trim());
    if (!m) return;
    const k = Number(m[1]);
    console.log(`BROADCAST ${k} ${Math.round((performance.timeOrigin + performance.now()) * 1000)}`);
    for (const w of Object.values(cluster.workers)) w.send({ broadcast: k });
  }).on('close', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
