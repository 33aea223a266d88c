'use strict';
// The uWebSockets.js (uws-pack 20.0.8) app both uWS servers run: App().ws('/*') with the DDP server
// behind a Meteor-contract shim. Settings follow Meteor's uws transport (maxBackpressure 16 MiB,
// idleTimeout 45 s) except maxPayloadLength, which is 16 MiB here as for every other server.
// Compression: off; BENCH_COMPRESS=1 → SHARED_COMPRESSOR | SHARED_DECOMPRESSOR (uWS has no
// threshold, level or window settings, so this is the closest it gets to Meteor's defaults).
// With `--native`, the same program runs on ddp-transport-native's uWS.js compat surface
// (require('ddp-transport-native/uws')) instead: the same code, the other implementation
// (`--pkg DIR`: that checkout's, for a before/after run).
const path = require('node:path');
const { COMPRESS, MAX_PAYLOAD, ShimSocket, pkgArg } = require('./common');

/** uws-pack, or ddp-transport-native's compat surface with `--native`. */
async function uwsModule() {
  return process.argv.includes('--native') ? require(path.join(pkgArg(), 'lib', 'uws')) : import('uws-pack');
}

/** The ws behaviour settings every uWS server here uses (handlers not included). */
function wsSettings(uws) {
  return {
    compression: COMPRESS ? (uws.SHARED_COMPRESSOR | uws.SHARED_DECOMPRESSOR) : uws.DISABLED,
    maxPayloadLength: MAX_PAYLOAD,
    maxBackpressure: 16 * 1024 * 1024,
    idleTimeout: 45,
  };
}

async function createUwsApp(ddp) {
  const uws = await uwsModule();
  const app = uws.App();
  app.ws('/*', {
    ...wsSettings(uws),
    open(ws) {
      const sock = new ShimSocket((str) => ws.send(str, false, COMPRESS), () => ws.end(1000));
      sock.uws = ws; // for uws-publish.js (topics)
      ws.sock = sock;
      ddp.handle(sock);
    },
    message(ws, ab, isBinary) {
      if (!isBinary) ws.sock.emit('data', Buffer.from(ab).toString('utf8'));
    },
    close(ws) {
      ws.sock._closed();
    },
  });
  return { uws, app };
}

/** Listen on host:port (0 = any); resolves the bound port. */
function listen(uws, app, host, port) {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (token) => {
      if (!token) reject(new Error(`uWS could not listen on ${host}:${port}`));
      else resolve(uws.us_socket_local_port(token));
    });
  });
}

module.exports = { uwsModule, wsSettings, createUwsApp, listen };
