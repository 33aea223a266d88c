'use strict';
// The package under Bun and Deno (docs/runtimes.md): the server runs under the runtime
// (helpers/runtime-server.js), the clients run here, under Node, with `ws`, over real sockets.
// Bun and Deno are installed from npm by this file (helpers/runtime-install.js, cached in
// .cache/runtimes); where one cannot be installed or cannot run, its test is skipped and says why.
// The same server under Node runs first, as the reference: what differs is named where it is
// asserted.
//
// What differs under Bun and Deno, and why: attach() hands an upgraded socket's fd to the core
// where the runtime's node:http socket has one (`socket._handle.fd`, a number under Node on Linux
// and macOS). Bun's and Deno's node:http sockets have none (Bun's `_handle.fd` is not a number,
// Deno's TCPWrap has no `fd`), so every upgrade takes the pipe path, as on Windows and as TLS does
// everywhere: the runtime pipes the bytes to the core's internal 127.0.0.1 listener. Hence, there,
// attach.test.js's "exactly one listening socket" and "fds back to baseline, one per adopted
// socket" become: one more listening socket (the internal listener, opened on the first upgrade)
// and three fds per connection instead of one.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { scope, waitFor, deadline, pool } = require('./helpers/common');
const { runProcess } = require('./helpers/proc');
const { listeningSockets } = require('./helpers/netinfo');
const { runtimes } = require('./helpers/runtime-install');

const ROOT = path.resolve(__dirname, '..');
const SERVER = path.join(__dirname, 'helpers', 'runtime-server.js');
const KiB = 1024;
const PROC = fs.existsSync('/proc/self/fd');

let installing = null;
/** Bun and Deno, installed once per run of this file (the first install downloads ~90 MB). */
const installed = () => installing || (installing = runtimes({ timeout: 300000 }));

/** The server under a runtime: {pid, ports, runtime, messages, request(cmd), exited, stderr()}. */
async function startServer(t, [file, args, env]) {
  const srv = runProcess(file, args, { cwd: ROOT, env: { ...process.env, ...env, DDP_TRANSPORT_NATIVE_SAME_PORT: '' }, timeoutMs: 120000 });
  t.after(() => srv.kill());
  const ready = await srv.waitMessage((m) => m.type === 'listening', 20000, 'server listening');
  return {
    ...ready,
    messages: srv.messages,
    exited: srv.exited,
    stderr: srv.stderr,
    request: (cmd, ms = 10000) => srv.request({ cmd }, ms),
  };
}

function httpGet(port, urlPath) {
  return deadline(new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  }), 5000, `GET ${urlPath}`);
}

const TCP_STATES = { '01': 'ESTABLISHED', '04': 'FIN_WAIT1', '05': 'FIN_WAIT2', '06': 'TIME_WAIT', '07': 'CLOSE', '08': 'CLOSE_WAIT', '09': 'LAST_ACK', '0A': 'LISTEN', '0B': 'CLOSING' };

/**
 * The process's socket fds other than unix-domain ones: {inode: what}, `what` being
 * 'port → port STATE' from /proc/<pid>/net/tcp, or 'not in the TCP table' (a closed socket whose fd
 * is still open). Unix sockets are left out: Deno opens unix socket pairs of its own on first use
 * (one or two pairs, once), which belong to no connection.
 */
function netSockets(pid) {
  const inodes = new Set();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch { /* closed meanwhile */ }
  }
  const table = (name) => {
    try { return fs.readFileSync(`/proc/${pid}/net/${name}`, 'utf8').split('\n').slice(1).map((l) => l.trim().split(/\s+/)); } catch { return []; }
  };
  for (const c of table('unix')) if (c.length >= 7) inodes.delete(c[6]);
  const out = {};
  for (const i of inodes) out[i] = 'not in the TCP table';
  const port = (a) => parseInt(a.split(':')[1], 16);
  for (const c of [...table('tcp'), ...table('tcp6')]) {
    if (c.length >= 10 && inodes.has(c[9])) out[c[9]] = `${port(c[1])} → ${port(c[2])} ${TCP_STATES[c[3]] || c[3]}`;
  }
  return out;
}

/** A compressible text over 64 KiB and an incompressible binary over 64 KiB. */
const bigText = () => 'ddp-transport-native under another runtime; '.repeat(4600);
const bigBinary = () => crypto.randomBytes(96 * KiB);

/** Send each message and check its echo: same bytes, same kind (text/binary). */
async function echoes(c, what) {
  const messages = [
    'héllo wörld ☃ 𝄞',
    Buffer.from([0, 1, 2, 127, 128, 254, 255, 0xc3, 0x28]),
    bigText(),
    bigBinary(),
  ];
  for (const sent of messages) {
    const binary = Buffer.isBuffer(sent);
    await c.send(sent, { binary });
    const got = await c.next(10000);
    const size = binary ? `${sent.length} B binary` : `${Buffer.byteLength(sent)} B text`;
    assert.equal(got.isBinary, binary, `${what}: the echo of ${size} keeps its kind`);
    if (binary) assert.ok(Buffer.from(got.data).equals(sent), `${what}: the echo of ${size} is intact`);
    else assert.ok(got.text === sent, `${what}: the echo of ${size} is intact`);
  }
}

const deflateOffered = (c) => /permessage-deflate/.test(c.ws.extensions || '');

const RUNTIMES = ['node', 'bun', 'deno'];

for (const name of RUNTIMES) {
  const expectedPath = name === 'node' ? 'fd' : 'pipe';
  test(`${name}: own listener echo (deflate on and off), publish/subscribe, attach() through the ${expectedPath} path, drain, close and a clean exit`, { timeout: 400000 }, async (t) => {
    let command;
    if (name === 'node') {
      command = [process.execPath, [SERVER], {}];
    } else {
      const rt = (await installed())[name];
      if (rt.skip) { t.skip(`${name} cannot run here: ${rt.skip}`); return; }
      command = rt.command(SERVER);
    }
    const srv = await startServer(t, command);
    const s = scope(t);
    t.diagnostic(`${srv.runtime.name} ${srv.runtime.version}, pid ${srv.pid}`);
    assert.equal(srv.runtime.name, name, 'the server runs under the runtime asked for');
    // the inline I/O mode needs Node's libuv loop (docs/runtimes.md): Bun and Deno run threads
    const inline = name === 'node' && process.platform === 'linux' && (process.env.DDP_TRANSPORT_NATIVE_IO || 'inline') === 'inline';
    assert.equal(srv.ioMode, inline ? 'inline' : 'threads', 'the I/O mode');

    await t.test('own listener (App().ws().listen()): text, binary and > 64 KiB messages echo intact, with and without permessage-deflate', async () => {
      const url = `ws://127.0.0.1:${srv.ports.own}/echo`;
      const plain = await s.ws(url, { perMessageDeflate: false });
      assert.equal(deflateOffered(plain), false);
      await echoes(plain, 'no deflate');
      const before = (await srv.request('stats')).own;
      assert.ok(before.wireBytesOut > before.bytesOut, `uncompressed: ${before.wireBytesOut} wire bytes out for ${before.bytesOut} payload bytes`);
      const deflate = await s.ws(url, { perMessageDeflate: true });
      assert.equal(deflateOffered(deflate), true, `permessage-deflate negotiated (extensions: ${deflate.ws.extensions})`);
      await echoes(deflate, 'permessage-deflate');
      const st = await srv.request('stats');
      const out = st.own.bytesOut - before.bytesOut;
      const wire = st.own.wireBytesOut - before.wireBytesOut;
      assert.ok(wire < out / 2, `compressed: ${wire} wire bytes out for ${out} payload bytes`);
      assert.ok(st.own.compressions > before.compressions, 'the server compressed');
      assert.deepEqual(st.kinds, { string: 4, buffer: 4, other: 0 }, 'text arrives as a string, binary as a Buffer');
    });

    await t.test('publish/subscribe (require(\'ddp-transport-native/uws\')): text and > 64 KiB binary reach every subscriber, with and without deflate', async () => {
      const url = `ws://127.0.0.1:${srv.ports.pubsub}/pubsub`;
      const subs = [];
      for (const perMessageDeflate of [true, false, true]) {
        const c = await s.ws(url, { perMessageDeflate });
        assert.equal((await c.next(5000)).text, 'subscribed');
        subs.push(c);
      }
      // Each subscriber publishes one message in turn (the sender is a subscriber too).
      const published = ['news for everyone', bigBinary(), bigText()];
      for (const [from, sent] of published.entries()) {
        const binary = Buffer.isBuffer(sent);
        const what = binary ? `${sent.length} B binary` : `${Buffer.byteLength(sent)} B text`;
        await subs[from].send(sent, { binary });
        for (const [i, c] of subs.entries()) {
          const got = await c.next(10000);
          assert.equal(got.isBinary, binary, `subscriber ${i} (deflate ${i !== 1 ? 'on' : 'off'}): the ${what} from ${from} keeps its kind`);
          assert.ok(binary ? Buffer.from(got.data).equals(sent) : got.text === sent, `subscriber ${i}: the ${what} from ${from}, intact`);
        }
      }
    });

    await t.test(`attach(http.Server): upgrades on the server's own port through the ${expectedPath} path; echo with and without deflate; the real peer address; plain HTTP still answers`, async () => {
      const url = `ws://127.0.0.1:${srv.ports.http}/websocket`;
      const clients = [];
      for (const perMessageDeflate of [false, true]) {
        const c = await s.ws(url, { perMessageDeflate });
        assert.equal(deflateOffered(c), perMessageDeflate);
        await echoes(c, `attach, deflate ${perMessageDeflate ? 'on' : 'off'}`);
        clients.push(c);
      }
      const huge = crypto.randomBytes(4 * 1024 * KiB);
      await clients[0].send(huge, { binary: true });
      const back = await clients[0].next(20000);
      assert.ok(back.isBinary && Buffer.from(back.data).equals(huge), 'a 4 MiB binary message crosses the same-port path both ways intact');
      assert.deepEqual(await httpGet(srv.ports.http, '/hello?x=1'), { status: 200, body: 'plain /hello?x=1' });
      const st = await srv.request('stats');
      const { path: used, socket, upgradeEvents } = st.samePort;
      if (name === 'node') {
        assert.equal(used, 'fd', 'under Node attach() hands the socket\'s fd to the core');
        assert.equal(upgradeEvents, 0, 'under Node the core takes the upgrades at its first look at the connection: no upgrade event');
      } else {
        // No listening handle of Node's to look first through: the upgrade event brings them.
        assert.ok(upgradeEvents >= 2, `under ${name} the upgrades arrive through the upgrade event (no first look): ${upgradeEvents}`);
        const why = `the runtime's node:http socket has _handle ${socket.handle}, _handle.fd ${socket.fd}`;
        // The difference this file is about: no fd to hand over, so the pipe.
        assert.notEqual(socket.fd, 'number', `under ${name} the node:http socket was expected to have no numeric fd (${why})`);
        assert.equal(used, 'pipe', `under ${name} attach() must serve through the pipe path: ${why}`);
        assert.ok(st.samePort.internalPort > 0, 'the internal listener is open');
      }
      t.diagnostic(`same port under ${name}: ${JSON.stringify(st.samePort)}`);
      const byNumber = (x, y) => x - y;
      const ports = clients.map((c) => c.localPort).sort(byNumber);
      assert.deepEqual(st.peers.map((p) => p.port).sort(byNumber), ports, 'getRemotePort() is the client\'s port (the pipe path carries it in its preamble)');
      assert.ok(st.peers.every((p) => p.address === '127.0.0.1'), `getRemoteAddressAsText(): ${JSON.stringify(st.peers)}`);
      for (const c of clients) c.close(1000);
      await Promise.all(clients.map((c) => c.waitClose(5000)));
    });

    await t.test('listening sockets and socket fds per connection (Linux /proc): where Bun and Deno differ from Node, and why', { skip: PROC ? false : 'no /proc on this system' }, async () => {
      const { own, pubsub, http: httpPort, last } = srv.ports;
      const known = [own, pubsub, httpPort, last];
      const listening = listeningSockets(srv.pid);
      const others = listening.map((l) => l.port).filter((p) => !known.includes(p));
      const described = listening.map((l) => `${l.address}:${l.port}`).join(', ');
      for (const p of known) assert.ok(listening.some((l) => l.port === p), `listening on ${p}: ${described}`);
      if (name === 'node') {
        assert.deepEqual(others, [], `under Node the fd is adopted: no internal listener beside the server's own listening sockets (${described})`);
      } else {
        // attach.test.js asserts exactly one listening socket for an attached server under Node;
        // here the pipe path needs the core's internal listener on 127.0.0.1 (one per app, opened
        // on its first upgrade: only the app of the http port has had one).
        assert.equal(others.length, 1, `under ${name} attach() pipes (no socket fd), so the core's internal loopback listener is one more listening socket (${described})`);
        const internal = listening.find((l) => l.port === others[0]);
        assert.equal(internal.address, '127.0.0.1', 'the internal listener binds 127.0.0.1');
      }
      const url = `ws://127.0.0.1:${httpPort}/websocket`;
      const connected = async (i) => {
        const c = await s.ws(url, { perMessageDeflate: i % 2 === 0 });
        await c.send(`c${i}`);
        assert.equal((await c.next(5000)).text, `c${i}`);
        return c;
      };
      const closed = async (cs) => {
        for (const c of cs) c.close(1000);
        await Promise.all(cs.map((c) => c.waitClose(5000)));
        await waitFor(async () => (await srv.request('stats')).same.connections === 0, { timeout: 10000, label: 'every socket closed in the server' });
      };
      /** `m` connect/echo/close cycles, 20 at a time. */
      const churn = async (m) => {
        const r = await pool(m, 20, async (i) => closed([await connected(i)]));
        assert.equal(r.done, m, `cycles with their echo: ${r.done}/${m}: ${r.errors.slice(0, 3).join('; ')}`);
      };
      // Warm-up at the churn's concurrency: a runtime may open descriptors of its own on first use.
      await churn(60);
      const count = () => Object.keys(netSockets(srv.pid)).length;
      let base = count();
      await waitFor(() => { const now = count(); const steady = now === base; base = now; return steady; }, { timeout: 5000, interval: 200, label: 'a steady socket count' });
      const before = netSockets(srv.pid);
      const N = 10;
      const cs = [];
      for (let i = 0; i < N; i++) cs.push(await connected(i));
      const delta = count() - base;
      if (name === 'node') {
        // attach.test.js's fd assertions hold here: one fd per connection, the core's dup.
        assert.ok(delta >= N && delta < N + 3, `under Node an adopted connection costs one socket fd (the core's dup; Node closed its own): ${delta} for ${N}`);
      } else {
        assert.ok(delta >= 3 * N && delta < 3 * N + 5, `under ${name} a piped connection costs three socket fds (the runtime's accepted socket, its loopback socket to the internal listener, the core's end of that): ${delta} for ${N}`);
      }
      await closed(cs);
      // Churn: every connection's socket fds go back.
      const opensBefore = (await srv.request('stats')).opens;
      const M = 300;
      await churn(M);
      assert.equal((await srv.request('stats')).opens - opensBefore, M, 'an open handler per cycle');
      let now;
      await waitFor(() => { now = count(); return now <= base; }, {
        timeout: 10000,
        label: 'socket fds back to their baseline',
        describe: () => {
          const after = netSockets(srv.pid);
          const extra = Object.keys(after).filter((i) => !(i in before)).map((i) => after[i]);
          return `baseline ${base}, now ${now}; new: ${extra.join(', ') || 'none'} (ports ${JSON.stringify(srv.ports)})`;
        },
      });
    });

    await t.test('drain() ends every socket with 1001; server.close() with a client still connected closes it at once; the process then exits by itself, with code 0', async () => {
      const a = await s.ws(`ws://127.0.0.1:${srv.ports.own}/echo`);
      const b = await s.ws(`ws://127.0.0.1:${srv.ports.http}/websocket`);
      const k = await s.ws(`ws://127.0.0.1:${srv.ports.last}/websocket`);
      await a.send('still here');
      assert.equal((await a.next()).text, 'still here');
      const drained = srv.request('drain');
      const codes = await Promise.all([a.waitClose(5000), b.waitClose(5000)]);
      assert.deepEqual(codes.map((x) => x.code), [1001, 1001], 'drain closes with 1001');
      await drained;
      await k.send('not drained');
      assert.equal((await k.next()).text, 'not drained');
      const closing = Date.now();
      await srv.request('close');
      const kc = await k.waitClose(5000);
      assert.equal(kc.code, 1001, `the client still connected at close gets 1001 (${Date.now() - closing} ms)`);
      const exit = await deadline(srv.exited, 10000, `${name} exiting after close()`);
      const ms = Date.now() - closing;
      assert.deepEqual({ code: exit.code, signal: exit.signal }, { code: 0, signal: null }, `exit after close (${ms} ms); stderr: ${srv.stderr().slice(-2000)}`);
      assert.ok(!srv.messages.some((m) => m.type === 'still-alive'), 'nothing kept the event loop alive');
      assert.equal(srv.stderr().trim(), '', 'nothing on stderr');
      t.diagnostic(`${name} exited ${ms} ms after close()`);
    });
  });
}
