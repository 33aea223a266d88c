'use strict';
// Loads the native addon through binding.js (the loader `napi build` generates; committed, see
// docs/release.md) and turns its failure into one error that says what to do, instead of the
// loader's "Cannot find native binding" and a chain of stack traces.
//
// Where the binary comes from:
// - a published install: the platform package `ddp-transport-native-<platform>` (an exact-version
//   optionalDependency of the root package; npm installs only the one matching os/cpu/libc);
// - a source checkout: `ddp-transport-native.<platform>.node` next to binding.js (`npm run build`);
// - anywhere: the file named by NAPI_RS_NATIVE_LIBRARY_PATH (honoured by binding.js).
//
// Windows x64 is found here, not by binding.js: napi's loader takes `-win32-x64-gnu` only inside a
// MinGW-built Node (process.config shlib_suffix 'dll.a') and looks for `-msvc` in Node's official
// node.exe, which is built with MSVC. The gnu DLL loads in node.exe all the same: it takes N-API
// from the host process when it loads (docs/windows.md). Same places, same order as binding.js.

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const pkg = require('../package.json');
const { platformName, platformOf } = require('./platform');

/** Platforms with a prebuilt package: package.json `napi.targets`. */
function prebuiltPlatforms() {
  return ((pkg.napi && pkg.napi.targets) || []).map(platformOf);
}

function explain(loadError) {
  const platform = platformName();
  const platformPackage = `${pkg.name}-${platform}`;
  const spec = `${platformPackage}@${pkg.version}`;
  const fromSource = 'Or build it from source (Rust >= 1.88; README, "Build from source") and set ' +
    'NAPI_RS_NATIVE_LIBRARY_PATH to the .node file.';
  // "Cannot find module" only says a candidate is absent; anything else is why one did not load.
  const causes = loadErrors(loadError)
    .map((e) => String(e && e.message ? e.message : e).split('\n')[0])
    .filter((m) => !m.startsWith('Cannot find module '));
  const why = causes.length ? [`It failed with: ${causes[0]}`] : [];

  if (fs.existsSync(path.join(ROOT, 'Cargo.toml'))) {
    // A source checkout (the published package carries no Rust sources).
    return [`${pkg.name}: the addon is not built in this checkout (${pkg.name}.${platform}.node is missing or does not load).`,
      ...why,
      'Run `npm run build` (needs Rust >= 1.88 and cargo); `npm test` and `npm start` build it when it is missing.'];
  }
  if (!prebuiltPlatforms().includes(platform)) {
    return [`${pkg.name}: there is no prebuilt binary for ${platform} (prebuilt: ${prebuiltPlatforms().join(', ')}).`,
      'Build it from source (Rust >= 1.88; README, "Build from source") and set NAPI_RS_NATIVE_LIBRARY_PATH to the .node file.'];
  }
  let installed = null;
  try {
    installed = require(`${platformPackage}/package.json`).version;
  } catch {
    // not installed
  }
  if (installed === null) {
    const others = installedPlatforms().filter((p) => p !== platform);
    if (others.length) return builtElsewhere(platform, others, spec);
    return [`${pkg.name}: no prebuilt binary for ${platform} was installed (optional dependencies omitted?).`,
      `It comes in ${spec}, an optional dependency of ${pkg.name}.`,
      `Reinstall without --omit=optional (npm), --no-optional (npm 6) or --ignore-optional (yarn), or add it: npm install ${spec}`,
      fromSource];
  }
  if (installed !== pkg.version) {
    return [`${pkg.name}: ${platformPackage} ${installed} is installed, but ${pkg.name} ${pkg.version} needs ${spec}.`,
      ...why, `Reinstall: npm install ${pkg.name}@${pkg.version}`];
  }
  return [`${pkg.name}: the prebuilt binary ${spec} is installed but does not load on this machine.`,
    ...why,
    process.platform === 'win32'
      ? 'The Windows binary needs 64-bit Windows 10 or later.'
      : 'The linux gnu binaries need glibc >= 2.17 (musl systems such as Alpine get the -musl package).',
    fromSource];
}

/** The platform packages installed next to this package (npm installs the one of the machine it
 *  ran on: another one here means node_modules was copied from another machine). */
function installedPlatforms() {
  return prebuiltPlatforms().filter((p) => {
    try {
      require.resolve(`${pkg.name}-${p}/package.json`, { paths: [ROOT] });
      return true;
    } catch {
      return false;
    }
  });
}

/** node_modules installed on another platform and copied here: a Meteor bundle built on macOS or
 *  Windows for a Linux server (Meteor Up, Galaxy, a Docker image). The step that fixes it runs
 *  where the bundle is built; docs/deploying.md. */
function builtElsewhere(platform, others, spec) {
  const [os, cpu, libc] = platform.split('-');
  const flags = `--os=${os} --cpu=${cpu}${os === 'linux' && libc ? ` --libc=${libc === 'gnu' ? 'glibc' : libc}` : ''}`;
  return [`${pkg.name}: no prebuilt binary for ${platform} here, only ${others.map((p) => `${pkg.name}-${p}`).join(', ')}: ` +
      `these node_modules were installed on ${others.join('/')} and copied (a bundle built on another machine?).`,
    `Where you build, before \`meteor build\` (or \`meteor deploy\`, \`mup deploy\`): \`meteor npm install --no-save ${flags}\` ` +
      '(npm >= 9.6; it adds this platform\'s package and keeps yours), or on this machine: ' +
      `\`npm install --no-save ${spec}\` next to ${pkg.name}. See "Deploying" in ${pkg.name}'s docs (docs/deploying.md).`];
}

/** The loader's own errors: its "Cannot find native binding" carries them (messages only, as new
 *  Error objects) in a `cause` chain. */
function loadErrors(err) {
  const out = [];
  for (let e = err && err.cause; e && out.length < 20; e = e.cause) out.push(e);
  return out.length ? out : [err];
}

/** The win32-x64-gnu binary, where binding.js would look for it; null elsewhere or when absent
 *  (binding.js then tries, and fails, or finds a source build's own -msvc file). */
function windowsBinary() {
  if (process.platform !== 'win32' || process.arch !== 'x64' || process.env.NAPI_RS_NATIVE_LIBRARY_PATH) return null;
  const local = path.join(ROOT, `${pkg.napi.binaryName}.win32-x64-gnu.node`);
  if (fs.existsSync(local)) return local;
  try {
    return require.resolve(`${pkg.name}-win32-x64-gnu`);
  } catch {
    return null;
  }
}

/** The frame of the code that required this package (outside it and outside Node's internals). */
function requireSite() {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 100;
  const stack = String(new Error('-').stack);
  Error.stackTraceLimit = limit;
  const frames = stack.split('\n').filter((l) => /^\s+at /.test(l));
  // An ES module import has no such frame: name the package's entry instead.
  return frames.find((f) => !f.includes(ROOT) && !f.includes('node:internal') && !f.includes('(node:')) ||
    `    at ${path.join(ROOT, 'index.js')}`;
}

let binding;
try {
  const windows = windowsBinary();
  binding = windows === null ? require('../binding.js') : require(windows);
} catch (err) {
  const error = new Error(explain(err).join('\n  '));
  // The message is the whole story. Instead of a stack trace (into the loader, not at the
  // problem) only the line that required the package; the loader's error stays reachable.
  const site = requireSite();
  error.stack = `Error: ${error.message}\n${site}`;
  for (const [key, value] of [['code', 'ERR_DDP_TRANSPORT_NATIVE_BINDING'], ['loadError', err]]) {
    Object.defineProperty(error, key, { value, enumerable: false, configurable: true, writable: true });
  }
  throw error;
}

module.exports = binding;
