'use strict';
// The three uWS.js programs of examples/uws run unchanged against our compat surface and real
// uWebSockets.js (uws-pack); every client-visible fact (messages, order, close codes, refusals)
// must be identical.

const test = require('node:test');
const assert = require('node:assert');
const WebSocket = require('ws');
const ours = require('../lib/uws');
const { importRealUws } = require('./helpers/common');

let real = null;
let whyNot = '';
test.before(async () => {
  ({ uws: real, whyNot: whyNot } = await importRealUws());
});

function run(program, uws, scenario) {
  return new Promise((resolve, reject) => {
    const server = require(`../examples/uws/${program}`).start(uws, 0, (port) => {
      scenario(port).then((log) => {
        server.close();
        resolve(log);
      }, (e) => {
        server.close();
        reject(e);
      });
    });
  });
}

/** A client that records what it sees: messages (text/binary), close code and reason, refusals. */
function client(port, path, log, name, options) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, options);
  ws.got = [];
  ws.waiters = [];
  ws.on('message', (d, isBinary) => {
    const m = isBinary ? `bin:${d.length}:${d.subarray(0, 8).toString('hex')}` : d.toString();
    log.push(`${name} < ${m}`);
    ws.got.push(m);
    for (const w of ws.waiters.splice(0)) w();
  });
  ws.closed = new Promise((resolve) => ws.on('close', (code, reason) => {
    log.push(`${name} closed ${code} ${reason}`);
    resolve();
  }));
  ws.refused = new Promise((resolve) => ws.on('unexpected-response', (req, res) => {
    let body = '';
    res.on('data', (c) => { body += c; });
    res.on('end', () => {
      log.push(`${name} refused ${res.statusCode} ${body}`);
      resolve();
    });
  }));
  ws.on('error', () => {});
  ws.opened = new Promise((resolve) => ws.on('open', resolve));
  ws.until = (n) => new Promise((resolve) => {
    const check = () => (ws.got.length >= n ? resolve() : ws.waiters.push(check));
    check();
  });
  return ws;
}

const scenarios = {
  async echo(port) {
    const log = [];
    const a = client(port, '/echo', log, 'a');
    await a.opened;
    const big = Buffer.alloc(200 * 1024, 7);
    for (let i = 0; i < 40; i++) {
      big[0] = i;
      a.send(big);
    }
    a.send('hello');
    await a.until(41);
    a.send('quit now');
    await a.closed;
    return log;
  },
  async chat(port) {
    const log = [];
    const nameless = client(port, '/chat/x', log, 'nameless');
    await nameless.refused;
    const ann = client(port, '/chat/a?name=ann', log, 'ann');
    await ann.until(1);
    const bob = client(port, '/chat/a?name=bob', log, 'bob');
    await Promise.all([ann.until(2), bob.until(1)]);
    const cid = client(port, '/chat/b?name=cid', log, 'cid');
    await cid.until(1);
    ann.send('hi all');
    await Promise.all([ann.until(3), bob.until(2)]);
    bob.send('/who');
    await bob.until(3);
    bob.send('/mute');
    await bob.until(4);
    ann.send('anyone?');
    await ann.until(4);
    ann.send('/quit');
    await ann.closed;
    cid.send('alone');
    await cid.until(2);
    bob.close();
    cid.close();
    await Promise.all([bob.closed, cid.closed]);
    return log;
  },
  async auth(port) {
    const log = [];
    const bad = client(port, '/x?token=nope', log, 'bad');
    await bad.refused;
    const gone = client(port, '/x?token=t2', log, 'gone');
    setTimeout(() => gone.terminate(), 2);
    const ada = client(port, '/room/1?token=t1', log, 'ada');
    await ada.until(1);
    ada.send('hello');
    ada.send(Buffer.from([1, 2, 3]));
    await ada.until(3);
    ada.send('bye');
    await ada.closed;
    await new Promise((r) => setTimeout(r, 50));
    return log;
  },
};

const expected = {
  chat: [
    'nameless refused 400 name required',
    'ann < * ann joined a',
    'ann < * bob joined a',
    'bob < * bob joined a',
    'cid < * cid joined b',
    'bob < ann: hi all',
    'ann < ok 1',
    'bob < 2 here',
    'bob < muted true false',
    'ann < ok 2',
    'ann closed 4000 bye',
    'cid < ok 1',
  ],
};

/** Each client's own transcript, in order (arrival order across different connections is not
 *  defined by either server). */
function perClient(log) {
  const out = {};
  for (const line of log) {
    const name = line.split(' ')[0];
    (out[name] = out[name] || []).push(line);
  }
  return out;
}

for (const program of Object.keys(scenarios)) {
  test(`uWS program "${program}": the same observable behaviour on our surface and on uWS.js`, async (t) => {
    const mine = await run(program, ours, scenarios[program]);
    if (expected[program]) assert.deepStrictEqual(perClient(mine.slice(0, expected[program].length)), perClient(expected[program]));
    if (real === null) {
      t.skip(`uws-pack did not load: ${whyNot}`);
      return;
    }
    const theirs = await run(program, real, scenarios[program]);
    assert.deepStrictEqual(perClient(mine), perClient(theirs));
  });
}

/** The Sec-WebSocket-Extensions answer of a uWS app with `compression` to `offer`. */
function negotiated(uws, compression, offer) {
  return new Promise((resolve, reject) => {
    const http = require('node:http');
    uws.App().ws('/*', { compression, message() {} }).listen('127.0.0.1', 0, (ls) => {
      if (!ls) { reject(new Error('listen failed')); return; }
      const port = uws.us_socket_local_port(ls);
      const req = http.request({ host: '127.0.0.1', port, headers: {
        Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Extensions': offer,
      } });
      const done = (v) => { uws.us_listen_socket_close(ls); resolve(v); };
      req.on('upgrade', (res, socket) => { socket.destroy(); done(res.headers['sec-websocket-extensions'] || null); });
      req.on('response', (res) => { res.resume(); done(`HTTP ${res.statusCode}`); });
      req.on('error', reject);
      req.end();
    });
  });
}

test('permessage-deflate negotiation: the same client-visible parameters as uWS.js', async (t) => {
  if (real === null) {
    t.skip(`uws-pack did not load: ${whyNot}`);
    return;
  }
  // Parameter sets (uWS orders them differently; the order carries no meaning). uWS announces
  // server_max_window_bits for a dedicated compressor even when not offered; we deflate with the
  // same window without announcing it (the client needs no bound it did not ask for).
  const params = (h) => (h === null ? null : h.split(';').map((p) => p.trim()).filter((p) => !p.startsWith('server_max_window_bits')).sort().join('; '));
  const offers = ['permessage-deflate; client_max_window_bits', 'permessage-deflate',
    'permessage-deflate; client_no_context_takeover; client_max_window_bits'];
  const K = ours;
  const settings = {
    SHARED_COMPRESSOR: K.SHARED_COMPRESSOR,
    'SHARED_COMPRESSOR | SHARED_DECOMPRESSOR': K.SHARED_COMPRESSOR | K.SHARED_DECOMPRESSOR,
    DEDICATED_COMPRESSOR_4KB: K.DEDICATED_COMPRESSOR_4KB,
    'SHARED_COMPRESSOR | DEDICATED_DECOMPRESSOR_1KB': K.SHARED_COMPRESSOR | K.DEDICATED_DECOMPRESSOR_1KB,
    'DEDICATED_COMPRESSOR_32KB | DEDICATED_DECOMPRESSOR_4KB': K.DEDICATED_COMPRESSOR_32KB | K.DEDICATED_DECOMPRESSOR_4KB,
  };
  for (const [name, compression] of Object.entries(settings)) {
    for (const offer of offers) {
      const [mine, theirs] = [await negotiated(ours, compression, offer), await negotiated(real, compression, offer)];
      assert.equal(params(mine), params(theirs), `${name}, offer "${offer}": ours "${mine}", uWS "${theirs}"`);
    }
  }
});
