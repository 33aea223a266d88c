'use strict';
// Bun and Deno for runtimes.test.js and bench/runtimes.js, from the npm registry: the platform
// packages the `bun` and `deno` packages depend on (`@oven/bun-<os>-<arch>`, `@deno/<os>-<arch>`),
// which hold the executable itself, so no install script runs and nothing comes from elsewhere.
// Installed once with `npm install --no-save --ignore-scripts --prefix <repo>/.cache/runtimes`
// and reused while the executables there answer `--version` with the pinned version.
//
//   runtimes({ install }) → { bun: Runtime | { skip }, deno: Runtime | { skip } }
//   Runtime: { name, version, bin, command(script) → [file, args, env] }

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { platformName } = require('../../lib/platform');

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(ROOT, '.cache', 'runtimes');

/** Pinned versions: the ones docs/runtimes.md reports. */
const VERSIONS = { bun: '1.4.5', deno: '2.9.6' };

/** The platform package and the executable inside it, or a reason there is none. */
function packageOf(name, platform = platformName()) {
  const bun = {
    'linux-x64-gnu': 'bun-linux-x64', 'linux-arm64-gnu': 'bun-linux-aarch64',
    'linux-x64-musl': 'bun-linux-x64-musl', 'linux-arm64-musl': 'bun-linux-aarch64-musl',
    'darwin-x64': 'bun-darwin-x64', 'darwin-arm64': 'bun-darwin-aarch64',
  };
  const deno = {
    'linux-x64-gnu': 'linux-x64-glibc', 'linux-arm64-gnu': 'linux-arm64-glibc',
    'darwin-x64': 'darwin-x64', 'darwin-arm64': 'darwin-arm64',
  };
  if (name === 'bun') {
    const p = bun[platform];
    if (!p) return { skip: `no Bun package on npm for ${platform}` };
    return { spec: `@oven/${p}@${VERSIONS.bun}`, bin: path.join(DIR, 'node_modules', '@oven', p, 'bin', 'bun') };
  }
  const p = deno[platform];
  if (!p) return { skip: `no Deno package on npm for ${platform}` };
  return { spec: `@deno/${p}@${VERSIONS.deno}`, bin: path.join(DIR, 'node_modules', '@deno', p, 'deno') };
}

/** Run a command asynchronously (a blocking spawnSync would stall an addon in this process):
 *  {code, stdout, stderr}, or {code: null, error} when it cannot start or runs over `timeout`. */
function run(file, args, { timeout = 30000, env, cwd } = {}) {
  return new Promise((resolve) => {
    let p;
    try {
      p = spawn(file, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      resolve({ code: null, error });
      return;
    }
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; if (stderr.length > 100000) stderr = stderr.slice(-50000); });
    const timer = setTimeout(() => p.kill('SIGKILL'), timeout);
    p.on('error', (error) => { clearTimeout(timer); resolve({ code: null, error, stdout, stderr }); });
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve(signal ? { code: null, error: new Error(`killed by ${signal} (over ${timeout} ms?)`), stdout, stderr } : { code, stdout, stderr });
    });
  });
}

/** Environment for the runtimes: no update checks, no prompts, their caches under DIR. */
const ENV = {
  NO_COLOR: '1',
  DENO_NO_UPDATE_CHECK: '1',
  DENO_NO_PROMPT: '1',
  DENO_DIR: path.join(DIR, 'deno-dir'),
  BUN_RUNTIME_TRANSPILER_CACHE_PATH: '0',
};

/** Deno's permissions for a program using the package: N-API addons need --allow-ffi; the
 *  addon's loader reads files and the environment; sockets need --allow-net. */
const DENO_PERMISSIONS = ['--allow-ffi', '--allow-net', '--allow-read', '--allow-env'];

/** How each runtime runs a CommonJS script: Deno takes a `.js` file as an ES module unless told
 *  (a `.cjs` name or "type": "commonjs" in package.json would also do). */
function command(name, bin, script, args = []) {
  if (name === 'deno') return [bin, ['run', ...DENO_PERMISSIONS, '--unstable-detect-cjs', script, ...args], ENV];
  return [bin, [script, ...args], ENV];
}

async function versionOf(name, bin) {
  if (!fs.existsSync(bin)) return null;
  const r = await run(bin, ['--version'], { timeout: 20000, env: ENV });
  if (r.code !== 0) return { error: `${bin} --version: ${r.error ? r.error.message : `exit ${r.code}`} ${(r.stderr || '').trim().slice(-300)}` };
  const m = name === 'deno' ? /^deno (\S+)/.exec(r.stdout) : /^(\S+)/.exec(r.stdout.trim());
  return { version: m ? m[1] : r.stdout.trim() };
}

function npmCommand() {
  const beside = path.join(path.dirname(process.execPath), 'npm');
  return fs.existsSync(beside) ? beside : 'npm';
}

/**
 * Bun and Deno, each a Runtime or {skip: reason}. With `install` (the default) the missing ones are
 * installed from npm first (one `npm install` for both: npm would prune a package installed alone).
 */
async function runtimes({ install = true, timeout = 300000 } = {}) {
  const names = ['bun', 'deno'];
  const found = {};
  const want = {};
  for (const name of names) {
    const pkg = packageOf(name);
    if (pkg.skip) { found[name] = { skip: pkg.skip }; continue; }
    want[name] = pkg;
  }
  const check = async () => {
    const missing = [];
    for (const [name, pkg] of Object.entries(want)) {
      const v = await versionOf(name, pkg.bin);
      if (v && v.version === VERSIONS[name]) {
        found[name] = { name, version: v.version, bin: pkg.bin, command: (script, args) => command(name, pkg.bin, script, args) };
      } else {
        found[name] = { skip: v && v.error ? v.error : `${name} ${VERSIONS[name]} is not installed in ${path.relative(ROOT, DIR)}${v ? ` (found ${v.version})` : ''}` };
        missing.push(name);
      }
    }
    return missing;
  };
  const missing = await check();
  if (missing.length && install) {
    fs.mkdirSync(DIR, { recursive: true });
    const specs = Object.values(want).map((p) => p.spec);
    const r = await run(npmCommand(), ['install', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund',
      '--loglevel=error', '--prefix', DIR, ...specs], { timeout, cwd: DIR });
    if (r.code !== 0) {
      const said = (r.stderr || '').split('\n').map((l) => l.replace(/^npm (error|ERR!)\s*/, '').trim())
        .filter((l) => l && !/complete log|npm help config/.test(l)).slice(0, 3).join(' / ');
      const why = r.error ? r.error.message : `exit ${r.code}: ${said}`;
      for (const name of missing) found[name] = { skip: `npm install ${specs.join(' ')} failed (${why})` };
      return found;
    }
    for (const name of await check()) found[name].skip = `installed ${want[name].spec}, but ${found[name].skip}`;
  }
  return found;
}

module.exports = { runtimes, command, VERSIONS, DIR, ENV, DENO_PERMISSIONS, run };
