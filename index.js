'use strict';
// Public API of ddp-transport-native: a uWebSockets.js-shaped App over the Rust core.
//   lib/app.js        App: routes, listen, attach, dispatch of event batches, drain, stats, close
//   lib/websocket.js  the WebSocket handed to handlers
//   lib/attach.js     same-port takeover of upgrades from Node's http/https server
//   lib/options.js    option validation (errors name the key and the valid values)
//   lib/constants.js  constants defined in Rust, read from the addon

const { TemplatedApp } = require('./lib/app');
const { SendStatus } = require('./lib/constants');
const { compressionOptions, admissionOptions } = require('./lib/options');
const { CONTENT_TYPE } = require('./lib/metrics');

function App(options) {
  return new TemplatedApp(options);
}

module.exports = {
  App,
  SendStatus,
  /** Validate permessage-deflate options (as for `behavior.compression`); errors name `where`
   *  and the key. Returns the normalised options, or null when compression is off. */
  compressionOptions,
  /** Validate admission-control options (as for `App({ admission })`); errors name `where` and
   *  the key. Returns the limits, or null when admission control is off. */
  admissionOptions,
  /** The Content-Type to serve `app.metrics()` with (Prometheus text format 0.0.4). */
  metricsContentType: CONTENT_TYPE,
};
