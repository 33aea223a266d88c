'use strict';
// One instance of the demo app (http.Server + the Meteor adapter + the demo's DDP session) for the
// nginx scale-out test: settings {drainOnSigterm: true} as packages['ddp-server'].native would
// give them, and a `whoami` method returning $INSTANCE. Prints `READY <port>`. It installs no
// SIGTERM handler of its own: the adapter drains on SIGTERM, then re-raises it and the process ends.

const { start } = require('../../demo/server');

const name = process.env.INSTANCE || String(process.pid);
start({
  port: 0,
  host: '127.0.0.1',
  settings: { drainOnSigterm: true },
  methods: { whoami: () => name },
}).then((demo) => {
  console.log(`READY ${demo.port}`);
}, (err) => {
  console.log(`ERROR ${err && err.message}`);
  process.exit(1);
});
// Never outlive the test that started us.
setTimeout(() => { console.log('ERROR lifetime exceeded'); process.exit(4); }, 90000).unref();
