'use strict';
// Shared test helpers: deadlines, polling, app start-up and a queued `ws` client wrapper.
// Every wait in here is bounded by a deadline so no test can hang.

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const WebSocket = require('ws');

const PKG_PATH = path.resolve(__dirname, '..', '..');

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Race `promise` against a timer; rejects with `timeout after Nms: label`. */
function deadline(promise, ms, label = 'operation') {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms: ${label}`)), ms);
  });
  return Promise.race([Promise.resolve(promise), timeout]).finally(() => clearTimeout(timer));
}

/** Poll `fn` until it returns a truthy value (returned) or the deadline passes (throws). */
async function waitFor(fn, { timeout = 5000, interval = 20, label = 'condition', describe } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (let i = 0; ; i++) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) {
      const extra = describe ? ` (${describe()})` : ` (last value: ${JSON.stringify(last)})`;
      throw new Error(`timeout after ${timeout} ms waiting for ${label}${extra}`);
    }
    await sleep(interval);
  }
}

/** `app.listen('127.0.0.1', 0, cb)` as a promise of the bound port. */
function listen(app, host = '127.0.0.1', port = 0) {
  return deadline(
    new Promise((resolve, reject) => {
      app.listen(host, port, (token, err) => {
        if (token && typeof token.port === 'number' && token.port > 0) resolve(token.port);
        else reject(err || new Error(`listen failed: token=${JSON.stringify(token)}`));
      });
    }),
    5000,
    `listen ${host}:${port}`,
  );
}

/**
 * Per-test resource tracker: every app and client registered is closed in `t.after`.
 * Usage: `const s = scope(t); const { app, port } = await s.app({...behavior})`.
 */
function scope(t) {
  const apps = [];
  const clients = [];
  const sockets = [];
  const children = [];
  t.after(async () => {
    for (const c of clients) {
      try { c.terminate(); } catch { /* already gone */ }
    }
    for (const so of sockets) {
      try { so.destroy(); } catch { /* already gone */ }
    }
    for (const a of apps) {
      try { a.close(); } catch { /* already closed */ }
    }
    for (const ch of children) {
      try { ch.kill(); } catch { /* already gone */ }
    }
  });
  return {
    /** Create an App (optionally with options), route `behavior` on `pattern`, listen; returns {app, port}. */
    async app(behavior, { pattern = '/*', appOptions, routes } = {}) {
      const { App } = require(PKG_PATH);
      const app = appOptions === undefined ? App() : App(appOptions);
      apps.push(app);
      if (routes) {
        for (const [p, b] of routes) app.ws(p, b);
      } else {
        app.ws(pattern, behavior);
      }
      const port = await listen(app);
      return { app, port };
    },
    trackApp(app) { apps.push(app); return app; },
    trackClient(c) { clients.push(c); return c; },
    trackSocket(so) { sockets.push(so); return so; },
    trackChild(ch) { children.push(ch); return ch; },
    async ws(url, opts) {
      const c = new WsClient(url, opts);
      clients.push(c);
      await c.opened;
      return c;
    },
  };
}

/**
 * A `ws` client whose incoming messages are queued so tests can `await next()` with a deadline.
 */
class WsClient {
  constructor(url, { protocols, headers, timeout = 10000, ...rest } = {}) {
    this.url = url;
    this.queue = [];
    this.waiters = [];
    this.pings = 0;
    this.closeInfo = null;
    this.error = null;
    this.ws = new WebSocket(url, protocols, { headers, handshakeTimeout: timeout, ...rest });
    this.ws.on('message', (data, isBinary) => {
      const m = { data, isBinary, text: isBinary ? null : data.toString('utf8') };
      const w = this.waiters.shift();
      if (w) w.resolve(m); else this.queue.push(m);
    });
    this.ws.on('ping', () => { this.pings++; });
    this.ws.on('error', (err) => { this.error = err; });
    this.opened = deadline(
      new Promise((resolve, reject) => {
        this.ws.once('upgrade', (res) => { this.localPort = res.socket.localPort; this.upgrade = res; });
        this.ws.once('open', () => resolve(this));
        this.ws.once('error', reject);
        this.ws.once('unexpected-response', (req, res) => {
          reject(new Error(`unexpected response ${res.statusCode}`));
          req.destroy();
        });
      }),
      timeout + 1000,
      `ws open ${url}`,
    );
    this.closed = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString('utf8') };
        const err = new Error('socket closed before message');
        for (const w of this.waiters.splice(0)) w.reject(err);
        resolve(this.closeInfo);
      });
    });
    // Unhandled rejection guard: `opened` may reject in tests that do not await it.
    this.opened.catch(() => {});
  }

  send(data, opts) {
    return new Promise((resolve, reject) => {
      this.ws.send(data, opts || {}, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** Next queued message ({data, isBinary, text}); rejects on deadline or close. */
  next(timeout = 5000) {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    if (this.closeInfo) return Promise.reject(new Error(`socket closed (${this.closeInfo.code}) before message`));
    let waiter;
    const p = new Promise((resolve, reject) => { waiter = { resolve, reject }; this.waiters.push(waiter); });
    return deadline(p, timeout, `message on ${this.url}`).catch((e) => {
      const i = this.waiters.indexOf(waiter);
      if (i >= 0) this.waiters.splice(i, 1);
      throw e;
    });
  }

  /** Collect exactly `n` messages. */
  async take(n, timeout = 10000) {
    const end = Date.now() + timeout;
    const out = [];
    for (let i = 0; i < n; i++) {
      out.push(await this.next(Math.max(1, end - Date.now())));
    }
    return out;
  }

  waitClose(timeout = 5000) {
    return deadline(this.closed, timeout, `close of ${this.url}`);
  }

  close(code, reason) { this.ws.close(code, reason); }

  terminate() { this.ws.terminate(); }

  get readyState() { return this.ws.readyState; }
}

/**
 * Attempt a ws upgrade that the server is expected to refuse; resolves {status, statusMessage, body, headers}.
 * Rejects if the upgrade succeeds.
 */
function wsExpectRejected(url, { protocols, headers, timeout = 5000 } = {}) {
  return deadline(
    new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { headers, handshakeTimeout: timeout });
      ws.on('error', () => {});
      ws.once('open', () => {
        ws.terminate();
        reject(new Error('upgrade unexpectedly accepted'));
      });
      ws.once('unexpected-response', (req, res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        const finish = () => {
          resolve({ status: res.statusCode, statusMessage: res.statusMessage, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
          req.destroy();
        };
        res.once('end', finish);
        res.once('error', finish);
        res.once('close', finish);
      });
    }),
    timeout + 1000,
    `rejected upgrade ${url}`,
  );
}

/** Run fn(0..total-1) with at most `concurrency` at once; counts successes, keeps 5 errors. */
async function pool(total, concurrency, fn) {
  let next = 0;
  let done = 0;
  const errors = [];
  const worker = async () => {
    while (next < total) {
      const i = next++;
      try { await fn(i); done++; } catch (e) { if (errors.length < 5) errors.push(`#${i}: ${e.message}`); }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { done, errors };
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for a server started by another process). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The path of an executable on PATH or in `extraDirs` (sbin directories by default), or null. */
function findExecutable(name, extraDirs = ['/usr/sbin', '/usr/local/sbin']) {
  for (const d of [...(process.env.PATH || '').split(path.delimiter), ...extraDirs]) {
    const p = path.join(d, name);
    try { fs.accessSync(p, fs.constants.X_OK); return p; } catch { /* next */ }
  }
  return null;
}

/** uWS.js itself (the uws-pack package), for tests that run a scenario against it beside this
 *  package: { uws } when it loads, else { uws: null, whyNot } (it needs a Node it has a binary for). */
async function importRealUws() {
  try {
    return { uws: await import('uws-pack'), whyNot: '' };
  } catch (e) {
    return { uws: null, whyNot: e.message };
  }
}

module.exports = {
  importRealUws,
  PKG_PATH,
  findExecutable,
  freePort,
  pool,
  sleep,
  deadline,
  waitFor,
  listen,
  scope,
  WsClient,
  wsExpectRejected,
};
