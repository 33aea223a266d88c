'use strict';
// ddp-transport-native's own listener wired exactly as uws-raw wires uWebSockets.js: its handlers
// call the DDP session directly (`ddp.open(send, close)`, `session.receive(str)`,
// `session.closed()`), no Meteor-contract shim, no EventEmitter in between. The like-for-like row
// for uws-raw (native-listen keeps the shim, like uws-direct).
const { COMPRESS, METEOR_DEFLATE, MAX_PAYLOAD, portArg, pkgArg, ready, exitRules, loadDdp } = require('./common');

const { App } = require(pkgArg());
const ddp = loadDdp();
const SESSION = Symbol('session');

const app = App({ threads: 1 });
app.ws('/*', {
  compression: COMPRESS ? { ...METEOR_DEFLATE } : false,
  maxPayloadLength: MAX_PAYLOAD,
  idleTimeout: 0,
  sendPingsAutomatically: false,
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

exitRules(() => app.close());
app.listen('127.0.0.1', portArg(), (token, error) => {
  if (!token) { console.error(`listen failed: ${error && error.message}`); process.exit(1); }
  ready(token.port);
});
