'use strict';
// Facts about a Windows PE image (a .node DLL, node.exe) read from its headers: machine, PE32+,
// DLL, a COFF symbol table left (not stripped), the DLLs it imports and the names it exports.
// Used by scripts/dist.js (the win32 binary's checks) and scripts/test-windows.js.

const MACHINES = { 0x8664: 'x86-64', 0xaa64: 'arm64', 0x14c: 'i386' };

function cString(b, off) {
  const end = b.indexOf(0, off);
  return b.toString('latin1', off, end < 0 ? b.length : end);
}

/** @param {Buffer} b the whole file */
function readPe(b) {
  if (b.length < 64 || b.toString('latin1', 0, 2) !== 'MZ') throw new Error('not a PE image (no MZ header)');
  const pe = b.readUInt32LE(0x3c);
  if (b.toString('latin1', pe, pe + 4) !== 'PE\0\0') throw new Error('not a PE image (no PE signature)');
  const coff = pe + 4;
  const machine = b.readUInt16LE(coff);
  const sections = b.readUInt16LE(coff + 2);
  const symbols = b.readUInt32LE(coff + 12); // PointerToSymbolTable: 0 once stripped
  const optSize = b.readUInt16LE(coff + 16);
  const characteristics = b.readUInt16LE(coff + 18);
  const opt = coff + 20;
  const magic = b.readUInt16LE(opt);
  const pe32plus = magic === 0x20b;
  const dirs = opt + (pe32plus ? 112 : 96);
  const dir = (i) => ({ rva: b.readUInt32LE(dirs + i * 8), size: b.readUInt32LE(dirs + i * 8 + 4) });
  const table = opt + optSize;
  const secs = [];
  for (let i = 0; i < sections; i++) {
    const s = table + i * 40;
    secs.push({ va: b.readUInt32LE(s + 12), vsize: b.readUInt32LE(s + 8), raw: b.readUInt32LE(s + 20), rawSize: b.readUInt32LE(s + 16) });
  }
  const at = (rva) => {
    const s = secs.find((x) => rva >= x.va && rva < x.va + Math.max(x.vsize, x.rawSize));
    if (!s) throw new Error(`RVA 0x${rva.toString(16)} is in no section`);
    return s.raw + rva - s.va;
  };

  const imports = [];
  const imp = dir(1);
  if (imp.rva) {
    for (let d = at(imp.rva); b.readUInt32LE(d + 12) !== 0; d += 20) imports.push(cString(b, at(b.readUInt32LE(d + 12))));
  }
  const exports = [];
  const exp = dir(0);
  if (exp.rva) {
    const e = at(exp.rva);
    const names = b.readUInt32LE(e + 24);
    const namePointers = at(b.readUInt32LE(e + 32));
    for (let i = 0; i < names; i++) exports.push(cString(b, at(b.readUInt32LE(namePointers + i * 4))));
  }
  return {
    machine: MACHINES[machine] || `machine 0x${machine.toString(16)}`,
    format: pe32plus ? 'PE32+' : magic === 0x10b ? 'PE32' : `optional header 0x${magic.toString(16)}`,
    dll: (characteristics & 0x2000) !== 0,
    stripped: symbols === 0,
    imports,
    exports,
  };
}

module.exports = { readPe };
