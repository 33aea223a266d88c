'use strict';
// The page browser-engines.test.js loads in every engine: plain HTML with one script that puts
// `window.h` in the page, the cases it runs with the browser's own WebSocket. Each case returns a
// small JSON result (lengths, FNV-1a hashes, samples, orders, close events) for the test to
// compare with what the server recorded; bulky data never leaves the page. The script is the
// source of pageHarness() below; it uses only what every engine has (no secure-context APIs).

/* global window, WebSocket, TextEncoder */
/* the page's script also holds fnv1a() (below) */
function pageHarness() {
  const enc = new TextEncoder();

  const bytesOf = (data) => (typeof data === 'string' ? enc.encode(data) : new Uint8Array(data));
  const hex = (u8) => Array.from(u8, (b) => b.toString(16).padStart(2, '0')).join('');
  /** What the test compares: byte length, hash, the first and last 8 bytes. */
  function digest(data) {
    const b = bytesOf(data);
    return { len: b.length, fnv: fnv1a(b), head: hex(b.subarray(0, 8)), tail: hex(b.subarray(Math.max(0, b.length - 8))) };
  }

  /** xorshift32: the same payloads in every engine and every run. */
  function rng(seed) {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13; x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5; x >>>= 0;
      return x;
    };
  }

  const PATTERN = 'héllo wörld ✓ 😀 DDP {"msg":"added","collection":"tasks"} ';
  /** A text of exactly n UTF-8 bytes: a repeated pattern (compressible) or random code points
   *  of 1 to 4 bytes (4-byte characters, i.e. surrogate pairs in JS, included; not compressible). */
  function text(n, random, seed) {
    const parts = [];
    let bytes = 0;
    if (!random) {
      const unit = enc.encode(PATTERN).length;
      const reps = Math.floor(n / unit);
      parts.push(PATTERN.repeat(reps));
      bytes = reps * unit;
    } else {
      const r = rng(seed);
      let chunk = [];
      while (n - bytes >= 4) {
        const k = r() % 4;
        let cp;
        if (k === 0) cp = 0x20 + (r() % 0x5f);
        else if (k === 1) cp = 0x80 + (r() % 0x780);
        else if (k === 2) { cp = 0x800 + (r() % 0xf000); if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x4e00 + (cp & 0xff); } // no lone surrogates
        else cp = 0x10000 + (r() % 0x100000);
        chunk.push(cp);
        bytes += k + 1;
        if (chunk.length === 8192) { parts.push(String.fromCodePoint(...chunk)); chunk = []; }
      }
      parts.push(String.fromCodePoint(...chunk));
    }
    parts.push('x'.repeat(n - bytes));
    return parts.join('');
  }
  /** n bytes: a repeated short run (compressible) or xorshift output (not). */
  function binary(n, random, seed) {
    const b = new Uint8Array(n);
    if (random) {
      const r = rng(seed);
      for (let i = 0; i < n; i++) b[i] = r() & 0xff;
    } else {
      for (let i = 0; i < n; i++) b[i] = (i % 61) + ((i >> 12) & 3);
    }
    return b;
  }

  function equal(a, b) {
    if (typeof a === 'string' || typeof b === 'string') return a === b;
    const x = new Uint8Array(a);
    const y = new Uint8Array(b);
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  }

  /** Opens a socket; resolves { ws, next(), closed } once open. next() resolves the next message. */
  function open(url, ms = 15000) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.binaryType = 'arraybuffer';
      const queue = [];
      const waiters = [];
      let closeEvent = null;
      const closeWaiters = [];
      ws.onmessage = (e) => (waiters.length ? waiters.shift()(e.data) : queue.push(e.data));
      ws.onclose = (e) => {
        closeEvent = { code: e.code, reason: e.reason, wasClean: e.wasClean };
        for (const w of waiters.splice(0)) w(null);
        for (const w of closeWaiters.splice(0)) w(closeEvent);
        reject(new Error(`closed before open: ${e.code} ${e.reason}`));
      };
      const timer = setTimeout(() => reject(new Error(`no open within ${ms} ms`)), ms);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve({
          ws,
          next: (t = 30000) => (queue.length ? Promise.resolve(queue.shift()) : new Promise((res, rej) => {
            if (closeEvent) return res(null);
            const timer2 = setTimeout(() => rej(new Error(`no message within ${t} ms`)), t);
            waiters.push((d) => { clearTimeout(timer2); res(d); });
          })),
          closed: (t = 15000) => (closeEvent ? Promise.resolve(closeEvent) : new Promise((res, rej) => {
            const timer3 = setTimeout(() => rej(new Error(`no close event within ${t} ms`)), t);
            closeWaiters.push((e) => { clearTimeout(timer3); res(e); });
          })),
        });
      };
    });
  }

  /** Every size × kind: sends each, waits for its echo, compares it whole. */
  async function echo(url, { sizes, tag }) {
    const s = await open(url);
    const rows = [];
    const kinds = [['text', false], ['text-random', true], ['binary', false], ['binary-random', true]];
    let seed = 7;
    for (const n of sizes) {
      for (const [kind, random] of kinds) {
        const isText = kind.startsWith('text');
        const msg = isText ? text(n, random, seed++) : binary(n, random, seed++);
        const started = performance.now();
        s.ws.send(msg);
        const got = await s.next(60000);
        rows.push({
          kind, size: n, sent: digest(msg), got: got === null ? null : digest(got),
          gotType: got === null ? 'none' : typeof got === 'string' ? 'text' : 'binary',
          equal: got !== null && equal(msg, got), ms: Math.round(performance.now() - started),
        });
      }
    }
    s.ws.close(1000, tag);
    await s.closed();
    return { extensions: s.ws.extensions, protocol: s.ws.protocol, rows };
  }

  /** n messages sent in one go (every third over 1 KiB, so compressed when deflate is on); the
   *  echoes must come back complete and in order. */
  async function burst(url, { n }) {
    const s = await open(url);
    const started = performance.now();
    for (let i = 0; i < n; i++) s.ws.send(`burst ${i} ${i % 3 === 0 ? 'z'.repeat(1500) : ''}`);
    const order = [];
    for (let i = 0; i < n; i++) {
      const d = await s.next(30000);
      if (d === null) break;
      order.push(Number(String(d).split(' ')[1]));
    }
    const ms = Math.round(performance.now() - started);
    s.ws.close(1000);
    await s.closed();
    const outOfOrder = order.findIndex((v, i) => v !== i);
    return { received: order.length, outOfOrder, ms };
  }

  /** Asks the server for its push; collects it until "push-done". */
  async function push(url) {
    const s = await open(url);
    const started = performance.now();
    s.ws.send('cmd:push');
    const texts = [];
    let bin = null;
    for (;;) {
      const d = await s.next(60000);
      if (d === null || d === 'push-done') break;
      if (typeof d === 'string') texts.push({ n: Number(d.split(' ')[1]), len: enc.encode(d).length, fnv: fnv1a(enc.encode(d)) });
      else bin = digest(d);
    }
    const ms = Math.round(performance.now() - started);
    s.ws.close(1000);
    await s.closed();
    return { bin, texts, ms };
  }

  /** The server ends the socket with an application code and reason; the page's close event. */
  async function serverClose(url, { code, reason }) {
    const s = await open(url);
    s.ws.send(`cmd:end:${code}:${reason}`);
    return s.closed();
  }

  /** The page closes with a code and reason; resolves the page's own close event. */
  async function clientClose(url, { code, reason }) {
    const s = await open(url);
    s.ws.send('cmd:hello');
    await s.next();
    s.ws.close(code, reason);
    return s.closed();
  }

  window.h = { echo, burst, push, serverClose, clientClose, ready: true };
}

/** FNV-1a, 32 bits, over bytes (a Buffer in Node, a Uint8Array in the page: the page gets this
 *  function's source beside pageHarness()'s). */
function fnv1a(bytes) {
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i];
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** digest() of the page, in Node. */
function digest(buf) {
  return {
    len: buf.length, fnv: fnv1a(buf),
    head: buf.subarray(0, 8).toString('hex'), tail: buf.subarray(Math.max(0, buf.length - 8)).toString('hex'),
  };
}

const PAGE_HTML = `<!doctype html><html><head><meta charset="utf-8"><title>engines</title></head>
<body><p>ddp-transport-native: browser engines</p><script>${fnv1a.toString()}
(${pageHarness.toString()})();</script></body></html>`;

module.exports = { PAGE_HTML, fnv1a, digest };
