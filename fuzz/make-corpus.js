#!/usr/bin/env node
'use strict';
// Regenerates the seed corpora under fuzz/corpus/<target>/ (committed; run this only to refresh
// them):   node fuzz/make-corpus.js [--no-browser]
//
// Real traffic is captured with a raw TCP server that answers upgrades itself (101, with
// `permessage-deflate` when offered) and records every byte the client sends: the request head
// goes to corpus/handshake, the frames that follow to corpus/frames or corpus/frames_deflate,
// and the compressed payloads of those frames to corpus/inflate. Clients: ws, faye-websocket
// (with permessage-deflate) and headless Chromium (if /usr/bin/chromium exists). Hand-written
// seeds cover what those clients never send (Firefox/Safari-style heads, bad heads, every frame
// kind and length encoding, protocol errors, Autobahn's extension offers).

const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const crypto = require('crypto');
const zlib = require('zlib');
const { spawn } = require('child_process');

const ROOT = path.resolve(__dirname, '..');
const CORPUS = path.join(__dirname, 'corpus');
const NM = path.join(ROOT, 'node_modules');
const WebSocket = require(path.join(NM, 'ws'));
const FayeWebSocket = require(path.join(NM, 'faye-websocket'));
const deflateExt = require(path.join(NM, 'permessage-deflate'));

const TARGETS = ['handshake', 'frames', 'frames_deflate', 'negotiate', 'inflate', 'deflate_roundtrip'];
const noBrowser = process.argv.includes('--no-browser');

function put(target, name, bytes) {
  const dir = path.join(CORPUS, target);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
}

// ---- frame building ---------------------------------------------------------------------------

const KEY = Buffer.from([0x37, 0xfa, 0x21, 0x3d]);

/** A client frame. opts: fin (true), rsv1, rsv (raw RSV bits), mask (KEY), len16/len64 (force encoding). */
function frame(opcode, payload, opts = {}) {
  payload = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const fin = opts.fin !== false;
  let b0 = (fin ? 0x80 : 0) | (opts.rsv1 ? 0x40 : 0) | (opts.rsv || 0) | opcode;
  const masked = opts.mask !== false;
  const len = payload.length;
  let head;
  if (opts.len64 || len > 0xffff) {
    head = Buffer.alloc(10);
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(opts.fakeLen === undefined ? len : opts.fakeLen), 2);
  } else if (opts.len16 || len > 125) {
    head = Buffer.alloc(4);
    head[1] = 126;
    head.writeUInt16BE(opts.fakeLen === undefined ? len : opts.fakeLen, 2);
  } else {
    head = Buffer.alloc(2);
    head[1] = opts.fakeLen === undefined ? len : opts.fakeLen;
  }
  head[0] = b0;
  if (!masked) return Buffer.concat([head, payload]);
  head[1] |= 0x80;
  const key = opts.key || KEY;
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i] ^= key[i & 3];
  return Buffer.concat([head, key, body]);
}

function closePayload(code, reason = '') {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code);
  return Buffer.concat([b, Buffer.from(reason)]);
}

/** permessage-deflate payload of one message, no context takeover (tail stripped). */
function deflateMsg(data, opts = {}) {
  const z = zlib.deflateRawSync(Buffer.from(data), { finishFlush: zlib.constants.Z_SYNC_FLUSH, windowBits: opts.windowBits || 15, level: opts.level === undefined ? 6 : opts.level });
  if (!z.subarray(-4).equals(Buffer.from([0, 0, 0xff, 0xff]))) throw new Error('no sync tail');
  return z.subarray(0, -4);
}

/** Parse client frames (masked), returning {opcode, rsv1, fin, payload} (payload unmasked). */
function parseFrames(buf) {
  const out = [];
  let p = 0;
  while (p + 2 <= buf.length) {
    const b0 = buf[p];
    const b1 = buf[p + 1];
    let len = b1 & 0x7f;
    let q = p + 2;
    if (len === 126) { len = buf.readUInt16BE(q); q += 2; } else if (len === 127) { len = Number(buf.readBigUInt64BE(q)); q += 8; }
    let key = null;
    if (b1 & 0x80) { key = buf.subarray(q, q + 4); q += 4; }
    if (q + len > buf.length) break;
    const payload = Buffer.from(buf.subarray(q, q + len));
    if (key) for (let i = 0; i < payload.length; i++) payload[i] ^= key[i & 3];
    out.push({ fin: !!(b0 & 0x80), rsv1: !!(b0 & 0x40), opcode: b0 & 15, payload });
    p = q + len;
  }
  return out;
}

/** Records for the inflate/roundtrip targets: 2-byte LE length + bytes. */
function records(list) {
  return Buffer.concat(list.map((b) => {
    const h = Buffer.alloc(2);
    h.writeUInt16LE(b.length);
    return Buffer.concat([h, b]);
  }));
}

// ---- capture server -----------------------------------------------------------------------------

/** Raw server: answers upgrades, records what each client sends. */
function captureServer(page) {
  const captures = [];
  const server = net.createServer((sock) => {
    let buf = Buffer.alloc(0);
    let cap = null;
    sock.on('data', (d) => {
      if (cap) {
        cap.wire = Buffer.concat([cap.wire, d]);
        // Answer a close frame so the client finishes cleanly.
        if (!cap.closed && parseFrames(cap.wire).some((f) => f.opcode === 8)) {
          cap.closed = true;
          sock.end(Buffer.from([0x88, 0x02, 0x03, 0xe8]));
        }
        return;
      }
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end + 4);
      const text = head.toString('latin1');
      const key = /\r\nsec-websocket-key:\s*(\S+)/i.exec(text);
      if (!key) {
        sock.end(`HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: ${Buffer.byteLength(page)}\r\nConnection: close\r\n\r\n${page}`);
        return;
      }
      const ext = /\r\nsec-websocket-extensions:\s*([^\r]*)/i.exec(text);
      const accept = crypto.createHash('sha1').update(`${key[1]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      const deflate = ext && /permessage-deflate/i.test(ext[1]);
      const proto = /\r\nsec-websocket-protocol:\s*([^,\r]*)/i.exec(text);
      cap = { head: Buffer.from(head), wire: buf.subarray(end + 4), deflate, url: /^GET (\S+)/.exec(text)[1] };
      captures.push(cap);
      sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\n` + (deflate ? 'Sec-WebSocket-Extensions: permessage-deflate\r\n' : '') +
        (proto ? `Sec-WebSocket-Protocol: ${proto[1].trim()}\r\n` : '') + '\r\n');
    });
    sock.on('error', () => {});
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, captures, port: server.address().port })));
}

const DDP = [
  '["{\\"msg\\":\\"connect\\",\\"version\\":\\"1\\",\\"support\\":[\\"1\\",\\"pre2\\",\\"pre1\\"]}"]',
  '{"msg":"sub","id":"a1","name":"tasks","params":[]}',
  '{"msg":"method","id":"1","method":"tasks.insert","params":[{"text":"héllo wörld ✓ 🚀"}]}',
];
const BIG = JSON.stringify({ msg: 'added', collection: 'users', fields: { name: 'x'.repeat(50), list: Array.from({ length: 60 }, (_, i) => ({ i, s: `item-${i}` })) } });

function wsClient(port, url, perMessageDeflate) {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${url}`, ['ddp', 'chat'], { perMessageDeflate });
    ws.on('open', () => {
      for (const m of DDP) ws.send(m);
      ws.send(Buffer.from([0, 1, 2, 3, 255, 254]));
      ws.send(BIG);
      ws.send('frag-', { fin: false });
      ws.send('ment-', { fin: false });
      ws.send('ed', { fin: true });
      ws.ping('p1');
      ws.pong('');
      ws.send('');
      ws.close(1000, 'bye');
    });
    ws.on('close', () => resolve());
    ws.on('error', () => resolve());
  });
}

function fayeClient(port) {
  return new Promise((resolve) => {
    const ws = new FayeWebSocket.Client(`ws://127.0.0.1:${port}/sockjs/websocket`, [], { extensions: [deflateExt] });
    ws.on('open', () => {
      for (const m of DDP) ws.send(m);
      ws.send(BIG);
      ws.send(Buffer.from('binary via faye'));
      ws.ping('faye');
      ws.close(1000, 'going');
    });
    ws.on('close', () => resolve());
    setTimeout(resolve, 3000);
  });
}

function chromium(port) {
  if (noBrowser || !fs.existsSync('/usr/bin/chromium')) return Promise.resolve(false);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'corpus-chromium-'));
  const child = spawn('/usr/bin/chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${dir}`,
    `http://127.0.0.1:${port}/`], { stdio: 'ignore' });
  return new Promise((resolve) => {
    const done = () => {
      child.kill('SIGKILL');
      setTimeout(() => { fs.rmSync(dir, { recursive: true, force: true }); resolve(true); }, 300);
    };
    const timer = setTimeout(done, 20000);
    child.on('exit', () => { clearTimeout(timer); resolve(true); });
    captureDone = () => { clearTimeout(timer); setTimeout(done, 500); };
  });
}
let captureDone = () => {};

const PAGE = `<!doctype html><script>
const msgs = ${JSON.stringify([...DDP, BIG])};
const ws = new WebSocket('ws://' + location.host + '/websocket?x=1', ['ddp']);
ws.onopen = () => { for (const m of msgs) ws.send(m); ws.send(new Uint8Array([1,2,3,200])); ws.send(''); ws.close(4000, 'browser'); };
</script>`;

// ---- hand-written seeds --------------------------------------------------------------------------

const KEY_B64 = 'dGhlIHNhbXBsZSBub25jZQ==';
const HEADS = {
  'firefox': 'GET /websocket HTTP/1.1\r\nHost: localhost:3000\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\nAccept: */*\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br, zstd\r\nSec-WebSocket-Version: 13\r\nOrigin: http://localhost:3000\r\nSec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\nConnection: keep-alive, Upgrade\r\nSec-Fetch-Dest: empty\r\nSec-Fetch-Mode: websocket\r\nSec-Fetch-Site: same-origin\r\nPragma: no-cache\r\nCache-Control: no-cache\r\nUpgrade: websocket\r\n\r\n',
  'safari': 'GET /sockjs/123/abcdefgh/websocket HTTP/1.1\r\nHost: example.com\r\nOrigin: https://example.com\r\nPragma: no-cache\r\nCache-Control: no-cache\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\nSec-WebSocket-Extensions: permessage-deflate\r\nUser-Agent: Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15\r\n\r\n',
  'minimal': 'GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\n\r\n',
  'lf-only': 'GET /ws HTTP/1.1\nHost: a\nUpgrade: WebSocket\nConnection: upgrade\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: ' + KEY_B64 + '\n\n',
  'repeated-headers': 'GET /x?y=1&z HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ddp, chat\r\nSec-WebSocket-Protocol: v2\r\nSec-WebSocket-Extensions: foo; bar=1\r\nSec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=10; client_max_window_bits\r\nSec-WebSocket-Key:\t' + KEY_B64 + ' \r\n\r\n',
  'two-keys': 'GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\n\r\n',
  'version-8': 'GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\n\r\n',
  'short-key': 'GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n\r\n',
  'http10': 'GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\n\r\n',
  'post': 'POST /websocket HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello',
  'plain-get': 'GET /favicon.ico HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n',
  'utf8-values': 'GET /caf\u00e9 HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\nX-Name: J\u00fcrgen \u2713\r\n\r\n',
  'head-plus-frame': 'GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ' + KEY_B64 + '\r\n\r\n\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58',
  'partial': 'GET /websocket HTTP/1.1\r\nHost: localhost:3000\r\nUpgrade: websocket\r\nConn',
};

const OFFERS = {
  'chrome': 'permessage-deflate; client_max_window_bits',
  'firefox': 'permessage-deflate',
  'ws-node': 'permessage-deflate; client_max_window_bits',
  'faye': 'permessage-deflate; client_max_window_bits',
  'all-params': 'permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12',
  'autobahn-13.3': 'permessage-deflate; client_max_window_bits; server_max_window_bits=9',
  'autobahn-13.5': 'permessage-deflate; client_max_window_bits=9; server_max_window_bits=9',
  'autobahn-13.7': 'permessage-deflate; client_no_context_takeover; client_max_window_bits, permessage-deflate; client_max_window_bits, permessage-deflate',
  'quoted': 'permessage-deflate; server_max_window_bits="10"; client_max_window_bits="\\15"',
  'fallbacks': 'x-webkit-deflate-frame, permessage-deflate; server_max_window_bits=8, permessage-deflate; foo=bar, permessage-deflate',
  'bad-values': 'permessage-deflate; server_max_window_bits=08; client_max_window_bits=16, permessage-deflate; server_max_window_bits',
  'duplicates': 'permessage-deflate; server_no_context_takeover; server_no_context_takeover, PerMessage-Deflate ; CLIENT_MAX_WINDOW_BITS = 11',
  'empty-elements': ' , ,permessage-deflate;;, "permessage-deflate"',
};

const ZERO = Buffer.from([0, 0]); // ctl bytes: 64 KiB cap, 131072 fragments, default offer

function handSeeds() {
  for (const [name, text] of Object.entries(HEADS)) put('handshake', `hand-${name}`, Buffer.from(text, 'utf8'));
  for (const [name, text] of Object.entries(OFFERS)) put('negotiate', name, text);

  const f = (name, ctl, ...frames) => put('frames', name, Buffer.concat([Buffer.from(ctl), ...frames]));
  f('text', [0, 1], frame(1, 'Hello, world!'));
  f('binary-16bit', [0, 2], frame(2, crypto.randomBytes(300).fill(7)));
  f('binary-64bit-len-encoding', [0, 3], frame(2, Buffer.alloc(70, 1), { len64: true }));
  f('text-16bit-len-encoding-of-5', [0, 4], frame(1, 'small', { len16: true }));
  f('fragmented-with-ping', [0, 5], frame(1, 'frag', { fin: false }), frame(9, 'ping'), frame(0, 'ment', { fin: false }), frame(10, 'pong'), frame(0, 'ed'));
  f('utf8-split-across-fragments', [0, 6], frame(1, Buffer.from([0xce, 0xba, 0xe1]), { fin: false }), frame(0, Buffer.from([0xbd, 0xb9, 0xcf, 0x83]), { fin: false }), frame(0, Buffer.from([0xce, 0xbc, 0xce, 0xb5])));
  f('invalid-utf8', [0, 7], frame(1, Buffer.from([0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5, 0xed, 0xa0, 0x80, 0x65, 0x64, 0x69, 0x74, 0x65, 0x64])));
  f('close-1000-reason', [0, 8], frame(8, closePayload(1000, 'normal closure')), frame(1, 'after close'));
  f('close-empty', [0, 9], frame(8, ''));
  f('close-one-byte', [0, 10], frame(8, Buffer.from([3])));
  f('close-bad-code', [0, 11], frame(8, closePayload(1005)));
  f('close-code-5000', [0, 12], frame(8, closePayload(5000)));
  f('close-bad-utf8-reason', [0, 13], frame(8, Buffer.concat([closePayload(1000), Buffer.from([0xff])])));
  f('unmasked', [0, 14], frame(1, 'nomask', { mask: false }));
  f('rsv2', [0, 15], frame(1, 'rsv', { rsv: 0x20 }));
  f('rsv1-without-extension', [0, 16], frame(1, 'rsv1', { rsv1: true }));
  f('reserved-opcode-3', [0, 17], frame(3, 'x'));
  f('reserved-opcode-11', [0, 18], frame(11, 'x'));
  f('ping-126', [0, 19], frame(9, Buffer.alloc(126, 0x61)));
  f('fragmented-ping', [0, 20], frame(9, 'x', { fin: false }));
  f('continuation-without-start', [0, 21], frame(0, 'x'));
  f('text-while-fragmented', [0, 22], frame(1, 'a', { fin: false }), frame(1, 'b'));
  f('len64-msb-set', [0, 23], frame(2, Buffer.alloc(4), { len64: true, fakeLen: 2n ** 63n + 5n }));
  f('too-big-for-1000-cap', [2, 24], frame(2, Buffer.alloc(1001, 9)));
  f('fragments-over-3', [8, 25], frame(2, 'a', { fin: false }), frame(0, 'b', { fin: false }), frame(0, 'c', { fin: false }), frame(0, 'd'));
  f('max-payload-125-control', [1, 26], frame(9, Buffer.alloc(125, 0x62)), frame(2, Buffer.alloc(125, 1)), frame(2, Buffer.alloc(126, 1)));
  f('pipelined-many', [0, 27], ...Array.from({ length: 20 }, (_, i) => frame(i % 2 ? 2 : 1, `m${i}`)));
  f('truncated', [0, 28], frame(1, 'Hello, world!').subarray(0, 9));
  f('empty-messages', [0, 29], frame(1, ''), frame(2, ''), frame(1, '', { fin: false }), frame(0, ''), frame(9, ''), frame(10, ''));

  const d = (name, ctl, ...frames) => put('frames_deflate', name, Buffer.concat([Buffer.from(ctl), ...frames]));
  const hello = deflateMsg('Hello');
  d('compressed-hello', [0, 1], frame(1, hello, { rsv1: true }));
  d('compressed-empty', [0, 2], frame(1, Buffer.from([0]), { rsv1: true }), frame(2, Buffer.alloc(0), { rsv1: true }));
  const big = deflateMsg(BIG);
  d('compressed-fragmented', [0, 3], frame(1, big.subarray(0, 10), { rsv1: true, fin: false }), frame(9, 'p'), frame(0, big.subarray(10, 50), { fin: false }), frame(0, big.subarray(50)));
  d('mixed-plain-and-compressed', [0, 4], frame(1, 'plain'), frame(1, hello, { rsv1: true }), frame(2, Buffer.from([1, 2, 3])));
  d('rsv1-on-continuation', [0, 5], frame(1, hello.subarray(0, 2), { rsv1: true, fin: false }), frame(0, hello.subarray(2), { rsv1: true }));
  d('rsv1-on-ping', [0, 6], frame(9, 'x', { rsv1: true }));
  const bomb = deflateMsg(Buffer.alloc(300000));
  d('bomb-over-64k-cap', [0, 7], frame(2, bomb, { rsv1: true }));
  d('bomb-over-1000-cap-fragmented', [2, 8], frame(2, bomb.subarray(0, 20), { rsv1: true, fin: false }), frame(0, bomb.subarray(20)));
  d('corrupt', [0, 9], frame(1, Buffer.from([0xff, 0xff, 0xff, 0x00]), { rsv1: true }));
  d('final-block', [0, 10], frame(1, zlib.deflateRawSync('final block ends the stream'), { rsv1: true }), frame(1, hello, { rsv1: true }));
  d('compressed-invalid-utf8', [0, 11], frame(1, deflateMsg(Buffer.from([0x61, 0xff, 0x62])), { rsv1: true }));
  d('no-context-takeover-offer', [0x20, 12], frame(1, hello, { rsv1: true }), frame(1, hello, { rsv1: true }));
  d('window-9', [0x30, 13], frame(1, deflateMsg(BIG, { windowBits: 9 }), { rsv1: true }));
  d('stored-block', [0, 14], frame(2, deflateMsg(crypto.createHash('sha512').update('x').digest(), { level: 0 }), { rsv1: true }));

  put('inflate', 'hand-messages', Buffer.concat([Buffer.from([15 - 9, 6]), records([hello, deflateMsg(BIG), Buffer.from([0]), deflateMsg('')])]));
  put('inflate', 'hand-bomb-cap-4096', Buffer.concat([Buffer.from([6, 5]), records([bomb.subarray(0, 2000)])]));
  put('inflate', 'hand-window-9-nct', Buffer.concat([Buffer.from([0x80, 4]), records([deflateMsg(BIG, { windowBits: 9 }), deflateMsg(BIG, { windowBits: 9 })])]));
  put('inflate', 'hand-corrupt', Buffer.concat([Buffer.from([6, 6]), records([Buffer.from([0xff, 0xfe, 0x00, 0x01]), hello])]));
  put('inflate', 'hand-final-block', Buffer.concat([Buffer.from([6, 6]), records([zlib.deflateRawSync('done'), hello])]));

  put('deflate_roundtrip', 'ddp-messages', Buffer.concat([Buffer.from([1, 0x87]), records(DDP.map((m) => Buffer.from(m)).concat([Buffer.from(BIG), Buffer.alloc(0)]))]));
  put('deflate_roundtrip', 'context-takeover-window-15', Buffer.concat([Buffer.from([6, 7]), records([Buffer.from(BIG), Buffer.from(BIG), Buffer.from(BIG.slice(100))])]));
  put('deflate_roundtrip', 'window-8-binary', Buffer.concat([Buffer.from([9, 0]), records([crypto.createHash('sha256').update('a').digest(), Buffer.alloc(5000, 0x41)])]));
}

// ---- main ---------------------------------------------------------------------------------------

async function main() {
  for (const t of TARGETS) fs.rmSync(path.join(CORPUS, t), { recursive: true, force: true });
  handSeeds();

  const cs = await captureServer(PAGE);
  await wsClient(cs.port, '/websocket', false);
  await wsClient(cs.port, '/websocket?compressed', { threshold: 0, clientMaxWindowBits: true });
  await fayeClient(cs.port);
  const chrome = chromium(cs.port);
  const wait = setInterval(() => {
    if (cs.captures.some((c) => c.url.startsWith('/websocket?x=1') && c.closed)) {
      clearInterval(wait);
      captureDone();
    }
  }, 100);
  const hadBrowser = await chrome;
  clearInterval(wait);
  cs.server.close();

  const names = { '/websocket': 'ws', '/websocket?compressed': 'ws-deflate', '/sockjs/websocket': 'faye-deflate', '/websocket?x=1': 'chromium' };
  for (const c of cs.captures) {
    const name = names[c.url] || 'client';
    put('handshake', `real-${name}`, c.head);
    put(c.deflate ? 'frames_deflate' : 'frames', `real-${name}`, Buffer.concat([ZERO, c.wire]));
    if (c.deflate) {
      const payloads = parseFrames(c.wire).filter((f) => f.rsv1).map((f) => f.payload);
      if (payloads.length) {
        // window 15, context takeover (what these clients use), cap 64 KiB
        put('inflate', `real-${name}`, Buffer.concat([Buffer.from([6, 6]), records(payloads)]));
      }
    }
  }
  const counts = TARGETS.map((t) => `${t} ${fs.readdirSync(path.join(CORPUS, t)).length}`).join(', ');
  console.log(`captured ${cs.captures.length} connections (browser: ${hadBrowser ? 'yes' : 'no'}); corpus: ${counts}`);
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
