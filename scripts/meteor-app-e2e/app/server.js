// The real-app suite's server module (server/e2e.js, imported from the app's server/main.js,
// below the import line where the app uses the npm package). Nothing here needs MongoDB: the
// publication is driven by methods.
import { Meteor } from 'meteor/meteor';
import { DDP } from 'meteor/ddp';

// What the suite reads from the page in every browser engine (scripts/meteor-app-e2e/browser.js),
// recorded by the page itself: one inline script put first in every page's <head>, before
// ddp-transport-native's fallback script, the runtime config and the client bundle. It keeps the
// page's WebSockets (url, and once open, which a 101 answer alone makes, the negotiated
// extensions), the XHR requests (SockJS's), and console lines, in window.__e2e, per page load.
// With `?e2e-break-websocket` in the page's URL it replaces the WebSocket constructor with one
// that throws, as a browser or policy that blocks WebSocket does, and records nothing more.
const PAGE_RECORDER = `<script>(function () {
  var rec = window.__e2e = { load: String(Math.random()).slice(2), sockets: [], requests: [], console: [] };
  ['log', 'info', 'warn', 'error'].forEach(function (k) {
    var f = console[k];
    console[k] = function () {
      try { rec.console.push(Array.prototype.map.call(arguments, String).join(' ')); } catch (e) {}
      return f.apply(console, arguments);
    };
  });
  var open = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, url) {
    try { rec.requests.push(String(new URL(url, location.href))); } catch (e) {}
    return open.apply(this, arguments);
  };
  if (/[?&]e2e-break-websocket(=|&|$)/.test(location.search)) {
    window.WebSocket = function WebSocket() {
      throw new DOMException('WebSocket blocked by the real-app check', 'SecurityError');
    };
    return;
  }
  var Native = window.WebSocket;
  window.WebSocket = new Proxy(Native, {
    construct: function (target, args, newTarget) {
      var ws = Reflect.construct(target, args, newTarget === window.WebSocket ? target : newTarget);
      var s = { url: ws.url, status: null, extensions: null };
      rec.sockets.push(s);
      ws.addEventListener('open', function () { s.status = 101; s.extensions = ws.extensions; });
      ws.addEventListener('close', function (e) { s.closeCode = e.code; });
      return ws;
    },
  });
})();</script>`;
const { WebAppInternals } = Package.webapp;
WebAppInternals.registerBoilerplateDataCallback('e2e-page-recorder', (request, data) => {
  data.dynamicHead = `${PAGE_RECORDER}${data.dynamicHead || ''}`;
  return true;
});

const docs = new Map();
const subscriptions = new Set();

Meteor.publish('items', function () {
  for (const [id, fields] of docs) this.added('items', id, fields);
  subscriptions.add(this);
  this.onStop(() => subscriptions.delete(this));
  this.ready();
});

Meteor.methods({
  echo(value) {
    return value;
  },
  'items.put'(id, value) {
    const kind = docs.has(id) ? 'changed' : 'added';
    docs.set(id, { value });
    for (const sub of subscriptions) sub[kind]('items', id, { value });
    return kind;
  },
  'items.remove'(id) {
    if (!docs.delete(id)) return false;
    for (const sub of subscriptions) sub.removed('items', id);
    return true;
  },
  /** Which socket carries the caller's DDP connection, as Meteor's session holds it. */
  transport() {
    const session = Meteor.server.sessions.get(this.connection.id);
    const socket = session && session.socket;
    return {
      protocol: socket ? socket.protocol : null,
      url: socket ? socket.url : null,
      clientAddress: this.connection.clientAddress,
    };
  },
  /** Server to server: this app's DDP client (Meteor's, in Node) calls the app at E2E_UPSTREAM. */
  async upstream(value) {
    const url = process.env.E2E_UPSTREAM;
    if (!url) throw new Meteor.Error('no-upstream', 'E2E_UPSTREAM is not set');
    const connection = DDP.connect(url);
    try {
      const echoed = await connection.callAsync('echo', value);
      const transport = await connection.callAsync('transport');
      return { echoed, transport };
    } finally {
      connection.disconnect();
    }
  },
});
