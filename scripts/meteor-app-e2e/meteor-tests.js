'use strict';
// Meteor's own package tests, run the way Meteor runs them (`meteor test-packages
// --driver-package test-in-console`, the page driven in headless Chromium) twice per Meteor
// line: once as the reference (Meteor's SockJS transport) and once with `native` (the project's
// Atmosphere package as an extra package, which is what the one-line import does). Every test
// that passes on the reference and fails on `native` is a new failure; the step fails when there
// is one. Server-side collections live in the MongoDB stand-in (mongo-standin.js), one database
// per run.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { freePort } = require('./sh');
const { meteorEnv } = require('./meteor-app');
const { startMongoStandIn } = require('./mongo-standin');
const { fillSubmodule } = require('./devbundle');
const { STARTUP_LINE, assert } = require('./checks');

/** The packages whose tests run: Meteor's DDP stack and the HTTP server it shares. Not
 *  accounts-base and ddp-rate-limiter: their tests use accounts-password and email, and email's
 *  npm-shrinkwrap pins nodemailer-openpgp@2.2.0, a version the npm registry does not have. */
const PACKAGES = ['ddp-client', 'ddp-server', 'socket-stream-client', 'ddp-common', 'webapp'];
const BUILD_TIMEOUT_MS = 25 * 60_000; // the first build of the test app, every package from source
const RUN_TIMEOUT_MS = 20 * 60_000; // all tests, client and server
const LISTENING = /test-in-console listening/;
const BUILD_ERRORS = /Your application has errors/;
// test-in-console's driver logs each finished test as `<C:|S: ><group - test> : <status>`.
const RESULT_LINE = /^([CS]: .+) : (OK|EXPECTED FAILURE|!!!!!!!!! FAIL !!!!!!!!!!!)$/;

/** Starts `meteor test-packages`; resolves { url, output(), stop() } once the driver listens. */
async function startTestPackages(line, { appDir, registry, mongoUrl, native, packageDirs, logFile }) {
  const port = await freePort();
  const args = ['test-packages', '--driver-package', 'test-in-console', '-p', `127.0.0.1:${port}`, '--test-app-path', appDir,
    ...(native ? ['--extra-packages', 'ddp-transport-native'] : []), ...PACKAGES];
  const out = fs.openSync(logFile, 'w');
  fs.writeSync(out, `$ meteor ${args.join(' ')}\n`);
  const child = spawn(line.meteor, args, {
    cwd: path.dirname(appDir),
    env: { ...meteorEnv(line, registry), MONGO_URL: mongoUrl, ...(packageDirs ? { METEOR_PACKAGE_DIRS: packageDirs } : {}) },
    stdio: ['ignore', out, out],
    detached: true, // its own process group: the tool, the app it runs and their children
  });
  fs.closeSync(out);
  const output = () => fs.readFileSync(logFile, 'utf8');
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try { process.kill(-child.pid, 'SIGTERM'); } catch {}
    const t = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch {} }, 10_000);
    await exited;
    clearTimeout(t);
  };
  const until = Date.now() + BUILD_TIMEOUT_MS;
  while (!LISTENING.test(output())) {
    if (child.exitCode !== null) throw new Error(`meteor test-packages exited (${child.exitCode}):\n${output().slice(-3000)}`);
    if (BUILD_ERRORS.test(output())) {
      await stop();
      throw new Error(`meteor test-packages: ${output().slice(output().indexOf('Errors prevented startup')).slice(0, 3000)}`);
    }
    if (Date.now() > until) {
      await stop();
      throw new Error(`meteor test-packages: "test-in-console listening" not within ${BUILD_TIMEOUT_MS / 60_000} min:\n${output().slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  return { url: `http://127.0.0.1:${port}/`, output, stop };
}

/** Loads the driver's page and waits for TEST_STATUS.DONE. Returns every test's status. */
async function runPage(context, url) {
  const page = await context.newPage();
  try {
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    const sockets = [];
    cdp.on('Network.webSocketCreated', (e) => sockets.push({ id: e.requestId, url: e.url, status: null }));
    cdp.on('Network.webSocketHandshakeResponseReceived', (e) => {
      const s = sockets.find((x) => x.id === e.requestId);
      if (s) s.status = e.response.status;
    });
    const tests = new Map(); // name -> 'OK' | 'EXPECTED FAILURE' | 'FAIL'
    page.on('console', (m) => {
      const r = RESULT_LINE.exec(m.text());
      if (r) tests.set(r[1], r[2].includes('FAIL !') ? 'FAIL' : r[2]);
    });
    await page.goto(url, { waitUntil: 'load', timeout: 120_000 });
    await page.waitForFunction(() => typeof TEST_STATUS !== 'undefined' && TEST_STATUS.DONE, null, { timeout: RUN_TIMEOUT_MS, polling: 1000 });
    const status = await page.evaluate(() => ({ passed: TEST_STATUS.PASSED, failed: TEST_STATUS.FAILURES,
      whereFailed: TEST_STATUS.WHERE_FAILED.map((f) => f.name) }));
    // A test whose failure was recorded by an event before its finish line still counts as failed.
    for (const name of status.whereFailed) tests.set(name, 'FAIL');
    return { ...status, tests, sockets };
  } finally {
    await page.close().catch(() => {});
  }
}

const summary = (r) => `${r.passed} passed, ${r.failed} failed${r.failed ? ` (${[...new Set(r.whereFailed)].join('; ')})` : ''}`;

/**
 * The Meteor-tests step for one line: rows `<tag> meteor-tests` reference, native, new failures.
 * Returns { reference, native, newFailures } (null where a run did not complete).
 */
async function meteorTests({ line, tag, context, results, registry, work, logDir, projectRoot, blazeGitDir }) {
  const scope = `${tag} meteor-tests`;
  // What Meteor's own test runner (packages/test-in-console/run.sh) puts on the package path:
  // packages/deprecated (livedata and http, which the DDP tests use), and Blaze (test-helpers
  // needs it), a submodule filled from meteor/blaze.
  fillSubmodule(line.checkout, 'packages/non-core/blaze', blazeGitDir);
  const mongo = await startMongoStandIn();
  // The project's Atmosphere package, found through METEOR_PACKAGE_DIRS (as `meteor add` finds a
  // package in an app's packages/); its Npm.depends takes the package from the local registry.
  const packageDirs = path.join(work, 'meteor-tests-packages');
  fs.rmSync(packageDirs, { recursive: true, force: true });
  fs.cpSync(path.join(projectRoot, 'meteor', 'ddp-transport-native'), path.join(packageDirs, 'ddp-transport-native'), { recursive: true });
  const runs = {};
  try {
    for (const variant of ['reference', 'native']) {
      const native = variant === 'native';
      const what = native ? "with native (the project's Atmosphere package, --extra-packages)" : "reference: Meteor's SockJS transport";
      await results.check(scope, `${what}: meteor test-packages ${PACKAGES.join(' ')}`, async () => {
        const t = Date.now();
        const server = await startTestPackages(line, { appDir: path.join(work, `meteor-tests-${variant}`), registry,
          mongoUrl: mongo.url(`meteor_tests_${variant}`), native,
          packageDirs: [path.join(line.checkout, 'packages', 'deprecated'), ...(native ? [packageDirs] : [])].join(path.delimiter),
          logFile: path.join(logDir, `meteor-tests-${variant}.log`) });
        try {
          const r = await runPage(context, server.url);
          const startup = STARTUP_LINE.exec(server.output());
          const raw = r.sockets.filter((s) => /\/websocket$/.test(new URL(s.url).pathname) && !/\/sockjs\//.test(s.url) && s.status === 101);
          if (native) {
            assert(startup, 'no startup line of the transport in the test app\'s output');
            assert(raw.length > 0, `the page opened no raw /websocket (101): ${JSON.stringify(r.sockets.map((s) => [s.url, s.status]))}`);
          } else {
            assert(!startup, `the reference run printed the transport's startup line: ${startup && startup[0]}`);
          }
          assert(r.tests.size > 0, 'no test result was logged');
          runs[variant] = r;
          return `${summary(r)}; ${Math.round((Date.now() - t) / 1000)} s`;
        } finally {
          await server.stop();
        }
      });
    }
  } finally {
    const stats = mongo.stats();
    fs.writeFileSync(path.join(logDir, 'meteor-tests-mongo-standin.json'), JSON.stringify(stats, null, 2));
    await mongo.close();
  }
  const { reference, native } = runs;
  let newFailures = null;
  if (reference && native) {
    newFailures = [...reference.tests].filter(([name, s]) => s === 'OK' && native.tests.get(name) !== 'OK').map(([name]) => name);
    const missing = newFailures.filter((n) => !native.tests.has(n));
    await results.check(scope, 'tests that pass on the reference and fail (or do not finish) on native', async () => {
      assert(newFailures.length === 0, `newFailures = ${newFailures.length}: ${newFailures.join('; ')}${missing.length ? ` (no result on native: ${missing.join('; ')})` : ''}`);
      const gained = [...native.tests].filter(([name, s]) => s === 'OK' && reference.tests.get(name) !== 'OK').map(([name]) => name);
      return `newFailures = 0 (reference ${reference.tests.size} tests, native ${native.tests.size}${gained.length ? `; pass only on native: ${gained.join('; ')}` : ''})`;
    });
  }
  fs.writeFileSync(path.join(logDir, 'meteor-tests.json'), JSON.stringify({
    packages: PACKAGES,
    reference: reference ? { ...reference, tests: Object.fromEntries(reference.tests) } : null,
    native: native ? { ...native, tests: Object.fromEntries(native.tests) } : null,
    newFailures,
  }, null, 2));
  return { reference, native, newFailures };
}

module.exports = { meteorTests, PACKAGES };
