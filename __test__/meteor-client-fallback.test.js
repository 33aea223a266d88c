'use strict';
// The page script that lets a browser whose WebSocket constructor fails use SockJS
// (meteor/client-fallback.js), run in a V8 context shaped like a page, and its injection through
// WebAppInternals' boilerplate data callbacks. The real-browser run of the same behaviour, through
// Meteor's own client in a real app: npm run test:meteor-app (docs/meteor-real-app.md).

const test = require('node:test');
const assert = require('node:assert/strict');
const vm = require('node:vm');
const { installClientFallback, pageScript, CALLBACK_KEY } = require('../meteor/client-fallback');

/** A page: `WebSocket` as given (undefined: none), the runtime config, a console that records. */
function page({ WebSocket, config }) {
  const warnings = [];
  const context = vm.createContext({
    __meteor_runtime_config__: config,
    console: { warn: (m) => warnings.push(m) },
    setTimeout,
    DOMException,
  });
  context.window = context;
  if (WebSocket !== undefined) context.WebSocket = WebSocket;
  vm.runInContext(`(${pageScript.toString()})();`, context);
  return { context, warnings, construct: (url) => vm.runInContext(`new WebSocket(${JSON.stringify(url)})`, context) };
}

function closed(socket) {
  return new Promise((resolve) => {
    socket.onclose = resolve;
  });
}

test('a constructor that throws while native serves: SockJS from the next attempt, a socket that closes at once', async () => {
  const Throwing = function WebSocket() { throw new DOMException('blocked', 'SecurityError'); };
  const config = { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' };
  const p = page({ WebSocket: Throwing, config });
  const socket = p.construct('ws://127.0.0.1:3000/websocket');
  assert.equal(socket.readyState, 3);
  const event = await closed(socket);
  assert.equal(event.code, 1006);
  assert.deepEqual({ ...config }, { DISABLE_SOCKJS: false, DDP_TRANSPORT: 'sockjs' });
  assert.deepEqual(p.warnings, ['ddp-transport-native: new WebSocket() failed (SecurityError); DDP uses SockJS.']);
  assert.doesNotThrow(() => { socket.send('x'); socket.close(); });
});

test('without DISABLE_SOCKJS (native not serving, or already fallen back) the error is the browser\'s', () => {
  const Throwing = function WebSocket() { throw new DOMException('blocked', 'SecurityError'); };
  const p = page({ WebSocket: Throwing, config: { DDP_TRANSPORT: 'sockjs' } });
  assert.throws(() => p.construct('ws://127.0.0.1:3000/anything'), { name: 'SecurityError' });
  assert.deepEqual(p.warnings, []);
});

test('a working constructor is untouched: the browser\'s socket, prototype, statics and name', () => {
  class FakeWebSocket {
    constructor(url, protocols) {
      this.url = url;
      this.protocols = protocols;
    }
  }
  FakeWebSocket.OPEN = 1;
  const config = { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' };
  const p = page({ WebSocket: FakeWebSocket, config });
  const socket = vm.runInContext('new WebSocket("ws://h/websocket", ["a"])', p.context);
  assert.ok(socket instanceof FakeWebSocket);
  assert.ok(vm.runInContext('(s) => s instanceof WebSocket', p.context)(socket));
  assert.equal(JSON.stringify([socket.url, socket.protocols]), '["ws://h/websocket",["a"]]'); // arrays of the page's realm
  assert.equal(vm.runInContext('WebSocket.OPEN', p.context), 1);
  assert.equal(vm.runInContext('WebSocket.name', p.context), 'FakeWebSocket');
  class Sub extends p.context.WebSocket {}
  assert.ok(new Sub('ws://h/x') instanceof Sub, 'subclasses keep their prototype');
  assert.deepEqual({ ...config }, { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' });
  assert.deepEqual(p.warnings, []);
});

test('a browser with no WebSocket at all: falls back the same way', async () => {
  const config = { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' };
  const p = page({ config });
  const socket = p.construct('ws://127.0.0.1:3000/websocket');
  await closed(socket);
  assert.equal(config.DISABLE_SOCKJS, false);
  assert.match(p.warnings[0], /this browser has no WebSocket; DDP uses SockJS/);
});

test('installed as a boilerplate data callback: the script goes into <head> while inline scripts are allowed', () => {
  const callbacks = {};
  let inline = true;
  const WebAppInternals = {
    registerBoilerplateDataCallback: (key, cb) => { callbacks[key] = cb; },
    inlineScriptsAllowed: () => inline,
  };
  assert.equal(installClientFallback(WebAppInternals), true);
  const data = { dynamicHead: '<meta name="x">' };
  assert.equal(callbacks[CALLBACK_KEY]({}, data, 'web.browser'), true);
  assert.ok(data.dynamicHead.startsWith('<meta name="x"><script>('));
  assert.ok(data.dynamicHead.endsWith(')();</script>'));
  // The injected text is the function that the tests above ran.
  assert.ok(data.dynamicHead.includes(pageScript.toString()));
  inline = false;
  const strict = {};
  assert.equal(callbacks[CALLBACK_KEY]({}, strict, 'web.browser'), false);
  assert.equal(strict.dynamicHead, undefined);
  assert.equal(installClientFallback({}), false, 'a Meteor without the hook: nothing installed');
});
