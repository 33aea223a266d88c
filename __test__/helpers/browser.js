'use strict';
// The headless Chromium the browser tests drive with playwright-core, in this order:
//   1. CHROMIUM_PATH, when set (it must be an executable: no fallback past it);
//   2. a system Chromium: `chromium` or `chromium-browser` on PATH (Debian's chromium package);
//   3. the Chromium in the npm tarball of @sparticuz/chromium (a devDependency), so `npm install`
//      is enough. Its bin/chromium.br is unpacked once per package version into
//      node_modules/.cache/ddp-transport-native/ (through a temporary directory renamed into place,
//      so an interrupted unpack or a parallel run never leaves a half-written binary behind; the
//      package's own executablePath() unpacks to a fixed /tmp/chromium shared by every version).
//      The NSS/NSPR/expat libraries it links are Amazon Linux builds shipped in the same tarball
//      (bin/al2023.tar.br): unpacked beside it and put on LD_LIBRARY_PATH only when `ldd` says
//      the machine lacks one of them.
// Every child process is asynchronous: a blocking spawnSync would stall the addon's deliveries.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { pipeline } = require('node:stream/promises');
const { execFile, spawn } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..', '..');
const CACHE = path.join(ROOT, 'node_modules', '.cache', 'ddp-transport-native');
const SYSTEM_NAMES = ['chromium', 'chromium-browser'];

function isExecutable(file) {
  try {
    if (!fs.statSync(file).isFile()) return false;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, name))) return path.join(dir, name);
  }
  return null;
}

function run(file, args, opts = {}) {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: 'utf8', timeout: 30000, ...opts }, (err, stdout, stderr) => {
      resolve({ err, stdout: stdout || '', stderr: stderr || '' });
    });
  });
}

/** The installed @sparticuz/chromium: { dir, version }, or null when it is not installed. */
function sparticuzPackage() {
  let entry;
  try {
    entry = require.resolve('@sparticuz/chromium'); // its exports hide package.json: walk up to it
  } catch {
    return null;
  }
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (!fs.existsSync(file)) continue;
    const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (pkg.name === '@sparticuz/chromium') return { dir, version: pkg.version };
  }
  return null;
}

async function unbrotli(from, to, mode) {
  await pipeline(fs.createReadStream(from), zlib.createBrotliDecompress(), fs.createWriteStream(to, { mode }));
}

async function untarBrotli(from, dir) {
  fs.mkdirSync(dir, { recursive: true });
  const tar = spawn('tar', ['-x', '-C', dir], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  tar.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve, reject) => {
    tar.once('error', reject);
    tar.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar -x ${from}: exit ${code} ${stderr}`))));
  });
  // tar may exit at the archive's end-of-archive blocks, before the padding after them is
  // written to its stdin: the pipeline then ends with a premature close (or EPIPE), which is no
  // error; tar's own exit status says whether the archive was extracted.
  const fed = pipeline(fs.createReadStream(from), zlib.createBrotliDecompress(), tar.stdin).catch((e) => {
    if (e.code !== 'ERR_STREAM_PREMATURE_CLOSE' && e.code !== 'EPIPE') throw e;
  });
  await Promise.all([fed, exited]);
}

/** Unpack @sparticuz/chromium's browser (once per version); resolves the unpacked directory. */
async function unpackSparticuz(pkg) {
  const target = path.join(CACHE, `sparticuz-chromium-${pkg.version}`);
  if (isExecutable(path.join(target, 'chromium'))) return target;
  fs.mkdirSync(CACHE, { recursive: true });
  const staging = fs.mkdtempSync(path.join(CACHE, '.unpack-'));
  try {
    const bin = path.join(pkg.dir, 'bin');
    await Promise.all([
      unbrotli(path.join(bin, 'chromium.br'), path.join(staging, 'chromium'), 0o755),
      untarBrotli(path.join(bin, 'al2023.tar.br'), path.join(staging, 'al2023')),
    ]);
    try {
      fs.renameSync(staging, target);
    } catch (e) {
      // Another run got there first: use its copy.
      if (!isExecutable(path.join(target, 'chromium'))) throw e;
    }
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  return target;
}

/**
 * The Chromium to use: { executablePath, env, source } — `env` is the environment to launch it
 * with (LD_LIBRARY_PATH added when the bundled libraries are needed), `source` says where it came from.
 * Throws when none is found.
 */
async function findChromium() {
  if (process.env.CHROMIUM_PATH) {
    const file = process.env.CHROMIUM_PATH;
    if (!isExecutable(file)) throw new Error(`CHROMIUM_PATH=${file} is not an executable file`);
    return { executablePath: file, env: process.env, source: `CHROMIUM_PATH=${file}` };
  }
  for (const name of SYSTEM_NAMES) {
    const file = onPath(name);
    if (file) return { executablePath: file, env: process.env, source: `system ${file}` };
  }
  const pkg = sparticuzPackage();
  if (!pkg) {
    throw new Error('no Chromium: run `npm install` (devDependency @sparticuz/chromium), ' +
      'or install chromium (apt-get install -y chromium), or set CHROMIUM_PATH');
  }
  const dir = await unpackSparticuz(pkg);
  const executablePath = path.join(dir, 'chromium');
  const env = { ...process.env };
  let libs = 'system libraries';
  const ldd = await run('ldd', [executablePath]);
  if (/not found/.test(ldd.stdout)) {
    const lib = path.join(dir, 'al2023', 'lib');
    env.LD_LIBRARY_PATH = [lib, process.env.LD_LIBRARY_PATH].filter(Boolean).join(path.delimiter);
    const missing = ldd.stdout.split('\n').filter((l) => /not found/.test(l)).map((l) => l.trim().split(' ')[0]);
    libs = `its own ${missing.join(', ')} (missing here)`;
  }
  return {
    executablePath,
    env,
    source: `@sparticuz/chromium ${pkg.version} (${path.relative(ROOT, executablePath)}, ${libs})`,
  };
}

/** Headless Chromium in a throwaway profile: resolves { context, chromium, userDataDir }. */
async function launchChromium({ timeout = 60000 } = {}) {
  const chromium = await findChromium();
  const { chromium: playwright } = require('playwright-core');
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-native-chromium-'));
  try {
    const context = await playwright.launchPersistentContext(userDataDir, {
      executablePath: chromium.executablePath,
      env: chromium.env,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
      timeout,
    });
    return { context, chromium, userDataDir };
  } catch (e) {
    fs.rmSync(userDataDir, { recursive: true, force: true });
    e.message = `launching ${chromium.source}: ${e.message}`;
    throw e;
  }
}

module.exports = { findChromium, launchChromium, isExecutable };
