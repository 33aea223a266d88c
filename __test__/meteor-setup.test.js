'use strict';
// `npx ddp-transport-native meteor-setup` and meteor/ddp-server.patch, against a fixture (a
// stand-in Meteor checkout and app written for these tests, see helpers/meteor-fixture/README.md).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { withTimeout } = require('./helpers/meteor-util');

const ROOT = path.resolve(__dirname, '..');
const CLI = path.join(ROOT, 'scripts', 'cli.js');
const PATCH = path.join(ROOT, 'meteor', 'ddp-server.patch');
const FIXTURE = path.join(__dirname, 'helpers', 'meteor-fixture');
const pkg = require('../package.json');

const WEAK_DEP = 'api.use("ddp-transport-native", "server", { weak: true });';
const VALID_NATIVE = 'const VALID_NAMES = ["sockjs", "uws", "native"];';

/** A fresh copy of the fixture: { dir, meteor, app, server (the checkout's ddp-server) }. */
function fixture(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-setup-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.cpSync(FIXTURE, dir, { recursive: true });
  return {
    dir,
    meteor: path.join(dir, 'meteor'),
    app: path.join(dir, 'app'),
    server: path.join(dir, 'meteor', 'packages', 'ddp-server'),
  };
}

/** Run a command (no shell); resolves { code, stdout, stderr }. Bounded. */
function run(file, args, opts = {}) {
  return withTimeout(new Promise((resolve) => {
    execFile(file, args, { ...opts, encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  }), 20000, `${path.basename(file)} ${args.join(' ')}`);
}

const setup = (args, opts) => run(process.execPath, [CLI, 'meteor-setup', ...args], opts);
const read = (...p) => fs.readFileSync(path.join(...p), 'utf8');
const has = (cmd) => process.env.PATH.split(path.delimiter).some((d) => fs.existsSync(path.join(d, cmd)));

function assertNoStack(r) {
  assert.doesNotMatch(r.stderr, /\n\s+at /, `no stack trace expected:\n${r.stderr}`);
}

test('the patch applies to the stand-in ddp-server with git apply and patch -p1 (dry runs)', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  if (has('git')) {
    // From the app's root (or any directory), --directory names Meteor's ddp-server copy.
    const r = await run('git', ['apply', '--check', '-v', `--directory=packages/ddp-server`, PATCH], { cwd: f.meteor });
    assert.equal(r.code, 0, `git apply --check: ${r.stderr}`);
  } else {
    t.diagnostic('git not installed: git apply --check skipped');
  }
  if (has('patch')) {
    const r = await run('patch', ['-p1', '--dry-run', '-i', PATCH], { cwd: f.server });
    assert.equal(r.code, 0, `patch --dry-run: ${r.stdout}${r.stderr}`);
    // The stand-in's lines sit elsewhere than Meteor's (offset is fine); no fuzz, no failure.
    assert.doesNotMatch(r.stdout, /fuzz|FAILED/i, r.stdout);
  } else {
    t.diagnostic('patch not installed: patch --dry-run skipped');
  }
  // The files really patched by git apply: the two changes, nothing else.
  if (has('git')) {
    const r = await run('git', ['apply', `--directory=packages/ddp-server`, PATCH], { cwd: f.meteor });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(read(f.server, 'transports', 'index.js').includes(VALID_NATIVE));
    assert.ok(read(f.server, 'package.js').includes(WEAK_DEP));
  }
});

test('meteor-setup: copies and patches ddp-server, copies the provider, lists it in .meteor/packages, says so', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  const packagesBefore = read(f.app, '.meteor', 'packages');
  const r = await setup(['--meteor-src', f.meteor, '--app', f.app]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');
  const appServer = path.join(f.app, 'packages', 'ddp-server');

  // ddp-server: the VALID_NAMES line exactly as Meteor writes it, plus "native"; the weak dep
  // after the uws use, the rest of the file untouched.
  const index = read(appServer, 'transports', 'index.js');
  assert.ok(index.includes(VALID_NATIVE), index);
  assert.equal(index.replace(VALID_NATIVE, 'const VALID_NAMES = ["sockjs", "uws"];'), read(f.server, 'transports', 'index.js'));
  const pkgJs = read(appServer, 'package.js');
  const lines = pkgJs.split('\n').map((l) => l.trim());
  const uws = lines.indexOf('api.use("ddp-transport-uws", "server");');
  const weak = lines.indexOf(WEAK_DEP);
  const client = lines.indexOf('api.use("ddp-client", "server");');
  assert.ok(uws >= 0 && uws < weak && weak < client, pkgJs);
  // The checkout itself is left alone.
  assert.ok(!read(f.server, 'package.js').includes('ddp-transport-native'));

  // The provider package, byte for byte.
  for (const name of fs.readdirSync(path.join(ROOT, 'meteor', 'ddp-transport-native'))) {
    assert.equal(read(f.app, 'packages', 'ddp-transport-native', name), read(ROOT, 'meteor', 'ddp-transport-native', name), name);
  }
  // .meteor/packages: appended once, everything else kept.
  assert.equal(read(f.app, '.meteor', 'packages'), `${packagesBefore}ddp-transport-native\n`);

  // What it printed.
  assert.match(r.stdout, /ddp-server: copied .* to .*packages\/ddp-server/);
  assert.match(r.stdout, /ddp-server: patched .*transports\/index\.js/);
  assert.match(r.stdout, /ddp-server: patched .*package\.js/);
  assert.match(r.stdout, /ddp-transport-native: copied the Meteor package/);
  assert.match(r.stdout, /\.meteor\/packages: added ddp-transport-native/);
  assert.match(r.stdout, /METEOR@3\.5/);
  t.diagnostic(r.stdout.trim().split('\n').join(' | '));
});

test('meteor-setup twice: the second run finds everything in place and changes nothing', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  assert.equal((await setup(['--meteor-src', f.meteor, '--app', f.app])).code, 0);
  const snapshot = (dir) => fs.readdirSync(dir, { recursive: true }).sort()
    .filter((p) => fs.statSync(path.join(dir, p)).isFile())
    .map((p) => `${p}\n${read(dir, p)}`).join('\n--\n');
  const before = snapshot(f.app);
  const r = await setup([`--meteor-src=${f.meteor}`, `--app=${f.app}`]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /already patched/);
  assert.match(r.stdout, /is up to date/);
  assert.match(r.stdout, /ddp-transport-native is already listed/);
  assert.equal(snapshot(f.app), before);
});

test('meteor-setup refuses, writing nothing, when the checkout already accepts "native"', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  // A "newer Meteor": the stand-in patched the way the patch would.
  if (has('patch')) {
    assert.equal((await run('patch', ['-p1', '-s', '-i', PATCH], { cwd: f.server })).code, 0);
  } else {
    fs.writeFileSync(path.join(f.server, 'transports', 'index.js'),
      read(f.server, 'transports', 'index.js').replace('"uws"]', '"uws", "native"]'));
    fs.writeFileSync(path.join(f.server, 'package.js'),
      read(f.server, 'package.js').replace('  api.use("ddp-client"', `  ${WEAK_DEP}\n  api.use("ddp-client"`));
  }
  const packagesBefore = read(f.app, '.meteor', 'packages');
  const r = await setup(['--meteor-src', f.meteor, '--app', f.app]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /already has this patch's changes: this Meteor accepts "native"/);
  assertNoStack(r);
  assert.equal(fs.existsSync(path.join(f.app, 'packages')), false, 'nothing copied');
  assert.equal(read(f.app, '.meteor', 'packages'), packagesBefore);

  // Only VALID_NAMES accepts it (no weak dependency): the hunk that is there is named as such.
  const g = fixture(t);
  fs.writeFileSync(path.join(g.server, 'transports', 'index.js'),
    read(g.server, 'transports', 'index.js').replace('"uws"]', '"uws", "native"]'));
  const r2 = await setup(['--meteor-src', g.meteor, '--app', g.app]);
  assert.equal(r2.code, 1);
  assert.match(r2.stderr, /does not apply to .*ddp-server; nothing was changed/);
  assert.match(r2.stderr, /transports\/index\.js: already has this change/);
  assert.match(r2.stderr, /If this Meteor already accepts "native"/);
  assert.equal(fs.existsSync(path.join(g.app, 'packages')), false);
});

test('meteor-setup refuses a hunk that does not apply, naming the file, the expected line and what is there', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  // The single-quoted line the old README's inline patch assumed.
  fs.writeFileSync(path.join(f.server, 'transports', 'index.js'),
    read(f.server, 'transports', 'index.js').replace('["sockjs", "uws"]', "['sockjs', 'uws']"));
  const r = await setup(['--meteor-src', f.meteor, '--app', f.app]);
  assert.equal(r.code, 1);
  assertNoStack(r);
  assert.match(r.stderr, /transports\/index\.js:\n\s+hunk @@ -2,3 \+2,3 @@ does not apply: expected these lines/);
  assert.ok(r.stderr.includes('const VALID_NAMES = ["sockjs", "uws"];'), r.stderr);
  assert.match(r.stderr, /found instead:\n\s+line 3: const VALID_NAMES = \['sockjs', 'uws'\];/);
  assert.equal(fs.existsSync(path.join(f.app, 'packages')), false, 'nothing copied');
  if (has('git')) {
    const g = await run('git', ['apply', '--check', '--directory=packages/ddp-server', PATCH], { cwd: f.meteor });
    assert.notEqual(g.code, 0, 'git apply refuses it too');
  }
});

test('meteor-setup refuses an app whose packages/ddp-server is a copy it did not patch', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  fs.cpSync(f.server, path.join(f.app, 'packages', 'ddp-server'), { recursive: true });
  const r = await setup(['--meteor-src', f.meteor, '--app', f.app]);
  assert.equal(r.code, 1);
  assertNoStack(r);
  assert.match(r.stderr, /packages\/ddp-server already exists and is not patched by this script; nothing was changed/);
  assert.match(r.stderr, /git apply --directory=packages\/ddp-server .*ddp-server\.patch/);
  assert.equal(fs.existsSync(path.join(f.app, 'packages', 'ddp-transport-native')), false);
});

test('meteor-setup --dry-run says what it would do and writes nothing', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  const r = await setup(['--meteor-src', f.meteor, '--app', f.app, '--dry-run']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\[dry run\] ddp-server: patched/);
  assert.match(r.stdout, /\[dry run\] \.meteor\/packages: added ddp-transport-native/);
  assert.equal(fs.existsSync(path.join(f.app, 'packages')), false);
  assert.ok(!read(f.app, '.meteor', 'packages').includes('ddp-transport-native'));
});

test('usage errors: missing or unknown arguments, missing directories, not a checkout, not an app (exit 2, one message, no stack)', { timeout: 30000 }, async (t) => {
  const f = fixture(t);
  const cases = [
    [[], /missing --meteor-src <dir>/],
    [['--meteor-src', f.meteor], /missing --app <dir>/],
    [['--meteor-src'], /--meteor-src needs a directory/],
    [['--meteor-src', f.meteor, '--app', f.app, '--force'], /unknown argument "--force"/],
    [['--meteor-src', path.join(f.dir, 'nope'), '--app', f.app], /--meteor-src .*nope: no such directory/],
    [['--meteor-src', f.app, '--app', f.app], /has no packages\/ddp-server\/package\.js: give a checkout of meteor\/meteor/],
    [['--meteor-src', f.meteor, '--app', path.join(f.dir, 'nope')], /--app .*nope: no such directory/],
    [['--meteor-src', f.meteor, '--app', f.meteor], /is not a Meteor app: it has no \.meteor\/packages/],
  ];
  for (const [args, re] of cases) {
    const r = await setup(args);
    assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}\n${r.stderr}`);
    assert.match(r.stderr, re, args.join(' '));
    assertNoStack(r);
  }
  const unknown = await run(process.execPath, [CLI, 'meteor-stup']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "meteor-stup"/);
  const help = await setup(['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Usage: ddp-transport-native meteor-setup --meteor-src/);
});

test('package.json: the bin entry, and the patch, the setup script and the provider package are published', () => {
  assert.equal(pkg.bin && pkg.bin['ddp-transport-native'], 'scripts/cli.js');
  assert.match(fs.readFileSync(CLI, 'utf8'), /^#!\/usr\/bin\/env node\n/);
  for (const entry of ['meteor/ddp-server.patch', 'meteor/ddp-transport-native/', 'scripts/cli.js', 'scripts/meteor-setup.js']) {
    assert.ok(pkg.files.includes(entry), `files has ${entry}: ${JSON.stringify(pkg.files)}`);
  }
});
