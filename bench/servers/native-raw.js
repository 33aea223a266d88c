'use strict';
// ddp-transport-native's own listener wired exactly as uws-raw wires uWebSockets.js: its handlers
// call the DDP session directly (`ddp.open(send, close)`, `session.receive(str)`,
// `session.closed()`), no Meteor-contract shim, no EventEmitter in between. The like-for-like row
// for uws-raw (native-listen keeps the shim, like uws-direct).
const { loadDdp, serveNative } = require('./common');

const ddp = loadDdp();
const SESSION = Symbol('session');

serveNative({
  open(ws) {
    ws.getUserData()[SESSION] = ddp.open((str) => ws.send(str), () => ws.end(1000));
  },
  message(ws, data, isBinary) {
    if (!isBinary) ws.getUserData()[SESSION].receive(data);
  },
  close(ws) {
    const session = ws.getUserData()[SESSION];
    if (session) session.closed();
  },
});
