'use strict';
// A throwaway npm registry (verdaccio) on 127.0.0.1, for installing the project's tarballs the way
// a user installs published packages: `npm run test:dist` and `npm run test:meteor-app`.
//
// Packages published to it are served from its storage. With `uplink` (a registry URL, e.g. the
// one npm is configured with), every other package is proxied from there, so a whole app can
// install through it; the project's own packages (`local` name patterns) never are. Without
// `uplink`, nothing but what was published exists. verdaccio 6 needs Node >= 22: the caller
// passes a Node binary to run it with.

const fs = require('node:fs');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');

const VERDACCIO = '6.10.4';

/** verdaccio installed (once) under cacheDir; returns its bin. `npm` runs `npm <args>`. */
function verdaccioBin(cacheDir, npm) {
  const dir = path.join(cacheDir, `verdaccio-${VERDACCIO}`);
  const bin = path.join(dir, 'node_modules', 'verdaccio', 'bin', 'verdaccio');
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  // node-fetch: verdaccio-audit asks for the dist-tag `cjs` (= 2.x), which not every registry
  // mirror carries; pin the same line. The audit middleware is disabled anyway.
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, overrides: { 'node-fetch': '2.7.0' } }));
  const r = npm(['install', '--no-audit', '--no-fund', '--no-package-lock', '--omit=dev', `verdaccio@${VERDACCIO}`],
    { cwd: dir, timeout: 600_000 });
  if (r.status !== 0) throw new Error(`npm install verdaccio failed (${r.status}):\n${r.stderr || r.stdout}`);
  return bin;
}

function config(dir, { uplink, local }) {
  const access = ['    access: $all', '    publish: $all', '    unpublish: $all'];
  return [
    `storage: ${JSON.stringify(path.join(dir, 'storage'))}`,
    'auth:',
    '  htpasswd:',
    `    file: ${JSON.stringify(path.join(dir, 'htpasswd'))}`,
    '    max_users: 10',
    ...(uplink ? ['uplinks:', '  upstream:', `    url: ${JSON.stringify(uplink)}`, '    timeout: 60s'] : ['uplinks: {}']),
    'packages:',
    ...(uplink ? local.flatMap((p) => [`  ${JSON.stringify(p)}:`, ...access]) : []),
    "  '**':",
    ...access,
    ...(uplink ? ['    proxy: upstream'] : []),
    'middlewares:',
    '  audit:',
    '    enabled: false',
    'web:',
    '  enable: false',
    'publish:',
    '  allow_offline: true',
    'log: { type: stdout, format: json, level: warn }',
    '',
  ].join('\n');
}

/** Starts verdaccio on the port; resolves the child once it answers /-/ping, or the reason it did not. */
async function launch(dir, nodeBin, bin, port, opts) {
  const file = path.join(dir, 'verdaccio.yaml');
  fs.writeFileSync(file, config(dir, opts));
  const logFile = path.join(dir, 'verdaccio.log');
  const out = fs.openSync(logFile, 'w');
  const child = spawn(nodeBin, [bin, '--config', file, '--listen', `127.0.0.1:${port}`], { cwd: dir, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const until = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) return { error: fs.readFileSync(logFile, 'utf8') };
    try {
      const res = await fetch(`http://127.0.0.1:${port}/-/ping`);
      if (res.ok) return { child };
    } catch {
      // not up yet
    }
    if (Date.now() > until) {
      child.kill('SIGKILL');
      return { error: 'no answer within 60 s' };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Starts a registry in dir (created). Resolves { url, port, npmrc, stop() }: npmrc holds the
 * registry and a publish token.
 * @param {{ dir: string, nodeBin: string, cacheDir: string, npm: Function, uplink?: string, local?: string[] }} o
 */
async function startRegistry({ dir, nodeBin, cacheDir, npm, uplink = null, local = [] }) {
  fs.mkdirSync(dir, { recursive: true });
  const bin = verdaccioBin(cacheDir, npm);
  // verdaccio does not report the port it got for port 0: try random free-looking ports instead.
  for (let attempt = 1; ; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    const up = await launch(dir, nodeBin, bin, port, { uplink, local });
    if (up.child) {
      const url = `http://127.0.0.1:${port}/`;
      const npmrc = await publishToken(url, port, dir);
      const stop = () => { if (up.child.exitCode === null) up.child.kill('SIGTERM'); };
      return { url, port, npmrc, stop };
    }
    if (attempt === 5 || !/EADDRINUSE/.test(up.error)) throw new Error(`verdaccio did not start: ${up.error}`);
  }
}

async function publishToken(url, port, dir) {
  // A user, for a token: npm publishes only with credentials.
  const res = await fetch(`${url}-/user/org.couchdb.user:smoke`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'smoke', password: 'smoke-test-only' }),
  });
  const { token } = await res.json();
  if (!token) throw new Error(`verdaccio gave no token (${res.status})`);
  const npmrc = path.join(dir, 'publish.npmrc');
  fs.writeFileSync(npmrc, `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\n`);
  return npmrc;
}

/** Publishes tarballs (in order) to the registry with `npm`. */
function publish(registry, tarballs, npm) {
  for (const f of tarballs) {
    const r = npm(['publish', f, '--registry', registry.url, '--userconfig', registry.npmrc, '--tag', 'latest', '--no-provenance'],
      { env: { ...process.env, npm_config_loglevel: 'error' } });
    if (r.status !== 0) throw new Error(`npm publish ${path.basename(f)} failed (${r.status}):\n${r.stderr || r.stdout}`);
  }
}

/** The registry npm is configured with here (the uplink for a proxying registry). */
function configuredRegistry() {
  const r = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' });
  const url = (r.stdout || '').trim();
  if (r.status !== 0 || !/^https?:\/\//.test(url)) throw new Error(`npm config get registry: ${r.stderr || url}`);
  return url;
}

module.exports = { VERDACCIO, startRegistry, publish, configuredRegistry };
