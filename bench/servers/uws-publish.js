'use strict';
// uWebSockets.js direct (as uws-direct.js), but the DDP server's `publish` goes out through uWS's
// own pub/sub: every `fanout` subscriber's socket subscribes to the topic `fanout` and one
// `app.publish('fanout', frame, false, compress)` delivers the `added` frame (uWS compresses it once
// for all subscribers with SHARED_COMPRESSOR). Meteor cannot use this (its mergebox sends per
// session); it is the lower bound for a fan-out of identical messages.
const { COMPRESS, portArg, ready, exitRules, loadDdp } = require('./common');
const { createUwsApp, listen } = require('./uws-app');

exitRules();
(async () => {
  const ddp = loadDdp();
  const { uws, app } = await createUwsApp(ddp);
  ddp.publish = function publish(doc) {
    const frame = JSON.stringify({ msg: 'added', collection: 'fanout', id: String(++this.fanoutSeq), fields: doc });
    let n = 0;
    for (const session of this.fanout) {
      if (session.isClosed) continue;
      if (!session.uwsTopic) {
        session.socket.uws.subscribe('fanout');
        session.uwsTopic = true;
      }
      n++;
    }
    app.publish('fanout', frame, false, COMPRESS);
    return n;
  };
  ready(await listen(uws, app, '127.0.0.1', portArg()));
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
