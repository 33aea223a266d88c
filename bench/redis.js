'use strict';
// The Redis bridge (require('ddp-transport-native/redis')) against a local publish, side by side
// (not a timed test; the box is shared: read the ratios, with their spread).
// Three /uws instances in their own processes (__test__/helpers/redis-instance.js) and a real
// redis-server on a free loopback port; one `ws` subscriber per row, in this process:
//   local, no bridge   publisher and subscriber on an instance without a bridge (plain uWS semantics)
//   local, bridged     publisher and subscriber on a bridged instance (it also sends to Redis)
//   cross-instance     published on instance A, the subscriber on instance B (through Redis)
// Per row and round: `rate`, a burst of --burst messages of --size bytes published at once: the
// publisher's loop with the end of its tick (the core's flush, the bridge's batches encoded and
// written to Redis), µs per publish, and messages/s from the burst's start to the subscriber's last
// message; `latency`, --paced messages at one per 1 ms timer tick, each carrying its send time:
// the subscriber's delivery latency p50/p99 (same box, same clock). Rounds are interleaved;
// medians with the spread (min–max) over rounds.
//
//   node bench/redis.js [--rounds 3] [--burst 20000] [--paced 2000] [--size 100]

const path = require('node:path');
const { runNode } = require('../__test__/helpers/proc');
const { WsClient } = require('../__test__/helpers/common');
const { REDIS_SERVER, redisServer } = require('../__test__/helpers/redis-server');

const a = process.argv.slice(2);
const arg = (k, d) => (a.includes(k) ? Number(a[a.indexOf(k) + 1]) : d);
const ROUNDS = arg('--rounds', 3);
const BURST = arg('--burst', 20000);
const PACED = arg('--paced', 2000);
const SIZE = arg('--size', 100);
const INSTANCE = path.join(__dirname, '..', '__test__', 'helpers', 'redis-instance.js');

async function instance(url, env, cleanup) {
  const proc = runNode(`require(${JSON.stringify(INSTANCE)})`, {
    env: { REDIS_URL: url, BRIDGE_OPTIONS: JSON.stringify({ prefix: 'bench:', maxQueued: 1e6, maxQueuedBytes: 2 ** 30 }), ...env },
    timeoutMs: 30 * 60000,
  });
  cleanup.push(() => proc.kill());
  const { port } = await proc.waitMessage((m) => m.type === 'ready', 15000, 'instance ready');
  return { port, op: (op, args = {}) => proc.request({ op, ...args }, 120000) };
}

/** Messages `c` gets until `n` arrived (or 60 s), with their arrival time (epoch ms). */
function collect(c, n) {
  return new Promise((resolve, reject) => {
    const got = [];
    const timer = setTimeout(() => reject(new Error(`only ${got.length} of ${n} messages within 60 s`)), 60000);
    const on = (data) => {
      got.push({ at: performance.timeOrigin + performance.now(), text: data.toString() });
      if (got.length === n) {
        clearTimeout(timer);
        c.ws.off('message', on);
        resolve(got);
      }
    };
    c.ws.on('message', on);
  });
}

const quantile = (xs, q) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const median = (xs) => quantile(xs, 0.5);

async function row(pub, sub, topic) {
  let got = collect(sub, BURST);
  const burst = await pub.op('burst', { topic, count: BURST, size: SIZE });
  const arrived = await got;
  const rate = BURST / ((arrived[arrived.length - 1].at - burst.t0) / 1000);
  got = collect(sub, PACED);
  await pub.op('paced', { topic, count: PACED, perTick: 1, size: SIZE });
  const lat = (await got).map((m) => m.at - Number(m.text.split(' ')[1]));
  return { publishUs: (burst.ms * 1000) / BURST, rate, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) };
}

async function main() {
  if (!REDIS_SERVER) throw new Error('redis-server not installed: apt-get install -y redis-server');
  const cleanup = [];
  const t = { after: (fn) => cleanup.push(fn) };
  try {
    const redis = await redisServer(t);
    const plain = await instance(redis.url, { NO_BRIDGE: '1' }, cleanup);
    const A = await instance(redis.url, {}, cleanup);
    const B = await instance(redis.url, {}, cleanup);
    const sub = async (inst, topic) => {
      const c = new WsClient(`ws://127.0.0.1:${inst.port}/sub?topics=${topic}`);
      cleanup.push(() => c.terminate());
      return c.opened;
    };
    const rows = {
      'local, no bridge': [plain, await sub(plain, 'p')],
      'local, bridged': [A, await sub(A, 'l')],
      'cross-instance': [A, await sub(B, 'x')],
    };
    const topics = { 'local, no bridge': 'p', 'local, bridged': 'l', 'cross-instance': 'x' };
    await A.op('synced');
    await B.op('synced');
    const results = Object.fromEntries(Object.keys(rows).map((k) => [k, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, [pub, c]] of Object.entries(rows)) {
        const x = await row(pub, c, topics[name]);
        results[name].push(x);
        process.stderr.write(`round ${r + 1} ${name}: ${JSON.stringify(x)}\n`);
      }
    }
    const stats = await Promise.all([A.op('stats'), B.op('stats')]);
    const f = (xs, d) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
    const base = results['local, no bridge'];
    console.log(`${BURST} messages of ${SIZE} B in a burst, ${PACED} paced at one per 1 ms tick; ${ROUNDS} interleaved rounds, medians (min–max)\n`);
    console.log('| row | publisher µs per message (loop + end of tick) | delivered msg/s (burst) | vs local, no bridge | latency p50 ms | latency p99 ms |');
    console.log('|---|--:|--:|--:|--:|--:|');
    for (const [name, xs] of Object.entries(results)) {
      const ratio = xs.map((x, i) => x.rate / base[i].rate);
      console.log(`| ${name} | ${f(xs.map((x) => x.publishUs), 2)} | ${f(xs.map((x) => x.rate), 0)} | ${f(ratio, 2)}× | `
        + `${f(xs.map((x) => x.p50), 2)} | ${f(xs.map((x) => x.p99), 2)} |`);
    }
    const [sa, sb] = stats.map((s) => s.bridge);
    console.log(`\nbridge A: published ${sa.published}, dropped ${sa.dropped}, failed ${sa.failed}, own echoes skipped ${sa.ownEchoes}; `
      + `bridge B: received ${sb.received}, dropped ${sb.dropped}`);
  } finally {
    for (const fn of cleanup.reverse()) await fn();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
