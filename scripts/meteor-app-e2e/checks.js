'use strict';
// The checks a Meteor developer would make on a real app that imports ddp-transport-native,
// through Meteor's own client in each browser engine (Chromium, Firefox, WebKit: browser.js), plus
// the server's own log and exit.

const path = require('node:path');
const { openPage } = require('./browser');
const { startBundle } = require('./meteor-app');
const { freePort } = require('./sh');

const STARTUP_LINE = /ddp-transport-native: native serves \/websocket on the app's own port \(([^)]*\))?[^\n]*/;
const OFF_LINE = 'ddp-transport-native: turned off (DDP_TRANSPORT_NATIVE=0)';
const SETTINGS_KEY = 'Meteor.settings.packages["ddp-transport-native"].payloadLength';
const BAD_SETTINGS = JSON.stringify({ packages: { 'ddp-transport-native': { payloadLength: 'big' } } });

class Results {
  constructor(log) {
    this.log = log;
    this.rows = [];
  }

  /** Runs fn; a thrown error fails the check (its message is the detail). */
  async check(scope, name, fn) {
    const started = Date.now();
    let ok = true;
    let detail;
    try {
      detail = await fn();
    } catch (e) {
      ok = false;
      detail = String(e && e.message ? e.message : e).split('\n').slice(0, 6).join(' | ');
    }
    const row = { scope, name, ok, detail: detail || '', ms: Date.now() - started };
    this.rows.push(row);
    this.log(`${ok ? 'ok  ' : 'FAIL'} ${scope}: ${name}${row.detail ? ` — ${row.detail}` : ''}`);
    return ok;
  }

  /** A check that could not run here, with the reason (neither passed nor failed). */
  skip(scope, name, why) {
    this.rows.push({ scope, name, ok: true, skipped: true, detail: why, ms: 0 });
    this.log(`skip ${scope}: ${name} — ${why}`);
  }
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const isWs = (s, port) => s.url === `ws://127.0.0.1:${port}/websocket`;
const sockjsRequests = (p) => p.requests.filter((u) => /\/sockjs\//.test(u));

/** The page reached this server over native: a raw WebSocket to /websocket (101), the socket
 *  Meteor's session holds is the native one, no /sockjs request. Returns a one-line summary.
 *  Sockets to other paths (the development tool's HMR socket) are not DDP's and are passed over. */
async function assertNative(p, port, { since = 0 } = {}) {
  const opened = p.sockets.slice(since).filter((s) => new URL(s.url).pathname === '/websocket');
  const last = opened[opened.length - 1];
  assert(last && isWs(last, port) && last.status === 101, `the page's WebSocket: ${JSON.stringify(opened)}`);
  const transport = await p.call('transport');
  assert(transport.protocol === 'websocket-raw', `Meteor's session socket is ${JSON.stringify(transport)}, not native's`);
  return `${last.url} 101, extensions "${last.extensions}", session socket ${transport.protocol}, client ${transport.clientAddress}`;
}

/** A page just opened on a server where native serves: assertNative, the runtime config says
 *  native, no /sockjs request, permessage-deflate negotiated. Returns assertNative's summary. */
async function assertNativePage(page, port) {
  const summary = await assertNative(page, port);
  const s = await page.state();
  assert(s.config.DISABLE_SOCKJS === true && s.config.DDP_TRANSPORT === 'native', `runtime config ${JSON.stringify(s.config)}`);
  assert(sockjsRequests(page).length === 0, `requests to /sockjs: ${sockjsRequests(page).join(', ')}`);
  assert(/permessage-deflate/.test(page.sockets[0].extensions), `extensions "${page.sockets[0].extensions}"`);
  return summary;
}

/**
 * The checks on one app: `bundles.v1` (client v1), `bundles.v2` (the same app, client v2), in each
 * of `engines` ([{ name, driver, skipped }], browser.js's launchEngines()): every browser check
 * runs in every engine, scope "<scope> <engine>"; the server-only checks (startup line, the
 * settings error) run with the first engine. An engine that cannot run here is reported skipped.
 */
async function appChecks({ results, engines, line, scope, bundles, logDir }) {
  let first = true;
  for (const { name, driver, skipped } of engines) {
    const engineScope = `${scope} ${name}`;
    if (skipped) {
      results.skip(engineScope, 'the app checks in this engine', skipped);
      continue;
    }
    await appChecksIn({ results, target: driver, line, scope: engineScope, bundles, logDir, serverChecks: first });
    first = false;
  }
}

async function appChecksIn({ results, target, line, scope, bundles, logDir, serverChecks }) {
  const check = (name, fn) => results.check(scope, name, fn);
  const logOf = (what) => path.join(logDir, `${scope.replace(/\W+/g, '-')}-${what}.log`);
  const port = await freePort();
  let server = null;
  let page = null;
  const stop = async () => {
    if (server) await server.stop();
    server = null;
  };
  try {
    server = await startBundle(line, bundles.v1, { port, logFile: logOf('server') });
    if (serverChecks) {
      await check('startup line', async () => {
        const m = STARTUP_LINE.exec(server.output());
        assert(m, `no startup line in ${server.logFile}`);
        return m[0];
      });
    }
    await check('page connects over a raw WebSocket to /websocket, permessage-deflate negotiated', async () => {
      page = await openPage(target, server.url);
      return await assertNativePage(page, port);
    });
    if (!page) throw new Error('no page: the remaining checks of this app need one');
    await check('method round trip', async () => {
      const value = { n: 42, s: 'héllo ✓', list: [1, 2, 3] };
      const got = await page.call('echo', value);
      assert(JSON.stringify(got) === JSON.stringify(value), `echo returned ${JSON.stringify(got)}`);
      return `echo ${JSON.stringify(got)}`;
    });
    await check('subscription sees added, changed, removed', async () => {
      assert(await page.call('items.put', 'a', 1) === 'added', 'items.put a 1');
      assert(await page.call('items.put', 'a', 2) === 'changed', 'items.put a 2');
      assert(await page.call('items.remove', 'a') === true, 'items.remove a');
      await page.waitFor(() => window.e2e.events.includes('removed a'), null, 'removed a on the page');
      const { events } = await page.state();
      const want = ['added a {"value":1}', 'changed a {"value":2}', 'removed a'];
      assert(JSON.stringify(events.slice(-3)) === JSON.stringify(want), `events ${JSON.stringify(events)}`);
      return events.slice(-3).join(', ');
    });
    await check('server restarted: the client reconnects and resubscribes by itself', async () => {
      await page.call('items.put', 'before', 1);
      await stop();
      await page.waitFor(() => !window.e2e.status().connected, null, 'the page sees the server gone');
      const since = page.sockets.length;
      server = await startBundle(line, bundles.v1, { port, logFile: logOf('server-restarted') });
      await page.waitFor(() => window.e2e.status().connected, null, 'reconnected');
      // The new server process starts empty: the page's store is reset, and a document put now
      // reaches the page only through a subscription the client renewed by itself.
      await page.call('items.put', 'after-restart', 1);
      await page.waitFor(() => 'after-restart' in window.e2e.items && !('before' in window.e2e.items), null, 'resubscribed (after-restart added, before gone)');
      const { statuses } = await page.state();
      return `${await assertNative(page, port, { since })}; statuses ${statuses.join(' → ')}`;
    });
    await check('hot code push: client v2 built, the page reloads and reconnects over native', async () => {
      await stop();
      const since = page.sockets.length;
      server = await startBundle(line, bundles.v2, { port, logFile: logOf('server-v2') });
      await page.waitFor(() => window.e2e && window.e2e.version === 'v2' && window.e2e.status().connected && window.e2e.isReady(),
        null, 'the page reloaded as client v2', 90_000);
      return `page now ${(await page.state()).version}; ${await assertNative(page, port, { since })}`;
    });
    await page.close();
    page = null;
    await check('a page whose WebSocket constructor throws falls back to SockJS and works', async () => {
      page = await openPage(target, server.url, { breakWebSocket: true });
      const transport = await page.call('transport');
      assert(transport.protocol && transport.protocol !== 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
      assert(sockjsRequests(page).length > 0, 'no /sockjs request');
      const warned = page.consoleLines.find((l) => l.startsWith('ddp-transport-native: new WebSocket() failed'));
      assert(warned, `no fallback line in the console: ${JSON.stringify(page.consoleLines)}`);
      assert(await page.call('echo', 'sockjs') === 'sockjs', 'echo over SockJS');
      await page.call('items.put', 'over-sockjs', 1);
      await page.waitFor(() => 'over-sockjs' in window.e2e.items, null, 'a document over SockJS');
      const sockjs = sockjsRequests(page).length;
      await page.close();
      page = null;
      return `"${warned}"; session socket ${transport.protocol} ${transport.url}; ${sockjs} /sockjs requests`;
    });
    await stop();
    await check('SERVER_WEBSOCKET_COMPRESSION=0: no extension negotiated, startup line says so', async () => {
      server = await startBundle(line, bundles.v1, { port, env: { SERVER_WEBSOCKET_COMPRESSION: '0' }, logFile: logOf('server-nocompression') });
      const m = STARTUP_LINE.exec(server.output());
      assert(m && m[0].includes('compression off'), `startup line: ${m && m[0]}`);
      page = await openPage(target, server.url);
      assert(page.sockets[0].extensions === '', `extensions "${page.sockets[0].extensions}"`);
      const summary = await assertNative(page, port);
      await page.close();
      page = null;
      return summary;
    });
    await stop();
    await check('DDP_TRANSPORT_NATIVE=0: SockJS serves, one line says so', async () => {
      server = await startBundle(line, bundles.v1, { port, env: { DDP_TRANSPORT_NATIVE: '0' }, logFile: logOf('server-off') });
      assert(server.output().includes(OFF_LINE), `no "${OFF_LINE}" line`);
      page = await openPage(target, server.url);
      const s = await page.state();
      assert(!s.config.DISABLE_SOCKJS, `runtime config ${JSON.stringify(s.config)}`);
      const transport = await page.call('transport');
      assert(transport.protocol !== 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
      assert(sockjsRequests(page).length > 0, 'no /sockjs request');
      await page.close();
      page = null;
      return `SockJS ${transport.protocol} (${transport.url})`;
    });
    await stop();
    if (serverChecks) await check('a settings error stops the app with its message', async () => {
      const r = await startBundle(line, bundles.v1, { port, env: { METEOR_SETTINGS: BAD_SETTINGS }, logFile: logOf('server-bad-settings'), expectExit: true });
      const out = r.output();
      assert(r.code !== 0 && r.code !== null, `exit ${r.code} ${r.signal || ''}`);
      const line1 = out.split('\n').find((l) => l.includes(SETTINGS_KEY));
      assert(line1, `no line naming ${SETTINGS_KEY}:\n${out.slice(-1500)}`);
      return `exit ${r.code}: ${line1.trim()}`;
    });
  } finally {
    if (page) await page.close().catch(() => {});
    await stop();
  }
}

/** Server to server: the app `client` (E2E_UPSTREAM set) calls `upstream` with Meteor's
 *  DDP.connect in Node; the upstream app must see that connection on native. */
async function serverToServer({ results, context, line, upstream, client, logDir }) {
  const [p1, p2] = [await freePort(), await freePort()];
  let a = null;
  let b = null;
  let page = null;
  try {
    await results.check(`${client.scope} → ${upstream.scope}`, "server-to-server: DDP.connect from a second app reaches the first over native", async () => {
      a = await startBundle(line, upstream.bundle, { port: p1, logFile: path.join(logDir, 's2s-upstream.log') });
      b = await startBundle(line, client.bundle, { port: p2, env: { E2E_UPSTREAM: a.url }, logFile: path.join(logDir, 's2s-client.log') });
      page = await openPage(context, b.url);
      const r = await page.call('upstream', 'hop');
      assert(r.echoed === 'hop', `upstream echo ${JSON.stringify(r)}`);
      assert(r.transport.protocol === 'websocket-raw' && r.transport.url === '/websocket', `upstream saw ${JSON.stringify(r.transport)}`);
      return `echo "hop" through ${b.url} → ${a.url}; upstream session socket ${r.transport.protocol} ${r.transport.url}`;
    });
  } finally {
    if (page) await page.close().catch(() => {});
    if (b) await b.stop();
    if (a) await a.stop();
  }
}

module.exports = { Results, appChecks, serverToServer, STARTUP_LINE, OFF_LINE, assert, assertNative, assertNativePage, sockjsRequests };
