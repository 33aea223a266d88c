'use strict';
// The floor of any WebSocket server attached to a Node http.Server (the `burst` workload only):
// Node accepts, parses the request and emits 'upgrade'; this handler writes the 101 and answers
// the client's first frame (its DDP `connect`) with one unmasked `connected` frame, written by
// hand, then keeps the socket. No WebSocket library, no DDP session: what is left is Node's own
// per-connection work (net.Socket, HTTP parser, upgrade event), which every transport attached to
// the app's http.Server pays before it sees the socket.
const crypto = require('node:crypto');
const http = require('node:http');
const { portArg, ready, exitRules, isWebsocketPath } = require('./common');

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'; // RFC 6455, section 1.3
let sessions = 0;

/** One unmasked text frame (payload < 126 bytes). */
function textFrame(str) {
  const payload = Buffer.from(str);
  return Buffer.concat([Buffer.from([0x81, payload.length]), payload]);
}

const server = http.createServer();
server.on('upgrade', (req, socket) => {
  const key = req.headers['sec-websocket-key'];
  if (!isWebsocketPath(req.url) || typeof key !== 'string') { socket.destroy(); return; }
  const accept = crypto.createHash('sha1').update(key + GUID).digest('base64');
  socket.setNoDelay(true);
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  // The first frame is the DDP connect: answer it, ignore the rest (the burst closes after it).
  socket.once('data', () => socket.write(textFrame(`{"msg":"connected","session":"s${++sessions}"}`)));
  socket.on('error', () => socket.destroy());
});

exitRules(() => server.close());
server.listen(portArg(), '127.0.0.1', () => ready(server.address().port));
