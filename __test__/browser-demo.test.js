'use strict';
// The demo page in headless Chromium: the browser's own WebSocket to /websocket on the page's port,
// DDP connect, echo "hello" with its round trip, and permessage-deflate negotiated by default.
// The browser comes from CHROMIUM_PATH, a system Chromium, or else the npm devDependency
// @sparticuz/chromium (helpers/browser.js), so `npm install` is enough: no browser FAILS this test.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { withTimeout } = require('./helpers/meteor-util');
const { launchChromium } = require('./helpers/browser');

const savedCompression = process.env.SERVER_WEBSOCKET_COMPRESSION;
let demo;
let browser;
let userDataDir;

before(async () => {
  delete process.env.SERVER_WEBSOCKET_COMPRESSION; // the demo's default, as in Meteor: compression on
  demo = await require('../demo/server').start({ port: 0, host: '127.0.0.1' });
});

after(async () => {
  if (browser) await withTimeout(browser.close(), 10000, 'browser close').catch(() => {});
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (demo) await demo.close();
  if (savedCompression !== undefined) process.env.SERVER_WEBSOCKET_COMPRESSION = savedCompression;
});

test('demo page echoes "hello" over a native WebSocket with permessage-deflate', { timeout: 120000 }, async (t) => {
  const launched = await launchChromium({ timeout: 60000 });
  userDataDir = launched.userDataDir;
  const { context } = launched;
  browser = context; // closing the persistent context closes the browser
  const page = context.pages()[0] || await context.newPage();

  const sockets = [];
  page.on('websocket', (ws) => sockets.push(ws.url()));
  const cdp = await context.newCDPSession(page);
  const { product } = await cdp.send('Browser.getVersion');
  t.diagnostic(`${product} from ${launched.chromium.source}`);
  await cdp.send('Network.enable');
  const handshakes = [];
  cdp.on('Network.webSocketHandshakeResponseReceived', (e) => handshakes.push(e.response));

  const base = `http://127.0.0.1:${demo.port}`;
  const resp = await page.goto(`${base}/`, { timeout: 30000 });
  assert.equal(resp.status(), 200);

  await page.waitForFunction(() => document.getElementById('reply').textContent === 'hello', null, { timeout: 20000 });
  const rtt = (await page.textContent('#rtt')).trim();
  assert.match(rtt, /^\d+(\.\d+)?$/, `rtt is a number of ms: "${rtt}"`);
  assert.ok(Number(rtt) >= 0 && Number(rtt) < 10000);
  assert.match(await page.textContent('#status'), /^connected, session \S+/);

  const wsUrl = `ws://127.0.0.1:${demo.port}/websocket`;
  const info = await page.evaluate(() => ({
    url: window.__ddpSocketUrl,
    isNative: window.__ddpSocket instanceof WebSocket &&
      /\[native code\]/.test(Function.prototype.toString.call(WebSocket)),
    extensions: window.__ddpSocketExtensions,
    readyState: window.__ddpSocket.readyState,
  }));
  assert.equal(info.url, wsUrl);
  assert.equal(info.isNative, true, 'the page used the browser\'s own WebSocket');
  assert.equal(info.readyState, 1);
  assert.match(info.extensions, /permessage-deflate/, 'negotiated extension seen by the page');
  assert.deepEqual(sockets, [wsUrl], 'exactly one WebSocket, to /websocket');

  // The 101 response as Chromium saw it.
  assert.equal(handshakes.length, 1);
  assert.equal(handshakes[0].status, 101);
  const headers = Object.fromEntries(Object.entries(handshakes[0].headers).map(([k, v]) => [k.toLowerCase(), v]));
  assert.match(headers['sec-websocket-extensions'] || '', /permessage-deflate/);

  // Typed text through the form.
  await page.fill('#text', 'typed ✓ text');
  await page.click('#send');
  await page.waitForFunction(() => document.getElementById('reply').textContent === 'typed ✓ text', null, { timeout: 10000 });
  assert.match((await page.textContent('#rtt')).trim(), /^\d+(\.\d+)?$/);

  // A big reply goes through compressed (over the 1024-byte threshold).
  const big = 'x'.repeat(5000);
  await page.fill('#text', big);
  await page.click('#send');
  await page.waitForFunction((n) => document.getElementById('reply').textContent.length === n, big.length, { timeout: 10000 });

  if (process.env.DEMO_SCREENSHOT) await page.screenshot({ path: process.env.DEMO_SCREENSHOT });
});
