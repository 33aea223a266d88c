'use strict';
// One instance of a uWS.js-style app bridged to Redis (require('ddp-transport-native/redis')), for
// __test__/redis.test.js and bench/redis.js; run in its own process (helpers/proc.js runNode).
// Clients connect to /sub?topics=a,b (subscribed on open); a client's message is JSON
// { topic, data, binary?, compress? } and is published with ws.publish (data base64 when binary).
// On stdin, JSON commands { id, op, ... }, answered on stdout with the same id:
//   publish { topic, data, binary?, compress? }   app.publish; answers { local }
//   stream { topic, count, intervalMs }           publishes "<seq>" count times, one per interval
//   burst { topic, count, size }                  publishes count messages "<seq> <padding>" at once;
//                                                 answers { ms (the loop's and its tick's end's time), t0 (its
//                                                 start, epoch ms) }
//   paced { topic, count, perTick, size }         perTick messages "<seq> <epoch ms> <padding>" per 1 ms timer tick
//   synced                                        waits for bridge.synced()
//   stats                                         { bridge, app (the core's counters), memory }
//   unbridge                                      bridge.close()
// Environment: REDIS_URL, BRIDGE_OPTIONS (JSON, merged), COMPRESS=1 (a shared compressor), NO_BRIDGE=1.

const uWS = require('ddp-transport-native/uws');

const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const app = uWS.App();
app.ws('/sub', {
  compression: process.env.COMPRESS === '1' ? uWS.SHARED_COMPRESSOR : uWS.DISABLED,
  maxPayloadLength: 1024 * 1024,
  upgrade: (res, req, context) => {
    const topics = (new URLSearchParams(req.getQuery() || '').get('topics') || '').split(',').filter(Boolean);
    res.upgrade({ topics }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'), context);
  },
  open: (ws) => {
    for (const t of ws.getUserData().topics) ws.subscribe(t);
  },
  message: (ws, message) => {
    const m = JSON.parse(Buffer.from(message).toString('utf8'));
    ws.publish(m.topic, m.binary ? Buffer.from(m.data, 'base64') : m.data, !!m.binary, !!m.compress);
  },
});

let bridge = null;
if (process.env.NO_BRIDGE !== '1') {
  const { bridge: bridgeApp } = require('ddp-transport-native/redis');
  bridge = bridgeApp(app, { url: process.env.REDIS_URL, ...JSON.parse(process.env.BRIDGE_OPTIONS || '{}') });
}

const ops = {
  publish: (c) => ({ local: app.publish(c.topic, c.binary ? Buffer.from(c.data, 'base64') : c.data, !!c.binary, !!c.compress) }),
  stream: (c) => new Promise((resolve) => {
    let seq = 0;
    const timer = setInterval(() => {
      app.publish(c.topic, String(seq++));
      if (seq === c.count) {
        clearInterval(timer);
        resolve({ published: seq });
      }
    }, c.intervalMs);
  }),
  burst: async (c) => {
    const pad = 'x'.repeat(c.size || 0);
    const t0 = performance.now();
    for (let i = 0; i < c.count; i++) app.publish(c.topic, `${i} ${pad}`);
    // the end-of-tick work too: the core's flush, the bridge's batches encoded and written
    await new Promise((resolve) => setImmediate(resolve));
    return { ms: performance.now() - t0, t0: performance.timeOrigin + t0 };
  },
  paced: (c) => new Promise((resolve) => {
    const pad = 'x'.repeat(c.size || 0);
    let seq = 0;
    const timer = setInterval(() => {
      for (let k = 0; k < c.perTick && seq < c.count; k++) app.publish(c.topic, `${seq++} ${performance.timeOrigin + performance.now()} ${pad}`);
      if (seq === c.count) {
        clearInterval(timer);
        resolve({ published: seq });
      }
    }, 1);
  }),
  synced: () => bridge.synced().then(() => ({})),
  stats: () => ({ bridge: bridge && bridge.stats(), app: app._inner.stats(), memory: process.memoryUsage() }),
  unbridge: () => bridge.close().then(() => ({})),
};

const rl = require('node:readline').createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  const c = JSON.parse(line);
  try {
    out({ id: c.id, ...(await ops[c.op](c)) });
  } catch (err) {
    out({ id: c.id, error: err.message });
  }
});
rl.on('close', () => {
  app.close();
  setTimeout(() => process.exit(0), 2000).unref();
});

app.listen('127.0.0.1', 0, (token) => out({ type: 'ready', port: uWS.us_socket_local_port(token) }));
