'use strict';
// For contributors working from a clone (`npm start`, `npm test`): build the addon with
// `npm run build` when this platform's binary is missing or older than the Rust sources, so a
// fresh clone needs only `npm install && npm start`. Never runs for consumers: the published
// package has no scripts/ and no install scripts; it gets its binary from the platform package.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { platformName } = require('../lib/platform');

const ROOT = path.join(__dirname, '..');
const pkg = require('../package.json');
const BINARY = path.join(ROOT, `${pkg.napi.binaryName}.${platformName()}.node`);
// What the binary is built from (the workspace's bench crates are not part of it).
const INPUTS = ['Cargo.toml', 'Cargo.lock', 'build.rs', 'src', 'crates/native-ws/Cargo.toml', 'crates/native-ws/src'];

function newestMtime(p) {
  let st;
  try {
    st = fs.statSync(p);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, entry)));
  return newest;
}

function reason() {
  if (!fs.existsSync(path.join(ROOT, 'binding.js'))) return 'binding.js is missing';
  if (!fs.existsSync(BINARY)) return `${path.basename(BINARY)} is missing`;
  const built = fs.statSync(BINARY).mtimeMs;
  const changed = INPUTS.filter((p) => newestMtime(path.join(ROOT, p)) > built);
  return changed.length ? `${changed.join(', ')} changed since ${path.basename(BINARY)} was built` : null;
}

const why = reason();
if (why === null) process.exit(0);

const cargo = spawnSync('cargo', ['--version'], { stdio: 'ignore' });
if (cargo.error || cargo.status !== 0) {
  console.error(`ddp-transport-native: ${why}, and cargo is not on PATH. Building from source needs ` +
    'Rust >= 1.88 (https://rustup.rs) and a C toolchain; then run `npm run build`.');
  process.exit(1);
}
console.error(`ddp-transport-native: ${why}: npm run build`);
const npm = process.env.npm_execpath;
const build = npm && npm.endsWith('.js')
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: ROOT, stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' });
process.exit(build.status === null ? 1 : build.status);
