'use strict';
// npm run dist [-- options]: release builds of every target this machine can build, and the npm
// tarballs of the root package and of each platform package, in dist/.
//
//   (no option)          build every buildable target of package.json `napi.targets`, then pack
//   --targets a,b        only these (napi platform names: linux-x64-gnu, darwin-arm64, …)
//   --build-only         build and check the binaries into the artifacts dir; no tarballs
//   --pack-only          no build: pack the binaries already in the artifacts dir
//   --require-all        fail unless every target of `napi.targets` has a binary (a release)
//   --artifacts <dir>    where the .node files go / are read from (default .cache/dist/artifacts)
//
// Linux and macOS binaries are cross-built with cargo-zigbuild (`napi build -x`); the linux gnu
// ones are pinned to glibc 2.17 (`<triple>.2.17`). Windows x64 is x86_64-pc-windows-gnu, built by
// `cargo zigbuild` itself (zig's MinGW-w64, UCRT): `napi build -x` refuses windows-gnu targets (it
// would hand them to cargo-xwin, which does MSVC only). zig and cargo-zigbuild come from PyPI into
// .cache/dist-tools/ when they are not on PATH; missing rustup targets are added.
//
// Packing follows napi-rs: `napi artifacts` copies each binary into its npm/<platform>/ package
// and `napi pre-publish -t npm --skip-optional-publish --no-gh-release` checks the packages, both
// on a staged copy (the tree is not modified); then `npm pack`. The root tarball is packed from a
// staged copy too: its package.json gains `optionalDependencies` naming every target at the exact
// version (they are not committed: see checkLayout), binding.js is the committed loader, checked
// against the one this build generates, and the README's links to files of the package become
// absolute links to those files of this version (publishedReadme).

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawnSync } = require('node:child_process');
const { platformName, platformOf } = require('../lib/platform');
const { readPe } = require('./pe');
const { markdownLinks, publishedPrefix, isRelativeLink } = require('./lib/markdown-links');

const ROOT = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const NAPI = path.join(path.dirname(require.resolve('@napi-rs/cli/package.json', { paths: [ROOT] })), 'dist', 'cli.js');
const TOOLS = path.join(ROOT, '.cache', 'dist-tools');
const STAGE = path.join(ROOT, '.cache', 'dist', 'stage');
const DIST = path.join(ROOT, 'dist');
const GLIBC_FLOOR = [2, 17];
// Without MACOSX_DEPLOYMENT_TARGET, zig links for the newest macOS it knows (15.0 with zig 0.17).
// Node 18-22 run on macOS >= 10.15 (x64) / 11 (arm64); these are Rust's own minimums or near them.
const MACOS_MIN = { x86_64: '10.13', aarch64: '11.0' };
const ZIG_PYPI = ['cargo-zigbuild==0.24.1', 'ziglang==0.17.1'];
const BUILD_TIMEOUT_MS = 20 * 60 * 1000;

// ---------------------------------------------------------------------------------------------
// Targets

const TARGETS = pkg.napi.targets.map((triple) => {
  const platform = platformOf(triple);
  const gnu = /-linux-gnu$/.test(triple);
  return {
    triple,
    platform,
    // cargo-zigbuild reads the suffix as the glibc version to link against.
    buildTarget: gnu ? `${triple}.${GLIBC_FLOOR.join('.')}` : triple,
    gnu,
    windows: triple.includes('-windows-'),
    // what cargo builds for a windows target (napi build renames it; cargo zigbuild does not)
    cargoDll: `${pkg.napi.binaryName.replace(/-/g, '_')}.dll`,
    binary: `${pkg.napi.binaryName}.${platform}.node`,
    packageName: `${pkg.name}-${platform}`,
    dir: path.join(ROOT, 'npm', platform),
  };
});

// ---------------------------------------------------------------------------------------------
// Helpers

function parseArgs(argv) {
  const opts = { targets: null, buildOnly: false, packOnly: false, requireAll: false,
    artifacts: path.join(ROOT, '.cache', 'dist', 'artifacts') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--targets') opts.targets = String(argv[++i] || '').split(',').filter(Boolean);
    else if (a.startsWith('--targets=')) opts.targets = a.slice(10).split(',').filter(Boolean);
    else if (a === '--build-only') opts.buildOnly = true;
    else if (a === '--pack-only') opts.packOnly = true;
    else if (a === '--require-all') opts.requireAll = true;
    else if (a === '--artifacts') opts.artifacts = path.resolve(argv[++i]);
    else throw new Error(`unknown option ${a} (see the header of scripts/dist.js)`);
  }
  for (const t of opts.targets || []) {
    if (!TARGETS.some((x) => x.platform === t)) {
      throw new Error(`--targets: ${t} is not in napi.targets (${TARGETS.map((x) => x.platform).join(', ')})`);
    }
  }
  return opts;
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', timeout: BUILD_TIMEOUT_MS, ...options });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}`);
  return r;
}

function capture(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', timeout: 120_000, ...options });
  return r.error || r.status !== 0 ? null : r.stdout;
}

function napi(args, options) {
  return run(process.execPath, [NAPI, ...args], options);
}

const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
const seconds = (ms) => `${(ms / 1000).toFixed(0)} s`;

function log(line = '') {
  process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------------------------------------
// Consistency of the committed release layout

function checkLayout() {
  const errors = [];
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) {
    if (pkg.scripts && pkg.scripts[s]) errors.push(`package.json has a "${s}" script: consumers would run it at install`);
  }
  if ((pkg.files || []).some((f) => f.includes('.node'))) errors.push('package.json "files" ships .node files; binaries go in the platform packages');
  // optionalDependencies are written into the packed manifest only: committed, they would name
  // packages that do not exist until this version is published, and `npm ci` refuses a lock file
  // without them ("Missing: ddp-transport-native-linux-x64-gnu@ from lock file").
  const committed = Object.keys(pkg.optionalDependencies || {}).filter((n) => n.startsWith(`${pkg.name}-`));
  if (committed.length) errors.push(`package.json must not list the platform packages (${committed.join(', ')}): dist adds them to the packed package.json`);
  for (const t of TARGETS) {
    const file = path.join(t.dir, 'package.json');
    if (!fs.existsSync(file)) {
      errors.push(`${path.relative(ROOT, file)} is missing (npx napi create-npm-dirs)`);
      continue;
    }
    const p = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (p.name !== t.packageName) errors.push(`${path.relative(ROOT, file)}: name ${p.name}, expected ${t.packageName}`);
    if (p.version !== pkg.version) errors.push(`${path.relative(ROOT, file)}: version ${p.version}, expected ${pkg.version} (npx napi version)`);
    if (p.main !== t.binary) errors.push(`${path.relative(ROOT, file)}: main ${p.main}, expected ${t.binary}`);
  }
  if (!fs.existsSync(path.join(ROOT, 'binding.js'))) errors.push('binding.js (the generated loader) is missing');
  const meteorPkg = path.join(ROOT, 'meteor', 'ddp-transport-native', 'package.js');
  if (fs.existsSync(meteorPkg)) {
    const m = /Npm\.depends\(\{[^}]*'ddp-transport-native':\s*'([^']+)'/.exec(fs.readFileSync(meteorPkg, 'utf8'));
    if (m && m[1] !== pkg.version) log(`warning: meteor/ddp-transport-native/package.js Npm.depends pins ${m[1]}, the package is ${pkg.version}`);
  }
  if (errors.length) throw new Error(`release layout:\n  ${errors.join('\n  ')}`);
}

// ---------------------------------------------------------------------------------------------
// Tools: rustup targets, zig + cargo-zigbuild

function ensureRustTargets(targets) {
  const installed = capture('rustup', ['target', 'list', '--installed']);
  if (installed === null) throw new Error('rustup is not on PATH: dist needs Rust via rustup (https://rustup.rs)');
  const missing = targets.map((t) => t.triple).filter((t) => !installed.split(/\r?\n/).includes(t));
  if (missing.length) {
    log(`rustup target add ${missing.join(' ')}`);
    run('rustup', ['target', 'add', ...missing]);
  }
}

/** PATH (and env) under which `cargo zigbuild` and zig work; installs them from PyPI if needed. */
function zigEnv() {
  const env = { ...process.env };
  const works = (e) => capture('cargo', ['zigbuild', '--help'], { env: e }) !== null &&
    (capture('zig', ['version'], { env: e }) !== null || capture('python3', ['-m', 'ziglang', 'version'], { env: e }) !== null);
  if (works(env)) return env;
  const venv = path.join(TOOLS, 'venv');
  const bin = path.join(venv, process.platform === 'win32' ? 'Scripts' : 'bin');
  env.PATH = `${bin}${path.delimiter}${env.PATH}`;
  if (!works(env)) {
    log(`installing ${ZIG_PYPI.join(' ')} from PyPI into ${path.relative(ROOT, venv)}`);
    fs.rmSync(venv, { recursive: true, force: true });
    run('python3', ['-m', 'venv', venv]);
    run(path.join(bin, 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...ZIG_PYPI]);
    if (!works(env)) throw new Error('cargo-zigbuild/zig still not usable after installing them');
  }
  return env;
}

// ---------------------------------------------------------------------------------------------
// Build and inspect

/** Windows DLLs every x64 Windows 10 has; anything else (libgcc_s_seh-1.dll, libwinpthread-1.dll,
 *  libnode.dll) would not be there, or would not be Node. */
const WINDOWS_SYSTEM_DLLS = /^(kernel32|ntdll|ws2_32|bcrypt|bcryptprimitives|advapi32|userenv|api-ms-win-[a-z0-9-]+)\.dll$/i;

function buildWindows(t, artifacts, env) {
  const started = Date.now();
  run('cargo', ['zigbuild', '--release', '--target', t.triple, '-p', pkg.name],
    { env: { ...env, CARGO_PROFILE_RELEASE_STRIP: 'symbols' } });
  const targetDir = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
  fs.copyFileSync(path.join(targetDir, t.triple, 'release', t.cargoDll), path.join(artifacts, t.binary));
  return Date.now() - started;
}

function build(t, artifacts, env, loaderDir, withLoader) {
  if (t.windows) return buildWindows(t, artifacts, env);
  const rel = (f) => path.relative(artifacts, path.join(loaderDir, f)); // --js/--dts are relative to -o
  const args = ['build', '--platform', '--release', '--target', t.buildTarget, '-o', artifacts,
    '--dts', rel('binding.d.ts')];
  args.push('--strip', '--cross-compile');
  // One build also writes the loader, to check the committed binding.js against it. It must be
  // written next to the .node: napi makes the loader's paths relative to where it is written.
  args.push(...(withLoader ? ['--js', 'binding.js'] : ['--no-js']));
  const started = Date.now();
  // --strip links with -s, which zig's Mach-O linker ignores; Cargo's strip removes the local
  // symbols everywhere (on macOS with rust-objcopy, which re-signs the ad-hoc signature).
  const macos = t.triple.includes('-apple-darwin') ? { MACOSX_DEPLOYMENT_TARGET: MACOS_MIN[t.triple.split('-')[0]] } : {};
  napi(args, { env: { ...env, CARGO_PROFILE_RELEASE_STRIP: 'symbols', ...macos } });
  if (withLoader) fs.renameSync(path.join(artifacts, 'binding.js'), path.join(loaderDir, 'binding.js'));
  return Date.now() - started;
}

function versionCmp(a, b) {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] || 0) - (b[i] || 0);
    if (d) return d;
  }
  return 0;
}

/** Facts about one binary: size, and per format: glibc floor / NEEDED / Mach-O symbols. */
function inspect(t, file) {
  const size = fs.statSync(file).size;
  const facts = { size, notes: [], errors: [] };
  const head = fs.readFileSync(file).subarray(0, 4);
  if (head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) {
    const sections = capture('readelf', ['-S', '-W', file]);
    const versions = capture('readelf', ['-V', '-W', file]);
    const dynamic = capture('readelf', ['-d', '-W', file]);
    if (sections === null) {
      facts.notes.push('readelf missing: not inspected');
      return facts;
    }
    facts.notes.push(/\s\.symtab\s/.test(sections) ? 'NOT stripped' : 'stripped');
    if (/\s\.symtab\s/.test(sections)) facts.errors.push('not stripped');
    const needed = [...(dynamic || '').matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
    const glibc = [...new Set([...(versions || '').matchAll(/GLIBC_(\d+(?:\.\d+)+)/g)].map((m) => m[1]))]
      .map((v) => v.split('.').map(Number)).sort(versionCmp);
    if (t.gnu) {
      const max = glibc[glibc.length - 1];
      facts.glibc = max ? max.join('.') : 'none';
      facts.notes.push(`needs GLIBC_${facts.glibc}`);
      if (max && versionCmp(max, GLIBC_FLOOR) > 0) facts.errors.push(`needs GLIBC_${facts.glibc} > ${GLIBC_FLOOR.join('.')}`);
    } else if (glibc.length) {
      facts.errors.push('a musl binary that references glibc symbol versions');
    }
    facts.notes.push(`NEEDED ${needed.join(' ') || '-'}`);
  } else if (head.readUInt32LE(0) === 0xfeedfacf) {
    const m = machO(fs.readFileSync(file));
    facts.notes.push(`Mach-O ${m.cpu}, macOS >= ${m.minos}`, m.locals === 0 ? 'stripped' : `NOT stripped (${m.locals} local symbols)`, m.signature);
    if (m.locals !== 0) facts.errors.push('not stripped');
    const min = MACOS_MIN[m.cpu === 'arm64' ? 'aarch64' : 'x86_64'];
    if (!m.minos || versionCmp(m.minos.split('.').map(Number), min.split('.').map(Number)) > 0) {
      facts.errors.push(`needs macOS ${m.minos}, expected ${min}`);
    }
    // Apple silicon refuses code without a valid signature; the linker's ad-hoc one will do.
    if (m.cpu === 'arm64' && !m.signatureValid) facts.errors.push(`arm64 macOS needs a valid signature: ${m.signature}`);
  } else if (head.subarray(0, 2).toString() === 'MZ') {
    windowsFacts(readPe(fs.readFileSync(file)), facts);
  } else {
    facts.errors.push('unknown binary format');
  }
  return facts;
}

/** A win32 .node: a PE32+ x86-64 DLL, stripped, exporting napi_register_module_v1 and taking
 *  N-API from the process that loads it (napi's dyn-symbols), so it imports neither napi_* nor
 *  node.exe/libnode.dll, and only DLLs that Windows itself has. */
function windowsFacts(pe, facts) {
  facts.notes.push(`${pe.format} ${pe.machine} ${pe.dll ? 'DLL' : 'not a DLL'}`, pe.stripped ? 'stripped' : 'NOT stripped');
  if (pe.format !== 'PE32+' || pe.machine !== 'x86-64' || !pe.dll) facts.errors.push(`expected a PE32+ x86-64 DLL, got ${pe.format} ${pe.machine}`);
  if (!pe.stripped) facts.errors.push('not stripped');
  if (!pe.exports.includes('napi_register_module_v1')) facts.errors.push('does not export napi_register_module_v1');
  const foreign = pe.imports.filter((d) => !WINDOWS_SYSTEM_DLLS.test(d));
  facts.notes.push(`imports ${pe.imports.join(' ')}`);
  if (foreign.length) facts.errors.push(`imports DLLs Windows does not have (or Node's own): ${foreign.join(', ')}`);
}

/** Mach-O facts: cpu, local symbols left, and the ad-hoc code signature checked page by page
 *  (the CodeDirectory's SHA-256 of every page up to codeLimit). */
function machO(b) {
  const cpu = { 0x01000007: 'x86_64', 0x0100000c: 'arm64' }[b.readUInt32LE(4)] || `cpu ${b.readUInt32LE(4)}`;
  let off = 32;
  let locals = null;
  let minos = null;
  let sig = null;
  for (let i = 0; i < b.readUInt32LE(16); i++) {
    const cmd = b.readUInt32LE(off);
    if (cmd === 0xb) locals = b.readUInt32LE(off + 12); // LC_DYSYMTAB: nlocalsym
    // LC_BUILD_VERSION (minos after platform) or LC_VERSION_MIN_MACOSX: xxxx.yy.zz in nibbles
    if (cmd === 0x32 || cmd === 0x24) {
      const v = b.readUInt32LE(off + (cmd === 0x32 ? 12 : 8));
      minos = `${v >>> 16}.${(v >> 8) & 0xff}${v & 0xff ? `.${v & 0xff}` : ''}`;
    }
    if (cmd === 0x1d) sig = b.subarray(b.readUInt32LE(off + 8), b.readUInt32LE(off + 8) + b.readUInt32LE(off + 12)); // LC_CODE_SIGNATURE
    off += b.readUInt32LE(off + 4);
  }
  if (!sig) return { cpu, locals, minos, signature: 'unsigned', signatureValid: false };
  if (sig.readUInt32BE(0) !== 0xfade0cc0) return { cpu, locals, minos, signature: 'signature: not a SuperBlob', signatureValid: false };
  for (let i = 0; i < sig.readUInt32BE(8); i++) {
    const cd = sig.subarray(sig.readUInt32BE(16 + i * 8));
    if (cd.readUInt32BE(0) !== 0xfade0c02) continue; // CodeDirectory
    const flags = cd.readUInt32BE(12);
    const hashOffset = cd.readUInt32BE(16);
    const pages = cd.readUInt32BE(28);
    const codeLimit = cd.readUInt32BE(32);
    const hashSize = cd[36];
    const algorithm = { 1: 'sha1', 2: 'sha256' }[cd[37]];
    const pageSize = 2 ** cd[39];
    let bad = 0;
    for (let p = 0; p < pages; p++) {
      const page = b.subarray(p * pageSize, Math.min((p + 1) * pageSize, codeLimit));
      const want = cd.subarray(hashOffset + p * hashSize, hashOffset + (p + 1) * hashSize);
      if (!crypto.createHash(algorithm).update(page).digest().subarray(0, hashSize).equals(want)) bad++;
    }
    const kind = flags & 0x2 ? 'ad-hoc' : 'signed';
    return { cpu, locals, minos, signatureValid: bad === 0,
      signature: bad === 0 ? `${kind} signature valid (${pages} pages)` : `${kind} signature INVALID (${bad}/${pages} pages differ)` };
  }
  return { cpu, locals, minos, signature: 'signature without a CodeDirectory', signatureValid: false };
}

/** Load the binary in this Node when it is for this machine (x64 glibc here): one real check. */
function loadCheck(t, file) {
  if (t.platform !== platformName()) return null;
  const code = `const b = require(${JSON.stringify(file)}); if (typeof b.constants !== 'function') throw new Error('no constants()'); b.constants();`;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 ? `loads in Node ${process.version}` : `FAILED to load: ${(r.stderr || '').trim().split('\n').pop()}`;
}

// ---------------------------------------------------------------------------------------------
// The README as the package carries it

/** A file of this version of the package once it is published. */
const publishedFileUrl = (file) => `${publishedPrefix(pkg.name, pkg.version)}${file}`;

/**
 * The README for the package. npmjs.com resolves a README's relative links against the manifest's
 * `repository`, which this package does not name, and otherwise leaves them relative, broken on
 * the package's page; so each relative link (README.md's links to docs/…, written for a clone)
 * becomes an absolute link to that file of this version (publishedFileUrl). In-page #anchors stay.
 * `shipped(file)` says whether the package carries a file: a link to one it does not is an error.
 * Returns { text, files } (the files linked).
 */
function publishedReadme(text, shipped) {
  const errors = [];
  const files = new Set();
  let out = text;
  for (const href of new Set(markdownLinks(text))) {
    if (!isRelativeLink(href)) continue;
    const hash = href.indexOf('#');
    const file = path.posix.normalize(decodeURIComponent(hash === -1 ? href : href.slice(0, hash)));
    if (!shipped(file)) {
      errors.push(`${href}: the package does not carry ${file} (package.json "files")`);
      continue;
    }
    if (!out.includes(`](${href})`)) {
      errors.push(`${href}: not written as [text](${href})`);
      continue;
    }
    out = out.split(`](${href})`).join(`](${publishedFileUrl(file)}${hash === -1 ? '' : href.slice(hash)})`);
    files.add(file);
  }
  const left = markdownLinks(out).filter(isRelativeLink);
  if (left.length) errors.push(`relative links left: ${left.join(', ')}`);
  if (errors.length) throw new Error(`README.md for the package:\n  ${errors.join('\n  ')}`);
  return { text: out, files: [...files].sort() };
}

// ---------------------------------------------------------------------------------------------
// Pack

function copyDir(from, to) {
  fs.mkdirSync(to, { recursive: true });
  for (const e of fs.readdirSync(from, { withFileTypes: true })) {
    if (e.isDirectory()) copyDir(path.join(from, e.name), path.join(to, e.name));
    else if (!e.name.endsWith('.node')) fs.copyFileSync(path.join(from, e.name), path.join(to, e.name));
  }
}

function npmPack(dir) {
  const npm = process.env.npm_execpath && process.env.npm_execpath.endsWith('.js')
    ? [process.execPath, [process.env.npm_execpath]] : ['npm', []];
  const r = spawnSync(npm[0], [...npm[1], 'pack', '--json', '--pack-destination', DIST], {
    cwd: dir, encoding: 'utf8', timeout: 120_000, shell: npm[0] === 'npm' && process.platform === 'win32',
    env: { ...process.env, npm_config_loglevel: 'error' } });
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed:\n${r.stderr}`);
  const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf('[')));
  return info;
}

/** The root manifest as published: every target of napi.targets as an exact-version optional
 *  dependency (what `napi pre-publish` writes for a full release). */
function publishedManifest() {
  const optionalDependencies = { ...(pkg.optionalDependencies || {}) };
  for (const t of TARGETS) optionalDependencies[t.packageName] = pkg.version;
  return { ...pkg, optionalDependencies };
}

function pack(built) {
  fs.rmSync(STAGE, { recursive: true, force: true });
  fs.mkdirSync(STAGE, { recursive: true });
  // Stage the root package (its `files`, README, LICENSE) and the npm/<platform> packages being packed.
  for (const f of [...pkg.files, 'README.md', 'LICENSE']) {
    const from = path.join(ROOT, f);
    if (!fs.existsSync(from)) throw new Error(`package.json "files" names ${f}, which does not exist`);
    if (fs.statSync(from).isDirectory()) copyDir(from, path.join(STAGE, f));
    else {
      fs.mkdirSync(path.dirname(path.join(STAGE, f)), { recursive: true });
      fs.copyFileSync(from, path.join(STAGE, f));
    }
  }
  const readme = publishedReadme(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), (f) => {
    const file = path.join(STAGE, f);
    return !f.startsWith('..') && fs.existsSync(file) && fs.statSync(file).isFile();
  });
  fs.writeFileSync(path.join(STAGE, 'README.md'), readme.text);
  for (const t of built) copyDir(t.dir, path.join(STAGE, 'npm', t.platform));
  // napi pre-publish needs a binary for every target it is given: give it the ones built here.
  const manifest = publishedManifest();
  const write = (m) => fs.writeFileSync(path.join(STAGE, 'package.json'), `${JSON.stringify(m, null, 2)}\n`);
  write({ ...manifest, napi: { ...pkg.napi, targets: built.map((t) => t.triple) } });
  // napi artifacts wants exactly the configured targets' binaries in its input dir.
  fs.mkdirSync(path.join(STAGE, 'artifacts'));
  for (const t of built) fs.copyFileSync(path.join(built.artifacts, t.binary), path.join(STAGE, 'artifacts', t.binary));
  napi(['artifacts', '--cwd', STAGE, '--output-dir', 'artifacts', '--npm-dir', 'npm']);
  napi(['pre-publish', '--cwd', STAGE, '-t', 'npm', '--skip-optional-publish', '--no-gh-release']);
  const prePublished = JSON.parse(fs.readFileSync(path.join(STAGE, 'package.json'), 'utf8')).optionalDependencies || {};
  for (const t of built) {
    if (prePublished[t.packageName] !== pkg.version) throw new Error(`napi pre-publish wrote optionalDependencies ${JSON.stringify(prePublished)}`);
  }
  write(manifest); // every target, as the release publishes them
  fs.rmSync(path.join(STAGE, 'artifacts'), { recursive: true });

  fs.rmSync(DIST, { recursive: true, force: true });
  fs.mkdirSync(DIST, { recursive: true });
  const tarballs = [];
  for (const t of built) {
    const info = npmPack(path.join(STAGE, 'npm', t.platform));
    const files = info.files.map((f) => f.path).sort();
    if (!files.includes(t.binary)) throw new Error(`${info.filename} lacks ${t.binary}`);
    tarballs.push({ ...info, platform: t.platform });
  }
  const root = npmPack(STAGE);
  const rootFiles = root.files.map((f) => f.path);
  const unexpected = rootFiles.filter((f) => f.endsWith('.node') || f.startsWith('npm/'));
  if (unexpected.length) throw new Error(`the root tarball carries ${unexpected.join(', ')}`);
  for (const f of ['binding.js', 'index.js', 'package.json', 'lib/load-binding.js', 'LICENSE', 'README.md', ...readme.files]) {
    if (!rootFiles.includes(f)) throw new Error(`the root tarball lacks ${f}`);
  }
  tarballs.push({ ...root, platform: '(root)' });
  return tarballs;
}

// ---------------------------------------------------------------------------------------------

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  checkLayout();
  const wanted = TARGETS.filter((t) => !opts.targets || opts.targets.includes(t.platform));
  const artifacts = opts.artifacts;
  const loaderDir = path.join(ROOT, '.cache', 'dist', 'loader');
  log(`ddp-transport-native ${pkg.version}: ${opts.packOnly ? 'packing' : 'building'} ${wanted.map((t) => t.platform).join(', ')}`);

  const results = [];
  if (!opts.packOnly) {
    const buildable = wanted;
    fs.rmSync(artifacts, { recursive: true, force: true });
    fs.rmSync(loaderDir, { recursive: true, force: true });
    fs.mkdirSync(artifacts, { recursive: true });
    fs.mkdirSync(loaderDir, { recursive: true });
    if (buildable.length) ensureRustTargets(buildable);
    const env = zigEnv();
    let loaderBuilt = false;
    for (const t of buildable) {
      log(`\n=== ${t.platform}: ${t.windows ? 'cargo zigbuild --release' : 'napi build --release --strip -x'} --target ${t.buildTarget}`);
      const withLoader = !loaderBuilt && !t.windows;
      const ms = build(t, artifacts, env, loaderDir, withLoader);
      loaderBuilt = loaderBuilt || withLoader;
      results.push({ t, ms });
    }
    if (loaderBuilt) {
      const fresh = fs.readFileSync(path.join(loaderDir, 'binding.js'), 'utf8');
      if (fresh !== fs.readFileSync(path.join(ROOT, 'binding.js'), 'utf8')) {
        throw new Error('binding.js differs from the loader this build generated (.cache/dist/loader/binding.js): ' +
          'run `npm run build` and commit binding.js');
      }
    }
  } else {
    for (const t of wanted) results.push({ t });
  }

  // Inspect what is in the artifacts dir.
  log('\nbinaries:');
  const failures = [];
  const built = [];
  for (const r of results) {
    const file = path.join(artifacts, r.t.binary);
    if (!fs.existsSync(file)) {
      const why = 'no binary in the artifacts dir';
      log(`  ${r.t.platform.padEnd(18)} skipped: ${why}`);
      if (opts.requireAll) failures.push(`${r.t.platform}: ${why}`);
      continue;
    }
    const facts = inspect(r.t, file);
    const load = loadCheck(r.t, file);
    if (load) facts.notes.push(load);
    if (load && load.startsWith('FAILED')) facts.errors.push(load);
    log(`  ${r.t.platform.padEnd(18)} ${kib(facts.size).padStart(11)}  ${facts.notes.join(', ')}` +
      `${r.ms ? `  (built in ${seconds(r.ms)})` : ''}`);
    for (const e of facts.errors) failures.push(`${r.t.platform}: ${e}`);
    built.push(r.t);
  }
  if (opts.requireAll) {
    for (const t of TARGETS) if (!wanted.includes(t)) failures.push(`${t.platform}: not requested`);
    // What the README says before the first release would be false on the package's page.
    if (/not on the npm registry yet/i.test(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'))) {
      failures.push('README.md still says the package is not on the npm registry yet: ' +
        'a release drops that (docs/release.md, "Cutting a release")');
    }
  }
  if (failures.length) throw new Error(`binaries:\n  ${failures.join('\n  ')}`);
  if (opts.buildOnly) {
    log(`\n${built.length} binaries in ${path.relative(ROOT, artifacts) || artifacts} (${seconds(Date.now() - t0)})`);
    return;
  }
  if (!built.length) throw new Error('nothing to pack');
  built.artifacts = artifacts;

  log('\n=== napi artifacts + napi pre-publish (staged copy), npm pack');
  const tarballs = pack(built);
  log(`\ntarballs in dist/ (${tarballs.length}):`);
  for (const tb of tarballs) {
    log(`  ${tb.filename.padEnd(52)} ${kib(tb.size).padStart(11)} packed, ${kib(tb.unpackedSize).padStart(11)} unpacked, ${tb.entryCount} files`);
  }
  log(`root optionalDependencies: ${TARGETS.map((t) => t.packageName).join(', ')} (all ${pkg.version})`);
  const missing = TARGETS.filter((t) => !built.includes(t)).map((t) => t.packageName);
  if (missing.length) log(`not in dist/ (the release workflow builds them): ${missing.join(', ')}`);
  log(`\ndist done in ${seconds(Date.now() - t0)}`);
}

try {
  main();
} catch (e) {
  process.stderr.write(`\ndist: ${e.message}\n`);
  process.exit(1);
}
