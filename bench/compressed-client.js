'use strict';
// The compressed-echo workload's client (Node + `ws`, since the Rust load generator speaks no
// permessage-deflate): N DDP clients keep K echo calls of a ~2 KiB JSON document in flight for S
// seconds over permessage-deflate, offered like Meteor's node DDP client does
// (`permessage-deflate; client_max_window_bits`) and compressing its own messages with Meteor's
// numbers (threshold 1024, level 1, memLevel 1).
//
//   node bench/compressed-client.js --url ws://127.0.0.1:P/websocket [--clients 50] [--inflight 4]
//        [--seconds 10] [--payload 2048] [--timeout 60] [--sync]
//
// Same stdout protocol as the loadgen: `MARK start`, `MARK end` (with --sync each waits for a line
// on stdin), then one JSON line. Bounded: connects and drains time out, the run stops at --seconds.

const WebSocket = require('ws');
const readline = require('node:readline');

function parseArgs(argv) {
  const o = { url: 'ws://127.0.0.1:3000/websocket', clients: 50, inflight: 4, seconds: 10, payload: 2048, timeout: 60, sync: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--url': o.url = next(); break;
      case '--clients': o.clients = Number(next()); break;
      case '--inflight': o.inflight = Number(next()); break;
      case '--seconds': o.seconds = Number(next()); break;
      case '--payload': o.payload = Number(next()); break;
      case '--timeout': o.timeout = Number(next()); break;
      case '--sync': o.sync = true; break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  for (const k of ['clients', 'inflight', 'seconds', 'payload', 'timeout']) {
    if (!(o[k] > 0)) throw new Error(`--${k} must be > 0`);
  }
  return o;
}

/** A JSON document of about `bytes` bytes, shaped like a page of Meteor documents. */
function makeDoc(bytes) {
  const items = [];
  const doc = { page: 1, items };
  for (let i = 0; JSON.stringify(doc).length < bytes; i++) {
    items.push({ _id: `doc${String(i).padStart(5, '0')}`, name: `Item number ${i}`, qty: (i * 7) % 13,
      price: Math.round(((i * 37) % 1000) * 1.5) / 100, tags: ['alpha', i % 2 ? 'odd' : 'even'] });
  }
  return doc;
}

let lines = null;
const waiting = [];
const queued = [];
function stdinLine() {
  if (!lines) {
    lines = readline.createInterface({ input: process.stdin });
    lines.on('line', (l) => (waiting.length ? waiting.shift()(l) : queued.push(l)));
    lines.on('close', () => { while (waiting.length) waiting.shift()(null); });
  }
  if (queued.length) return Promise.resolve(queued.shift());
  return new Promise((resolve) => waiting.push(resolve));
}

async function mark(name, sync) {
  process.stdout.write(`MARK ${name}\n`);
  if (sync) await stdinLine();
}

function pct(sorted, p) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
}

function connectOne(url, timeoutMs) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      perMessageDeflate: {
        threshold: 1024,
        zlibDeflateOptions: { level: 1, memLevel: 1 },
        clientMaxWindowBits: true,
      },
      maxPayload: 16 * 1024 * 1024,
    });
    const timer = setTimeout(() => { ws.terminate(); reject(new Error('timed out connecting')); }, timeoutMs);
    ws.on('error', (e) => { clearTimeout(timer); reject(e); });
    ws.on('open', () => ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })));
    const onMsg = (data) => {
      const m = JSON.parse(data.toString());
      if (m.msg === 'connected') {
        clearTimeout(timer);
        ws.off('message', onMsg);
        ws.removeAllListeners('error');
        resolve(ws);
      } else if (m.msg === 'failed' || m.msg === 'error') {
        clearTimeout(timer);
        reject(new Error(`DDP ${m.msg}: ${data}`));
      }
    };
    ws.on('message', onMsg);
  });
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const params = [makeDoc(o.payload)];
  const paramsJson = JSON.stringify(params);
  const docBytes = JSON.stringify(params[0]).length;

  const conns = await Promise.all(Array.from({ length: o.clients }, () => connectOne(o.url, o.timeout * 1000)));
  const extensions = conns[0].extensions || '';
  const negotiated = /permessage-deflate/.test(extensions);

  await mark('start', o.sync);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + o.seconds * 1000;
  const lat = [];
  let done = 0;
  let payloadBytesIn = 0;
  const wire0 = conns.map((ws) => ws._socket.bytesRead);
  const errors = [];

  await new Promise((resolveAll) => {
    let live = conns.length;
    const finishOne = () => { if (--live === 0) resolveAll(); };
    const guard = setTimeout(() => {
      errors.push('replies still missing 10 s after the deadline');
      resolveAll();
    }, o.seconds * 1000 + 10000);
    guard.unref();
    conns.forEach((ws) => {
      let nextId = 1;
      const inflight = new Map();
      let stopped = false;
      const send = () => {
        const id = String(nextId++);
        inflight.set(id, performance.now());
        ws.send(`{"msg":"method","id":"${id}","method":"echo","params":${paramsJson}}`);
      };
      const stop = () => { if (!stopped) { stopped = true; finishOne(); } };
      ws.on('message', (data) => {
        payloadBytesIn += data.length;
        const m = JSON.parse(data.toString());
        if (m.msg === 'result') {
          const t = inflight.get(m.id);
          if (t === undefined) return;
          inflight.delete(m.id);
          const now = performance.now();
          lat.push(now - t);
          if (now < deadline) {
            done++;
            send();
          } else if (inflight.size === 0) {
            stop();
          }
        } else if (m.msg === 'ping') {
          ws.send('{"msg":"pong"}');
        }
      });
      ws.on('close', () => { if (!stopped) errors.push('server closed a connection'); stop(); });
      ws.on('error', (e) => errors.push(e.message));
      for (let i = 0; i < o.inflight; i++) send();
    });
  });

  const wall = (Math.min(performance.now(), deadline) - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const wireIn = conns.reduce((s, ws, i) => s + (ws._socket.bytesRead - wire0[i]), 0);
  await mark('end', o.sync);
  lat.sort((a, b) => a - b);
  const ok = errors.length === 0 && done > 0 && negotiated;
  const out = {
    workload: 'compressed', ok, clients: o.clients, inflight: o.inflight, seconds: wall, calls: done,
    calls_per_s: done / wall, lat_p50_us: pct(lat, 50) * 1000, lat_p99_us: pct(lat, 99) * 1000,
    doc_bytes: docBytes, negotiated, extensions,
    wire_ratio: payloadBytesIn ? wireIn / payloadBytesIn : 0,
    loadgen_cpu_s: (cpu.user + cpu.system) / 1e6,
    loadgen_cpu_us_per_call: done ? (cpu.user + cpu.system) / done : 0,
    errors: errors.length,
    error: negotiated ? [...new Set(errors)].slice(0, 3).join('; ') : `permessage-deflate not negotiated (extensions: "${extensions}")`,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  for (const ws of conns) ws.terminate();
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ workload: 'compressed', ok: false, error: String(e && e.message || e) }) + '\n');
  process.exit(1);
});
