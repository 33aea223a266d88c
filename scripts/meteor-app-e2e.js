'use strict';
// The real-app suite: real Meteor apps, built by Meteor's own tool from a checkout of
// meteor/meteor, with ddp-transport-native installed from a registry as users install it, driven
// through Meteor's own client in the browser engines Meteor apps meet: Chromium, Firefox and
// WebKit (__test__/helpers/engines.js; Firefox and WebKit from Debian packages, each skipped with
// the reason where it cannot run). Not part of `npm test` or CI: it needs a clone of Meteor's
// repository.
//
//   npm run test:meteor-app -- --meteor <meteor/meteor git dir> [options]
//
//   --meteor DIR      a clone of meteor/meteor (bare or not)
//   --repos DIR       where the other clones are, as <dir>/<owner>+<repo>/repo (default: two
//                     levels above --meteor). Needed:
//                     meteor/node-source-map-support, meteor/fstream, meteor/node-kexec (the dev
//                     bundle's github.com dependencies) and meteor/blaze (the Blaze app)
//   --refs A,B        Meteor commits to run (default: release/METEOR@3.0.4 and the newest commit
//                     of the snapshot, dev-bundle-22.9.0.0: the 3.1 line on Node 22)
//   --only LIST       some of: npm, atmosphere, blaze, s2s, deploy, dev, meteor-tests (default: all);
//                     also overlay35 (not in the default; needs --meteor35-src)
//   --meteor35-src DIR  for overlay35: a directory holding Meteor 3.5's packages/ddp-server (a clone
//                     of meteor/meteor at a 3.5 release); it is copied into an app of the line as
//                     a local package at run time (meteor-app-e2e/overlay35.js)
//   --work DIR        cache and work dir (default .cache/meteor-app-e2e: dev bundles per commit)
//   --no-dist         use the tarballs already in dist/ (default: npm run dist for linux-x64-gnu
//                     and darwin-arm64 first, cargo's incremental build)
//   --engines LIST    the engines of the app checks: some of chromium, firefox, webkit (default:
//                     all three; the other checks drive Chromium)
//
// What it does, per Meteor commit: checkout + offline dev bundle (cached per commit; devbundle.js),
// a local registry (verdaccio on 127.0.0.1) serving the project's dist/ tarballs and proxying
// everything else to the registry npm is configured with; then apps made with `meteor create`:
//   npm        the package from the registry + `import 'ddp-transport-native/meteor/auto'`
//   atmosphere the project's Atmosphere package in packages/, `meteor add ddp-transport-native`
//   blaze      `meteor create --blaze` (a UI framework) with the import line
// built with `meteor build --directory`, run as Meteor Up runs a bundle, and checked (checks.js;
// the browser checks in each engine, reported per engine): startup line, raw WebSocket to /websocket with permessage-deflate, method, subscription
// (added/changed/removed), server restart (reconnect + resubscribe), hot code push, a page whose
// WebSocket constructor throws (SockJS fallback), SERVER_WEBSOCKET_COMPRESSION=0,
// DDP_TRANSPORT_NATIVE=0, a settings error; server to server (s2s); a bundle built on a Mac
// (deploy.js); development mode, `meteor run` (devmode.js: the startup line, the page through the
// tool's proxy, server edit -> restart, HMR, client edit -> hot code push, DDP_TRANSPORT_NATIVE=0);
// Meteor's own tests of its DDP packages on SockJS and on native, failing on any
// test that passes on SockJS only (meteor-tests.js, with a MongoDB stand-in: mongo-standin.js).
// Ends with a table and "N passed, M failed"; exit 1 when anything failed.

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const pkg = require('../package.json');

const { DIST_TARGETS } = require('./meteor-app-e2e/dist-registry');

const DEFAULT_REFS = ['release/METEOR@3.0.4', 'dev-bundle-22.9.0.0'];
const ENGINES = ['chromium', 'firefox', 'webkit']; // browser.js's, without loading it here
const ALL = ['npm', 'atmosphere', 'blaze', 's2s', 'deploy', 'dev', 'meteor-tests'];
const OPTIONAL = ['overlay35'];

function parseArgs(argv) {
  const o = { meteor: null, repos: null, refs: DEFAULT_REFS, only: ALL, work: path.join(ROOT, '.cache', 'meteor-app-e2e'), dist: true, meteor35Src: null,
    engines: ENGINES };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--meteor') o.meteor = path.resolve(next());
    else if (a === '--repos') o.repos = path.resolve(next());
    else if (a === '--refs') o.refs = next().split(',').filter(Boolean);
    else if (a === '--only') o.only = next().split(',').filter(Boolean);
    else if (a === '--work') o.work = path.resolve(next());
    else if (a === '--no-dist') o.dist = false;
    else if (a === '--meteor35-src') o.meteor35Src = path.resolve(next());
    else if (a === '--engines') o.engines = next().split(',').filter(Boolean);
    else throw new Error(`unknown option ${a} (see the top of ${path.relative(process.cwd(), __filename)})`);
  }
  for (const x of o.only) if (![...ALL, ...OPTIONAL].includes(x)) throw new Error(`--only: ${x} is not one of ${[...ALL, ...OPTIONAL].join(', ')}`);
  for (const x of o.engines) if (!ENGINES.includes(x)) throw new Error(`--engines: ${x} is not one of ${ENGINES.join(', ')}`);
  if (o.only.includes('overlay35') && !o.meteor35Src) throw new Error('--only overlay35 needs --meteor35-src DIR (Meteor 3.5\'s packages/ddp-server)');
  return o;
}

function gitDir(dir) {
  return fs.existsSync(path.join(dir, '.git')) ? path.join(dir, '.git') : dir;
}

const NEEDS = `test:meteor-app needs a clone of meteor/meteor (its git dir), and clones of
meteor/node-source-map-support, meteor/fstream, meteor/node-kexec and meteor/blaze laid out as
<dir>/<owner>+<repo>/repo two levels above it (or --repos <dir>); Rust and cargo-zigbuild (npm
run dist), Chromium from npm (devDependency @sparticuz/chromium), Firefox and WebKit from Debian
(apt-get install -y firefox-esr webkit2gtk-driver xvfb; an engine that is missing is skipped,
saying so), ~6 GB of disk and 30-40 min on 2 cores for two Meteor lines (dev bundles are cached
per commit). Run:
  npm run test:meteor-app -- --meteor <dir of meteor/meteor>
Nothing was run.`;

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!o.meteor) {
    console.log(NEEDS);
    return 0;
  }
  // Loaded here so that the no-argument path needs nothing installed.
  const { setLog, run } = require('./meteor-app-e2e/sh');
  const { prepareMeteor, fillSubmodule } = require('./meteor-app-e2e/devbundle');
  const { createApp, buildApp, installBundle, setClientVersion } = require('./meteor-app-e2e/meteor-app');
  const { Results, appChecks, serverToServer } = require('./meteor-app-e2e/checks');
  const { deployChecks } = require('./meteor-app-e2e/deploy');
  const { meteorTests } = require('./meteor-app-e2e/meteor-tests');
  const { devModeChecks } = require('./meteor-app-e2e/devmode');
  const { overlay35Checks } = require('./meteor-app-e2e/overlay35');
  const browser = require('./meteor-app-e2e/browser');
  const { startDistRegistry } = require('./meteor-app-e2e/dist-registry');

  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const runDir = path.join(o.work, 'runs', stamp);
  fs.mkdirSync(runDir, { recursive: true });
  setLog(path.join(runDir, 'commands.log'));
  const started = Date.now();
  const log = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}`);
  const results = new Results(log);
  const meteorGit = gitDir(o.meteor);
  const repos = o.repos || path.resolve(o.meteor, '..', '..');
  const gitDirOf = (owner, repo) => {
    const dir = path.join(repos, `${owner}+${repo}`, 'repo');
    if (!fs.existsSync(dir)) throw new Error(`${dir} is missing: fetch github:${owner}/${repo} (or pass --repos)`);
    return gitDir(dir);
  };
  log(`work dir ${runDir} (every command's output: commands.log)`);

  // The project as users get it: dist/ tarballs in a local registry.
  if (o.dist) {
    log(`npm run dist -- --targets ${DIST_TARGETS.join(',')}`);
    run('npm', ['run', 'dist', '--', '--targets', DIST_TARGETS.join(',')], { cwd: ROOT, timeout: 40 * 60_000 });
  }
  const registry = await startDistRegistry({ workDir: o.work, runDir });
  log(`local registry ${registry.url}: ${registry.tarballs.map((f) => path.basename(f)).join(', ')}; other packages proxied`);

  let chromium = null;
  let engines = [];
  const lines = [];
  try {
    chromium = await browser.launch();
    log(`browser: ${chromium.source}`);
    engines = await browser.launchEngines(o.engines, { chromium, log });
    for (const ref of o.refs) {
      const lineStarted = Date.now();
      const line = prepareMeteor({ gitDir: meteorGit, ref, cacheDir: o.work, gitDirOf, log });
      // The first call builds the tool's isopackets (minutes). From a checkout it exits 1 after
      // printing "Unreleased, running from a checkout at <commit>".
      const version = run(line.meteor, ['--version'], { env: { ...process.env, METEOR_ALLOW_SUPERUSER: '1', METEOR_OFFLINE_CATALOG: '1' },
        timeout: 15 * 60_000, allowFail: true }).out.replace(/\s+/g, ' ').replace(/.*(Unreleased, running from a checkout)/, '$1').trim();
      if (!version.startsWith('Unreleased, running from a checkout')) throw new Error(`${line.meteor} --version: ${version}`);
      log(`Meteor ${ref} = ${line.commit} (meteor-tool ${line.toolVersion}, Node ${line.devBundle.nodeVersion}, npm ${line.devBundle.npmVersion}): ${version}`);
      lines.push({ ref, commit: line.commit, tool: line.toolVersion, node: line.devBundle.nodeVersion, npm: line.devBundle.npmVersion });
      const work = path.join(o.work, line.commit.slice(0, 12), 'apps');
      const logDir = path.join(runDir, line.commit.slice(0, 12));
      fs.mkdirSync(work, { recursive: true });
      fs.mkdirSync(logDir, { recursive: true });
      const tag = ref.replace(/^release\/METEOR@/, '');
      const env = { context: chromium.context, engines, line, results, logDir };

      /** Creates, builds (client v1 and v2) and installs one app; null when that failed. */
      const made = {};
      const makeApp = async (name, how, createArgs) => {
        const dir = path.join(work, name);
        let bundles = null;
        await results.check(`${tag} ${name}`, `meteor create${createArgs ? ` ${createArgs}` : ' --minimal'} + build (client v1 and v2)`, async () => {
          const t = Date.now();
          createApp(line, { dir, how, registry: registry.url, projectRoot: ROOT, version: pkg.version, createArgs });
          const v1 = buildApp(line, { dir, out: path.join(work, `${name}-out-v1`), registry: registry.url });
          setClientVersion(dir, 'v2');
          const v2 = buildApp(line, { dir, out: path.join(work, `${name}-out-v2`), registry: registry.url });
          setClientVersion(dir, 'v1');
          for (const b of [v1, v2]) installBundle(line, b, registry.url);
          bundles = { v1, v2 };
          return `${Math.round((Date.now() - t) / 1000)} s`;
        });
        made[name] = bundles;
        return bundles;
      };
      for (const [name, how, createArgs] of [['npm', 'npm'], ['atmosphere', 'atmosphere'], ['blaze', 'npm', '--blaze']]) {
        if (!o.only.includes(name) && !(name !== 'blaze' && o.only.includes('s2s'))) continue;
        if (name === 'blaze') {
          const filled = fillSubmodule(line.checkout, 'packages/non-core/blaze', gitDirOf('meteor', 'blaze'));
          if (filled) log(`packages/non-core/blaze filled from meteor/blaze ${filled}`);
        }
        const bundles = await makeApp(name, how, createArgs);
        if (bundles && o.only.includes(name)) await appChecks({ ...env, scope: `${tag} ${name}`, bundles });
      }
      if (o.only.includes('s2s') && made.npm && made.atmosphere) {
        await serverToServer({ ...env, upstream: { scope: `${tag} npm`, bundle: made.npm.v1 }, client: { scope: `${tag} atmosphere`, bundle: made.atmosphere.v1 } });
      }
      if (o.only.includes('deploy')) {
        const r = new Results(log);
        await deployChecks({ ...env, results: r, registry: registry.url, workDir: work, version: pkg.version });
        for (const row of r.rows) results.rows.push({ ...row, scope: `${tag} ${row.scope}` });
      }
      if (o.only.includes('dev')) {
        await devModeChecks({ line, tag, context: chromium.context, results, registry: registry.url, work, logDir, projectRoot: ROOT,
          version: pkg.version });
      }
      if (o.only.includes('meteor-tests')) {
        await meteorTests({ line, tag, context: chromium.context, results, registry: registry.url, work, logDir, projectRoot: ROOT,
          blazeGitDir: gitDirOf('meteor', 'blaze') });
      }
      if (o.only.includes('overlay35')) {
        await overlay35Checks({ line, tag, context: chromium.context, results, registry: registry.url, work, logDir, projectRoot: ROOT,
          version: pkg.version, src: o.meteor35Src, downloads: path.join(o.work, 'downloads'), log });
      }
      log(`Meteor ${ref}: ${Math.round((Date.now() - lineStarted) / 1000)} s`);
    }
  } finally {
    for (const e of engines) if (e.driver && e.name !== 'chromium') await e.driver.close().catch(() => {});
    if (chromium) await chromium.close().catch(() => {});
    registry.stop();
  }

  const rows = results.rows;
  const table = ['| Meteor | app | check | result |', '|---|---|---|---|',
    ...rows.map((r) => `| ${r.scope.split(' ')[0]} | ${r.scope.split(' ').slice(1).join(' ')} | ${r.name} | ${r.skipped ? 'skipped' : r.ok ? 'pass' : 'FAIL'}: ${r.detail.replace(/\|/g, '\\|')} |`)];
  const summary = [
    `# test:meteor-app ${new Date().toISOString()}`,
    '',
    ...lines.map((l) => `- ${l.ref} = ${l.commit} (meteor-tool ${l.tool}, Node ${l.node}, npm ${l.npm})`),
    `- ${pkg.name} ${pkg.version} from dist/ (${DIST_TARGETS.join(', ')}) through a local registry; Chromium: ${chromium ? chromium.source : 'none'}`,
    ...engines.map((e) => `- app checks in ${e.name}: ${e.skipped ? `skipped (${e.skipped})` : `${e.driver.version} from ${e.driver.source}`}`),
    `- ${Math.round((Date.now() - started) / 1000)} s in all`,
    '',
    ...table,
    '',
  ].join('\n');
  fs.writeFileSync(path.join(runDir, 'results.md'), summary);
  fs.writeFileSync(path.join(runDir, 'results.json'), JSON.stringify({ lines, rows }, null, 2));
  console.log(`\n${summary}`);
  const failed = rows.filter((r) => !r.ok).length;
  const skipped = rows.filter((r) => r.skipped).length;
  console.log(`results: ${path.join(runDir, 'results.md')}`);
  console.log(`${rows.length - failed - skipped} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`test:meteor-app: ${e && e.stack ? e.stack : e}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
});
