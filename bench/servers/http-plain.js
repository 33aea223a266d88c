'use strict';
// A Node http.Server answering every request with a small 200, for bench/http.js: with `--attach`
// the Meteor adapter is attached to it (as in a Meteor app with transport `native`: the core then
// looks first at each new connection); without, the same server alone. Extra argument `--upgrade`:
// attached with DDP_TRANSPORT_NATIVE_SAME_PORT=upgrade (no first look).
const http = require('node:http');
const path = require('node:path');
const { portArg, pkgArg, ready, exitRules } = require('./common');

const BODY = 'ok\n';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': BODY.length });
  res.end(BODY);
});
if (process.argv.includes('--attach')) {
  if (process.argv.includes('--upgrade')) process.env.DDP_TRANSPORT_NATIVE_SAME_PORT = 'upgrade';
  const { createNativeTransport } = require(path.join(pkgArg(), 'meteor'));
  createNativeTransport().setup(server, '', { websocketExtensions: () => [] });
}
exitRules(() => server.close());
server.listen(portArg(), '127.0.0.1', () => ready(server.address().port));
