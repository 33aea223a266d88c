'use strict';
// The release layout (fast checks; `npm run test:dist` installs the real tarballs):
// npm/<platform> packages match napi.targets, nothing compiles at install, and without its
// binary the package fails with one message that says what to do.

const { test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { platformName, platformOf } = require('../lib/platform');

const ROOT = path.join(__dirname, '..');
const pkg = require('../package.json');

test('npm/<platform>/package.json for every napi target: name, version, main, files, os/cpu/libc', () => {
  for (const triple of pkg.napi.targets) {
    const platform = platformOf(triple);
    const p = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', platform, 'package.json'), 'utf8'));
    const binary = `${pkg.napi.binaryName}.${platform}.node`;
    assert.equal(p.name, `${pkg.name}-${platform}`);
    assert.equal(p.version, pkg.version, `${p.name}: run npx napi version`);
    assert.equal(p.main, binary);
    assert.deepEqual(p.files, [binary]);
    assert.deepEqual(p.os, [platform.split('-')[0]]);
    assert.deepEqual(p.cpu, [platform.split('-')[1]]);
    if (p.os[0] === 'linux') assert.deepEqual(p.libc, [platform.endsWith('-musl') ? 'musl' : 'glibc']);
  }
  const dirs = fs.readdirSync(path.join(ROOT, 'npm')).sort();
  assert.deepEqual(dirs, pkg.napi.targets.map(platformOf).sort());
});

test('nothing compiles at install: no install scripts, no binaries in the root package', () => {
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(pkg.scripts[s], undefined, s);
  assert.ok(!pkg.files.some((f) => f.includes('.node')));
  assert.ok(pkg.files.includes('binding.js'));
  assert.ok(fs.existsSync(path.join(ROOT, 'binding.js')), 'binding.js is committed');
});

/** The root package as published (optionalDependencies added, as npm run dist does), copied
 *  alone into node_modules, then `require`d in a child Node. */
function requireInstalled(setup) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-packaging-'));
  try {
    const at = path.join(dir, 'node_modules', pkg.name);
    fs.mkdirSync(at, { recursive: true });
    for (const f of ['binding.js', 'index.js', 'lib']) fs.cpSync(path.join(ROOT, f), path.join(at, f), { recursive: true });
    const optionalDependencies = Object.fromEntries(pkg.napi.targets.map((t) => [`${pkg.name}-${platformOf(t)}`, pkg.version]));
    fs.writeFileSync(path.join(at, 'package.json'), JSON.stringify({ ...pkg, optionalDependencies }));
    if (setup) setup(dir);
    const env = { ...process.env };
    delete env.NAPI_RS_NATIVE_LIBRARY_PATH;
    return spawnSync(process.execPath, ['-e', `require(${JSON.stringify(pkg.name)})`], { cwd: dir, env, encoding: 'utf8', timeout: 30_000 });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('without the platform package (--omit=optional): one message naming the package, no stack trace', () => {
  const r = requireInstalled();
  assert.notEqual(r.status, 0);
  const spec = `${pkg.name}-${platformName()}@${pkg.version}`;
  assert.match(r.stderr, new RegExp(`no prebuilt binary for ${platformName()} was installed`));
  assert.ok(r.stderr.includes(`npm install ${spec}`), r.stderr);
  assert.ok(r.stderr.split('\n').filter((l) => /^\s+at /.test(l)).length <= 1, r.stderr);
});

test('node_modules installed on another platform (a bundle built on a Mac): names the build step', () => {
  const other = platformName() === 'darwin-arm64' ? 'linux-x64-gnu' : 'darwin-arm64';
  const r = requireInstalled((dir) => {
    const name = `${pkg.name}-${other}`;
    const at = path.join(dir, 'node_modules', name);
    fs.mkdirSync(at);
    fs.writeFileSync(path.join(at, 'package.json'), JSON.stringify({ name, version: pkg.version }));
  });
  assert.notEqual(r.status, 0);
  const [os_, cpu, libc] = platformName().split('-');
  assert.match(r.stderr, new RegExp(`no prebuilt binary for ${platformName()} here, only ${pkg.name}-${other}`));
  const step = `meteor npm install --no-save --os=${os_} --cpu=${cpu}${os_ === 'linux' && libc ? ` --libc=${libc === 'gnu' ? 'glibc' : libc}` : ''}`;
  assert.ok(r.stderr.includes(step), r.stderr);
  assert.ok(r.stderr.includes(`npm install --no-save ${pkg.name}-${platformName()}@${pkg.version}`), r.stderr);
});

test('a platform package whose binary does not load: says so, with the reason', () => {
  const r = requireInstalled((dir) => {
    const name = `${pkg.name}-${platformName()}`;
    const at = path.join(dir, 'node_modules', name);
    fs.mkdirSync(at);
    const main = `${pkg.napi.binaryName}.${platformName()}.node`;
    fs.writeFileSync(path.join(at, 'package.json'), JSON.stringify({ name, version: pkg.version, main }));
    fs.writeFileSync(path.join(at, main), 'not a shared object');
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /is installed but does not load on this machine/);
  assert.match(r.stderr, /It failed with: /);
});
