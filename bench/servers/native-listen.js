'use strict';
// ddp-transport-native's own listener: App().ws('/*') with a thin Meteor-contract shim to
// the DDP server (the uWS-shaped API used directly, no Meteor adapter).
// BENCH_ADMISSION=0: admission control off (the storm workload's "without" column).
const { loadDdp, ShimSocket, serveNative } = require('./common');

const ddp = loadDdp();
const SOCK = Symbol('sock');

serveNative({
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
