#!/usr/bin/env node
'use strict';
// Autobahn|Testsuite conformance run against scripts/echo-server.js (the public JS API).
//
//   node scripts/autobahn.js                 # the CI set (see CI_CASES)
//   node scripts/autobahn.js --all           # every case, 1.* to 13.*
//   node scripts/autobahn.js --cases 1.*,7.1.1,12.1.*
//   node scripts/autobahn.js --keep-report DIR   # copy the HTML/JSON report to DIR
//   options: --exclude a,b   --verbose (stream wstest's output)   --timeout SECONDS (default 3600)
//            --compression max|meteor|off   (echo server's permessage-deflate settings, default
//            max: server parameters as offered; meteor: Meteor's defaults; see echo-server.js)
//
// Autobahn|Testsuite is Python 2.7 only. It is installed once into an isolated virtualenv under
// .autobahn/ (never into pyenv's own site-packages) and reused while it works:
//   python3 -m pip install --target .autobahn/virtualenv-pkg 'virtualenv<20.22'
//   PYTHONPATH=.autobahn/virtualenv-pkg python3 -m virtualenv -p <pyenv 2.7.18>/bin/python2 .autobahn/venv
//   .autobahn/venv/bin/pip install autobahntestsuite
// Overrides: AUTOBAHN_PYTHON2 (the 2.7 interpreter), AUTOBAHN_DIR (instead of .autobahn/).
//
// Prints the counts per behavior, every case that did not pass (with its description), and a
// last line `N passed, M failed`. Passed = OK, NON-STRICT or INFORMATIONAL (for both the case's
// behavior and its close behavior); anything else (FAILED, UNIMPLEMENTED, WRONG CODE, UNCLEAN, a
// case missing from the report) is a failure. Exit status: 0 only if nothing failed.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');

const ROOT = path.resolve(__dirname, '..');
const ABDIR = process.env.AUTOBAHN_DIR ? path.resolve(process.env.AUTOBAHN_DIR) : path.join(ROOT, '.autobahn');
const VENV = path.join(ABDIR, 'venv');
const VIRTUALENV_PKG = path.join(ABDIR, 'virtualenv-pkg');
const WSTEST = path.join(VENV, 'bin', 'wstest');

/** The CI set: 1-10 (there is no 8 or 11) plus the first compression group of 12 and 13; 12.2+ and
 *  13.2+ repeat those with other sizes/parameters and take ~12 min more (see docs/conformance.md). */
const CI_CASES = ['1.*', '2.*', '3.*', '4.*', '5.*', '6.*', '7.*', '9.*', '10.*', '12.1.*', '13.1.*'];
const PASS = new Set(['OK', 'NON-STRICT', 'INFORMATIONAL']);
const ORDER = ['OK', 'NON-STRICT', 'INFORMATIONAL', 'UNIMPLEMENTED', 'FAILED'];

function usage(msg) {
  if (msg) process.stderr.write(`autobahn: ${msg}\n`);
  process.stderr.write(
    'usage: node scripts/autobahn.js [--all | --cases a,b,...] [--exclude a,b,...]\n' +
      '                                [--keep-report DIR] [--timeout SECONDS] [--verbose]\n' +
      '                                [--compression max|meteor|off]\n',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const o = { cases: CI_CASES, exclude: [], keepReport: null, timeout: 3600, verbose: false, set: 'ci', compression: 'max' };
  const list = (v) => (v || '').split(',').map((s) => s.trim()).filter(Boolean);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--all') {
      o.cases = ['*'];
      o.set = 'all';
    } else if (a === '--cases') {
      o.cases = list(value());
      o.set = 'custom';
      if (!o.cases.length) usage('--cases needs at least one case');
    } else if (a === '--exclude') o.exclude = list(value());
    else if (a === '--keep-report') o.keepReport = path.resolve(value());
    else if (a === '--timeout') {
      o.timeout = Number(value());
      if (!(o.timeout > 0)) usage('--timeout must be a positive number of seconds');
    } else if (a === '--compression') {
      o.compression = value();
      if (!['max', 'meteor', 'off'].includes(o.compression)) usage('--compression must be max, meteor or off');
    } else if (a === '--verbose') o.verbose = true;
    else if (a === '-h' || a === '--help') usage();
    else usage(`unknown argument ${a}`);
  }
  return o;
}

const log = (s) => process.stdout.write(`${s}\n`);

/** Run a command, inheriting nothing but stderr/stdout into a buffer; resolves {code, out}. */
function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', (e) => resolve({ code: -1, out: `${out}${e.message}\n` }));
    child.on('close', (code, signal) => resolve({ code: code === null ? 128 : code, signal, out }));
  });
}

async function python2() {
  if (process.env.AUTOBAHN_PYTHON2) return process.env.AUTOBAHN_PYTHON2;
  let root = process.env.PYENV_ROOT;
  if (!root) {
    const r = await run('pyenv', ['root']);
    root = r.code === 0 ? r.out.trim() : path.join(os.homedir(), '.pyenv');
  }
  return path.join(root, 'versions', '2.7.18', 'bin', 'python2');
}

async function wstestWorks() {
  if (!fs.existsSync(WSTEST)) return false;
  const r = await run(path.join(VENV, 'bin', 'python'), ['-c', 'import autobahntestsuite, autobahn, twisted']);
  return r.code === 0;
}

/** Make sure .autobahn/venv has a working wstest; install it (isolated) if not. */
async function ensureWstest() {
  if (await wstestWorks()) return;
  const py2 = await python2();
  if (!fs.existsSync(py2)) {
    throw new Error(`Python 2.7 not found at ${py2} (set AUTOBAHN_PYTHON2 to a python2.7 binary)`);
  }
  log(`autobahn: installing Autobahn|Testsuite into ${VENV} (one-time, ~1-2 min)`);
  const t0 = Date.now();
  fs.rmSync(VENV, { recursive: true, force: true });
  fs.mkdirSync(ABDIR, { recursive: true });
  const steps = [];
  if (!fs.existsSync(path.join(VIRTUALENV_PKG, 'virtualenv'))) {
    steps.push(['python3', ['-m', 'pip', 'install', '--disable-pip-version-check', '--quiet',
      '--target', VIRTUALENV_PKG, 'virtualenv<20.22']]);
  }
  steps.push(['python3', ['-m', 'virtualenv', '--quiet', '-p', py2, VENV],
    { env: { ...process.env, PYTHONPATH: VIRTUALENV_PKG } }]);
  steps.push([path.join(VENV, 'bin', 'pip'), ['install', '--disable-pip-version-check', '--quiet',
    '--no-python-version-warning', 'autobahntestsuite']]);
  for (const [cmd, args, opts] of steps) {
    const r = await run(cmd, args, opts);
    if (r.code !== 0) {
      throw new Error(`setup step failed (exit ${r.code}): ${cmd} ${args.join(' ')}\n${r.out}`);
    }
  }
  if (!(await wstestWorks())) throw new Error(`wstest still not usable in ${VENV}`);
  log(`autobahn: installed in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

/** Start the echo server as an async child; resolves {child, port} at `READY <port>`. */
function startServer(compression) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(__dirname, 'echo-server.js'), '--compression', compression], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('echo server did not print READY within 10 s'));
    }, 10000);
    child.stdout.on('data', (d) => {
      if (ready) return;
      buf += d;
      const m = /READY (\d+) io (\w+)/.exec(buf);
      if (m) {
        ready = true;
        clearTimeout(timer);
        process.stdout.write(`echo server on port ${m[1]}, I/O mode ${m[2]}\n`);
        resolve({ child, port: Number(m[1]) });
      }
    });
    child.stderr.on('data', (d) => process.stderr.write(`[echo-server] ${d}`));
    child.on('exit', (code, signal) => {
      child.exited = { code, signal };
      if (!ready) {
        clearTimeout(timer);
        reject(new Error(`echo server exited before READY (code ${code}, signal ${signal})`));
      }
    });
  });
}

/** Natural order of case ids like "12.1.10" vs "12.1.9". */
function caseCompare(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] || 0) - (pb[i] || 0);
    if (d) return d;
  }
  return 0;
}

function runWstest(specPath, cwd, opts) {
  return new Promise((resolve) => {
    const child = spawn(WSTEST, ['-m', 'fuzzingclient', '-s', specPath], {
      cwd,
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const logFile = fs.createWriteStream(path.join(cwd, 'wstest.log'));
    let done = 0;
    let pending = '';
    const t0 = Date.now();
    const onData = (d) => {
      logFile.write(d);
      if (opts.verbose) process.stdout.write(d);
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) {
        if (/Running test case ID/.test(line)) {
          done++;
          if (!opts.verbose && done % 50 === 0) {
            log(`autobahn: ${done} cases run (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
          }
        }
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
    }, opts.timeout * 1000);
    child.on('error', (e) => logFile.write(`spawn error: ${e.message}\n`));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      logFile.end();
      resolve({ code, signal, timedOut, ran: done });
    });
  });
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function tail(file, n) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  await ensureWstest();

  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'autobahn-'));
  const outdir = path.join(work, 'report');
  let server;
  let failedRun = false;
  try {
    server = await startServer(opts.compression);
    const spec = {
      outdir,
      servers: [{ agent: 'native', url: `ws://127.0.0.1:${server.port}` }],
      cases: opts.cases,
      'exclude-cases': opts.exclude,
      'exclude-agent-cases': {},
      options: { failByDrop: false },
    };
    const specPath = path.join(work, 'spec.json');
    fs.writeFileSync(specPath, `${JSON.stringify(spec, null, 2)}\n`);
    log(`autobahn: server on port ${server.port} (compression ${opts.compression}); cases ${opts.cases.join(' ')}` +
      (opts.exclude.length ? `; excluding ${opts.exclude.join(' ')}` : ''));

    const tw = Date.now();
    const res = await runWstest(specPath, work, opts);
    const wall = (Date.now() - tw) / 1000;
    log(`autobahn: wstest finished in ${wall.toFixed(1)} s (exit ${res.code}${res.signal ? `, ${res.signal}` : ''})`);
    if (res.timedOut) {
      log(`autobahn: wstest killed after the ${opts.timeout} s timeout`);
      failedRun = true;
    }
    if (server.child.exited) {
      log(`autobahn: the echo server DIED during the run (code ${server.child.exited.code}, signal ${server.child.exited.signal})`);
      failedRun = true;
    }

    const indexFile = path.join(outdir, 'index.json');
    if (!fs.existsSync(indexFile)) {
      log(`autobahn: no report (${indexFile} missing); last lines of wstest's output:`);
      log(tail(path.join(work, 'wstest.log'), 30));
      log('0 passed, 1 failed');
      return 1;
    }
    const index = readJson(indexFile).native || {};
    const ids = Object.keys(index).sort(caseCompare);

    const counts = {};
    const closeCounts = {};
    const failed = [];
    let passed = 0;
    for (const id of ids) {
      const r = index[id];
      counts[r.behavior] = (counts[r.behavior] || 0) + 1;
      closeCounts[r.behaviorClose] = (closeCounts[r.behaviorClose] || 0) + 1;
      if (PASS.has(r.behavior) && PASS.has(r.behaviorClose)) passed++;
      else failed.push(id);
    }
    const fmt = (c) => [...ORDER.filter((k) => c[k]), ...Object.keys(c).filter((k) => !ORDER.includes(k))]
      .map((k) => `${k} ${c[k]}`).join(', ') || 'none';
    log(`autobahn: ${ids.length} cases`);
    log(`  behavior:        ${fmt(counts)}`);
    log(`  close behavior:  ${fmt(closeCounts)}`);

    // Per top-level section, to see where the time and the non-OK results are.
    const sections = {};
    for (const id of ids) {
      const s = id.split('.')[0];
      const sec = (sections[s] = sections[s] || { n: 0, ms: 0, other: {} });
      sec.n++;
      sec.ms += index[id].duration || 0;
      if (index[id].behavior !== 'OK') sec.other[index[id].behavior] = (sec.other[index[id].behavior] || 0) + 1;
    }
    for (const s of Object.keys(sections).sort((a, b) => a - b)) {
      const sec = sections[s];
      const other = Object.entries(sec.other).map(([k, v]) => `${k} ${v}`).join(', ');
      log(`  ${s.padStart(2)}.*: ${String(sec.n).padStart(3)} cases, ${(sec.ms / 1000).toFixed(1).padStart(6)} s` +
        (other ? ` (${other})` : ''));
    }

    const notOk = ids.filter((id) => index[id].behavior === 'NON-STRICT' || index[id].behavior === 'INFORMATIONAL');
    if (notOk.length) {
      log('passed but not OK:');
      for (const id of notOk) log(`  ${id} ${index[id].behavior}`);
    }
    if (failed.length) {
      log('FAILED cases:');
      for (const id of failed) {
        const r = index[id];
        let desc = '';
        let result = '';
        try {
          const rep = readJson(path.join(outdir, r.reportfile));
          desc = (rep.description || '').replace(/<[^>]+>/g, '').replace(/\s+/g, ' ').trim();
          result = (rep.result || '').replace(/\s+/g, ' ').trim();
        } catch { /* report file unreadable: show what index.json has */ }
        log(`  ${id}: behavior ${r.behavior}, close ${r.behaviorClose}, remote close code ${r.remoteCloseCode}`);
        if (desc) log(`      ${desc.slice(0, 300)}`);
        if (result) log(`      result: ${result.slice(0, 300)}`);
      }
    }
    if (res.code !== 0 && !failed.length) {
      log(`autobahn: wstest exited with ${res.code}; last lines of its output:`);
      log(tail(path.join(work, 'wstest.log'), 20));
    }

    if (opts.keepReport) {
      fs.mkdirSync(opts.keepReport, { recursive: true });
      fs.cpSync(outdir, opts.keepReport, { recursive: true });
      fs.copyFileSync(path.join(work, 'wstest.log'), path.join(opts.keepReport, 'wstest.log'));
      log(`autobahn: report copied to ${opts.keepReport} (open index.html)`);
    }

    // A dead server, a timeout or a wstest crash fails the run even if every recorded case passed.
    const nFailed = failed.length || (failedRun || res.code !== 0 ? 1 : 0);
    log(`autobahn: total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    log(`${passed} passed, ${nFailed} failed`);
    return nFailed ? 1 : ids.length ? 0 : 1;
  } finally {
    if (server && !server.child.exited) server.child.kill('SIGTERM');
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`autobahn: ${err.stack || err.message}\n`);
    process.stdout.write('0 passed, 1 failed\n');
    process.exit(1);
  },
);
