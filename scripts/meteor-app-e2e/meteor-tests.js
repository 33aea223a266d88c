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
const { freePort, groupStopper } = require('./sh');
const { meteorEnv } = require('./meteor-app');
const { startMongoStandIn } = require('./mongo-standin');
const { fillSubmodule } = require('./devbundle');
const { STARTUP_LINE, assert } = require('./checks');

/** The packages whose tests run, in groups, each group its own `meteor test-packages` and
 *  page: Meteor's DDP stack and the HTTP server it shares. Not accounts-base and
 *  ddp-rate-limiter (the DDP parts of accounts): with the shrinkwrap fix in devbundle.js and
 *  node-gyp pointed at the dev bundle's headers (meteor-app.js) they build, and their server
 *  tests run, but on the reference (SockJS) the page's client tests stop after "accounts - parse
 *  urls for accounts-password" and do not finish within RUN_TIMEOUT_MS in a page of their own
 *  either, so there is no reference to compare with. */
const GROUPS = [
  { name: 'ddp', packages: ['ddp-client', 'ddp-server', 'socket-stream-client', 'ddp-common', 'webapp'] },
];
const PACKAGES = GROUPS.flatMap((g) => g.packages);
/** Blaze (test-in-console's page) finds jQuery only through the jquery package, which none of
 *  PACKAGES uses: without it the page stops at "jQuery not found" before any test runs. */
const EXTRA_PACKAGES = ['jquery'];
/** Runs with native: a test that fails in any of them is a new failure (ordering defects show
 *  up in some runs only: "livedata server - publish object" failed in one run of five before the
 *  close rule of lib/app.js). */
const NATIVE_ROUNDS = 3;
const BUILD_TIMEOUT_MS = 25 * 60_000; // the first build of the test app, every package from source
const RUN_TIMEOUT_MS = 20 * 60_000; // all tests, client and server
const LISTENING = /test-in-console listening/;
const BUILD_ERRORS = /Your application has errors/;
// test-in-console's driver logs each finished test as `<C:|S: ><group - test> : <status>`.
const RESULT_LINE = /^([CS]: .+) : (OK|EXPECTED FAILURE|!!!!!!!!! FAIL !!!!!!!!!!!)$/;

/** Starts `meteor test-packages`; resolves { url, output(), stop() } once the driver listens. */
async function startTestPackages(line, { appDir, registry, mongoUrl, native, packageDirs, logFile, packages = PACKAGES }) {
  const port = await freePort();
  const args = ['test-packages', '--driver-package', 'test-in-console', '-p', `127.0.0.1:${port}`, '--test-app-path', appDir,
    '--extra-packages', [...EXTRA_PACKAGES, ...(native ? ['ddp-transport-native'] : [])].join(','), ...packages];
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
  const stop = groupStopper(child);
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

/** Loads the driver's page and waits for TEST_STATUS.DONE. Returns every test's status. The
 *  page's console goes to consoleFile, each line with the seconds since the page was opened. */
async function runPage(context, url, consoleFile) {
  const page = await context.newPage();
  const opened = Date.now();
  const lines = [];
  const out = fs.openSync(consoleFile, 'w');
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
      const text = m.text();
      lines.push(text);
      fs.writeSync(out, `[${((Date.now() - opened) / 1000).toFixed(1)} s] ${text}\n`);
      const r = RESULT_LINE.exec(text);
      if (r) tests.set(r[1], r[2].includes('FAIL !') ? 'FAIL' : r[2]);
    });
    await page.goto(url, { waitUntil: 'load', timeout: 120_000 });
    try {
      await page.waitForFunction(() => typeof TEST_STATUS !== 'undefined' && TEST_STATUS.DONE, null, { timeout: RUN_TIMEOUT_MS, polling: 1000 });
    } catch (e) {
      throw new Error(`the tests did not finish within ${RUN_TIMEOUT_MS / 60_000} min (${tests.size} finished; ` +
        `the page's last console lines: ${lines.slice(-3).join(' / ')}; all in ${consoleFile})`);
    }
    const status = await page.evaluate(() => ({ passed: TEST_STATUS.PASSED, failed: TEST_STATUS.FAILURES,
      whereFailed: TEST_STATUS.WHERE_FAILED.map((f) => f.name) }));
    // A test whose failure was recorded by an event before its finish line still counts as failed.
    for (const name of status.whereFailed) tests.set(name, 'FAIL');
    return { ...status, tests, sockets };
  } finally {
    fs.closeSync(out);
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
  // One run's results: every group's tests in one map, counts added up.
  const runs = { reference: [], native: [] };
  try {
    for (const [variant, round] of [['reference', 1], ...Array.from({ length: NATIVE_ROUNDS }, (_, i) => ['native', i + 1])]) {
      const native = variant === 'native';
      const what = native ? `with native (the project's Atmosphere package, --extra-packages), round ${round} of ${NATIVE_ROUNDS}`
        : "reference: Meteor's SockJS transport";
      const name = `${variant}${native ? `-${round}` : ''}`;
      const run = { passed: 0, failed: 0, whereFailed: [], tests: new Map(), sockets: [] };
      let complete = true;
      for (const group of GROUPS) {
        const ok = await results.check(scope, `${what}: meteor test-packages ${group.packages.join(' ')}`, async () => {
          const t = Date.now();
          const server = await startTestPackages(line, { appDir: path.join(work, `meteor-tests-${group.name}-${variant}`), registry,
            mongoUrl: mongo.url(`meteor_tests_${group.name}_${name.replace('-', '_')}`), native, packages: group.packages,
            packageDirs: [path.join(line.checkout, 'packages', 'deprecated'), ...(native ? [packageDirs] : [])].join(path.delimiter),
            logFile: path.join(logDir, `meteor-tests-${group.name}-${name}.log`) });
          try {
            const r = await runPage(context, server.url, path.join(logDir, `meteor-tests-${group.name}-${name}-console.log`));
            const startup = STARTUP_LINE.exec(server.output());
            const raw = r.sockets.filter((x) => /\/websocket$/.test(new URL(x.url).pathname) && !/\/sockjs\//.test(x.url) && x.status === 101);
            if (native) {
              assert(startup, 'no startup line of the transport in the test app\'s output');
              assert(raw.length > 0, `the page opened no raw /websocket (101): ${JSON.stringify(r.sockets.map((x) => [x.url, x.status]))}`);
            } else {
              assert(!startup, `the reference run printed the transport's startup line: ${startup && startup[0]}`);
            }
            assert(r.tests.size > 0, 'no test result was logged');
            run.passed += r.passed;
            run.failed += r.failed;
            run.whereFailed.push(...r.whereFailed);
            for (const [n, st] of r.tests) run.tests.set(n, st);
            run.sockets.push(...r.sockets);
            return `${summary(r)}; ${Math.round((Date.now() - t) / 1000)} s`;
          } finally {
            await server.stop();
          }
        });
        complete = complete && ok;
      }
      if (complete) runs[variant].push(run);
    }
  } finally {
    const stats = mongo.stats();
    fs.writeFileSync(path.join(logDir, 'meteor-tests-mongo-standin.json'), JSON.stringify(stats, null, 2));
    await mongo.close();
  }
  const [reference] = runs.reference;
  const natives = runs.native;
  let newFailures = null;
  if (reference && natives.length === NATIVE_ROUNDS) {
    // A test passes on native when it passed in every round.
    const nativeOk = (n) => natives.every((r) => r.tests.get(n) === 'OK');
    newFailures = [...reference.tests].filter(([n, st]) => st === 'OK' && !nativeOk(n)).map(([n]) => n);
    const missing = newFailures.filter((n) => natives.some((r) => !r.tests.has(n)));
    await results.check(scope, `tests that pass on the reference and fail (or do not finish) on native in any of ${NATIVE_ROUNDS} rounds`, async () => {
      assert(newFailures.length === 0, `newFailures = ${newFailures.length}: ${newFailures.join('; ')}${missing.length ? ` (no result in a native round: ${missing.join('; ')})` : ''}`);
      const gained = [...natives[0].tests].filter(([n]) => nativeOk(n) && reference.tests.get(n) !== 'OK').map(([n]) => n);
      return `newFailures = 0 (reference ${summary(reference).replace(/ \(.*/, '')} of ${reference.tests.size} tests; native ${natives.map((r) => `${r.passed}/${r.tests.size}`).join(', ')} passed` +
        `${gained.length ? `; pass only on native: ${gained.join('; ')}` : ''})`;
    });
  }
  const plain = (r) => ({ ...r, tests: Object.fromEntries(r.tests) });
  fs.writeFileSync(path.join(logDir, 'meteor-tests.json'), JSON.stringify({
    groups: GROUPS,
    extraPackages: EXTRA_PACKAGES,
    reference: reference ? plain(reference) : null,
    native: natives.map(plain),
    newFailures,
  }, null, 2));
  return { reference, native: natives, newFailures };
}

module.exports = { meteorTests, startTestPackages, runPage, GROUPS, PACKAGES };
