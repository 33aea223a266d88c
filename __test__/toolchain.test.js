'use strict';
// The contributors' toolchain, as the README states it, and a Rust build without warnings:
// - `cargo clippy` (every target of the workspace, release profile, so it reuses `npm run build`'s
//   and `cargo test --release`'s dependencies) with -D warnings: a new compiler or clippy warning
//   fails here. clippy's incompatible_msrv lint checks the code against each crate's rust-version.
//   loadgen (bench/loadgen) is left out until its clippy warnings are fixed.
// - each crate's rust-version is at least the highest rust-version of its locked dependencies, and
//   the README, scripts/ensure-built.js and lib/load-binding.js name the addon's.
// - the Node the README asks contributors for is what every locked dev dependency declares it
//   runs on (uws-pack, the README's one exception, declares Node >= 22 and ships binaries for 18
//   to 22), and no older Node would do.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const semver = require('semver');

const ROOT = path.join(__dirname, '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

function cargo(args, timeout) {
  return spawnSync('cargo', args, { cwd: ROOT, encoding: 'utf8', timeout, maxBuffer: 256 << 20 });
}

test('cargo clippy --workspace --all-targets --release -- -D warnings: no warning', { timeout: 900_000 }, (t) => {
  if (cargo(['clippy', '--version'], 60_000).status !== 0) return t.skip('clippy not installed: rustup component add clippy');
  const r = cargo(['clippy', '--workspace', '--all-targets', '--release', '--', '-D', 'warnings'], 840_000);
  const problems = r.stderr.split('\n').filter((l) => /^(warning|error)\b/.test(l) || /^\s+--> /.test(l));
  assert.strictEqual(r.status, 0, `cargo clippy failed (${r.status}):\n${problems.join('\n') || r.stderr.slice(-4000)}`);
  assert.deepStrictEqual(problems.filter((l) => l.startsWith('warning')), [], r.stderr.slice(-4000));
});

test('each crate\'s rust-version covers its locked dependencies, and the docs name the addon\'s', { timeout: 300_000 }, () => {
  const r = cargo(['metadata', '--format-version', '1', '--locked'], 240_000);
  assert.strictEqual(r.status, 0, `cargo metadata failed:\n${r.stderr}`);
  const meta = JSON.parse(r.stdout);
  const packages = new Map(meta.packages.map((p) => [p.id, p]));
  const nodes = new Map(meta.resolve.nodes.map((n) => [n.id, n]));
  const version = (v) => semver.coerce(v).version;
  const checked = [];
  for (const id of meta.workspace_members) {
    const member = packages.get(id);
    if (!member.rust_version) continue;
    // Its dependencies, their dependencies (build ones included; dev ones of the member only).
    let highest = { rust: '0.0.0', by: null };
    const seen = new Set();
    const stack = [[id, true]];
    while (stack.length) {
      const [at, top] = stack.pop();
      if (seen.has(at)) continue;
      seen.add(at);
      const p = packages.get(at);
      if (at !== id && p.rust_version && semver.gt(version(p.rust_version), highest.rust)) {
        highest = { rust: version(p.rust_version), by: `${p.name} ${p.version}` };
      }
      for (const d of nodes.get(at).deps) {
        if (d.dep_kinds.some((k) => k.kind !== 'dev' || top)) stack.push([d.pkg, false]);
      }
    }
    assert.ok(semver.gte(version(member.rust_version), highest.rust),
      `${member.name}: rust-version ${member.rust_version}, but ${highest.by} declares ${highest.rust}`);
    checked.push(member.name);
  }
  assert.ok(checked.includes('ddp-transport-native') && checked.includes('native-ws'), `rust-version set in: ${checked.join(', ')}`);

  const addon = packages.get(meta.workspace_members.find((id) => packages.get(id).name === 'ddp-transport-native')).rust_version;
  for (const file of ['README.md', 'scripts/ensure-built.js', 'lib/load-binding.js']) {
    const named = [...fs.readFileSync(path.join(ROOT, file), 'utf8').matchAll(/Rust (?:≥|>=) ?(\d+\.\d+)/g)].map((m) => m[1]);
    assert.ok(named.length, `${file} names no Rust version`);
    for (const v of named) assert.strictEqual(v, addon, `${file} says Rust ≥ ${v}; Cargo.toml's rust-version is ${addon}`);
  }
});

test('the contributors\' Node in the README is what the locked dev dependencies declare', () => {
  const m = /Node (\d+\.\d+) or later in the (\d+) line, or (\d+\.\d+) or later/.exec(README.replace(/\s+/g, ' '));
  assert.ok(m, 'README.md, "Build from source", names the contributors\' Node as "Node X.Y or later in the X line, or Z.W or later"');
  const floors = [`${m[1]}.0`, `${m[3]}.0`];
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  const declared = Object.entries(lock.packages)
    .filter(([key, p]) => key && p.engines && p.engines.node)
    // optional ones (other platforms' binaries, the wasm32 fallbacks and what they need) where npm
    // installed them
    .filter(([key, p]) => !p.optional || fs.existsSync(path.join(ROOT, key, 'package.json')))
    .map(([key, p]) => ({ name: key.replace(/^.*node_modules\//, ''), version: p.version, range: p.engines.node }));
  const refuse = (v) => declared.filter((d) => d.name !== 'uws-pack' && !semver.satisfies(v, d.range))
    .map((d) => `${d.name}@${d.version} (${d.range})`);
  for (const floor of floors) {
    assert.deepStrictEqual(refuse(floor), [], `Node ${floor}: these dev dependencies declare they do not run on it`);
  }
  // The floors are the real ones: the Node just below each is refused by some dev dependency.
  assert.strictEqual(m[1].split('.')[0], m[2], `README.md: Node ${m[1]} is not in the ${m[2]} line`);
  const minorBelow = (v) => { const [major, minor] = v.split('.').map(Number); return `${major}.${minor - 1}.0`; };
  for (const v of [minorBelow(m[1]), minorBelow(m[3])]) {
    assert.ok(refuse(v).length, `every dev dependency also runs on Node ${v}: the README could ask for less`);
  }
  // uws-pack, the exception the README names, carries uWS.js binaries for this Node line.
  assert.match(README, /uws-pack/);
  const bins = fs.readdirSync(path.join(ROOT, 'node_modules', 'uws-pack', 'dist', 'bin'));
  for (const [line, abi] of [['20', 115], ['22', 127]]) {
    assert.ok(bins.some((b) => b.endsWith(`_${abi}.node`)), `uws-pack has no binary for Node ${line} (ABI ${abi})`);
  }
});
