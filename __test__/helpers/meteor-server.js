'use strict';
// A plain http.Server with the `native` transport set up on it, the way ddp-server does it.

const http = require('node:http');
const { createNativeTransport } = require('../../meteor');
const { listen, closeServer, withTimeout } = require('./meteor-util');

const live = new Set();

/**
 * @param {object} [o]
 * @param {object} [o.settings]       packages['ddp-server'].native
 * @param {string} [o.prefix]         pathPrefix
 * @param {object} [o.options]        setup() options (default: compression off via websocketExtensions → [])
 * @param {Function} [o.onConnection] called synchronously from the 'connection' event
 * @param {Function} [o.beforeSetup]  (server) => void, e.g. to add other request/upgrade listeners first
 * @param {object} [o.logger]
 */
async function makeServer(o = {}) {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`app:${req.url}`);
  });
  if (o.beforeSetup) o.beforeSetup(server);
  const options = o.options !== undefined ? o.options : { websocketExtensions: () => [] };
  const transport = createNativeTransport({ settings: o.settings, logger: o.logger })
    .setup(server, o.prefix || '', options);
  const sockets = [];
  const waiters = [];
  transport.on('connection', (socket) => {
    sockets.push(socket);
    if (o.onConnection) o.onConnection(socket);
    const w = waiters.shift();
    if (w) w(socket);
  });
  const port = await listen(server);
  let seen = 0;
  const handle = {
    server,
    transport,
    port,
    sockets,
    /** The next socket not yet returned by nextSocket(). */
    nextSocket(ms = 3000) {
      if (seen < sockets.length) return Promise.resolve(sockets[seen++]);
      return withTimeout(new Promise((resolve) => waiters.push((s) => { seen++; resolve(s); })), ms, 'connection event');
    },
    /** Close the core app (every socket) and the http.Server; never hangs. */
    async close() {
      live.delete(handle);
      try { transport._app.close(); } catch (e) { /* already closed */ }
      await closeServer(server);
    },
  };
  live.add(handle);
  return handle;
}

/** Safety net for after(): close whatever a failed test left open, so the process can exit. */
async function closeAllServers() {
  for (const h of [...live]) await h.close();
}

module.exports = { makeServer, closeAllServers };
