'use strict';
// A real redis-server (Debian's package) for the Redis bridge's tests and bench: started on a free
// loopback port with no persistence, restartable on the same port, stopped (SIGSTOP) and resumed,
// killed when the test ends. REDIS_SERVER is null when the binary is absent: suites then skip,
// with the reason written in the suite itself (.ci/run greps the suites for it).

const { spawn } = require('node:child_process');
const net = require('node:net');
const { findExecutable, freePort, deadline, sleep } = require('./common');

const REDIS_SERVER = findExecutable('redis-server');


class RedisServer {
  constructor(port) {
    this.port = port;
    this.url = `redis://127.0.0.1:${port}`;
    this.proc = null;
    this.output = '';
  }

  /** Start it (again) on its port; resolves once it accepts connections (10 s at most). */
  async start() {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--daemonize', 'no', '--loglevel', 'warning'];
    const proc = spawn(REDIS_SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const keep = (d) => { this.output = (this.output + d).slice(-8000); };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    this.exited = exited;
    const end = Date.now() + 10000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited: ${this.output}`);
      if (await accepts(this.port)) return this;
      if (Date.now() > end) throw new Error(`redis-server did not accept within 10 s: ${this.output}`);
      await sleep(20);
    }
  }

  /** SIGTERM (SIGKILL after 5 s); resolves when it has exited. */
  async stop() {
    const proc = this.proc;
    if (proc === null || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGCONT');
    proc.kill('SIGTERM');
    await deadline(this.exited, 5000, 'redis-server exit').catch(() => { proc.kill('SIGKILL'); return this.exited; });
  }

  pause() { this.proc.kill('SIGSTOP'); }

  resume() { this.proc.kill('SIGCONT'); }
}

function accepts(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/** A redis-server on a free port, stopped when the test `t` ends (`{ start: false }`: not started). */
async function redisServer(t, { start = true } = {}) {
  const r = new RedisServer(await freePort());
  t.after(() => r.stop());
  if (start) await r.start();
  return r;
}

module.exports = { REDIS_SERVER, redisServer };
