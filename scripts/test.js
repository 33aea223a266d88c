'use strict';
// The two test commands, from one list (ONLY_IN_ALL below):
//   npm test           the fast loop: build the addon when needed (scripts/ensure-built.js), cargo's
//                      tests, then every node:test suite under __test__/ except ONLY_IN_ALL's
//   npm run test:all   (this script with --all) the same with every suite, in both I/O modes
//                      (DDP_TRANSPORT_NATIVE_IO=inline, then =threads): what .ci/run runs
// npm test runs the suites in the mode DDP_TRANSPORT_NATIVE_IO names (default: the apps' default,
// inline). cargo's tests run the server's socket tests with both drivers either way.
// Other arguments go to `node --test` (e.g. --test-reporter=tap).

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.join(__dirname, '..');
const TESTS = path.join(ROOT, '__test__');

// The suites only `npm run test:all` runs, and why: each drives a browser or a proxy (Chromium,
// Firefox, WebKit, nginx, HAProxy) or runs long on its own. docs/testing.md has each suite's time.
const ONLY_IN_ALL = {
  'bench-smoke.test.js': 'every benchmark server and workload once',
  'browser-demo.test.js': 'headless Chromium',
  'browser-engines.test.js': 'Chromium, Firefox and WebKit (~30 s per I/O mode)',
  'fairness.test.js': 'saturates the server',
  'memory.test.js': 'RSS after 5,000-connection bursts',
  'proxy-attach.test.js': 'HAProxy in front',
  'proxy-protocol.test.js': 'HAProxy in front',
  'runtimes.test.js': 'Bun and Deno, installed from npm (~90 MB the first time)',
  'scale-out.test.js': 'nginx in front of two instances',
  'types.test.js': 'a TypeScript compile',
};

function suites(all) {
  const found = fs.readdirSync(TESTS).filter((f) => /\.test\.m?js$/.test(f)).sort();
  const unknown = Object.keys(ONLY_IN_ALL).filter((f) => !found.includes(f));
  if (unknown.length) {
    console.error(`scripts/test.js: ONLY_IN_ALL names suites that do not exist: ${unknown.join(', ')}`);
    process.exit(1);
  }
  return all ? found : found.filter((f) => !(f in ONLY_IN_ALL));
}

function run(cmd, args, env = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', env: { ...process.env, ...env } });
  if (r.error) throw r.error;
  if (r.status !== 0) process.exit(r.status === null ? 1 : r.status);
}

const args = process.argv.slice(2);
const all = args.includes('--all');
const files = suites(all);
if (!all) {
  console.error(`npm test: ${files.length} node:test suites; npm run test:all also runs ` +
    Object.entries(ONLY_IN_ALL).map(([f, why]) => `${f} (${why})`).join(', '));
}
run(process.execPath, [path.join(__dirname, 'ensure-built.js')]);
run('cargo', ['test', '--workspace', '--release']);
run('cargo', ['test', '--release', '-p', 'native-ws', '--test', 'server'], { DDP_TRANSPORT_NATIVE_IO: 'inline' });
const modes = all ? ['inline', 'threads'] : [process.env.DDP_TRANSPORT_NATIVE_IO || 'inline'];
for (const mode of modes) {
  console.error(`node:test suites, I/O mode ${mode} (DDP_TRANSPORT_NATIVE_IO=${mode})`);
  run(process.execPath, ['--test', ...args.filter((a) => a !== '--all'), ...files.map((f) => path.join('__test__', f))],
    { DDP_TRANSPORT_NATIVE_IO: mode });
}
