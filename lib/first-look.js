'use strict';
// The first look at each connection an attached server accepts (Unix, Node): before Node's HTTP
// layer has it (before Node even makes a net.Socket of it) the core peeks at its first bytes
// (crates/native-ws/src/peek.rs). A WebSocket upgrade on the app's paths is the core's: it reads
// and answers the request itself and Node's handle is closed (the core holds a dup of its fd), so
// Node never parses the request nor builds a socket, a request object or an `upgrade` event for
// it. Every other connection goes to Node's own connection handling with every byte unread.
// Upgrades that come later on a keep-alive connection still arrive through the `upgrade` event
// (lib/attach.js).
//
// Node internals this relies on (present in Node 18.17 through 26):
// - `server._handle.onconnection(err, clientHandle)`: net.Server's callback for each accepted
//   connection (lib/net.js), set on the listening handle by listen(); a node:cluster worker's
//   server gets the same call from the cluster module, on the handle its listen() made.
// - `clientHandle.fd`: the accepted TCP or pipe handle's fd (-1 on Windows: no first look).
// - `clientHandle.close()`: closes Node's fd, nothing else (the handle was never read).
// - Node reads nothing from the handle before it makes a net.Socket of it: until then the core may
//   watch the fd for readability in its own epoll (the inline mode) without Node's loop seeing it.

/** On a listening handle: the state whose wrapper replaced its onconnection. */
const WRAPPED = Symbol('ddp-transport-native.firstLook');
/** On an accepted handle the core looked at: when the look began (performance.now()). */
const LOOKED_SINCE = Symbol('ddp-transport-native.lookedSince');

/** When the core began to look at the connection of `socket` (performance.now()), or undefined:
 *  the PROXY header reader counts that time as part of its handshake timeout. */
function lookedSince(socket) {
  const handle = socket._handle;
  return handle == null ? undefined : handle[LOOKED_SINCE];
}

/** lookNow's answers: not decided yet, ours, Node's. */
const WAIT = 0;
const MINE = 1;

/** Whether `clientHandle` has an fd the core can take. */
function hasFd(clientHandle) {
  return clientHandle != null && typeof clientHandle.fd === 'number' && clientHandle.fd >= 0;
}

/** Wrap the onconnection of `state.server`'s listening handle (when it has one, once). */
function wrap(state) {
  const handle = state.server._handle;
  if (handle == null || typeof handle.onconnection !== 'function' || handle[WRAPPED] !== undefined) return;
  const original = handle.onconnection;
  const { app, claim } = state;
  handle.onconnection = function onconnection(err, clientHandle) {
    if (err || app._closed || !hasFd(clientHandle)) return original.call(this, err, clientHandle);
    // What has arrived by now usually decides: anything but our upgrade goes to Node at once.
    const now = app._native.lookNow(clientHandle.fd, claim);
    if (now === MINE) {
      try {
        app._native.take(clientHandle.fd, claim);
      } catch {
        // Only dup() can fail (EMFILE): Node's own handling then has the connection.
        return original.call(this, err, clientHandle);
      }
      clientHandle.close();
      return undefined;
    }
    if (now !== WAIT) return original.call(this, err, clientHandle);
    // Not decided yet: the core waits for the first bytes (on this thread in the inline mode).
    const token = app._nextExamine++;
    try {
      app._native.examine(clientHandle.fd, claim, token);
    } catch {
      // Only dup() can fail (EMFILE): Node's own handling then has the connection.
      return original.call(this, err, clientHandle);
    }
    const listening = this;
    clientHandle[LOOKED_SINCE] = performance.now();
    app._examining.set(token, (outcome) => {
      if (outcome === 'returned') original.call(listening, 0, clientHandle);
      else clientHandle.close(); // 'claimed' (the core has it), or 'closed' (the app closed)
    });
    return undefined;
  };
  handle[WRAPPED] = { state, original };
  state.handles.push(handle);
}

/**
 * Look first at every connection `server` accepts from now on (and after each listen()), for
 * upgrades on `paths`; returns the record `stopLooking` needs. A server without a listening
 * handle of Node's (Bun, Deno) is never wrapped: its upgrades keep the `upgrade` event.
 */
function lookFirst(app, server, paths, proxyProtocol) {
  const state = { app, server, claim: app._native.claim(paths, proxyProtocol), handles: [], onListening: null };
  state.onListening = () => wrap(state);
  server.on('listening', state.onListening);
  wrap(state);
  return state;
}

/** Undo `lookFirst`: Node's onconnection is back on every handle still wrapped. Connections
 *  being examined finish their examination (the app answers them or gives them back). */
function stopLooking(state) {
  state.server.removeListener('listening', state.onListening);
  for (const handle of state.handles) {
    const w = handle[WRAPPED];
    if (w !== undefined && w.state === state) {
      handle.onconnection = w.original;
      delete handle[WRAPPED];
    }
  }
  state.handles.length = 0;
}

module.exports = { lookFirst, stopLooking, lookedSince };
