'use strict';
// Deploys keep `native`: a bundle built from a tree whose node_modules were installed on a Mac
// (simulated: npm's --os=darwin --cpu=arm64, so only ddp-transport-native-darwin-arm64 is there)
// is run as Meteor Up's image runs it (`npm install --production` in programs/server, then
// `node main.js`): first as built (it falls back to SockJS; the line it logs must name the
// step), then after the documented step (docs/deploying.md), where `native` must serve.

const fs = require('node:fs');
const path = require('node:path');
const { createApp, buildApp, installBundle, startBundle, meteorNpm, prepend, IMPORT_LINE } = require('./meteor-app');
const { openPage } = require('./browser');
const { assert, STARTUP_LINE } = require('./checks');
const { freePort } = require('./sh');

const PKG = 'ddp-transport-native';
/** The documented step: run where the bundle is built, before `meteor build`. */
const STEP = ['install', '--no-save', '--os=linux', '--cpu=x64', '--libc=glibc'];
const STEP_TEXT = `meteor npm ${STEP.join(' ')}`;

function platformPackages(app) {
  const dir = path.join(app, 'node_modules');
  return fs.readdirSync(dir).filter((d) => d.startsWith(`${PKG}-`)).sort();
}

function bundledPlatformPackages(bundle) {
  const dir = path.join(bundle, 'programs', 'server', 'npm', 'node_modules');
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((d) => d.startsWith(`${PKG}-`)).sort() : [];
}

async function deployChecks({ results, context, line, registry, workDir, logDir, version }) {
  const scope = 'deploy (bundle built on a Mac)';
  const check = (name, fn) => results.check(scope, name, fn);
  const app = path.join(workDir, 'mac-built-app');
  const port = await freePort();
  let server = null;
  let page = null;
  try {
    const made = await check(`node_modules installed as on macOS arm64 (meteor npm install --os=darwin --cpu=arm64 ${PKG})`, async () => {
      createApp(line, { dir: app, how: 'none', registry });
      prepend(path.join(app, 'server', 'main.js'), [IMPORT_LINE]);
      meteorNpm(line, app, ['install', '--save', '--os=darwin', '--cpu=arm64', `${PKG}@${version}`], registry);
      const found = platformPackages(app);
      assert(JSON.stringify(found) === JSON.stringify([`${PKG}-darwin-arm64`]), `platform packages: ${found.join(', ')}`);
      return `node_modules: ${PKG}, ${found.join(', ')}`;
    });
    if (!made) return;

    await check('as built: the server falls back to SockJS, and its line names the build step', async () => {
      const bundle = buildApp(line, { dir: app, out: path.join(workDir, 'out-mac-as-built'), registry });
      installBundle(line, bundle, registry);
      server = await startBundle(line, bundle, { port, logFile: path.join(logDir, 'deploy-as-built.log') });
      const warning = server.output().split('\n').find((l) => l.includes('could not load its native binary'));
      assert(warning, `no fallback line:\n${server.output().slice(-1500)}`);
      assert(warning.includes(STEP_TEXT), `the line does not name "${STEP_TEXT}": ${warning}`);
      page = await openPage(context, server.url);
      const transport = await page.call('transport');
      assert(transport.protocol !== 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
      await page.close();
      page = null;
      await server.stop();
      server = null;
      return `bundle carries ${bundledPlatformPackages(bundle).join(', ')}; SockJS ${transport.protocol}; line: ${warning.trim()}`;
    });

    await check(`after "${STEP_TEXT}" where it is built: the bundle carries the Linux binary and native serves`, async () => {
      meteorNpm(line, app, STEP, registry);
      const found = platformPackages(app);
      assert(found.includes(`${PKG}-linux-x64-gnu`) && found.includes(`${PKG}-darwin-arm64`), `platform packages after the step: ${found.join(', ')}`);
      const manifest = JSON.parse(fs.readFileSync(path.join(app, 'package.json'), 'utf8'));
      assert(!Object.keys(manifest.dependencies || {}).some((d) => d.startsWith(`${PKG}-`)), 'the step changed package.json');
      const bundle = buildApp(line, { dir: app, out: path.join(workDir, 'out-mac-with-step'), registry });
      const bundled = bundledPlatformPackages(bundle);
      assert(bundled.includes(`${PKG}-linux-x64-gnu`), `bundle carries ${bundled.join(', ')}`);
      installBundle(line, bundle, registry);
      server = await startBundle(line, bundle, { port, logFile: path.join(logDir, 'deploy-with-step.log') });
      const m = STARTUP_LINE.exec(server.output());
      assert(m, `no startup line:\n${server.output().slice(-1500)}`);
      page = await openPage(context, server.url);
      const transport = await page.call('transport');
      assert(transport.protocol === 'websocket-raw', `session socket ${JSON.stringify(transport)}`);
      return `node_modules after the step: ${found.join(', ')}; bundle carries ${bundled.join(', ')}; native serves (${transport.protocol} ${transport.url})`;
    });
  } finally {
    if (page) await page.close().catch(() => {});
    if (server) await server.stop();
  }
}

module.exports = { deployChecks, STEP_TEXT };
