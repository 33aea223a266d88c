'use strict';
// napi-rs's name for the platform this process runs on, as in the binary's file name
// (`ddp-transport-native.<platform>.node`) and the prebuilt package (`ddp-transport-native-<platform>`).

const fs = require('node:fs');

function isMusl() {
  try {
    const report = process.report && process.report.getReport();
    if (report && report.header) return !report.header.glibcVersionRuntime;
  } catch {
    // fall through
  }
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    return false;
  }
}

/** `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, `win32-x64-gnu`, … On Windows x64 the
 *  prebuilt binary is the MinGW (gnu) build, which Node's official node.exe loads (docs/windows.md);
 *  other Windows archs keep napi's msvc names (none is prebuilt). */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'linux') return `${platform}-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `${platform}-${arch}-${arch === 'x64' ? 'gnu' : 'msvc'}`;
  return `${platform}-${arch}`;
}

/** napi-rs's platform name for a Rust target triple (as `napi`'s own parseTriple maps it). */
function platformOf(triple) {
  const [cpu, , sys, abi] = triple.split('-');
  const arch = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32' }[cpu] || cpu;
  const platform = { windows: 'win32' }[sys] || sys;
  return abi ? `${platform}-${arch}-${abi}` : `${platform}-${arch}`;
}

module.exports = { platformName, platformOf, isMusl };
