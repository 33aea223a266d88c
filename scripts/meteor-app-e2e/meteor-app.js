'use strict';
// Real Meteor apps for the suite: created with `meteor create`, built with `meteor build
// --directory`, run as Meteor Up's image runs a bundle (`npm install --production` in
// programs/server, then `node main.js`), all with the checkout's own tool and dev bundle.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { run, waitForPort } = require('./sh');

const APP_SOURCES = path.join(__dirname, 'app');
const IMPORT_LINE = "import 'ddp-transport-native/meteor/auto';";
const START_TIMEOUT_MS = 90_000;

/** The environment `./meteor` and `meteor npm` run in: as root, no package server, the dev
 *  bundle's node and npm first on PATH, npm pointed at `registry`, node-gyp at the dev bundle's
 *  Node headers (a package whose prebuilt binary is downloaded from elsewhere, such as
 *  accounts-password's bcrypt, is built from source). */
function meteorEnv(line, registry) {
  return {
    ...process.env,
    METEOR_ALLOW_SUPERUSER: '1',
    METEOR_OFFLINE_CATALOG: '1',
    PATH: `${line.devBundle.bin}:${process.env.PATH}`,
    npm_config_nodedir: path.dirname(line.devBundle.bin),
    npm_config_registry: registry,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  };
}

function meteor(line, args, { cwd, registry, timeout = 20 * 60_000 }) {
  return run(line.meteor, args, { cwd, env: meteorEnv(line, registry), timeout });
}

/** `meteor npm …` in dir (the dev bundle's npm). */
function meteorNpm(line, dir, args, registry, extraEnv = {}) {
  return run(line.meteor, ['npm', ...args], { cwd: dir, env: { ...meteorEnv(line, registry), ...extraEnv }, timeout: 10 * 60_000 });
}

const CLIENT_MODULE = path.join('client', 'e2e.js');

function setClientVersion(dir, version) {
  const file = path.join(dir, CLIENT_MODULE);
  const src = fs.readFileSync(file, 'utf8');
  const next = src.replace(/const CLIENT_VERSION = '[^']*';/, `const CLIENT_VERSION = '${version}';`);
  if (!/const CLIENT_VERSION = '[^']*';/.test(src)) throw new Error(`${file}: no CLIENT_VERSION line`);
  fs.writeFileSync(file, next);
}

/** Prepends lines to a file. */
function prepend(file, lines) {
  fs.writeFileSync(file, `${lines.join('\n')}\n${fs.readFileSync(file, 'utf8')}`);
}

/**
 * `meteor create` (createArgs, default --minimal) with the skeleton kept as it is, plus the
 * suite's modules (client/e2e.js, server/e2e.js) imported from the skeleton's main modules. how:
 * 'npm' (the package from the registry and the import line at the top of server/main.js),
 * 'atmosphere' (the project's Atmosphere package copied into packages/ and `meteor add`ed) or
 * 'none' (Meteor's own transport; the caller adds what it tests).
 */
function createApp(line, { dir, how, registry, projectRoot, version, createArgs = '--minimal' }) {
  fs.rmSync(dir, { recursive: true, force: true });
  meteor(line, ['create', ...createArgs.split(' '), path.basename(dir)], { cwd: path.dirname(dir), registry });
  fs.copyFileSync(path.join(APP_SOURCES, 'client.js'), path.join(dir, CLIENT_MODULE));
  fs.copyFileSync(path.join(APP_SOURCES, 'server.js'), path.join(dir, 'server', 'e2e.js'));
  prepend(path.join(dir, 'client', 'main.js'), ["import './e2e.js';"]);
  prepend(path.join(dir, 'server', 'main.js'), [...(how === 'npm' ? [IMPORT_LINE] : []), "import './e2e.js';"]);
  // What the suite's modules use: Tracker (client), DDP.connect (server), hot code push
  // (autoupdate + reload; hot-module-replacement in the skeletons is for `meteor run` only).
  const packagesFile = path.join(dir, '.meteor', 'packages');
  const listed = fs.readFileSync(packagesFile, 'utf8').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
  const wanted = ['tracker', 'ddp', 'hot-code-push'].filter((p) => !listed.includes(p));
  if (wanted.length) fs.appendFileSync(packagesFile, `${wanted.join('\n')}\n`);
  if (how === 'npm') {
    meteorNpm(line, dir, ['install', '--save', `ddp-transport-native@${version}`], registry);
  } else if (how === 'atmosphere') {
    fs.cpSync(path.join(projectRoot, 'meteor', 'ddp-transport-native'), path.join(dir, 'packages', 'ddp-transport-native'), { recursive: true });
    meteor(line, ['add', 'ddp-transport-native'], { cwd: dir, registry });
  }
  return dir;
}

/** `meteor build --directory out` (the server-side bundle in out/bundle); returns out/bundle. */
function buildApp(line, { dir, out, registry, extraEnv = {} }) {
  fs.rmSync(out, { recursive: true, force: true });
  run(line.meteor, ['build', '--directory', out], { cwd: dir, env: { ...meteorEnv(line, registry), ...extraEnv }, timeout: 20 * 60_000 });
  const bundle = path.join(out, 'bundle');
  return bundle;
}

/** What Meteor Up's image does before `node main.js`: `npm install --production` in
 *  programs/server, with the dev bundle's Node and npm (the Node the app was built for). */
function installBundle(line, bundle, registry) {
  run('npm', ['install', '--production', '--no-audit', '--no-fund'], {
    cwd: path.join(bundle, 'programs', 'server'),
    env: { ...meteorEnv(line, registry) },
    timeout: 10 * 60_000,
  });
}

/**
 * Starts `node main.js` in the bundle on 127.0.0.1:port (no MONGO_URL: the apps use no
 * collection). Resolves { child, port, url, logFile, output(), stop() } once the port answers.
 * `expectExit`: resolve when the process exits instead (for startup failures).
 */
async function startBundle(line, bundle, { port, env = {}, logFile, expectExit = false }) {
  const out = fs.openSync(logFile, 'w');
  const child = spawn(path.join(line.devBundle.bin, 'node'), ['main.js'], {
    cwd: bundle,
    env: { PATH: `${line.devBundle.bin}:/usr/bin:/bin`, HOME: process.env.HOME, PORT: String(port), BIND_IP: '127.0.0.1',
      ROOT_URL: `http://127.0.0.1:${port}`,
      // the I/O mode the suite runs the package in (unset: the default)
      ...(process.env.DDP_TRANSPORT_NATIVE_IO ? { DDP_TRANSPORT_NATIVE_IO: process.env.DDP_TRANSPORT_NATIVE_IO } : {}),
      ...env },
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  const output = () => fs.readFileSync(logFile, 'utf8');
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
  };
  const server = { child, port, url: `http://127.0.0.1:${port}`, logFile, output, stop, exited };
  if (expectExit) {
    const t = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT_MS);
    const how = await exited;
    clearTimeout(t);
    return { ...server, ...how };
  }
  try {
    await waitForPort(port, START_TIMEOUT_MS, () => (child.exitCode !== null ? `node main.js exited (${child.exitCode}):\n${output().slice(-2000)}` : null));
  } catch (e) {
    await stop();
    throw e;
  }
  return server;
}

module.exports = { createApp, buildApp, installBundle, startBundle, setClientVersion, meteor, meteorNpm, meteorEnv, prepend, IMPORT_LINE };
