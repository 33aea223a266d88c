'use strict';
// A uWS.js server with an authenticated, asynchronous upgrade: the token (query "token") is
// checked later (as a database lookup would be); the headers are read before, since req is only
// valid during the handler; res.onAborted marks a client that left meanwhile. Runs on uWS.js.

const USERS = { t1: 'ada', t2: 'linus' };

function lookup(token) {
  return new Promise((resolve) => setTimeout(() => resolve(USERS[token]), 20));
}

function start(uws, port, onListen) {
  let token = null;
  const app = uws.App().ws('/*', {
    upgrade: (res, req, context) => {
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      const tok = req.getQuery('token');
      const path = req.getUrl();
      res.onAborted(() => {
        res.aborted = true;
      });
      lookup(tok).then((user) => {
        if (res.aborted) return;
        res.cork(() => {
          if (user === undefined) res.writeStatus('401 Unauthorized').end('bad token');
          else res.upgrade({ user, path }, key, protocol, extensions, context);
        });
      });
    },
    open: (ws) => {
      const { user, path } = ws.getUserData();
      ws.send(`welcome ${user} on ${path}`);
    },
    message: (ws, message, isBinary) => {
      const text = Buffer.from(message).toString();
      if (text === 'bye') ws.end(4001, `bye ${ws.getUserData().user}`);
      else ws.send(isBinary ? message : `${ws.getUserData().user} said ${text}`, isBinary);
    },
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
