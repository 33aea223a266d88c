'use strict';
// uWebSockets.js (uws-pack) listening directly on the benchmark port: the best case for uWS.
const { portArg, ready, exitRules, loadDdp } = require('./common');
const { createUwsApp, listen } = require('./uws-app');

exitRules();
(async () => {
  const { uws, app } = await createUwsApp(loadDdp());
  ready(await listen(uws, app, '127.0.0.1', portArg()));
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
