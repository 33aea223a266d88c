'use strict';
// uWebSockets.js (uws-pack) listening on the benchmark port, its handlers calling the DDP session
// directly: no Meteor-contract shim, no EventEmitter in between (`ddp.open(send, close)`,
// `session.receive(str)`, `session.closed()`). The same uWS settings as uws-direct/uws-proxied
// (bench/servers/uws-app.js); what uWS.js costs without Meteor's socket layer.
const { COMPRESS, portArg, ready, exitRules, loadDdp } = require('./common');
const { uwsModule, wsSettings, listen } = require('./uws-app');

exitRules();
(async () => {
  const uws = await uwsModule();
  const ddp = loadDdp();
  const app = uws.App();
  app.ws('/*', {
    ...wsSettings(uws),
    open(ws) {
      ws.session = ddp.open((str) => ws.send(str, false, COMPRESS), () => ws.end(1000));
    },
    message(ws, ab, isBinary) {
      if (!isBinary) ws.session.receive(Buffer.from(ab).toString());
    },
    close(ws) {
      ws.session.closed();
    },
  });
  ready(await listen(uws, app, '127.0.0.1', portArg()));
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
