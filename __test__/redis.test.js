'use strict';
// The Redis bridge (require('ddp-transport-native/redis')) with a real redis-server and three
// instances, each an /uws app in its own process (helpers/redis-instance.js), real `ws` clients.
// Faults: Redis down at start, Redis restarted while publishing, a stopped (SIGSTOP) Redis.
// Skipped only when redis-server is not installed (.ci/run installs it).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const Redis = require('ioredis');
const { runNode } = require('./helpers/proc');
const { WsClient, sleep, waitFor } = require('./helpers/common');
const { REDIS_SERVER, redisServer } = require('./helpers/redis-server');

// The reason .ci/run greps the suites for: it installs the package and runs this suite again.
const REDIS_SKIP = REDIS_SERVER ? false : 'redis-server not installed: apt-get install -y redis-server';

const INSTANCE = path.join(__dirname, 'helpers', 'redis-instance.js');
const PREFIX = 'test:';

/** `n` instances bridged to `redis` (each its own process), stopped when the test ends. */
async function instances(t, n, url, { env = {}, options = {} } = {}) {
  const list = [];
  for (let i = 0; i < n; i++) {
    const proc = runNode(`require(${JSON.stringify(INSTANCE)})`, {
      env: { REDIS_URL: url, BRIDGE_OPTIONS: JSON.stringify({ prefix: PREFIX, ...options }), ...env },
      timeoutMs: 120000,
    });
    t.after(() => proc.kill());
    const { port } = await proc.waitMessage((m) => m.type === 'ready', 15000, 'instance ready');
    list.push({ proc, port, op: (op, args = {}) => proc.request({ op, ...args }, 30000) });
  }
  return list;
}

/** A `ws` client subscribed to `topics` on instance `inst`. */
async function subscriber(t, inst, topics, opts) {
  const c = new WsClient(`ws://127.0.0.1:${inst.port}/sub?topics=${topics.join(',')}`, opts);
  t.after(() => c.terminate());
  await c.opened;
  return c;
}

async function allSynced(list) {
  await Promise.all(list.map((i) => i.op('synced')));
}

/** Every message `c` gets within `quietMs` after the last one (bounded by `maxMs`), after the
 *  first `expect` messages (waited for up to 15 s: a busy box may hold a delivery longer than
 *  `quietMs`); the extras show up in the result. */
async function drain(c, quietMs = 300, maxMs = 10000, expect = 0) {
  const got = expect > 0 ? await c.take(expect, 15000) : [];
  const end = Date.now() + maxMs;
  while (Date.now() < end) {
    try {
      got.push(await c.next(quietMs));
    } catch {
      break;
    }
  }
  return got;
}

const bridgeStats = async (inst) => (await inst.op('stats')).bridge;
const seqs = (msgs) => msgs.map((m) => Number(m.text.split(' ')[0]));

test('three instances: a topic published on any of them reaches every subscriber on every instance exactly once, text and binary', { skip: REDIS_SKIP, timeout: 60000 }, async (t) => {
  const redis = await redisServer(t);
  const list = await instances(t, 3, redis.url);
  const news = [];
  const other = [];
  for (const inst of list) {
    news.push(await subscriber(t, inst, ['news']), await subscriber(t, inst, ['news', 'other']));
    other.push(await subscriber(t, inst, ['other']));
  }
  await allSynced(list);
  for (let i = 0; i < 3; i++) {
    const text = await list[i].op('publish', { topic: 'news', data: `text from ${i}` });
    assert.equal(text.local, true, 'app.publish answers for the local subscribers');
    await list[i].op('publish', { topic: 'news', data: Buffer.from([i, 0xff, 0, 0x80]).toString('base64'), binary: true });
  }
  for (const c of news) {
    const got = await drain(c, 300, 10000, 6);
    assert.equal(got.length, 6, `each subscriber gets each of the 6 messages once: ${JSON.stringify(got.map((m) => m.text))}`);
    for (let i = 0; i < 3; i++) {
      const mine = got.filter((m) => (m.isBinary ? m.data[0] === i : m.text === `text from ${i}`));
      assert.equal(mine.length, 2, `publisher ${i}: one text and one binary`);
      assert.deepEqual(mine.map((m) => m.isBinary), [false, true], 'opcode kept, in the publisher\'s order');
      assert.deepEqual([...mine[1].data], [i, 0xff, 0, 0x80], 'binary bytes intact');
    }
  }
  for (const c of other) assert.deepEqual(await drain(c, 100), [], 'subscribers of another topic get nothing');
  for (const inst of list) {
    const s = await bridgeStats(inst);
    assert.equal(s.connected, true);
    assert.equal(s.published, 2);
    assert.equal(s.ownEchoes, 2, 'its own two messages came back from Redis and were skipped');
    assert.equal(s.received, 4, 'the other instances\' four were delivered');
    assert.equal(s.dropped + s.failed + s.malformed, 0);
  }
});

test('ws.publish reaches every subscriber on every instance but the sender; topics without local subscribers are not subscribed in Redis', { skip: REDIS_SKIP, timeout: 60000 }, async (t) => {
  const redis = await redisServer(t);
  const list = await instances(t, 3, redis.url);
  const sender = await subscriber(t, list[0], ['room']);
  const peers = [await subscriber(t, list[0], ['room']), await subscriber(t, list[1], ['room']), await subscriber(t, list[1], ['room'])];
  const lone = await subscriber(t, list[2], ['elsewhere']);
  await allSynced(list);
  const probe = new Redis(redis.url);
  t.after(() => probe.disconnect());
  assert.deepEqual(await probe.pubsub('NUMSUB', `${PREFIX}room`, `${PREFIX}elsewhere`), [`${PREFIX}room`, 2, `${PREFIX}elsewhere`, 1],
    'one Redis subscription per instance that has subscribers to the topic');
  await sender.send(JSON.stringify({ topic: 'room', data: 'hi all' }));
  for (const c of peers) assert.deepEqual((await drain(c, 300, 10000, 1)).map((m) => m.text), ['hi all']);
  assert.deepEqual(await drain(sender, 200), [], 'not to the sender (uWS\'s rule), not back through Redis');
  assert.deepEqual(await drain(lone, 100), []);
  assert.equal((await bridgeStats(list[2])).received, 0, 'instance 2 is not subscribed to room: Redis sends it nothing');
  lone.close();
  await waitFor(async () => (await bridgeStats(list[2])).topics === 0, { label: 'instance 2 has no topic' });
  await list[2].op('synced');
  assert.deepEqual(await probe.pubsub('NUMSUB', `${PREFIX}elsewhere`), [`${PREFIX}elsewhere`, 0], 'its last subscriber gone, the channel is unsubscribed');
});

test('local delivery of a message from another instance is the app\'s publish: compressed once for all its subscribers', { skip: REDIS_SKIP, timeout: 60000 }, async (t) => {
  const redis = await redisServer(t);
  const list = await instances(t, 3, redis.url, { env: { COMPRESS: '1' } });
  const subs = [];
  for (const inst of list.slice(1)) for (let k = 0; k < 5; k++) subs.push(await subscriber(t, inst, ['doc'], { perMessageDeflate: true }));
  await allSynced(list);
  const before = await Promise.all(list.map((i) => i.op('stats')));
  const doc = JSON.stringify({ msg: 'added', collection: 'tasks', fields: { text: 'compress me '.repeat(400) } });
  await list[0].op('publish', { topic: 'doc', data: doc, compress: true });
  for (const c of subs) {
    const [m] = await c.take(1);
    assert.equal(m.text, doc);
    assert.match(c.ws.extensions, /permessage-deflate/);
  }
  for (const [k, inst] of list.slice(1).entries()) {
    const after = (await inst.op('stats')).app;
    const b = before[k + 1].app;
    assert.equal(after.compressions - b.compressions, 1, 'one compression for the five subscribers');
    assert.equal(after.compressionsReused - b.compressionsReused, 4);
    assert.ok(after.wireBytesOut - b.wireBytesOut < 5 * doc.length / 4, 'compressed on the wire');
  }
});

test('Redis down at start: a warning naming Redis, retries; local publish works meanwhile (counted as droppedOffline); bridged once Redis is up', { skip: REDIS_SKIP, timeout: 60000 }, async (t) => {
  const redis = await redisServer(t, { start: false });
  const [a] = await instances(t, 1, redis.url, { options: { retryMaxMs: 200 } });
  const local = await subscriber(t, a, ['x']);
  await waitFor(() => /redis bridge: .*ECONNREFUSED.*retrying/.test(a.proc.stderr()), { label: 'the warning on stderr' });
  assert.match(a.proc.stderr(), new RegExp(`redis://127\\.0\\.0\\.1:${redis.port}`), 'the warning names the URL');
  await a.op('publish', { topic: 'x', data: 'while down' });
  assert.deepEqual((await local.take(1)).map((m) => m.text), ['while down'], 'local subscribers still get it');
  let s = await bridgeStats(a);
  assert.equal(s.connected, false);
  assert.equal(s.droppedOffline, 1);
  assert.ok(s.errors >= 1);
  await sleep(500);
  assert.equal((a.proc.stderr().match(/DTN_REDIS_UNAVAILABLE/g) || []).length, 1, 'one warning per outage, not one per retry');
  await redis.start();
  await a.op('synced'); // resolves once connected and subscribed
  const [b] = await instances(t, 1, redis.url);
  await b.op('synced');
  await b.op('publish', { topic: 'x', data: 'from b' });
  assert.deepEqual((await local.take(1)).map((m) => m.text), ['from b']);
  s = await bridgeStats(a);
  assert.equal(s.connected, true);
  assert.equal(s.received, 1);
});

test('Redis restarted while publishing: reconnects and resubscribes; what was published meanwhile is counted, nothing is delivered twice or out of order', { skip: REDIS_SKIP, timeout: 90000 }, async (t) => {
  const redis = await redisServer(t);
  const list = await instances(t, 3, redis.url, { options: { retryMaxMs: 200 } });
  const local = await subscriber(t, list[0], ['s']);
  const remote = [await subscriber(t, list[1], ['s']), await subscriber(t, list[2], ['s'])];
  await allSynced(list);
  const COUNT = 400;
  const streaming = list[0].op('stream', { topic: 's', count: COUNT, intervalMs: 10 });
  await sleep(1000);
  await redis.stop();
  await sleep(500);
  await redis.start();
  assert.deepEqual(await streaming, { id: (await streaming).id, published: COUNT });
  await allSynced(list);
  assert.deepEqual(seqs(await drain(local, 300, 10000, COUNT)), Array.from({ length: COUNT }, (_, i) => i), 'local subscribers get every message');
  const a = await bridgeStats(list[0]);
  assert.equal(a.published + a.droppedOffline + a.droppedQueueFull, COUNT, 'every publish is counted once');
  assert.equal(a.acknowledged + a.failed, a.published, 'each message sent is answered or failed (in flight when the connection broke)');
  assert.equal(a.queued, 0);
  assert.ok(a.droppedOffline > 0, 'publishes while Redis was down are counted as droppedOffline');
  for (const [k, c] of remote.entries()) {
    const got = seqs(await drain(c));
    for (let i = 1; i < got.length; i++) assert.ok(got[i] > got[i - 1], `instance ${k + 1}: in order, no duplicate (${got[i - 1]}, ${got[i]})`);
    const gaps = got.filter((v, i) => i > 0 && v !== got[i - 1] + 1).length;
    assert.equal(gaps, 1, `instance ${k + 1}: one gap, the outage: ${JSON.stringify(got)}`);
    assert.equal(got[0], 0);
    assert.equal(got[got.length - 1], COUNT - 1, `instance ${k + 1}: resubscribed, the stream's tail arrived`);
    assert.ok(got.length <= a.acknowledged, 'at most what Redis acknowledged');
  }
  for (const inst of list) {
    const s = await bridgeStats(inst);
    assert.equal(s.connected, true);
    assert.ok(s.reconnects >= 2, `both connections reconnected (${s.reconnects})`);
  }
  // a topic first subscribed after the restart works too
  const late = await subscriber(t, list[2], ['late']);
  await allSynced(list);
  await list[1].op('publish', { topic: 'late', data: 'after' });
  assert.deepEqual((await late.take(1)).map((m) => m.text), ['after']);
});

test('a stopped Redis (SIGSTOP): the outbound queue stays within maxQueued / maxQueuedBytes, the rest is counted as droppedQueueFull, memory stays bounded; resumed, the queued messages arrive in order', { skip: REDIS_SKIP, timeout: 90000 }, async (t) => {
  const redis = await redisServer(t);
  const MAX_QUEUED = 1000;
  const MAX_BYTES = 1024 * 1024;
  const [byCount] = await instances(t, 1, redis.url, { options: { maxQueued: MAX_QUEUED } });
  const [byBytes] = await instances(t, 1, redis.url, { options: { maxQueued: 1e7, maxQueuedBytes: MAX_BYTES } });
  const [b] = await instances(t, 1, redis.url);
  const remote = await subscriber(t, b, ['slow']);
  await allSynced([byCount, byBytes, b]);
  await byCount.op('burst', { topic: 'slow', count: 10, size: 10 }); // the path works
  assert.equal((await drain(remote, 300, 10000, 10)).length, 10);
  const rss0 = (await byBytes.op('stats')).memory.rss;
  redis.pause();
  t.after(() => redis.resume());
  // 5,000 small messages: the count cap
  await byCount.op('burst', { topic: 'slow', count: 5000, size: 10 });
  const c = await bridgeStats(byCount);
  assert.equal(c.queued, MAX_QUEUED);
  assert.equal(c.published, 10 + MAX_QUEUED);
  assert.equal(c.droppedQueueFull, 5000 - MAX_QUEUED);
  // 100,000 messages of 2 KiB (195 MiB offered): the byte cap, memory bounded
  await byBytes.op('burst', { topic: 'slow', count: 100000, size: 2048 });
  const y = await bridgeStats(byBytes);
  assert.ok(y.queuedBytes <= MAX_BYTES && y.queuedBytes > MAX_BYTES - 2100, `queued bytes ${y.queuedBytes}: up to ${MAX_BYTES}`);
  assert.equal(y.published, y.queued);
  assert.equal(y.published + y.droppedQueueFull, 100000, 'every publish counted once');
  const grown = ((await byBytes.op('stats')).memory.rss - rss0) / 1048576;
  assert.ok(grown < 64, `RSS grew ${grown.toFixed(1)} MiB for 195 MiB offered while Redis was stopped`);
  redis.resume();
  for (const inst of [byCount, byBytes]) {
    await waitFor(async () => (await bridgeStats(inst)).queued === 0, { timeout: 20000, label: 'queue drained after SIGCONT' });
    const s = await bridgeStats(inst);
    assert.equal(s.acknowledged, s.published);
  }
  const got = await drain(remote, 300, 30000, MAX_QUEUED + y.published);
  const small = seqs(got.filter((m) => m.text.length < 100));
  const large = seqs(got.filter((m) => m.text.length > 2048));
  assert.deepEqual(small, Array.from({ length: MAX_QUEUED }, (_, i) => i), 'the first maxQueued of the stop, in order');
  assert.deepEqual(large, Array.from({ length: y.published }, (_, i) => i), 'all that fit in maxQueuedBytes, in order');
});

test('without ioredis installed, bridge() throws an error naming the package and how to install it', { timeout: 30000 }, async () => {
  const child = runNode(`
    const Module = require('node:module');
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      if (request === 'ioredis') { const e = new Error("Cannot find module 'ioredis'"); e.code = 'MODULE_NOT_FOUND'; throw e; }
      return resolve.call(this, request, ...rest);
    };
    const uWS = require('ddp-transport-native/uws');
    const { bridge } = require('ddp-transport-native/redis');
    try { bridge(uWS.App(), { url: 'redis://127.0.0.1:1' }); console.log(JSON.stringify({ threw: null })); }
    catch (e) { console.log(JSON.stringify({ threw: e.message })); }
  `, { timeoutMs: 20000 });
  const m = await child.waitMessage((x) => 'threw' in x, 15000);
  assert.match(m.threw, /needs the Redis client 'ioredis', which is not installed .*npm install ioredis/);
});

test('bad bridge options throw at setup naming the key; an app of the main API or one bridged twice is refused', () => {
  const uWS = require('ddp-transport-native/uws');
  const { App } = require('ddp-transport-native');
  const { bridge } = require('ddp-transport-native/redis');
  const app = uWS.App();
  assert.throws(() => bridge(app, { url: 'http://x' }), /url must be a redis:\/\/ or rediss:\/\/ URL/);
  assert.throws(() => bridge(app, { prefix: 3 }), /prefix must be a string/);
  assert.throws(() => bridge(app, { maxQueued: 0 }), /maxQueued must be an integer from 1/);
  assert.throws(() => bridge(app, { maxQueuedBytes: 1.5 }), /maxQueuedBytes must be an integer/);
  assert.throws(() => bridge(app, { urll: 'redis://x' }), /unknown option urll/);
  assert.throws(() => bridge(App(), {}), /app must be an App \(or SSLApp\) of ddp-transport-native\/uws/);
  const b = bridge(app, { url: 'redis://127.0.0.1:1', retryMaxMs: 10000 });
  assert.throws(() => bridge(app, {}), /already bridged/);
  app.close(); // closes the bridge with it
  assert.equal(app._topics.broker, null);
  return b.close();
});

test('/uws without a bridge stays uWS.js: no Redis client loaded, publish stays in the process', { timeout: 30000 }, async () => {
  const child = runNode(`
    const uWS = require('ddp-transport-native/uws');
    const app = uWS.App();
    const local = app.publish('t', 'x');
    app.close();
    console.log(JSON.stringify({ local, loaded: Object.keys(require.cache).filter((k) => /ioredis|lib[\\\\/]redis/.test(k)) }));
  `, { timeoutMs: 20000 });
  const m = await child.waitMessage((x) => 'loaded' in x, 15000);
  assert.deepEqual(m, { local: false, loaded: [] });
});
