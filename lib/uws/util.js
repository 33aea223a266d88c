'use strict';
// Small helpers of the uWS compat surface: uWS's ArrayBuffer forms and its closed-socket error.

const net = require('net');

/** As uWS's message: an ArrayBuffer holding exactly these bytes (a string is UTF-8 encoded). */
function arrayBuffer(v) {
  if (v instanceof ArrayBuffer) return v;
  const b = typeof v === 'string' ? Buffer.from(v) : v;
  if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) return b.buffer;
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
}

/** A uWS RecognizedString (string, ArrayBuffer, TypedArray, DataView) as a JS string. */
function text(v) {
  if (typeof v === 'string') return v;
  if (v instanceof ArrayBuffer) return Buffer.from(v).toString();
  if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString();
  return String(v);
}

/** The binary form uWS's getRemoteAddress() gives: 4 bytes for IPv4, 16 for IPv6 (an
 *  IPv4-mapped address of a dual-stack listener stays 16 bytes). */
function addressBytes(addr) {
  const out = new Uint8Array(net.isIPv4(addr || '') ? 4 : 16);
  if (!addr) return out.buffer;
  if (out.length === 4) {
    addr.split('.').forEach((p, i) => { out[i] = Number(p); });
    return out.buffer;
  }
  let a = addr;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    const p = v4[1].split('.').map(Number);
    a = `${a.slice(0, v4.index)}${((p[0] << 8) | p[1]).toString(16)}:${((p[2] << 8) | p[3]).toString(16)}`;
  }
  const [head, tail] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    out[2 * i] = n >> 8;
    out[2 * i + 1] = n & 255;
  });
  return out.buffer;
}

/** getProxiedRemoteAddress(): the address as getRemoteAddress() encodes it, or an empty
 *  ArrayBuffer when no PROXY header named one (as uWS). */
function proxiedBytes(addr) {
  return addr === undefined ? new ArrayBuffer(0) : addressBytes(addr);
}

/** What uWS throws on any call on a closed WebSocket (its own message). */
function closedError() {
  return new Error('Invalid access of closed uWS.WebSocket/SSLWebSocket.');
}

module.exports = { arrayBuffer, text, addressBytes, proxiedBytes, closedError };
