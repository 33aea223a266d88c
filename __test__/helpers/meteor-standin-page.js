'use strict';
// A stand-in for the real-app suite's page (scripts/meteor-app-e2e), for checking its engine-neutral
// page driver (scripts/meteor-app-e2e/browser.js, openPage() on an engine driver) in each engine
// without building a Meteor app: the <head> the app's server gives every page — the page recorder
// of scripts/meteor-app-e2e/app/server.js, then ddp-transport-native's fallback script
// (meteor/client-fallback.js, through the same boilerplate callback Meteor runs) and a runtime
// config saying native — and, in place of Meteor's client, a small one with the same
// `window.e2e` surface: a WebSocket to `wsPath` while DISABLE_SOCKJS is set (calls go over it as
// JSON and come back echoed), else "SockJS" (an XHR to /sockjs/info), reconnecting on close.

const fs = require('node:fs');
const path = require('node:path');
const { installClientFallback } = require('../../meteor/client-fallback');

const APP_SERVER = path.join(__dirname, '..', '..', 'scripts', 'meteor-app-e2e', 'app', 'server.js');

/** The app server's PAGE_RECORDER, as that file defines it. */
function pageRecorder() {
  const m = /const PAGE_RECORDER = `(<script>[\s\S]*?<\/script>)`;/.exec(fs.readFileSync(APP_SERVER, 'utf8'));
  if (!m) throw new Error(`no PAGE_RECORDER in ${APP_SERVER}`);
  return m[1];
}

/** The <head> Meteor's boilerplate callbacks make: the fallback's callback appends its script,
 *  the app's (registered after it) puts the recorder first. */
function dynamicHead() {
  const data = { dynamicHead: '' };
  let callback = null;
  installClientFallback({ registerBoilerplateDataCallback: (key, cb) => { callback = cb; } });
  callback({}, data);
  return `${pageRecorder()}${data.dynamicHead}`;
}

/* global window, WebSocket, XMLHttpRequest, location, __meteor_runtime_config__ */
function standinClient(wsPath) {
  let ws = null;
  let connected = false;
  let via = null;
  let n = 0;
  const pending = new Map();
  function connect() {
    if (__meteor_runtime_config__.DISABLE_SOCKJS) {
      ws = new WebSocket(`ws://${location.host}${wsPath}`);
      ws.onopen = () => { connected = true; via = 'websocket'; };
      ws.onmessage = (e) => {
        const m = JSON.parse(e.data);
        if (pending.has(m.id)) pending.get(m.id)(m);
        pending.delete(m.id);
      };
      ws.onclose = () => { connected = false; setTimeout(connect, 100); };
    } else {
      const x = new XMLHttpRequest();
      x.open('GET', '/sockjs/info?cb=standin');
      x.onload = () => { connected = true; via = 'sockjs'; };
      x.send();
    }
  }
  window.e2e = {
    version: 'v1', items: {}, events: [], statuses: [],
    isReady: () => connected,
    status: () => ({ connected, status: connected ? 'connected' : 'connecting' }),
    call: (name, ...args) => (via === 'sockjs' ? Promise.resolve({ via, name, args }) : new Promise((resolve) => {
      const id = ++n;
      pending.set(id, (m) => resolve({ via, name: m.name, args: m.args }));
      ws.send(JSON.stringify({ id, name, args }));
    })),
  };
  connect();
}

/** The stand-in page's HTML, its client connecting to `wsPath` on the page's own host. */
function standinHtml(wsPath) {
  return `<!doctype html><html><head><meta charset="utf-8">${dynamicHead()}
<script>__meteor_runtime_config__ = { DISABLE_SOCKJS: true, DDP_TRANSPORT: 'native' };</script></head>
<body><script>(${standinClient.toString()})(${JSON.stringify(wsPath)});</script></body></html>`;
}

module.exports = { standinHtml, pageRecorder };
