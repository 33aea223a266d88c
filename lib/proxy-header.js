'use strict';
// The PROXY protocol (v1, v2) on an attached server (App option proxyProtocol): every connection
// the server accepts must open with a PROXY header, which is read here, before Node's HTTP parser
// sees the connection. The server's 'connection' listeners are replaced by one that reads the
// header (parsed by the core's rule, native.parseProxyHeader: same parser, same caps as the own
// listener), gives the socket the client it names as its remoteAddress/remotePort/remoteFamily,
// puts the bytes after the header back (socket.unshift) and then hands the socket to the
// listeners that were there before (Node's HTTP connection handling). A connection without a
// valid header within the handshake timeout is destroyed unanswered, as on the own listener.

const net = require('net');
const { native, HANDSHAKE_TIMEOUT_MS } = require('./constants');
const { lookedSince } = require('./first-look');

/** On a socket: the client its PROXY header named ({ address, port }), for attach's adopt. */
const PROXIED = Symbol('ddp-transport-native.proxied');
/** On a server: the record of its connection wrapper, shared by the apps attached to it. */
const READER = Symbol('ddp-transport-native.proxyHeaderReader');

/** The client `socket`'s PROXY header named, or undefined (no header read, or it named none). */
function proxiedPeer(socket) {
  return socket[PROXIED];
}

function setPeer(socket, address, port) {
  const value = (v) => ({ value: v, configurable: true, enumerable: true });
  Object.defineProperties(socket, {
    remoteAddress: value(address),
    remotePort: value(port),
    remoteFamily: value(net.isIPv6(address) ? 'IPv6' : 'IPv4'),
  });
  socket[PROXIED] = { address, port };
}

/** Read the header opening `socket`, then call `next(socket)`; destroy it instead when the
 *  header is invalid, the peer leaves or the handshake timeout passes first. */
function readHeader(socket, next) {
  let buf = null;
  // The time the core's first look at the connection took (lib/first-look.js) is part of it.
  const since = lookedSince(socket);
  const left = since === undefined ? HANDSHAKE_TIMEOUT_MS : Math.max(0, HANDSHAKE_TIMEOUT_MS - (performance.now() - since));
  const timer = setTimeout(() => socket.destroy(), left);
  const stop = () => {
    clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('error', onError);
    socket.removeListener('end', onError);
    socket.removeListener('close', stop);
  };
  // An error before Node's HTTP layer has the socket (ECONNRESET), or the peer's end (FIN)
  // before a whole header: only this connection ends.
  function onError() {
    stop();
    socket.destroy();
  }
  function onData(chunk) {
    buf = buf === null ? chunk : Buffer.concat([buf, chunk]);
    const header = native.parseProxyHeader(buf);
    if (header === null) return; // a valid header may still follow
    stop();
    if (header.error != null) {
      socket.destroy();
      return;
    }
    // Stop the flow of data events (nobody listens until `next` does), put the request's first
    // bytes back, let Node's listeners set the socket up, then let the buffered bytes flow to
    // them (on the next tick, before any later read of the socket reaches Node's parser).
    socket.pause();
    if (header.address != null) setPeer(socket, header.address, header.port);
    if (buf.length > header.length) socket.unshift(buf.subarray(header.length));
    next(socket);
    if (!socket.destroyed) socket.resume();
  }
  socket.on('data', onData);
  socket.on('error', onError);
  socket.on('end', onError);
  socket.on('close', stop);
}

/**
 * Make `server` require a PROXY header on every connection it accepts from now on. Apps
 * attached to the same server share one reader; returns the record `releaseProxyHeaders` needs.
 */
function requireProxyHeaders(server) {
  let record = server[READER];
  if (record === undefined) {
    const previous = server.listeners('connection').slice();
    server.removeAllListeners('connection');
    const onConnection = (socket) => {
      readHeader(socket, (s) => {
        for (const l of previous) l.call(server, s);
      });
    };
    server.on('connection', onConnection);
    record = { server, onConnection, previous, users: 0 };
    server[READER] = record;
  }
  record.users++;
  return record;
}

/** One app less needs the reader; the last one gives the server its listeners back. */
function releaseProxyHeaders(record) {
  if (--record.users > 0) return;
  const { server, onConnection, previous } = record;
  server.removeListener('connection', onConnection);
  for (const l of previous) server.on('connection', l);
  delete server[READER];
}

module.exports = { requireProxyHeaders, releaseProxyHeaders, proxiedPeer };
