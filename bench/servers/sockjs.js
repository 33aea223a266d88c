'use strict';
// sockjs 0.3.24 as Meteor's `sockjs` transport runs it: faye-websocket under the raw endpoint
// `/sockjs/websocket`, permessage-deflate2 with Meteor's defaults offered (a client that does not ask
// for it — the Rust load generator — gets plain frames), and `/websocket` rewritten to the raw
// endpoint by a listener that runs before sockjs's own.
const http = require('node:http');
const sockjs = require('sockjs');
const deflate = require('permessage-deflate2');
const { METEOR_DEFLATE, portArg, ready, exitRules, loadDdp } = require('./common');

const ddp = loadDdp();
const server = http.createServer();
const PREFIX = '/sockjs';

const sjs = sockjs.createServer({
  prefix: PREFIX,
  log() {},
  heartbeat_delay: 45000,
  disconnect_delay: 60 * 1000,
  jsessionid: false,
  faye_server_options: { extensions: [deflate.configure({ ...METEOR_DEFLATE })] },
});
sjs.installHandlers(server);

// Rewrite /websocket and /websocket/ (query kept) to sockjs's raw websocket endpoint.
for (const event of ['request', 'upgrade']) {
  server.prependListener(event, (req) => {
    try {
      const u = new URL(req.url, 'http://localhost');
      if (u.pathname === '/websocket' || u.pathname === '/websocket/') req.url = PREFIX + '/websocket' + u.search;
    } catch (e) { /* malformed URL: leave it alone */ }
  });
}

sjs.on('connection', (socket) => {
  // What Meteor's stream_server adds to a sockjs connection.
  socket.send = (data) => socket.write(data);
  socket.setWebsocketTimeout = (ms) => {
    try {
      if ((socket.protocol === 'websocket' || socket.protocol === 'websocket-raw') && socket._session.recv) {
        socket._session.recv.connection.setTimeout(ms);
      }
    } catch (e) { /* not a websocket session */ }
  };
  ddp.handle(socket);
});

exitRules(() => server.close());
server.listen(portArg(), '127.0.0.1', () => ready(server.address().port));
