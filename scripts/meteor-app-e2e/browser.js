'use strict';
// Headless Chromium on a real Meteor app page, driven through Meteor's own client (the app's
// `window.e2e`, scripts/meteor-app-e2e/app/client.js). The Chromium is the one the browser test
// uses (__test__/helpers/browser.js: @sparticuz/chromium from npm, or a system one). The
// DevTools protocol reports every WebSocket the page opens, with the handshake's response headers.

const { launchChromium } = require('../../__test__/helpers/browser');

const WAIT_MS = 45_000;

async function launch() {
  const { context, chromium } = await launchChromium();
  return { context, source: chromium.source, close: () => context.close() };
}

/**
 * Opens the app's page; resolves once Meteor's client is connected and the subscription ready.
 * breakWebSocket: the page's WebSocket constructor throws (installed before any page script).
 * Returns { page, sockets, requests, consoleLines, state(), waitFor(fn, arg, what), close() };
 * sockets: [{ url, status, extensions }] in the order the page opened them.
 */
async function openPage(context, url, { breakWebSocket = false } = {}) {
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
    state: () => page.evaluate(() => ({
      version: window.e2e && window.e2e.version,
      status: window.e2e && window.e2e.status(),
      ready: window.e2e && window.e2e.isReady(),
      items: window.e2e && JSON.parse(JSON.stringify(window.e2e.items)),
      events: window.e2e && window.e2e.events.slice(),
      statuses: window.e2e && window.e2e.statuses.slice(),
      config: { DISABLE_SOCKJS: __meteor_runtime_config__.DISABLE_SOCKJS, DDP_TRANSPORT: __meteor_runtime_config__.DDP_TRANSPORT },
    })),
    call: (name, ...args) => page.evaluate(([n, a]) => window.e2e.call(n, ...a), [name, args]),
    close: () => page.close(),
  };
  await waitFor(() => window.e2e && window.e2e.status().connected && window.e2e.isReady(), null, 'Meteor client connected and subscribed');
  return handle;
}

module.exports = { launch, openPage, WAIT_MS };
