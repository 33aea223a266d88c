'use strict';
// Same-port mode: take over WebSocket upgrades on some paths from Node's http/https server.
//
// For a plain TCP socket, Node stops reading, Rust dups the fd, validates the request Node
// parsed, replays the bytes that followed it and writes the 101; Node's handle is then closed,
// which closes only its own fd (no FIN: the dup keeps the connection). Sockets without an fd
// (TLS terminated in Node) are piped to the core's internal loopback listener instead; so is
// every socket on Windows, where Node gives JS no socket handle (docs/windows.md).
//
// Before that, where Node has an fd (Unix, Node), the core looks first at each new connection
// (lib/first-look.js): a connection whose first request is an upgrade on our paths never reaches
// Node's HTTP layer; the `upgrade` event then serves upgrades that come later on a keep-alive
// connection, and the sockets the first look cannot see (TLS, Windows, Bun, Deno).
//
// DDP_TRANSPORT_NATIVE_SAME_PORT (read at attach): `fd` (or unset), the default: the first look,
// then adoption in the `upgrade` event where Node has an fd. `upgrade`: no first look (every
// upgrade goes through Node's parser and the `upgrade` event; for measuring that path: bench
// transport native-attach-upgrade). `pipe`: pipe every socket, as on Windows (bench transport
// native-attach-pipe), or to avoid fd adoption.

const net = require('net');
const tls = require('tls');
const { native } = require('./constants');
const { lookFirst, stopLooking } = require('./first-look');
const { nativeError } = require('./options');
const { requireProxyHeaders, releaseProxyHeaders, proxiedPeer } = require('./proxy-header');

const SAME_PORT_VARIABLE = 'DDP_TRANSPORT_NATIVE_SAME_PORT';

/** DDP_TRANSPORT_NATIVE_SAME_PORT: 'fd' (the default), 'upgrade' or 'pipe'. */
function samePortMode() {
  const v = process.env[SAME_PORT_VARIABLE];
  if (v === undefined || v === '' || v === 'fd') return 'fd';
  if (v === 'pipe' || v === 'upgrade') return v;
  throw new Error(`${SAME_PORT_VARIABLE} must be "fd" (the default: the core looks first at each new connection and adopts the socket's fd where Node has one), "upgrade" (adopt only in the server's upgrade event, after Node parsed the request) or "pipe" (pipe every socket to the internal listener, as on Windows), got ${JSON.stringify(v)}`);
}

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
  const mode = samePortMode();
  const pipe = mode === 'pipe';
  // Before the upgrade listener: a connection's PROXY header is read before Node parses it.
  const proxy = proxyProtocol ? requireProxyHeaders(server) : null;
  // Before both: the core's first look (its bytes are TLS records on a TLS server).
  const look = mode === 'fd' && !(server instanceof tls.Server) ? lookFirst(app, server, paths, proxyProtocol) : null;
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
    takeOver(app, req, socket, head, pipe);
  };
  server.on('upgrade', onUpgrade);
  const onClose = () => app.close();
  server.once('close', onClose);
  // server.close() closes the app at once. An adopted socket is closed in Node as soon as the core
  // has its fd, but a piped one (TLS, Windows, DDP_TRANSPORT_NATIVE_SAME_PORT=pipe) stays open in
  // Node until its client leaves, and the server's 'close' event waits for it: closing the server
  // would otherwise wait for every WebSocket client to go.
  const ownClose = Object.prototype.hasOwnProperty.call(server, 'close') ? server.close : undefined;
  const serverClose = server.close;
  const close = function close(...args) {
    app.close();
    return serverClose.apply(this, args);
  };
  server.close = close;
  return { server, onUpgrade, onClose, previous, proxy, look, close, ownClose };
}

/** Undo `attach`: the listeners that were there before get the server's upgrades (and, with
 *  proxyProtocol, its connections) back. */
function detach({ server, onUpgrade, onClose, previous, proxy, look, close, ownClose }) {
  if (look !== null) stopLooking(look);
  server.removeListener('upgrade', onUpgrade);
  server.removeListener('close', onClose);
  if (server.close === close) {
    if (ownClose === undefined) delete server.close;
    else server.close = ownClose;
  }
  for (const l of previous) server.on('upgrade', l);
  if (proxy !== null) releaseProxyHeaders(proxy);
}

function takeOver(app, req, socket, head, pipe) {
  const handle = socket._handle;
  // Node on Windows has no handle.fd (undefined): the pipe, as for TLS.
  const fd = !pipe && handle && !socket.encrypted && typeof handle.fd === 'number' ? handle.fd : -1;
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
