'use strict';
// The three browser engines Meteor apps meet (Chromium, Firefox, WebKit), behind one small page
// driver, so that a suite runs the same page-side code in each:
//
//   const driver = await launchEngine('firefox');   // or 'chromium', 'webkit'
//   driver.name, driver.version, driver.source      // what ran, for the test's diagnostic
//   await driver.goto(url)                           // navigate, resolves once the page loaded
//   await driver.evaluate(fn, arg)                   // fn(arg) in the page; resolves its
//                                                    // (awaited, JSON-shaped) result
//   await driver.close()                             // the browser and its profile, gone
//
// How each one runs:
//   chromium  headless, through playwright-core, the Chromium helpers/browser.js finds (npm's
//             @sparticuz/chromium unless a system one is there: no Debian package needed);
//   firefox   Debian's firefox-esr, headless, through puppeteer-core over WebDriver BiDi;
//   webkit    WebKitGTK's MiniBrowser (libwebkit2gtk-4.1-0) driven by WebKitWebDriver
//             (webkit2gtk-driver) over plain WebDriver HTTP; MiniBrowser has no headless mode, so
//             the driver runs under `xvfb-run -a` (xvfb).
// `engineUnavailable(name)` says why an engine cannot run here ("<what> not installed: apt-get
// install -y <package>"), or null: the suites skip with that reason (.ci/run reads it).
// Every child process is asynchronous and every wait is bounded.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { launchChromium, isExecutable } = require('./browser');
const { freePort } = require('./common');

const ENGINES = ['chromium', 'firefox', 'webkit'];
const FIREFOX = process.env.FIREFOX_PATH || '/usr/bin/firefox-esr';
const WEBKIT_DRIVER = '/usr/bin/WebKitWebDriver';
const MINIBROWSER_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib']
  .map((d) => path.join(d, 'webkit2gtk-4.1', 'MiniBrowser'));
const XVFB_RUN = '/usr/bin/xvfb-run';


const miniBrowser = () => MINIBROWSER_DIRS.find(isExecutable) || null;

/** The skip reasons, one per missing piece (browser-engines.test.js repeats each literally, for
 *  .ci/run to read the packages from). */
const MISSING = Object.freeze({
  firefox: 'Firefox not installed: apt-get install -y firefox-esr',
  webkitDriver: 'WebKitWebDriver not installed: apt-get install -y webkit2gtk-driver',
  miniBrowser: 'MiniBrowser not installed: apt-get install -y libwebkit2gtk-4.1-0',
  xvfb: 'xvfb-run not installed: apt-get install -y xvfb',
});

/** Why `name` cannot run on this machine (the skip reason), or null when it can. */
function engineUnavailable(name) {
  if (name === 'chromium') return null; // from npm when the machine has none
  if (process.platform !== 'linux') return `${name} is driven here on Linux only (Debian packages)`;
  if (name === 'firefox') return isExecutable(FIREFOX) ? null : MISSING.firefox;
  if (name === 'webkit') {
    if (!isExecutable(WEBKIT_DRIVER)) return MISSING.webkitDriver;
    if (!miniBrowser()) return MISSING.miniBrowser;
    if (!isExecutable(XVFB_RUN)) return MISSING.xvfb;
    return null;
  }
  throw new Error(`unknown engine ${name}`);
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

// ---- Chromium: playwright-core ----------------------------------------------------------------

async function launchChromiumDriver({ timeout }) {
  const { context, chromium, userDataDir } = await launchChromium({ timeout });
  const page = context.pages()[0] || await context.newPage();
  const version = context.browser() ? context.browser().version() : await page.evaluate(() => navigator.userAgent);
  return {
    name: 'chromium',
    version: `Chromium ${String(version).replace(/^.*Chrome\/(\S+).*$/, '$1')}`,
    source: chromium.source,
    userAgent: await page.evaluate(() => navigator.userAgent),
    async goto(url) { await page.goto(url, { waitUntil: 'load', timeout }); },
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    async close() {
      await withTimeout(context.close(), 15000, 'closing Chromium').catch(() => {});
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

// ---- Firefox: puppeteer-core over WebDriver BiDi ---------------------------------------------

async function launchFirefoxDriver({ timeout }) {
  const puppeteer = require('puppeteer-core');
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-native-firefox-'));
  let browser;
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: FIREFOX,
      headless: true,
      userDataDir,
      timeout,
      protocolTimeout: timeout,
      // A quiet profile: no first-run pages, updates or telemetry reaching out.
      extraPrefsFirefox: {
        'app.update.enabled': false,
        'browser.shell.checkDefaultBrowser': false,
        'datareporting.policy.dataSubmissionEnabled': false,
        'toolkit.telemetry.enabled': false,
        'network.dns.disablePrefetch': true,
      },
    });
    const page = (await browser.pages())[0] || await browser.newPage();
    return {
      name: 'firefox',
      version: (await browser.version()).replace(/^firefox\//i, 'Firefox '),
      source: `system ${fs.realpathSync(FIREFOX)} (puppeteer-core ${require('puppeteer-core/package.json').version}, WebDriver BiDi)`,
      userAgent: await page.evaluate(() => navigator.userAgent),
      async goto(url) { await page.goto(url, { waitUntil: 'load', timeout }); },
      evaluate: (fn, arg) => page.evaluate(fn, arg),
      async close() {
        await withTimeout(browser.close(), 15000, 'closing Firefox').catch(() => {
          try { browser.process() && browser.process().kill('SIGKILL'); } catch { /* gone */ }
        });
        fs.rmSync(userDataDir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    if (browser) await browser.close().catch(() => {});
    fs.rmSync(userDataDir, { recursive: true, force: true });
    e.message = `launching ${FIREFOX}: ${e.message}`;
    throw e;
  }
}

// ---- WebKit: WebKitWebDriver + MiniBrowser under xvfb-run, plain WebDriver HTTP ---------------

/** A WebDriver command: resolves `value`, throws the driver's error (with its message). */
async function wd(base, method, route, body, ms) {
  const res = await withTimeout(fetch(`${base}${route}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  }), ms, `WebDriver ${method} ${route}`);
  const json = await res.json().catch(() => ({}));
  if (!res.ok || (json.value && json.value.error)) {
    const v = json.value || {};
    throw new Error(`WebDriver ${method} ${route}: ${v.error || res.status} ${v.message || ''}`.trim());
  }
  return json.value;
}

// The page-side wrapper of evaluate: runs the function's source with its argument, awaits it and
// hands back { ok } or { err } (WebDriver's own script errors lose the message in some engines).
const ASYNC_WRAPPER = `
  var done = arguments[arguments.length - 1];
  var arg = arguments[1];
  var fn = eval('(' + arguments[0] + ')');
  Promise.resolve().then(function () { return fn(arg); })
    .then(function (v) { done({ ok: v === undefined ? null : v }); },
          function (e) { done({ err: String(e && e.stack ? e.message + '\\n' + e.stack : e) }); });`;

async function launchWebkitDriver({ timeout }) {
  const binary = miniBrowser();
  const port = await freePort();
  // xvfb-run -a: a free display number; its own Xvfb ends with the driver. detached: the
  // driver, Xvfb and the browsers form one process group, ended together.
  const child = spawn(XVFB_RUN, ['-a', '-s', '-screen 0 1280x1024x24', WEBKIT_DRIVER, `--port=${port}`, '--host=127.0.0.1'], {
    stdio: ['ignore', 'pipe', 'pipe'], detached: true,
  });
  let output = '';
  child.stdout.on('data', (d) => { output = (output + d).slice(-4000); });
  child.stderr.on('data', (d) => { output = (output + d).slice(-4000); });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const kill = () => {
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
    const t = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
    return withTimeout(exited, 5000, 'WebKitWebDriver exit').catch(() => {}).finally(() => clearTimeout(t));
  };
  const base = `http://127.0.0.1:${port}`;
  let session;
  try {
    const deadline = Date.now() + timeout;
    for (;;) {
      const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 200))]);
      if (gone) throw new Error(`WebKitWebDriver exited (${gone.code ?? gone.signal}): ${output.trim()}`);
      try {
        const st = await wd(base, 'GET', '/status', undefined, 2000);
        if (st && st.ready !== false) break;
      } catch { /* not yet listening */ }
      if (Date.now() > deadline) throw new Error(`WebKitWebDriver did not answer within ${timeout / 1000} s: ${output.trim()}`);
    }
    session = await wd(base, 'POST', '/session', {
      capabilities: { alwaysMatch: { browserName: 'MiniBrowser', 'webkitgtk:browserOptions': { binary, args: ['--automation'] } } },
    }, timeout);
    const id = session.sessionId;
    await wd(base, 'POST', `/session/${id}/timeouts`, { script: timeout, pageLoad: timeout }, 10000);
    const evaluate = async (fn, arg) => {
      const r = await wd(base, 'POST', `/session/${id}/execute/async`,
        { script: ASYNC_WRAPPER, args: [fn.toString(), arg === undefined ? null : arg] }, timeout + 5000);
      if (r && r.err !== undefined) throw new Error(`in the page: ${r.err}`);
      return r ? r.ok : r;
    };
    const caps = session.capabilities || {};
    let closed = false;
    return {
      name: 'webkit',
      version: `WebKitGTK ${caps.browserVersion || '?'}`,
      source: `system ${binary} via ${WEBKIT_DRIVER} under xvfb-run (WebDriver)`,
      userAgent: await evaluate(() => navigator.userAgent),
      async goto(url) { await wd(base, 'POST', `/session/${id}/url`, { url }, timeout + 5000); },
      evaluate,
      async close() {
        if (closed) return;
        closed = true;
        await wd(base, 'DELETE', `/session/${id}`, undefined, 10000).catch(() => {});
        await kill();
      },
    };
  } catch (e) {
    if (session) await wd(base, 'DELETE', `/session/${session.sessionId}`, undefined, 10000).catch(() => {});
    await kill();
    e.message = `launching ${binary} via ${WEBKIT_DRIVER}: ${e.message}`;
    throw e;
  }
}

/** Launches one engine; resolves its driver (see the top of this file). */
async function launchEngine(name, { timeout = 60000 } = {}) {
  const why = engineUnavailable(name);
  if (why) throw new Error(why);
  if (name === 'chromium') return launchChromiumDriver({ timeout });
  if (name === 'firefox') return launchFirefoxDriver({ timeout });
  return launchWebkitDriver({ timeout });
}

module.exports = { ENGINES, MISSING, engineUnavailable, launchEngine };
