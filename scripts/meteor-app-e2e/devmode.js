'use strict';
// Development mode: the app a developer first meets, run by `meteor run` (the tool's proxy on
// the app's port in front of the app process, which the tool restarts on a server edit, and the
// tool's own hot-module-replacement socket at /__meteor__hmr__/websocket). An app made as the
// `npm` one (the import line), plus a self-accepting client module (app/hmr.js). Checked in
// headless Chromium through Meteor's own client, as the built apps are (checks.js).

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { openPage } = require('./browser');
const { createApp, meteorEnv, setClientVersion, prepend } = require('./meteor-app');
const { freePort, waitForPort, groupStopper } = require('./sh');
const { STARTUP_LINE, OFF_LINE, assert, assertNative, sockjsRequests } = require('./checks');

// What the tool prints when the app process has started: the first time, and after each restart.
const RUNNING = /=> (App running at:|Meteor server restarted)/g;
const START_TIMEOUT_MS = 15 * 60_000; // the first `meteor run` builds the app
const EDIT_TIMEOUT_MS = 120_000;
const HMR_PATH = '/__meteor__hmr__/websocket';
const HMR_MODULE = path.join('client', 'hmr.js');

/** `meteor run` in dir on 127.0.0.1:port, in its own process group. Resolves once the tool
 *  says the app runs and the port answers: { output(), runs(), stop() }. */
async function startMeteorRun(line, dir, { port, registry, env = {}, logFile }) {
  const out = fs.openSync(logFile, 'w');
  const args = ['run', '--port', `127.0.0.1:${port}`];
  fs.writeSync(out, `$ meteor ${args.join(' ')}\n`);
  const child = spawn(line.meteor, args, { cwd: dir, env: { ...meteorEnv(line, registry), ...env }, stdio: ['ignore', out, out], detached: true });
  fs.closeSync(out);
  const output = () => fs.readFileSync(logFile, 'utf8');
  const runs = () => (output().match(RUNNING) || []).length;
  const stop = groupStopper(child);
  const dead = () => (child.exitCode !== null ? `meteor run exited (${child.exitCode}):\n${output().slice(-2000)}` : null);
  try {
    await waitUntil(() => runs() > 0, START_TIMEOUT_MS, '"App running at:"', dead);
    await waitForPort(port, 30_000, dead);
  } catch (e) {
    await stop();
    throw e;
  }
  return { output, runs, stop, url: `http://127.0.0.1:${port}` };
}

async function waitUntil(cond, ms, what, dead = () => null) {
  const until = Date.now() + ms;
  while (!cond()) {
    const d = dead();
    if (d) throw new Error(d);
    if (Date.now() > until) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Appends a comment to a file: an edit that changes nothing but the file. */
function touch(file, n) {
  fs.appendFileSync(file, `// edit ${n}\n`);
}

/** The development-mode checks for one Meteor line. */
async function devModeChecks({ line, tag, context, results, registry, work, logDir, projectRoot, version }) {
  const scope = `${tag} dev`;
  const check = (name, fn) => results.check(scope, name, fn);
  const dir = path.join(work, 'devmode');
  const logOf = (what) => path.join(logDir, `dev-${what}.log`);
  let tool = null;
  let page = null;
  const stopTool = async () => {
    if (tool) await tool.stop();
    tool = null;
  };
  try {
    const made = await check('meteor create --minimal + the import line + a self-accepting client module', async () => {
      createApp(line, { dir, how: 'npm', registry, projectRoot, version });
      fs.copyFileSync(path.join(__dirname, 'app', 'hmr.js'), path.join(dir, HMR_MODULE));
      prepend(path.join(dir, 'client', 'main.js'), ["import './hmr.js';"]);
      return dir;
    });
    if (!made) return;
    const port = await freePort();
    await check('meteor run: the startup line, printed by the app process behind the tool\'s proxy', async () => {
      const t = Date.now();
      tool = await startMeteorRun(line, dir, { port, registry, logFile: logOf('run') });
      await waitUntil(() => STARTUP_LINE.test(tool.output()), 30_000, 'the startup line');
      return `${STARTUP_LINE.exec(tool.output())[0]}; app running after ${Math.round((Date.now() - t) / 1000)} s`;
    });
    if (!tool) return;
    await check('the page connects through the tool\'s proxy over a raw WebSocket, permessage-deflate negotiated', async () => {
      page = await openPage(context, tool.url);
      const summary = await assertNative(page, port);
      assert(sockjsRequests(page).length === 0, `requests to /sockjs: ${sockjsRequests(page).join(', ')}`);
      const ddp = page.sockets.find((s) => new URL(s.url).pathname === '/websocket');
      assert(/permessage-deflate/.test(ddp.extensions), `extensions "${ddp.extensions}"`);
      assert(await page.call('echo', 'dev') === 'dev', 'echo');
      return summary;
    });
    if (!page) throw new Error('no page: the remaining development-mode checks need one');
    let edits = 0;
    await check('server edit: the tool restarts the app, the page reconnects and resubscribes over native', async () => {
      await page.call('items.put', 'before', 1);
      const runs = tool.runs();
      const since = page.sockets.length;
      touch(path.join(dir, 'server', 'e2e.js'), ++edits);
      await waitUntil(() => tool.runs() > runs, EDIT_TIMEOUT_MS, 'the tool restarting the app');
      await page.waitFor(() => window.e2e.status().connected, null, 'reconnected', EDIT_TIMEOUT_MS);
      // The restarted process starts empty: a document put now reaches the page only through a
      // subscription its client renewed by itself, and the one put before is gone.
      await page.call('items.put', 'after-restart', 1);
      await page.waitFor(() => 'after-restart' in window.e2e.items && !('before' in window.e2e.items), null, 'resubscribed (after-restart added, before gone)');
      return await assertNative(page, port, { since });
    });
    await check(`HMR: a self-accepting module is replaced without a reload, over the tool's ${HMR_PATH}; the DDP socket stays`, async () => {
      await page.page.evaluate(() => { window.e2eSamePage = true; });
      const ddpBefore = page.sockets.filter((x) => new URL(x.url).pathname === '/websocket').length;
      const file = path.join(dir, HMR_MODULE);
      fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace("HMR_VALUE = 'a'", "HMR_VALUE = 'b'"));
      await page.waitFor(() => window.e2eHmr && window.e2eHmr.value === 'b', null, 'the module re-ran with the new value', EDIT_TIMEOUT_MS);
      const s = await page.page.evaluate(() => ({ same: window.e2eSamePage === true, loads: window.e2eHmr.loads, connected: window.e2e.status().connected }));
      assert(s.same, 'the page reloaded');
      assert(s.loads >= 2, `the module ran ${s.loads} time(s) in this page`);
      const hmr = page.sockets.filter((x) => new URL(x.url).pathname === HMR_PATH);
      assert(hmr.length > 0 && hmr.every((x) => x.status === 101), `the HMR socket: ${JSON.stringify(hmr)}`);
      const ddpAfter = page.sockets.filter((x) => new URL(x.url).pathname === '/websocket').length;
      assert(ddpAfter === ddpBefore && s.connected, `DDP sockets ${ddpBefore} → ${ddpAfter}, connected ${s.connected}`);
      const transport = await page.call('transport');
      assert(transport.protocol === 'websocket-raw', `Meteor's session socket is ${JSON.stringify(transport)}`);
      return `module ran ${s.loads} times in one page; ${hmr.length} HMR socket(s), 101; the DDP socket kept (${transport.protocol})`;
    });
    await check('client edit: hot code push, the page reloads as client v2 and reconnects over native', async () => {
      const since = page.sockets.length;
      setClientVersion(dir, 'v2');
      await page.waitFor(() => window.e2e && window.e2e.version === 'v2' && window.e2e.status().connected && window.e2e.isReady(),
        null, 'the page reloaded as client v2', EDIT_TIMEOUT_MS);
      const reloaded = await page.page.evaluate(() => window.e2eSamePage !== true);
      assert(reloaded, 'the page did not reload');
      return `page now ${(await page.state()).version}; ${await assertNative(page, port, { since })}`;
    });
    await page.close();
    page = null;
    await stopTool();
    await check('DDP_TRANSPORT_NATIVE=0 under meteor run: SockJS serves, one line says so', async () => {
      tool = await startMeteorRun(line, dir, { port, registry, env: { DDP_TRANSPORT_NATIVE: '0' }, logFile: logOf('run-off') });
      await waitUntil(() => tool.output().includes(OFF_LINE), 30_000, `"${OFF_LINE}"`);
      page = await openPage(context, tool.url);
      const s = await page.state();
      assert(!s.config.DISABLE_SOCKJS, `runtime config ${JSON.stringify(s.config)}`);
      const transport = await page.call('transport');
      assert(transport.protocol !== 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
      assert(sockjsRequests(page).length > 0, 'no /sockjs request');
      return `SockJS ${transport.protocol} (${transport.url})`;
    });
  } finally {
    if (page) await page.close().catch(() => {});
    await stopTool();
    setClientVersionIfPresent(dir);
  }
}

function setClientVersionIfPresent(dir) {
  if (fs.existsSync(path.join(dir, 'client', 'e2e.js'))) setClientVersion(dir, 'v1');
}

module.exports = { devModeChecks };
