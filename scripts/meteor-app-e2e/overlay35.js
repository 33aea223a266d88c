'use strict';
// Meteor 3.5's ddp-server in a real app of the 3.1 line (issue #36 part 4): Meteor 3.5's
// packages/ddp-server, read at run time from --meteor35-src DIR (a clone of meteor/meteor at a
// 3.5 release, or a directory laid out like one), is copied into the app's packages/ddp-server,
// where it overrides the checkout's own ddp-server. Nothing of it is kept in this project.
//
// Changed in the copy, and said so in the output:
// - Npm.depends "uWebSockets.js": 3.5 names a GitHub git URL (not reachable where only package
//   registries are). It becomes a tarball made here from the npm package uws-pack (a republish
//   of uWebSockets.js v20): uws-pack's binaries in uWebSockets.js's own layout (package name
//   uWebSockets.js, a CommonJS main that requires uws_<platform>_<arch>_<abi>.node, as
//   uWebSockets.js's uws.js does). uws-pack itself cannot be Npm.require'd: it is ESM only (no
//   main, exports "import" only), and 3.5's transports/uws.js does Npm.require('uWebSockets.js').
// - .npm/ (3.5's npm-shrinkwrap, which pins that git URL) is not copied.
// - A DIR without packages/ddp-server/package.js but with reconstructed/ddp-server/package.js
//   (an assembled overlay) gets that file, labelled as a reconstruction in the output.
// socket-stream-client stays the 3.1 line's (its client ignores DDP_TRANSPORT, so Meteor's uws
// transport is reached from browsers with DISABLE_SOCKJS=1, which 3.5's ddp-server maps to uws).
//
// Checks: (1) the unpatched 3.5 ddp-server + the one-line import: native serves (startup line,
// the page's raw WebSocket with permessage-deflate, method, subscription, server restart,
// DDP_TRANSPORT_NATIVE=0 -> 3.5's SockJS); DISABLE_SOCKJS=1 in the same bundle -> native stands
// down, 3.5's uws transport serves; (2) the same app without the import line, DISABLE_SOCKJS=1
// and DDP_TRANSPORT=uws -> Meteor's uws transport serves; (3) the registry path (the project's
// meteor/ddp-server.patch): which of its files DIR has, whether the patch applies.

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { run, npmPack, freePort } = require('./sh');
const { createApp, buildApp, installBundle, startBundle, IMPORT_LINE } = require('./meteor-app');
const { STARTUP_LINE, OFF_LINE, assert, assertNative, assertNativePage, sockjsRequests } = require('./checks');
const { openPage } = require('./browser');

const UWS_PACK = 'uws-pack@20.0.8';
const STANDS_DOWN = /ddp-transport-native: stands down: [^\n]*/;
/** The registry path: ddp-server with its transport registry (meteor/meteor PR #14737, after
 *  3.5.1) plus the three packages it uses; the project's patch is written against these. */
const REGISTRY_FILES = [
  'ddp-server/package.js', 'ddp-server/transports/index.js',
  'ddp-transport-registry/package.js', 'ddp-transport-registry/registry.js',
  'ddp-transport-sockjs/package.js', 'ddp-transport-sockjs/server/main.js', 'ddp-transport-sockjs/server/transport.js',
  'ddp-transport-sockjs/client/main.js',
  'ddp-transport-uws/package.js', 'ddp-transport-uws/server/main.js', 'ddp-transport-uws/server/transport.js',
];

function listFiles(dir, base = dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? listFiles(p, base) : [path.relative(base, p)];
  }).sort();
}

/** uws-pack's binaries as the package uWebSockets.js (a tarball, made once). */
function uwsTarball(downloads) {
  const packed = npmPack(UWS_PACK, downloads);
  const version = UWS_PACK.split('@')[1];
  const out = path.join(downloads, `uWebSockets.js-from-uws-pack-${version}.tgz`);
  if (fs.existsSync(out)) return { file: out, packed };
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'uws-pack-'));
  try {
    run('tar', ['-xzf', packed, '-C', tmp]);
    const pkgDir = path.join(tmp, 'uWebSockets.js', 'package');
    fs.mkdirSync(pkgDir, { recursive: true });
    const bin = path.join(tmp, 'package', 'dist', 'bin');
    const binaries = fs.readdirSync(bin).filter((f) => f.endsWith('.node'));
    if (!binaries.length) throw new Error(`${packed}: no dist/bin/*.node`);
    for (const f of binaries) fs.copyFileSync(path.join(bin, f), path.join(pkgDir, f));
    fs.copyFileSync(path.join(tmp, 'package', 'LICENSE'), path.join(pkgDir, 'LICENSE'));
    fs.writeFileSync(path.join(pkgDir, 'package.json'), `${JSON.stringify({
      name: 'uWebSockets.js', version, main: 'uws.js', license: 'Apache-2.0',
      description: `uws-pack ${version}'s binaries in uWebSockets.js's layout (made by the real-app suite, scripts/meteor-app-e2e/overlay35.js)`,
    }, null, 2)}\n`);
    fs.writeFileSync(path.join(pkgDir, 'uws.js'), `'use strict';
// As uWebSockets.js v20's uws.js: the binary for this platform, architecture and Node ABI.
module.exports = (() => {
  try {
    return require('./uws_' + process.platform + '_' + process.arch + '_' + process.versions.modules + '.node');
  } catch (e) {
    throw new Error('uWebSockets.js (uws-pack ${version}): no binary for ' + process.platform + '_' + process.arch + '_' + process.versions.modules + '.\\n\\n' + e.toString());
  }
})();
`);
    run('tar', ['-czf', out, '-C', path.dirname(pkgDir), 'package']);
    return { file: out, packed, binaries: binaries.length };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Copies DIR's 3.5 ddp-server into dest; rewrites the uWebSockets.js entry. Returns what it did. */
function overlayDdpServer(src, dest, tarball) {
  const from = path.join(src, 'packages', 'ddp-server');
  for (const f of ['stream_server.js', 'livedata_server.js', path.join('transports', 'index.js')]) {
    if (!fs.existsSync(path.join(from, f))) throw new Error(`${path.join(from, f)} is missing: --meteor35-src needs Meteor 3.5's packages/ddp-server (with its transports/)`);
  }
  fs.rmSync(dest, { recursive: true, force: true });
  fs.cpSync(from, dest, { recursive: true, filter: (p) => !/(^|\/)(\.npm|\.build[^/]*|node_modules)$/.test(p) });
  const lines = [];
  let packageJs = `${from}/package.js`;
  if (!fs.existsSync(path.join(dest, 'package.js'))) {
    const rec = path.join(src, 'reconstructed', 'ddp-server', 'package.js');
    if (!fs.existsSync(rec)) throw new Error(`${from}/package.js is missing (and no ${rec})`);
    fs.copyFileSync(rec, path.join(dest, 'package.js'));
    packageJs = `${rec} (a RECONSTRUCTION, not Meteor's file: see its header)`;
  }
  const files = listFiles(dest);
  lines.push(`packages/ddp-server <- ${from}: ${files.filter((f) => f !== 'package.js').join(', ')}`);
  lines.push(`packages/ddp-server/package.js <- ${packageJs}`);
  const pj = path.join(dest, 'package.js');
  const text = fs.readFileSync(pj, 'utf8');
  const entry = /(["'])uWebSockets\.js\1(\s*:\s*)(["'])([^"']*)\3/;
  const m = entry.exec(text);
  if (!m) throw new Error(`${packageJs}: no "uWebSockets.js" entry in Npm.depends`);
  const now = `file://${tarball.file}`;
  fs.writeFileSync(pj, text.replace(entry, `$1uWebSockets.js$1$2$3${now}$3`));
  lines.push(`package.js Npm.depends "uWebSockets.js": ${m[4]} -> ${now} (${UWS_PACK} from the registry, ${path.basename(tarball.packed)}, ` +
    'its binaries in uWebSockets.js\'s layout); nothing else in the copy is changed');
  return { lines, files };
}

/** The first lines of Meteor's own error in a failed build (not the command line). */
function buildError(e) {
  const text = String(e && e.message ? e.message : e);
  const at = text.search(/Errors prevented|error:|Error:|While /);
  return new Error(at > 0 ? text.slice(at) : text);
}

function build(line, dir, out, registry) {
  try {
    const bundle = buildApp(line, { dir, out, registry });
    installBundle(line, bundle, registry);
    return bundle;
  } catch (e) {
    throw buildError(e);
  }
}

/** What the built bundle's ddp-server is: 3.5's (transports/) or not. */
function bundledDdpServer(bundle) {
  const file = path.join(bundle, 'programs', 'server', 'packages', 'ddp-server.js');
  const text = fs.readFileSync(file, 'utf8');
  const has = ['getTransport', 'createUwsTransport', 'createSockJSTransport', 'disconnectGracePeriod'].filter((w) => text.includes(w));
  assert(has.includes('getTransport') && has.includes('createUwsTransport'), `${file} is not 3.5's ddp-server (has: ${has.join(', ') || 'none of getTransport, createUwsTransport'})`);
  const uws = path.join(bundle, 'programs', 'server', 'npm', 'node_modules', 'meteor', 'ddp-server', 'node_modules', 'uWebSockets.js', 'package.json');
  const uwsVersion = fs.existsSync(uws) ? JSON.parse(fs.readFileSync(uws, 'utf8')).version : 'missing';
  return `bundle's ddp-server.js has ${has.join(', ')}; its node_modules/uWebSockets.js ${uwsVersion}`;
}

/** A WebSocket handshake from Node to /websocket: { status, headers } (the 101's headers). */
function handshake(port) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/websocket', headers: {
      Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
      'Sec-WebSocket-Extensions': 'permessage-deflate; client_max_window_bits',
    } });
    const done = (res, socket) => {
      if (socket) socket.destroy();
      else res.resume();
      resolve({ status: res.statusCode, headers: res.headers });
    };
    req.on('upgrade', done);
    req.on('response', (res) => done(res));
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('no handshake response within 10 s')));
    req.end();
  });
}

const showHandshake = (h) => `${h.status}${h.headers.uwebsockets ? `, uWebSockets: ${h.headers.uwebsockets}` : ', no uWebSockets header'}` +
  `, extensions "${h.headers['sec-websocket-extensions'] || ''}"`;

/** Method + subscription through the open page. */
async function methodAndSubscription(page, key) {
  const value = { n: 42, s: 'héllo ✓', key };
  const got = await page.call('echo', value);
  assert(JSON.stringify(got) === JSON.stringify(value), `echo returned ${JSON.stringify(got)}`);
  assert(await page.call('items.put', key, 1) === 'added', `items.put ${key} 1`);
  assert(await page.call('items.put', key, 2) === 'changed', `items.put ${key} 2`);
  assert(await page.call('items.remove', key) === true, `items.remove ${key}`);
  await page.waitFor((k) => window.e2e.events.includes(`removed ${k}`), key, `removed ${key} on the page`);
  const { events } = await page.state();
  const want = [`added ${key} {"value":1}`, `changed ${key} {"value":2}`, `removed ${key}`];
  assert(JSON.stringify(events.slice(-3)) === JSON.stringify(want), `events ${JSON.stringify(events)}`);
  return `echo ok; ${events.slice(-3).join(', ')}`;
}

/** The page reached Meteor's uws transport: raw WebSocket 101 on /websocket, no /sockjs, the
 *  101 from uWS (its "uWebSockets" header), Meteor's session socket is the uws adapter. */
async function assertUws(page, port) {
  const ws = page.sockets.filter((s) => new URL(s.url).pathname === '/websocket');
  const last = ws[ws.length - 1];
  assert(last && last.status === 101, `the page's WebSocket: ${JSON.stringify(page.sockets)}`);
  assert(sockjsRequests(page).length === 0, `requests to /sockjs: ${sockjsRequests(page).join(', ')}`);
  const transport = await page.call('transport');
  assert(transport.protocol === 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
  const h = await handshake(port);
  assert(h.status === 101 && h.headers.uwebsockets, `handshake from Node: ${showHandshake(h)} (not uWS's)`);
  const s = await page.state();
  return `${last.url} 101, extensions "${last.extensions}", runtime config ${JSON.stringify(s.config)}; handshake from Node ${showHandshake(h)}`;
}

/** The registry path: which of its files DIR has, and whether the project's patch applies. */
function registryPath(src, projectRoot, overlayCopy) {
  const roots = [path.join(src, 'packages'), path.join(src, 'registry-era', 'packages')];
  const where = (f) => roots.find((r) => fs.existsSync(path.join(r, f)));
  // The release layout's ddp-server (packages/) has no registry: only a registry-era copy counts
  // for ddp-server's own files, and only when that is not the 3.5 release's transports/index.js.
  const registryIndex = roots.map((r) => path.join(r, 'ddp-server', 'transports', 'index.js'))
    .find((f) => fs.existsSync(f) && /DDPTransportRegistry/.test(fs.readFileSync(f, 'utf8')));
  const missing = REGISTRY_FILES.filter((f) => {
    if (f === 'ddp-server/transports/index.js') return !registryIndex;
    if (f === 'ddp-server/package.js') {
      return !roots.some((r) => {
        const p = path.join(r, f);
        return fs.existsSync(p) && /ddp-transport-(registry|sockjs|uws)/.test(fs.readFileSync(p, 'utf8'));
      });
    }
    return !where(f);
  });
  const patch = path.join(projectRoot, 'meteor', 'ddp-server.patch');
  // `git apply --check` in a scratch dir outside any repository, on copies of the patched files.
  const applies = (files, what) => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ddp-server-patch-'));
    try {
      for (const [rel, file] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(tmp, rel)), { recursive: true });
        fs.copyFileSync(file, path.join(tmp, rel));
      }
      const args = ['apply', '--check', ...Object.keys(files).map((f) => `--include=${f}`), patch];
      const r = run('git', args, { cwd: tmp, allowFail: true });
      return r.status === 0 ? `applies to ${what}` : `does not apply to ${what}: ${r.out.trim().split('\n').slice(0, 4).join('; ')}`;
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  };
  const onRelease = applies({ 'package.js': path.join(overlayCopy, 'package.js'), 'transports/index.js': path.join(overlayCopy, 'transports', 'index.js') },
    "3.5's release ddp-server (package.js, transports/index.js)");
  const onRegistryIndex = registryIndex ? `its transports/index.js hunk ${applies({ 'transports/index.js': registryIndex }, registryIndex)}`
    : 'no registry-era transports/index.js';
  return { missing, onRelease, onRegistryIndex };
}

/** The overlay step for one Meteor line (meant for the 3.1 line: dev-bundle-22.9.0.0). */
async function overlay35Checks({ line, tag, context, results, registry, work, logDir, projectRoot, version, src, downloads, log }) {
  const scope = `${tag} overlay35`;
  const check = (name, fn) => results.check(scope, name, fn);
  const logOf = (what) => path.join(logDir, `overlay35-${what}.log`);
  const dirA = path.join(work, 'overlay35');
  const dirB = path.join(work, 'overlay35-noimport');
  let server = null;
  let page = null;
  const stop = async () => {
    if (page) await page.close().catch(() => {});
    page = null;
    if (server) await server.stop();
    server = null;
  };
  const uwsSettings = async () => JSON.stringify({ packages: { 'ddp-server': { uws: { port: await freePort() } } } });
  let bundleA = null;
  let bundleB = null;
  try {
    await check(`Meteor 3.5's ddp-server (unpatched) from ${src} in packages/ddp-server + the import line: meteor create --minimal + build`, async () => {
      const t = Date.now();
      const tarball = uwsTarball(downloads);
      createApp(line, { dir: dirA, how: 'npm', registry, projectRoot, version });
      const overlay = overlayDdpServer(src, path.join(dirA, 'packages', 'ddp-server'), tarball);
      for (const l of overlay.lines) log(`  overlay35: ${l}`);
      log('  overlay35: not overlaid: packages/socket-stream-client (the 3.1 line\'s stays)');
      bundleA = build(line, dirA, path.join(work, 'overlay35-out'), registry);
      return `${bundledDdpServer(bundleA)}; ${Math.round((Date.now() - t) / 1000)} s`;
    });
    if (bundleA) {
      const port = await freePort();
      await check('native serves: the startup line', async () => {
        server = await startBundle(line, bundleA, { port, logFile: logOf('server') });
        const m = STARTUP_LINE.exec(server.output());
        assert(m, `no startup line in ${server.logFile}:\n${server.output().slice(-1500)}`);
        return m[0];
      });
      if (server) {
        await check('the page: raw WebSocket to /websocket 101, permessage-deflate, native\'s session socket', async () => {
          page = await openPage(context, server.url);
          const summary = await assertNativePage(page, port);
          const h = await handshake(port);
          assert(h.status === 101 && !h.headers.uwebsockets, `handshake from Node: ${showHandshake(h)}`);
          return `${summary}; handshake from Node ${showHandshake(h)}`;
        });
      }
      if (page) {
        await check('method round trip and subscription (added, changed, removed)', () => methodAndSubscription(page, 'a'));
        await check('server restarted: the client reconnects and resubscribes by itself, over native', async () => {
          await page.call('items.put', 'before', 1);
          await server.stop();
          server = null;
          await page.waitFor(() => !window.e2e.status().connected, null, 'the page sees the server gone');
          const since = page.sockets.length;
          server = await startBundle(line, bundleA, { port, logFile: logOf('server-restarted') });
          await page.waitFor(() => window.e2e.status().connected, null, 'reconnected');
          await page.call('items.put', 'after-restart', 1);
          await page.waitFor(() => 'after-restart' in window.e2e.items && !('before' in window.e2e.items), null, 'resubscribed (after-restart added, before gone)');
          return await assertNative(page, port, { since });
        });
      }
      await stop();
      await check('DDP_TRANSPORT_NATIVE=0: Meteor 3.5\'s SockJS transport serves, one line says so', async () => {
        server = await startBundle(line, bundleA, { port, env: { DDP_TRANSPORT_NATIVE: '0' }, logFile: logOf('server-off') });
        assert(server.output().includes(OFF_LINE), `no "${OFF_LINE}" line`);
        page = await openPage(context, server.url);
        const s = await page.state();
        assert(s.config.DDP_TRANSPORT === 'sockjs' && !s.config.DISABLE_SOCKJS, `runtime config ${JSON.stringify(s.config)}`);
        const transport = await page.call('transport');
        assert(transport.protocol !== 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
        assert(sockjsRequests(page).length > 0, 'no /sockjs request');
        assert(await page.call('echo', 'sockjs') === 'sockjs', 'echo over SockJS');
        return `SockJS ${transport.protocol} (${transport.url}); runtime config ${JSON.stringify(s.config)}`;
      });
      await stop();
      await check('DISABLE_SOCKJS=1 beside the import line: native stands down, Meteor\'s uws transport serves the page (method + subscription)', async () => {
        server = await startBundle(line, bundleA, { port, env: { DISABLE_SOCKJS: '1', METEOR_SETTINGS: await uwsSettings() }, logFile: logOf('server-uws') });
        const m = STANDS_DOWN.exec(server.output());
        assert(m && !STARTUP_LINE.test(server.output()), `native did not stand down:\n${server.output().slice(-1500)}`);
        page = await openPage(context, server.url);
        const summary = await assertUws(page, port);
        return `"${m[0]}"; ${summary}; ${await methodAndSubscription(page, 'u')}`;
      });
      await stop();
    }

    await check('the same app without the import line: build', async () => {
      assert(fs.existsSync(path.join(dirA, 'packages', 'ddp-server', 'package.js')), 'the overlay app was not made');
      const t = Date.now();
      fs.rmSync(dirB, { recursive: true, force: true });
      fs.cpSync(dirA, dirB, { recursive: true });
      const main = path.join(dirB, 'server', 'main.js');
      const text = fs.readFileSync(main, 'utf8');
      assert(text.includes(IMPORT_LINE), `${main}: no import line`);
      fs.writeFileSync(main, text.split('\n').filter((l) => l.trim() !== IMPORT_LINE).join('\n'));
      bundleB = build(line, dirB, path.join(work, 'overlay35-noimport-out'), registry);
      return `${bundledDdpServer(bundleB)}; ${Math.round((Date.now() - t) / 1000)} s`;
    });
    if (bundleB) {
      const port = await freePort();
      await check('DISABLE_SOCKJS=1 DDP_TRANSPORT=uws, no import line: Meteor\'s uws transport serves the page (method + subscription)', async () => {
        server = await startBundle(line, bundleB, { port, env: { DISABLE_SOCKJS: '1', DDP_TRANSPORT: 'uws', METEOR_SETTINGS: await uwsSettings() }, logFile: logOf('noimport-server-uws') });
        assert(!/ddp-transport-native/.test(server.output()), `ddp-transport-native printed something:\n${server.output().slice(-800)}`);
        page = await openPage(context, server.url);
        const s = await page.state();
        assert(s.config.DDP_TRANSPORT === 'uws', `runtime config ${JSON.stringify(s.config)}`);
        return `${await assertUws(page, port)}; ${await methodAndSubscription(page, 'v')}`;
      });
      await stop();
    }

    await check('the registry path ({"packages":{"ddp-server":{"transport":"native"}}} + meteor/ddp-server.patch)', async () => {
      const overlayCopy = path.join(dirA, 'packages', 'ddp-server');
      assert(fs.existsSync(overlayCopy), 'the overlay app was not made');
      const r = registryPath(src, projectRoot, overlayCopy);
      const detail = `missing from ${src}: ${r.missing.join(', ') || 'nothing'}; the patch ${r.onRelease}; ${r.onRegistryIndex}`;
      if (r.missing.length) throw new Error(`not built: ${detail}`);
      throw new Error(`not built: every file is there, but this step does not build the registry path yet (${detail})`);
    });
  } finally {
    await stop();
  }
}

module.exports = { overlay35Checks, overlayDdpServer, uwsTarball, registryPath, handshake, listFiles };
