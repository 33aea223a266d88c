'use strict';
// Child-process helpers. Servers under test that must be measured (RSS, fds) or that must be
// allowed to crash / exit run in a fresh `node` started asynchronously: a blocking spawnSync in
// the test process would stall the addon's threadsafe-function delivery.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { deadline } = require('./common');

const PKG_PATH = path.resolve(__dirname, '..', '..');

/**
 * Run `source` with `node -e` in a fresh process (runProcess below). The child gets env DTN_PKG
 * (the package path, for `require(process.env.DTN_PKG)`).
 */
function runNode(source, { env = {}, timeoutMs = 60000, args = [] } = {}) {
  return runProcess(process.execPath, [...args, '-e', source], { env: { ...process.env, DTN_PKG: PKG_PATH, ...env }, timeoutMs });
}

/**
 * Run `file args` in a fresh process (env: exactly `env`). Each stdout line that parses as JSON is
 * a message. Returns a handle:
 *   child, pid, messages (array), stderr() (text so far),
 *   waitMessage(pred, timeout) -> the first message (seen or future) matching pred,
 *   send(obj) -> writes one JSON line to the child's stdin,
 *   exited -> Promise<{code, signal, exitAt}>, kill(), request(obj, pred, timeout).
 * The child is SIGKILLed after `timeoutMs` whatever happens, so it can never outlive the test.
 */
function runProcess(file, args, { env = process.env, cwd, timeoutMs = 60000 } = {}) {
  const child = spawn(file, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const messages = [];
  const waiters = [];
  let stderr = '';
  let stdoutRest = '';
  let exitInfo = null;
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { stderr += d; if (stderr.length > 200000) stderr = stderr.slice(-100000); });
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    stdoutRest += d;
    let i;
    while ((i = stdoutRest.indexOf('\n')) >= 0) {
      const line = stdoutRest.slice(0, i);
      stdoutRest = stdoutRest.slice(i + 1);
      let msg;
      try { msg = JSON.parse(line); } catch { msg = { type: 'text', line }; }
      messages.push(msg);
      for (const w of waiters.slice()) {
        if (w.pred(msg)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(msg); }
      }
    }
  });
  child.stdin.on('error', () => {});
  const killTimer = setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, timeoutMs);
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      clearTimeout(killTimer);
      exitInfo = { code, signal, exitAt: Date.now() };
      const err = () => new Error(`child exited (code ${code}, signal ${signal}) before the expected message; stderr:\n${stderr.slice(-4000)}`);
      for (const w of waiters.splice(0)) w.reject(err());
      resolve(exitInfo);
    });
  });
  return {
    child,
    pid: child.pid,
    messages,
    stderr: () => stderr,
    exited,
    get exitInfo() { return exitInfo; },
    waitMessage(pred, timeout = 10000, label = 'child message') {
      const seen = messages.find(pred);
      if (seen) return Promise.resolve(seen);
      if (exitInfo) return Promise.reject(new Error(`child already exited (code ${exitInfo.code}); stderr:\n${stderr.slice(-4000)}`));
      let waiter;
      const p = new Promise((resolve, reject) => { waiter = { pred, resolve, reject }; waiters.push(waiter); });
      return deadline(p, timeout, `${label}; child stderr: ${stderr.slice(-2000)}`).catch((e) => {
        const i = waiters.indexOf(waiter);
        if (i >= 0) waiters.splice(i, 1);
        throw e;
      });
    },
    send(obj) {
      if (!exitInfo && child.stdin.writable) child.stdin.write(`${JSON.stringify(obj)}\n`);
    },
    /** Send a request {id, ...} and wait for the reply with the same id. */
    request(obj, timeout = 10000) {
      const id = `${Date.now()}-${Math.random()}`;
      const p = this.waitMessage((m) => m && m.id === id, timeout, `reply to ${JSON.stringify(obj)}`);
      this.send({ ...obj, id });
      return p;
    },
    kill() {
      if (!exitInfo) { try { child.kill('SIGKILL'); } catch { /* gone */ } }
      return exited;
    },
  };
}

/** {rss (bytes), fds (open descriptors)} of a live process, from /proc. */
function procStats(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(status);
  const rss = m ? Number(m[1]) * 1024 : NaN;
  const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
  return { rss, fds };
}

/**
 * Prepended to child scripts: `out(obj)` writes one JSON line to stdout, `App` is the package's
 * export, `onCommand(fn)` calls fn for each JSON line on stdin (keeps the child alive).
 */
const CHILD_PRELUDE = `
'use strict';
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const { App } = require(process.env.DTN_PKG);
function onCommand(fn) {
  const rl = require('node:readline').createInterface({ input: process.stdin });
  rl.on('line', (l) => { let m; try { m = JSON.parse(l); } catch { return; } fn(m); });
  rl.on('close', () => process.exit(0));
  return rl;
}
`;

module.exports = { runNode, runProcess, procStats, PKG_PATH, CHILD_PRELUDE };
