'use strict';
// `ws` on a Node http.Server at /websocket. perMessageDeflate is off, as a Meteor ws transport with
// compression disabled would run it; BENCH_COMPRESS=1 turns it on with Meteor's defaults in ws's
// option names.
const http = require('node:http');
const { WebSocketServer } = require('ws');
const { COMPRESS, MAX_PAYLOAD, METEOR_DEFLATE, portArg, ready, exitRules, loadDdp, isWebsocketPath, ShimSocket } = require('./common');

const ddp = loadDdp();
const server = http.createServer();

const perMessageDeflate = COMPRESS ? {
  threshold: METEOR_DEFLATE.threshold,
  zlibDeflateOptions: { level: METEOR_DEFLATE.level, memLevel: METEOR_DEFLATE.memLevel },
  serverNoContextTakeover: METEOR_DEFLATE.noContextTakeover,
  serverMaxWindowBits: METEOR_DEFLATE.maxWindowBits,
} : false;

const wss = new WebSocketServer({ noServer: true, perMessageDeflate, maxPayload: MAX_PAYLOAD });
server.on('upgrade', (req, socket, head) => {
  if (!isWebsocketPath(req.url)) { socket.destroy(); return; }
  wss.handleUpgrade(req, socket, head, (ws) => {
    const sock = new ShimSocket((str) => ws.send(str), () => ws.close());
    ws.on('message', (data, isBinary) => { if (!isBinary) sock.emit('data', data.toString()); });
    ws.on('close', () => sock._closed());
    ws.on('error', () => sock._closed());
    ddp.handle(sock);
  });
});

exitRules(() => server.close());
server.listen(portArg(), '127.0.0.1', () => ready(server.address().port));
