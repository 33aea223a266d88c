'use strict';
// `ddp-transport-native meteor-setup --meteor-src <meteor checkout> --app <app dir>`: puts the
// `native` DDP transport into a Meteor 3.5 app.
//
//   1. copies packages/ddp-server from the Meteor checkout into the app's packages/ddp-server
//      (a local package overrides the release's) and applies meteor/ddp-server.patch to it;
//   2. copies the provider package (meteor/ddp-transport-native) into the app's packages/;
//   3. adds `ddp-transport-native` to the app's .meteor/packages if it is not listed.
//
// Nothing is written unless every hunk of the patch applies. The patch is applied by the small
// strict unified-diff applier below (exact context lines, a unique match anywhere in the file
// when the line numbers moved), so the result does not depend on git or patch being installed.
// A second run finds the copy already patched and leaves it alone.

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const PATCH_FILE = path.join(ROOT, 'meteor', 'ddp-server.patch');
const PROVIDER_DIR = path.join(ROOT, 'meteor', 'ddp-transport-native');
const PROVIDER = 'ddp-transport-native';
const DDP_SERVER = path.join('packages', 'ddp-server');

const USAGE = `Usage: ddp-transport-native meteor-setup --meteor-src <meteor checkout> --app <app dir> [--dry-run]

  --meteor-src  a checkout of meteor/meteor at your app's release (it has packages/ddp-server)
  --app         the Meteor app (it has .meteor/packages)
  --dry-run     say what would be done, write nothing

Copies packages/ddp-server into <app>/packages/, applies meteor/ddp-server.patch to it
(VALID_NAMES accepts "native"; a weak dependency loads the provider before ddp-server), copies
the ddp-transport-native Meteor package into <app>/packages/ and lists it in .meteor/packages.`;

/** An error meant for the user: printed as one message, no stack trace. */
class SetupError extends Error {
  constructor(message, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

// ---------------------------------------------------------------------------------------------
// Arguments

function parseArgs(argv) {
  const opts = { meteorSrc: null, app: null, dryRun: false, help: false };
  const names = { '--meteor-src': 'meteorSrc', '--app': 'app' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') { opts.help = true; continue; }
    if (arg === '--dry-run') { opts.dryRun = true; continue; }
    const eq = arg.indexOf('=');
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    const key = names[flag];
    if (!key) throw new SetupError(`unknown argument ${JSON.stringify(arg)}\n\n${USAGE}`, 2);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '' || (eq === -1 && value.startsWith('--'))) {
      throw new SetupError(`${flag} needs a directory\n\n${USAGE}`, 2);
    }
    opts[key] = value;
  }
  if (opts.help) return opts;
  for (const [flag, key] of Object.entries(names)) {
    if (!opts[key]) throw new SetupError(`missing ${flag} <dir>\n\n${USAGE}`, 2);
  }
  return opts;
}

// ---------------------------------------------------------------------------------------------
// Unified diff: parse and apply (strict: context must match exactly)

/**
 * Parse a unified diff into [{ path, hunks: [{ header, oldStart, lines: [{op, text}] }] }].
 * Text before the first `--- ` line (a description, `diff --git` lines) is ignored. Paths are
 * taken from the `+++ ` line with the first component (`b/`) stripped, as `patch -p1` does.
 */
function parseUnifiedDiff(text) {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const files = [];
  let file = null;
  let hunk = null;
  let oldLeft = 0;
  let newLeft = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (hunk && (oldLeft > 0 || newLeft > 0)) {
      const op = line[0] === undefined ? ' ' : line[0];
      if (op === '\\') continue; // "\ No newline at end of file"
      if (op !== ' ' && op !== '-' && op !== '+') {
        throw new Error(`malformed patch: line ${i + 1} inside hunk ${hunk.header}: ${JSON.stringify(line)}`);
      }
      hunk.lines.push({ op, text: line.slice(1) });
      if (op !== '+') oldLeft--;
      if (op !== '-') newLeft--;
      if (oldLeft < 0 || newLeft < 0) throw new Error(`malformed patch: hunk ${hunk.header} is longer than its header says`);
      continue;
    }
    if (line.startsWith('--- ') && i + 1 < lines.length && lines[i + 1].startsWith('+++ ')) {
      const target = lines[i + 1].slice(4).split('\t')[0].trim();
      const slash = target.indexOf('/');
      file = { path: slash === -1 ? target : target.slice(slash + 1), hunks: [] };
      files.push(file);
      hunk = null;
      i++;
      continue;
    }
    const m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (m) {
      if (!file) throw new Error(`malformed patch: hunk before any file header at line ${i + 1}`);
      hunk = { header: m[0], oldStart: Number(m[1]), lines: [] };
      oldLeft = m[2] === undefined ? 1 : Number(m[2]);
      newLeft = m[4] === undefined ? 1 : Number(m[4]);
      file.hunks.push(hunk);
    }
  }
  if (hunk && (oldLeft > 0 || newLeft > 0)) throw new Error(`malformed patch: hunk ${hunk.header} is cut short`);
  if (files.length === 0) throw new Error('malformed patch: no file in it');
  return files;
}

/** Indices i >= from where `want` (array of lines) matches `have` exactly. */
function findAll(have, want, from) {
  const out = [];
  for (let i = from; i + want.length <= have.length; i++) {
    let ok = true;
    for (let k = 0; k < want.length; k++) {
      if (have[i + k] !== want[k]) { ok = false; break; }
    }
    if (ok) out.push(i);
  }
  return out;
}

// The line at `near` (0-based) if it matches, else the only match; null if none or ambiguous.
function locate(have, want, from, near) {
  const all = findAll(have, want, from);
  if (all.includes(near)) return near;
  return all.length === 1 ? all[0] : null;
}

const show = (lines) => lines.map((l) => `    ${l}`).join('\n');

/**
 * Apply one file's hunks to `content`. Returns { state: 'applied', content } when every hunk
 * applies, { state: 'already' } when every hunk's result is already there, or
 * { state: 'failed', problems: [string] } naming each hunk that does not apply and what it expected.
 */
function applyFilePatch(content, filePatch) {
  const eol = content.includes('\r\n') ? '\r\n' : '\n';
  const have = content.split(eol);
  const out = [];
  const problems = [];
  let cursor = 0;
  let already = 0;
  let offset = 0;
  for (const hunk of filePatch.hunks) {
    const before = hunk.lines.filter((l) => l.op !== '+').map((l) => l.text);
    const after = hunk.lines.filter((l) => l.op !== '-').map((l) => l.text);
    const near = hunk.oldStart - 1 + offset;
    const at = locate(have, before, cursor, near);
    if (at !== null) {
      out.push(...have.slice(cursor, at), ...after);
      cursor = at + before.length;
      offset = at - (hunk.oldStart - 1);
      continue;
    }
    if (locate(have, after, 0, near) !== null) {
      already++;
      continue;
    }
    const removed = hunk.lines.filter((l) => l.op === '-').map((l) => l.text);
    // Show where the file differs: the lines holding the expected line's rarest word.
    const key = (removed[0] || before.find((l) => l.trim()) || '').trim();
    const linesWith = (w) => have.map((l, i) => [i, l]).filter(([, l]) => l.includes(w));
    const words = (key.match(/[\w$.-]{4,}/g) || []).map((w) => [w, linesWith(w)]).filter(([, ls]) => ls.length);
    words.sort((a, b) => a[1].length - b[1].length || b[0].length - a[0].length);
    const [token, similar] = words[0] || [key, []];
    let problem = `hunk ${hunk.header} does not apply: expected these lines\n${show(before)}`;
    if (findAll(have, before, 0).length > 1) problem += '\n  (they occur more than once)';
    else if (similar.length) problem += `\n  found instead:\n${similar.slice(0, 3).map(([i, l]) => `    line ${i + 1}: ${l}`).join('\n')}`;
    else problem += `\n  (no line containing ${JSON.stringify(token)})`;
    problems.push(problem);
  }
  if (problems.length) return { state: 'failed', problems };
  if (already === filePatch.hunks.length) return { state: 'already' };
  if (already > 0) {
    return { state: 'failed', problems: [`partly patched already (${already} of ${filePatch.hunks.length} hunks): fix it by hand`] };
  }
  out.push(...have.slice(cursor));
  return { state: 'applied', content: out.join(eol) };
}

/**
 * Apply a parsed patch to the files under `dir` (read only; nothing is written).
 * Returns { state: 'applied' | 'already' | 'failed', files: [{ path, state, content?, problems? }] }.
 */
function applyPatchToDir(dir, patchFiles) {
  const files = patchFiles.map((fp) => {
    const full = path.join(dir, fp.path);
    let content;
    try {
      content = fs.readFileSync(full, 'utf8');
    } catch (e) {
      return { path: fp.path, state: 'failed', problems: [`cannot read ${full}: ${e.code || e.message}`] };
    }
    return { path: fp.path, ...applyFilePatch(content, fp) };
  });
  const states = new Set(files.map((f) => f.state));
  let state = 'failed';
  if (states.size === 1 && states.has('applied')) state = 'applied';
  else if (states.size === 1 && states.has('already')) state = 'already';
  return { state, files };
}

function describeFailure(dir, result) {
  const parts = [];
  for (const f of result.files) {
    const where = path.join(dir, f.path);
    if (f.state === 'failed') parts.push(`${where}:\n  ${f.problems.join('\n  ')}`);
    else if (f.state === 'already') parts.push(`${where}: already has this change`);
  }
  return parts.join('\n');
}

// ---------------------------------------------------------------------------------------------
// File helpers

function isDir(p) {
  try { return fs.statSync(p).isDirectory(); } catch { return false; }
}

function isFile(p) {
  try { return fs.statSync(p).isFile(); } catch { return false; }
}

/** Copy a directory tree (files and folders; node_modules folders are left out). */
function copyTree(from, to) {
  fs.mkdirSync(to, { recursive: true });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') copyTree(src, dst);
    } else if (entry.isFile()) {
      fs.copyFileSync(src, dst);
    }
  }
}

/** Same file names and bytes in both directories (one level; the provider package is flat). */
function sameFlatDir(a, b) {
  if (!isDir(b)) return false;
  const names = fs.readdirSync(a).sort();
  if (names.join('\0') !== fs.readdirSync(b).sort().join('\0')) return false;
  return names.every((n) => isFile(path.join(a, n)) && isFile(path.join(b, n)) &&
    fs.readFileSync(path.join(a, n)).equals(fs.readFileSync(path.join(b, n))));
}

/** Package names listed in a .meteor/packages text (comments, blanks and @constraints dropped). */
function listedPackages(text) {
  return text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean).map((l) => l.split('@')[0]);
}

function versionOf(packageJs) {
  const m = /^\s*version:\s*["']([^"']+)["']/m.exec(packageJs);
  return m ? m[1] : 'unknown';
}

// ---------------------------------------------------------------------------------------------
// The command

/**
 * Run meteor-setup. Returns the report lines; throws SetupError on a refusal.
 * @param {{ meteorSrc: string, app: string, dryRun?: boolean }} opts
 */
function meteorSetup(opts) {
  const meteorSrc = path.resolve(opts.meteorSrc);
  const app = path.resolve(opts.app);
  const dry = Boolean(opts.dryRun);
  const report = [];
  const say = (line) => report.push(dry ? `[dry run] ${line}` : line);

  if (!isDir(meteorSrc)) throw new SetupError(`--meteor-src ${meteorSrc}: no such directory`, 2);
  const srcServer = path.join(meteorSrc, DDP_SERVER);
  if (!isFile(path.join(srcServer, 'package.js'))) {
    throw new SetupError(`--meteor-src ${meteorSrc} has no ${path.join(DDP_SERVER, 'package.js')}: ` +
      'give a checkout of meteor/meteor (git clone --branch release/METEOR@<your release> ...)', 2);
  }
  if (!isDir(app)) throw new SetupError(`--app ${app}: no such directory`, 2);
  const packagesFile = path.join(app, '.meteor', 'packages');
  if (!isFile(packagesFile)) {
    throw new SetupError(`--app ${app} is not a Meteor app: it has no .meteor/packages`, 2);
  }

  const patch = parseUnifiedDiff(fs.readFileSync(PATCH_FILE, 'utf8'));
  const appServer = path.join(app, DDP_SERVER);

  // 1. ddp-server: copy and patch, or find it already patched.
  if (fs.existsSync(appServer)) {
    const existing = applyPatchToDir(appServer, patch);
    if (existing.state !== 'already') {
      throw new SetupError(`${appServer} already exists and is not patched by this script; ` +
        'nothing was changed. Either remove it and run meteor-setup again, or patch it yourself ' +
        `from the app's root:\n    git apply --directory=${DDP_SERVER} ${PATCH_FILE}\n` +
        `What the patch found there:\n${describeFailure(appServer, existing)}`);
    }
    say(`ddp-server: ${appServer} is already patched (accepts "native", weak dependency on ${PROVIDER}); left as it is`);
  } else {
    const result = applyPatchToDir(srcServer, patch);
    if (result.state === 'already') {
      throw new SetupError(`${srcServer} already has this patch's changes: this Meteor accepts "native" ` +
        `and loads ${PROVIDER} first by itself, so no local ddp-server is needed; nothing was changed. ` +
        `Add only the package: meteor add ${PROVIDER}`);
    }
    if (result.state !== 'applied') {
      throw new SetupError(`${PATCH_FILE} does not apply to ${srcServer}; nothing was changed.\n` +
        `${describeFailure(srcServer, result)}\n` +
        'If this Meteor already accepts "native" (a newer release), it needs no patch: add only the ' +
        `package (meteor add ${PROVIDER}). Otherwise use a checkout of the 3.5 release line.`);
    }
    if (!dry) {
      copyTree(srcServer, appServer);
      for (const f of result.files) fs.writeFileSync(path.join(appServer, f.path), f.content);
    }
    say(`ddp-server: copied ${srcServer} (version ${versionOf(fs.readFileSync(path.join(srcServer, 'package.js'), 'utf8'))}) ` +
      `to ${appServer}`);
    for (const f of result.files) say(`ddp-server: patched ${path.join(appServer, f.path)}`);
  }

  // 2. The provider package.
  const appProvider = path.join(app, 'packages', PROVIDER);
  if (sameFlatDir(PROVIDER_DIR, appProvider)) {
    say(`${PROVIDER}: ${appProvider} is up to date`);
  } else {
    const verb = fs.existsSync(appProvider) ? 'updated' : 'copied';
    if (!dry) copyTree(PROVIDER_DIR, appProvider);
    say(`${PROVIDER}: ${verb} the Meteor package to ${appProvider}`);
  }

  // 3. .meteor/packages.
  const listed = fs.readFileSync(packagesFile, 'utf8');
  if (listedPackages(listed).includes(PROVIDER)) {
    say(`.meteor/packages: ${PROVIDER} is already listed`);
  } else {
    if (!dry) fs.writeFileSync(packagesFile, `${listed}${listed === '' || listed.endsWith('\n') ? '' : '\n'}${PROVIDER}\n`);
    say(`.meteor/packages: added ${PROVIDER}`);
  }

  const release = path.join(app, '.meteor', 'release');
  if (isFile(release)) {
    say(`note: the app's release is ${fs.readFileSync(release, 'utf8').trim()}; --meteor-src must be a checkout of that release`);
  }
  say('next: select the transport with settings.json {"packages":{"ddp-server":{"transport":"native"}}} ' +
    '(or DDP_TRANSPORT=native), then run the app');
  return report;
}

/** CLI entry: prints the report or one error message; returns the exit code. */
function main(argv, out = process.stdout, err = process.stderr) {
  try {
    const opts = parseArgs(argv);
    if (opts.help) {
      out.write(`${USAGE}\n`);
      return 0;
    }
    for (const line of meteorSetup(opts)) out.write(`${line}\n`);
    return 0;
  } catch (e) {
    if (e instanceof SetupError) {
      err.write(`ddp-transport-native meteor-setup: ${e.message}\n`);
      return e.exitCode;
    }
    err.write(`ddp-transport-native meteor-setup: unexpected error: ${e && e.message}\n`);
    return 1;
  }
}

module.exports = {
  main, meteorSetup, parseArgs, parseUnifiedDiff, applyFilePatch, applyPatchToDir, listedPackages,
  SetupError, USAGE, PATCH_FILE, PROVIDER_DIR,
};
