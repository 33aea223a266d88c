'use strict';
// A uWS.js echo server that respects backpressure: while the socket's buffered amount is over
// LIMIT, echoes wait in a per-socket queue and go out on `drain`. Runs unchanged on
// require('uws-pack') (uWebSockets.js) and require('ddp-transport-native/uws').

const LIMIT = 256 * 1024;

function flush(ws) {
  const q = ws.getUserData().pending;
  while (q.length > 0 && ws.getBufferedAmount() < LIMIT) {
    const [msg, isBinary] = q.shift();
    ws.send(msg, isBinary);
  }
}

function start(uws, port, onListen) {
  let token = null;
  const app = uws.App().ws('/echo', {
    maxPayloadLength: 1024 * 1024,
    maxBackpressure: 4 * 1024 * 1024,
    idleTimeout: 60,
    open: (ws) => {
      ws.getUserData().pending = [];
    },
    message: (ws, message, isBinary) => {
      const q = ws.getUserData().pending;
      // The ArrayBuffer is only valid during this call: copy it before queueing.
      if (q.length > 0 || ws.getBufferedAmount() >= LIMIT) q.push([message.slice(0), isBinary]);
      else ws.send(message, isBinary);
      if (Buffer.from(message, 0, 4).toString() === 'quit') ws.end(1000, 'done');
    },
    drain: (ws) => flush(ws),
    close: () => {},
  });
  app.listen('127.0.0.1', port, (listenSocket) => {
    token = listenSocket;
    onListen(listenSocket ? uws.us_socket_local_port(listenSocket) : -1);
  });
  return {
    close() {
      if (token) uws.us_listen_socket_close(token);
      app.close();
    },
  };
}

module.exports = { start };
