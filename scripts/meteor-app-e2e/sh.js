'use strict';
// Process helpers of the real-app suite: run a command (output to a log file, bounded in time),
// npm pack from the registry, a free port (the tests' helper), waiting for a port.

const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { freePort } = require('../../__test__/helpers/common');

let logFile = null;

/** Every command's output goes to this file (the suite prints only its own lines). */
function setLog(file) {
  logFile = file;
  fs.mkdirSync(path.dirname(file), { recursive: true });
}

function appendLog(text) {
  if (logFile) fs.appendFileSync(logFile, text);
}

/**
 * Runs cmd with args; throws with the output's tail when it fails. Returns stdout.
 * options: cwd, env, timeout (ms, default 20 min), input, allowFail (returns { status, out }).
 */
function run(cmd, args, options = {}) {
  const started = Date.now();
  appendLog(`\n$ (cd ${options.cwd || process.cwd()}) ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, {
    cwd: options.cwd,
    env: options.env || process.env,
    input: options.input,
    encoding: 'utf8',
    timeout: options.timeout || 20 * 60_000,
    maxBuffer: 256 << 20,
  });
  const out = `${r.stdout || ''}${r.stderr || ''}`;
  appendLog(`${out}\n[exit ${r.status}${r.signal ? ` ${r.signal}` : ''}${r.error ? ` ${r.error.message}` : ''} after ${((Date.now() - started) / 1000).toFixed(1)} s]\n`);
  if (options.allowFail) return { status: r.error ? -1 : r.status, out, stdout: r.stdout || '' };
  if (r.error || r.status !== 0) {
    const tail = out.trim().split('\n').slice(-25).join('\n');
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.error ? r.error.message : `exit ${r.status}`}):\n${tail}`);
  }
  return r.stdout || '';
}

/** `npm pack <spec>` into dir (once); returns the tarball's path. */
function npmPack(spec, dir, npm = 'npm') {
  fs.mkdirSync(dir, { recursive: true });
  const marker = path.join(dir, `${spec.replace(/[^\w.@-]/g, '_')}.tarball`);
  if (fs.existsSync(marker)) {
    const file = fs.readFileSync(marker, 'utf8');
    if (fs.existsSync(file)) return file;
  }
  const out = run(npm, ['pack', spec, '--json', '--pack-destination', dir], { timeout: 10 * 60_000 });
  const [{ filename }] = JSON.parse(out.slice(out.indexOf('[')));
  const file = path.join(dir, path.basename(filename));
  fs.writeFileSync(marker, file);
  return file;
}

/** Resolves when something accepts on 127.0.0.1:port; rejects after ms. */
async function waitForPort(port, ms, isDead = () => null) {
  const until = Date.now() + ms;
  for (;;) {
    const dead = isDead();
    if (dead) throw new Error(dead);
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing answered on 127.0.0.1:${port} within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** For a child spawned `detached` (its own process group: a tool, the app it runs and their
 *  children): a function that ends the whole group (SIGTERM, SIGKILL after 10 s) and resolves
 *  once the child has exited. */
function groupStopper(child) {
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try { process.kill(-child.pid, 'SIGTERM'); } catch {}
    const t = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch {} }, 10_000);
    await exited;
    clearTimeout(t);
  };
}

module.exports = { setLog, appendLog, run, npmPack, freePort, waitForPort, groupStopper };
