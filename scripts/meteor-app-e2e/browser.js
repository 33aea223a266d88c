'use strict';
// The browsers on a real Meteor app page, driven through Meteor's own client (the app's
// `window.e2e`, scripts/meteor-app-e2e/app/client.js).
//
// Two kinds of target for openPage():
//   - a playwright BrowserContext of headless Chromium (launch(): the Chromium the browser test
//     uses, __test__/helpers/browser.js): a new page per call, and the DevTools protocol reports
//     every WebSocket the page opens, with the handshake's response headers. The development-mode,
//     deploy, server-to-server, overlay35 and Meteor's-own-tests checks use it;
//   - an engine driver (launchEngines(): Chromium, Firefox, WebKit through
//     __test__/helpers/engines.js, one page each, { name, goto, evaluate, close }): the page records
//     what the checks read itself (window.__e2e, put in by the app's server: app/server.js), so
//     the same checks run the same way in every engine. The app checks (checks.js) use these.
// Either way openPage() hands back the same handle: { sockets, requests, consoleLines, state(),
// call(), waitFor(), evaluate(), close() }.

const { launchChromium } = require('../../__test__/helpers/browser');
const { ENGINES, engineUnavailable, launchEngine } = require('../../__test__/helpers/engines');

const WAIT_MS = 45_000;

async function launch() {
  const { context, chromium } = await launchChromium();
  return { context, source: chromium.source, close: () => context.close() };
}

/** A driver on one page of an open Chromium context (launch()'s), for the engine-neutral path. */
async function contextDriver(context, source) {
  const page = await context.newPage();
  const ua = await page.evaluate(() => navigator.userAgent);
  return {
    name: 'chromium',
    version: `Chromium ${ua.replace(/^.*Chrome\/(\S+).*$/, '$1')}`,
    source,
    goto: async (url) => { await page.goto(url, { waitUntil: 'load', timeout: WAIT_MS }); },
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    close: () => page.close(),
  };
}

/**
 * The engines to run the app checks in: resolves [{ name, driver, skipped }] in `names`' order;
 * `skipped` is the reason when an engine cannot run here (then `driver` is null). Chromium is a
 * page of `chromium` (launch()'s) when given, else a browser of its own.
 */
async function launchEngines(names = ENGINES, { chromium = null, log = () => {} } = {}) {
  const out = [];
  for (const name of names) {
    const why = engineUnavailable(name);
    if (why) {
      log(`browser ${name}: skipped (${why})`);
      out.push({ name, driver: null, skipped: why });
      continue;
    }
    const driver = name === 'chromium' && chromium ? await contextDriver(chromium.context, chromium.source) : await launchEngine(name);
    log(`browser ${name}: ${driver.version} from ${driver.source}`);
    out.push({ name, driver, skipped: null });
  }
  return out;
}

const isDriver = (target) => typeof target.goto === 'function' && typeof target.evaluate === 'function';

/**
 * Opens the app's page; resolves once Meteor's client is connected and the subscription ready.
 * breakWebSocket: the page's WebSocket constructor throws (installed before any page script).
 * Returns { page, sockets, requests, consoleLines, state(), waitFor(fn, arg, what), close() };
 * sockets: [{ url, status, extensions }] in the order the page opened them.
 */
async function openPage(target, url, { breakWebSocket = false } = {}) {
  if (isDriver(target)) return openDriverPage(target, url, { breakWebSocket });
  const context = target;
  const page = await context.newPage();
  if (breakWebSocket) {
    await page.addInitScript(() => {
      window.WebSocket = function WebSocket() {
        throw new DOMException('WebSocket blocked by the real-app check', 'SecurityError');
      };
    });
  }
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  const sockets = [];
  cdp.on('Network.webSocketCreated', (e) => sockets.push({ id: e.requestId, url: e.url, status: null, extensions: null }));
  cdp.on('Network.webSocketHandshakeResponseReceived', (e) => {
    const s = sockets.find((x) => x.id === e.requestId);
    if (!s) return;
    const headers = Object.fromEntries(Object.entries(e.response.headers || {}).map(([k, v]) => [k.toLowerCase(), v]));
    s.status = e.response.status;
    s.extensions = headers['sec-websocket-extensions'] || '';
  });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const consoleLines = [];
  page.on('console', (m) => consoleLines.push(m.text()));
  const waitFor = (fn, arg, what, timeout = WAIT_MS) => page.waitForFunction(fn, arg, { timeout }).catch((e) => {
    throw new Error(`${what}: not within ${timeout / 1000} s (${e.message.split('\n')[0]})`);
  });
  await page.goto(url, { waitUntil: 'load', timeout: WAIT_MS });
  const handle = {
    page,
    sockets,
    requests,
    consoleLines,
    waitFor,
    /** The client's view: { version, status, ready, items, events, statuses, config }. */
    state: () => page.evaluate(pageState),
    call: (name, ...args) => page.evaluate(([n, a]) => window.e2e.call(n, ...a), [name, args]),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    close: () => page.close(),
  };
  await waitFor(() => window.e2e && window.e2e.status().connected && window.e2e.isReady(), null, 'Meteor client connected and subscribed');
  return handle;
}

/** The client's view, as state() returns it (both paths). */
const pageState = () => ({
  version: window.e2e && window.e2e.version,
  status: window.e2e && window.e2e.status(),
  ready: window.e2e && window.e2e.isReady(),
  items: window.e2e && JSON.parse(JSON.stringify(window.e2e.items)),
  events: window.e2e && window.e2e.events.slice(),
  statuses: window.e2e && window.e2e.statuses.slice(),
  config: { DISABLE_SOCKJS: __meteor_runtime_config__.DISABLE_SOCKJS, DDP_TRANSPORT: __meteor_runtime_config__.DDP_TRANSPORT },
});

/**
 * openPage() on an engine driver: the driver's one page goes to `url`; what the page recorded
 * (window.__e2e) is read back after every call, wait and state(), and kept across page loads (a
 * hot code push reloads the page), so `sockets`, `requests` and `consoleLines` grow as with the
 * DevTools path. The page's /sockjs requests also come from its Resource Timing entries.
 */
async function openDriverPage(driver, url, { breakWebSocket }) {
  const loads = new Map(); // page load id -> its last record
  const handle = { engine: driver.name, sockets: [], requests: [], consoleLines: [] };
  const refresh = async () => {
    let r;
    try {
      r = await driver.evaluate(() => window.__e2e && {
        load: window.__e2e.load,
        sockets: window.__e2e.sockets.map((s) => ({ url: s.url, status: s.status, extensions: s.extensions })),
        requests: window.__e2e.requests.concat(performance.getEntriesByType('resource').map((e) => e.name)),
        console: window.__e2e.console.slice(),
      });
    } catch {
      return; // the page is between two loads: the next read gets it
    }
    if (!r) return;
    loads.set(r.load, r);
    const all = [...loads.values()];
    handle.sockets = all.flatMap((x) => x.sockets);
    handle.requests = [...new Set(all.flatMap((x) => x.requests))];
    handle.consoleLines = all.flatMap((x) => x.console);
  };
  const waitFor = async (fn, arg, what, timeout = WAIT_MS) => {
    const deadline = Date.now() + timeout;
    let last = '';
    for (;;) {
      try {
        if (await driver.evaluate(fn, arg)) break;
      } catch (e) {
        last = ` (last: ${String(e.message).split('\n')[0]})`; // e.g. evaluated during a reload
      }
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeout / 1000} s${last}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    await refresh();
  };
  const target = breakWebSocket ? `${url}${url.includes('?') ? '&' : '?'}e2e-break-websocket=1` : url;
  await driver.goto(target);
  await refresh();
  if (!loads.size) throw new Error(`${target} in ${driver.name}: the page has no window.__e2e (the app's page recorder, app/server.js)`);
  Object.assign(handle, {
    waitFor,
    state: async () => {
      const s = await driver.evaluate(pageState);
      await refresh();
      return s;
    },
    call: async (name, ...args) => {
      const v = await driver.evaluate(([n, a]) => window.e2e.call(n, ...a), [name, args]);
      await refresh();
      return v;
    },
    evaluate: (fn, arg) => driver.evaluate(fn, arg),
    close: () => driver.goto('about:blank'),
  });
  await waitFor(() => window.e2e && window.e2e.status().connected && window.e2e.isReady(), null, 'Meteor client connected and subscribed');
  return handle;
}

module.exports = { launch, launchEngines, openPage, WAIT_MS, ENGINES };
