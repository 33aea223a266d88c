'use strict';
// Same-port mode: take over WebSocket upgrades on some paths from Node's http/https server.
//
// For a plain TCP socket, Node stops reading, Rust dups the fd, validates the request Node
// parsed, replays the bytes that followed it and writes the 101; Node's handle is then closed,
// which closes only its own fd (no FIN: the dup keeps the connection). Sockets without an fd
// (TLS terminated in Node) are piped to the core's internal loopback listener instead.

const net = require('net');
const { native } = require('./constants');
const { nativeError } = require('./options');
const { requireProxyHeaders, releaseProxyHeaders, proxiedPeer } = require('./proxy-header');

function rethrow(err) {
  throw err;
}

/** Path of a request target without its query (an absolute-form target gives its path); null
 *  for a target the core refuses (native/target.rs: `*`, `http://%`, bad `%` escapes, ...). */
function requestPath(url) {
  const origin = native.originForm(url);
  if (origin === null) return null;
  const q = origin.indexOf('?');
  return q < 0 ? origin : origin.slice(0, q);
}

/**
 * Route `server`'s upgrades on `paths` to `app` (its native side is `app._native`); every other
 * upgrade goes to the listeners that were there before, untouched (like Meteor's stream_server).
 * Returns the record `detach` needs.
 */
function attach(app, server, paths, { proxyProtocol = false } = {}) {
  // Before the upgrade listener: a connection's PROXY header is read before Node parses it.
  const proxy = proxyProtocol ? requireProxyHeaders(server) : null;
  const previous = server.listeners('upgrade').slice();
  server.removeAllListeners('upgrade');
  const onUpgrade = (req, socket, head) => {
    const path = requestPath(req.url || '');
    // A malformed target is nobody's: the core answers it 400, as the own listener does, instead
    // of handing it to listeners that may not survive it (new URL('http://%') throws).
    if (app._closed || (path !== null && !paths.some((p) => native.pathMatches(p, path)))) {
      // Nobody else will take it (Node's own rule for an unhandled upgrade): destroy it.
      if (previous.length === 0 && server.listenerCount('upgrade') <= 1) socket.destroy();
      for (const l of previous) l.call(server, req, socket, head);
      return;
    }
    takeOver(app, req, socket, head);
  };
  server.on('upgrade', onUpgrade);
  const onClose = () => app.close();
  server.once('close', onClose);
  return { server, onUpgrade, onClose, previous, proxy };
}

/** Undo `attach`: the listeners that were there before get the server's upgrades (and, with
 *  proxyProtocol, its connections) back. */
function detach({ server, onUpgrade, onClose, previous, proxy }) {
  server.removeListener('upgrade', onUpgrade);
  server.removeListener('close', onClose);
  for (const l of previous) server.on('upgrade', l);
  if (proxy !== null) releaseProxyHeaders(proxy);
}

function takeOver(app, req, socket, head) {
  const handle = socket._handle;
  const fd = handle && !socket.encrypted && typeof handle.fd === 'number' ? handle.fd : -1;
  if (fd < 0) {
    viaLoopback(app, req, socket, head);
    return;
  }
  if (typeof handle.readStop === 'function') handle.readStop();
  try {
    // The client a PROXY header named (lib/proxy-header.js) is the socket's, as on the own listener.
    const proxied = proxiedPeer(socket);
    app._native.adopt(fd, req.method, req.url, req.httpVersion, req.rawHeaders, head, proxied?.address, proxied?.port);
  } catch (e) {
    // Only dup() can fail here (EMFILE: out of file descriptors). Like a failed accept, this
    // costs one connection, not the server: the client sees the socket close and retries.
    socket.destroy();
    process.emitWarning(nativeError(e, 'adopting an upgraded socket'));
    return;
  }
  socket.destroy();
}

// Sockets without an fd: pipe them to the internal loopback listener (127.0.0.1, kernel-chosen
// port, opened on first use), with the real peer address in a preamble that carries a per-app
// secret.
function viaLoopback(app, req, socket, head) {
  if (app._internal === null) {
    try {
      app._internal = app._native.internalListener();
    } catch (e) {
      socket.destroy();
      process.nextTick(rethrow, nativeError(e, 'opening the internal listener'));
      return;
    }
  }
  const { port, secret } = app._internal;
  // A unix socket's peer has no address: the preamble then names none.
  const peer = socket.remoteAddress === undefined ? '' : ` ${socket.remoteAddress} ${socket.remotePort}`;
  const lines = [`PEER ${secret}${peer}`, `${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  const inner = net.connect(port, '127.0.0.1');
  inner.setNoDelay(true);
  socket.setNoDelay?.(true);
  inner.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (head && head.length) inner.write(head);
  socket.pipe(inner);
  inner.pipe(socket);
  const done = () => {
    socket.destroy();
    inner.destroy();
  };
  socket.on('error', done);
  inner.on('error', done);
  socket.on('close', done);
  inner.on('close', done);
}

module.exports = { attach, detach };
