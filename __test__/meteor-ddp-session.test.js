'use strict';
// demo/ddp-session.js on a fake Meteor-contract socket (no network): the DDP server the demo,
// the tests and the benchmark share.

const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const EventEmitter = require('node:events');
const { DdpServer, randomId } = require('../demo/ddp-session');
const { waitFor } = require('./helpers/meteor-util');

const T = { timeout: 10000 };

class FakeSocket extends EventEmitter {
  constructor({ withTimeout = true } = {}) {
    super();
    this.sent = [];
    this.closedCalls = 0;
    this.timeouts = [];
    if (withTimeout) this.setWebsocketTimeout = (ms) => this.timeouts.push(ms);
  }
  send(s) {
    assert.equal(typeof s, 'string');
    this.sent.push(JSON.parse(s));
  }
  close() { this.closedCalls++; }
  in(obj) { this.emit('data', typeof obj === 'string' ? obj : JSON.stringify(obj)); }
  take() { return this.sent.splice(0); }
}

function connected(server, opts) {
  const s = new FakeSocket(opts);
  server.handle(s);
  s.in({ msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] });
  const [m] = s.take();
  assert.equal(m.msg, 'connected');
  return { socket: s, session: m.session };
}

describe('DdpServer', () => {
  test('connect → connected with a random session id; timeouts 45000 then 0', T, () => {
    const ddp = new DdpServer();
    const a = connected(ddp);
    const b = connected(ddp);
    assert.match(a.session, /^[23456789A-HJ-NP-Za-km-z]{17}$/);
    assert.notEqual(a.session, b.session);
    assert.deepEqual(a.socket.timeouts, [45000, 0]);
    // A socket without setWebsocketTimeout is fine too.
    connected(ddp, { withTimeout: false });
  });

  test('pre1/pre2 accepted; bad or unsupported version → failed then close in the same tick', T, () => {
    const ddp = new DdpServer();
    for (const version of ['pre1', 'pre2']) {
      const s = new FakeSocket();
      ddp.handle(s);
      s.in({ msg: 'connect', version, support: [version] });
      assert.equal(s.take()[0].msg, 'connected');
    }
    for (const bad of [{ version: '2', support: ['2'] }, { version: 7 }, {}, { version: 'x', support: ['x', 'pre1'] }]) {
      const s = new FakeSocket();
      ddp.handle(s);
      s.in({ msg: 'connect', ...bad });
      const expected = bad.support && bad.support.includes('pre1') ? 'pre1' : '1';
      assert.deepEqual(s.take(), [{ msg: 'failed', version: expected }], JSON.stringify(bad));
      assert.equal(s.closedCalls, 1);
      assert.deepEqual(s.timeouts, [45000], 'the handshake timeout stays on for a failed connect');
    }
  });

  test('messages before connect → "Must connect first"', T, () => {
    const s = new FakeSocket();
    new DdpServer().handle(s);
    s.in({ msg: 'method', id: '1', method: 'echo', params: [1] });
    const [m] = s.take();
    assert.equal(m.msg, 'error');
    assert.equal(m.reason, 'Must connect first');
  });

  test('method → result + updated; echo, custom sync/async, unknown, thrown', T, async () => {
    const ddp = new DdpServer({
      methods: {
        add(a, b) { return a + b; },
        later(x) { return new Promise((r) => setTimeout(() => r(x * 2), 5)); },
        boom() { throw new Error('secret detail'); },
        meteorError() { const e = new Error('x'); e.error = 'not-allowed'; e.reason = 'Nope'; throw e; },
        rejects() { return Promise.reject(Object.assign(new Error('y'), { error: 409, reason: 'Conflict' })); },
        nothing() {},
        whoami() { return this.id; },
      },
    });
    const { socket: s, session } = connected(ddp);
    s.in({ msg: 'method', id: '1', method: 'echo', params: [{ a: [1, 'b'] }] });
    assert.deepEqual(s.take(), [
      { msg: 'result', id: '1', result: { a: [1, 'b'] } },
      { msg: 'updated', methods: ['1'] },
    ]);
    s.in({ msg: 'method', id: '2', method: 'add', params: [2, 3] });
    assert.deepEqual(s.take()[0], { msg: 'result', id: '2', result: 5 });
    s.in({ msg: 'method', id: '3', method: 'later', params: [21] });
    await waitFor(() => s.sent.length === 2, 2000, 'async result');
    assert.deepEqual(s.take(), [{ msg: 'result', id: '3', result: 42 }, { msg: 'updated', methods: ['3'] }]);
    s.in({ msg: 'method', id: '4', method: 'nope', params: [] });
    const [unknown, upd] = s.take();
    assert.equal(unknown.error.error, 404);
    assert.equal(unknown.error.reason, "Method 'nope' not found");
    assert.deepEqual(upd, { msg: 'updated', methods: ['4'] });
    s.in({ msg: 'method', id: '5', method: 'boom' });
    const [boom] = s.take();
    assert.deepEqual([boom.error.error, boom.error.reason], [500, 'Internal server error'], 'internal errors are not leaked');
    s.in({ msg: 'method', id: '6', method: 'meteorError', params: [] });
    const [me] = s.take();
    assert.deepEqual([me.error.error, me.error.reason], ['not-allowed', 'Nope']);
    s.in({ msg: 'method', id: '7', method: 'rejects', params: [] });
    await waitFor(() => s.sent.length === 2, 2000, 'rejection');
    const [rj] = s.take();
    assert.deepEqual([rj.error.error, rj.error.reason], [409, 'Conflict']);
    s.in({ msg: 'method', id: '8', method: 'nothing', params: [] });
    const [nothing] = s.take();
    assert.deepEqual(nothing, { msg: 'result', id: '8' });
    s.in({ msg: 'method', id: '9', method: 'whoami', params: [] });
    assert.equal(s.take()[0].result, session, 'methods run with the session as `this`');
    s.in({ msg: 'method', id: 10, method: 'echo', params: [] });
    assert.equal(s.take()[0].reason, 'Bad request');
    s.in({ msg: 'method', id: '11', method: 'echo', params: 'x' });
    assert.equal(s.take()[0].reason, 'Bad request');
  });

  test('ping → pong (with id if given); pong ignored', T, () => {
    const { socket: s } = connected(new DdpServer());
    s.in({ msg: 'ping' });
    s.in({ msg: 'ping', id: 'abc' });
    s.in({ msg: 'pong', id: 'zzz' });
    assert.deepEqual(s.take(), [{ msg: 'pong' }, { msg: 'pong', id: 'abc' }]);
  });

  test('Parse error, Bad request (missing msg, non-object, unknown msg)', T, () => {
    const { socket: s } = connected(new DdpServer());
    s.in('{not json');
    assert.deepEqual(s.take(), [{ msg: 'error', reason: 'Parse error' }]);
    s.in({ id: '1' });
    assert.deepEqual(s.take(), [{ msg: 'error', reason: 'Bad request', offendingMessage: { id: '1' } }]);
    s.in('42');
    assert.equal(s.take()[0].reason, 'Bad request');
    s.in('null');
    assert.equal(s.take()[0].reason, 'Bad request');
    s.in({ msg: 'teleport' });
    assert.equal(s.take()[0].reason, 'Bad request');
    s.in({ msg: 'connect', version: '1' });
    assert.equal(s.take()[0].reason, 'Bad request', 'a second connect is refused');
  });

  test('sub fanout → ready; unknown sub → nosub with error; unsub → nosub; publish fans out', T, () => {
    const ddp = new DdpServer();
    const a = connected(ddp).socket;
    const b = connected(ddp).socket;
    const c = connected(ddp).socket;
    a.in({ msg: 'sub', id: 'sa', name: 'fanout', params: [] });
    b.in({ msg: 'sub', id: 'sb', name: 'fanout' });
    assert.deepEqual(a.take(), [{ msg: 'ready', subs: ['sa'] }]);
    assert.deepEqual(b.take(), [{ msg: 'ready', subs: ['sb'] }]);
    c.in({ msg: 'sub', id: 'sc', name: 'secret', params: [] });
    const [nosub] = c.take();
    assert.equal(nosub.msg, 'nosub');
    assert.equal(nosub.id, 'sc');
    assert.equal(nosub.error.error, 404);

    c.in({ msg: 'method', id: '1', method: 'publish', params: [{ text: 'hi' }] });
    assert.deepEqual(c.take(), [{ msg: 'result', id: '1', result: 2 }, { msg: 'updated', methods: ['1'] }]);
    const [addedA] = a.take();
    const [addedB] = b.take();
    assert.deepEqual(addedA, addedB);
    assert.equal(addedA.msg, 'added');
    assert.equal(addedA.collection, 'fanout');
    assert.equal(typeof addedA.id, 'string');
    assert.deepEqual(addedA.fields, { text: 'hi' });

    // A second subscription to fanout from the same session: still one copy per publish.
    a.in({ msg: 'sub', id: 'sa2', name: 'fanout' });
    a.take();
    assert.equal(ddp.publish({ n: 2 }), 2);
    assert.equal(a.take().length, 1);
    b.take();

    // unsub one of a's subs: still subscribed; unsub both: gone.
    a.in({ msg: 'unsub', id: 'sa' });
    assert.deepEqual(a.take(), [{ msg: 'nosub', id: 'sa' }]);
    assert.equal(ddp.publish({ n: 3 }), 2);
    a.take(); b.take();
    a.in({ msg: 'unsub', id: 'sa2' });
    a.take();
    assert.equal(ddp.publish({ n: 4 }), 1);
    assert.deepEqual(a.take(), []);
    assert.equal(b.take().length, 1);
    a.in({ msg: 'unsub', id: 'never' });
    assert.deepEqual(a.take(), [{ msg: 'nosub', id: 'never' }]);

    // A closed session leaves the fan-out and sends nothing more.
    b.emit('close');
    assert.equal(ddp.publish({ n: 5 }), 0);
    assert.deepEqual(b.take(), []);
    assert.equal(ddp.sessions.size, 2);
  });

  test('results of async methods are not sent after close', T, async () => {
    let release;
    const ddp = new DdpServer({ methods: { wait() { return new Promise((r) => { release = r; }); } } });
    const { socket: s } = connected(ddp);
    s.in({ msg: 'method', id: '1', method: 'wait', params: [] });
    s.emit('close');
    release('late');
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(s.take(), []);
  });

  test('direct entry: open(send, close) → session.receive / session.closed, no socket object', T, () => {
    const ddp = new DdpServer({ methods: { twice(x) { return 2 * x; } } });
    const out = [];
    let closes = 0;
    const s = ddp.open((str) => out.push(JSON.parse(str)), () => closes++);
    assert.equal(s.socket, null);
    s.receive(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
    assert.equal(out.shift().msg, 'connected');
    s.receive(JSON.stringify({ msg: 'method', id: '1', method: 'twice', params: [21] }));
    s.receive(JSON.stringify({ msg: 'sub', id: 's', name: 'fanout' }));
    assert.deepEqual(out.splice(0), [{ msg: 'result', id: '1', result: 42 }, { msg: 'updated', methods: ['1'] },
      { msg: 'ready', subs: ['s'] }]);
    assert.equal(ddp.publish({ n: 1 }), 1);
    assert.equal(out.shift().msg, 'added');
    s.closed();
    s.closed();
    assert.equal(ddp.sessions.size, 0);
    assert.equal(ddp.publish({ n: 2 }), 0);
    s.receive(JSON.stringify({ msg: 'ping' }));
    assert.deepEqual(out, []);
    assert.equal(closes, 0);
    // A bad version: `failed`, then the close function; the optional timeout function as handle's.
    const timeouts = [];
    const f = ddp.open((str) => out.push(JSON.parse(str)), () => closes++, (ms) => timeouts.push(ms));
    f.receive(JSON.stringify({ msg: 'connect', version: '9', support: ['9'] }));
    assert.deepEqual(out.splice(0), [{ msg: 'failed', version: '1' }]);
    assert.equal(closes, 1);
    assert.deepEqual(timeouts, [45000]);
  });

  test('publications option: run once on sub before ready; added() keeps the fields sent; hasSub', T, () => {
    const calls = [];
    const ddp = new DdpServer({
      publications: {
        items(subId, ...params) {
          calls.push([subId, params, this.hasSub('items')]);
          this.added('items', 'a', { n: 1 });
          if (params[0] === 'boom') throw new Error('boom');
        },
      },
    });
    const { socket: s } = connected(ddp);
    s.in({ msg: 'sub', id: 'x', name: 'items', params: [7] });
    s.in({ msg: 'sub', id: 'x', name: 'items', params: [7] }); // the same id again: ready only
    assert.deepEqual(s.take(), [{ msg: 'added', collection: 'items', id: 'a', fields: { n: 1 } },
      { msg: 'ready', subs: ['x'] }, { msg: 'ready', subs: ['x'] }]);
    assert.deepEqual(calls, [['x', [7], true]]);
    const session = [...ddp.sessions][0];
    assert.deepEqual(session.views.get('items').get('a'), { n: 1 });
    s.in({ msg: 'sub', id: 'y', name: 'items', params: ['boom'] });
    const [, nosub] = s.take();
    assert.equal(nosub.msg, 'nosub');
    assert.equal(nosub.error.error, 500);
    assert.equal(session.hasSub('items'), true);
    s.in({ msg: 'unsub', id: 'x' });
    assert.equal(session.hasSub('items'), false);
    s.in({ msg: 'sub', id: 'z', name: 'nope' });
    assert.equal(s.take().pop().error.error, 404);
  });

  test('randomId', T, () => {
    const ids = new Set();
    for (let i = 0; i < 2000; i++) ids.add(randomId());
    assert.equal(ids.size, 2000);
    assert.equal(randomId(5).length, 5);
  });
});
