'use strict';
// ddp-transport-native's own listener: App({threads:1}).ws('/*') with a thin Meteor-contract shim to
// the DDP server (the uWS-shaped API used directly, no Meteor adapter).
const { COMPRESS, MAX_PAYLOAD, METEOR_DEFLATE, portArg, pkgArg, ready, exitRules, loadDdp, ShimSocket } = require('./common');

const { App } = require(pkgArg());
const ddp = loadDdp();
const SOCK = Symbol('sock');

// BENCH_ADMISSION=0: admission control off (the storm workload's "without" column)
const app = App(process.env.BENCH_ADMISSION === '0' ? { threads: 1, admission: false } : { threads: 1 });
app.ws('/*', {
  compression: COMPRESS ? { ...METEOR_DEFLATE } : false,
  maxPayloadLength: MAX_PAYLOAD,
  idleTimeout: 0,
  sendPingsAutomatically: false,
  open(ws) {
    const sock = new ShimSocket((str) => ws.send(str), () => ws.end(1000));
    ws.getUserData()[SOCK] = sock;
    ddp.handle(sock);
  },
  message(ws, data, isBinary) {
    if (!isBinary) ws.getUserData()[SOCK].emit('data', data);
  },
  close(ws) {
    const sock = ws.getUserData()[SOCK];
    if (sock) sock._closed();
  },
});

exitRules(() => app.close());
app.listen('127.0.0.1', portArg(), (token, error) => {
  if (!token) { console.error(`listen failed: ${error && error.message}`); process.exit(1); }
  ready(token.port);
});
