'use strict';
// A uWS.js chat: rooms are topics ("/chat/:room?name=…"). Joins and leaves go to the whole room
// (app.publish); a line goes to the others (ws.publish) and the sender gets "ok <n>". Commands:
// "/who" (room size), "/mute" (unsubscribe), "/quit" (close 4000). Runs unchanged on uWS.js.

function start(uws, port, onListen) {
  let token = null;
  const app = uws.App();
  app.ws('/chat/:room', {
    compression: uws.SHARED_COMPRESSOR,
    maxPayloadLength: 16 * 1024,
    idleTimeout: 30,
    upgrade: (res, req, context) => {
      const name = req.getQuery('name');
      if (!name) {
        res.writeStatus('400 Bad Request').end('name required');
        return;
      }
      res.upgrade(
        { name, room: req.getParameter(0), sent: 0 },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      const u = ws.getUserData();
      ws.subscribe(`room/${u.room}`);
      app.publish(`room/${u.room}`, `* ${u.name} joined ${u.room}`);
    },
    message: (ws, message) => {
      const u = ws.getUserData();
      const line = Buffer.from(message).toString();
      const topic = `room/${u.room}`;
      if (line === '/who') ws.send(`${app.numSubscribers(topic)} here`);
      else if (line === '/mute') ws.send(`muted ${ws.unsubscribe(topic)} ${ws.isSubscribed(topic)}`);
      else if (line === '/quit') ws.end(4000, 'bye');
      else {
        ws.publish(topic, `${u.name}: ${line}`);
        ws.send(`ok ${++u.sent}`);
      }
    },
    close: (ws) => {
      const u = ws.getUserData();
      app.publish(`room/${u.room}`, `* ${u.name} left`);
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
