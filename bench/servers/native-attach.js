'use strict';
// ddp-transport-native through its Meteor adapter (meteor/index.js), attached to a Node http.Server on the
// app's own port — exactly what a Meteor 3.5 app with transport `native` runs. Compression follows
// Meteor: SERVER_WEBSOCKET_COMPRESSION unset + permessage-deflate2 extensions when BENCH_COMPRESS=1,
// otherwise `false` and no extensions.
const http = require('node:http');
const path = require('node:path');
const { COMPRESS, METEOR_DEFLATE, portArg, pkgArg, ready, exitRules, loadDdp } = require('./common');

if (COMPRESS) delete process.env.SERVER_WEBSOCKET_COMPRESSION;
else process.env.SERVER_WEBSOCKET_COMPRESSION = 'false';

const { createNativeTransport } = require(path.join(pkgArg(), 'meteor'));
const ddp = loadDdp();
const server = http.createServer((req, res) => {
  res.writeHead(404, { 'Content-Type': 'text/plain' });
  res.end('not found');
});

const websocketExtensions = COMPRESS
  ? () => [require('permessage-deflate2').configure({ ...METEOR_DEFLATE })]
  : () => [];
// BENCH_ADMISSION=0: admission control off (the storm workload's "without" column); a JSON
// object: those admission limits
const ADM = process.env.BENCH_ADMISSION;
const settings = ADM === '0' ? { admission: false } : ADM && ADM.startsWith('{') ? { admission: JSON.parse(ADM) } : {};
const events = createNativeTransport({ settings }).setup(server, '', { websocketExtensions });
events.on('connection', (socket) => ddp.handle(socket));

exitRules(() => server.close());
server.listen(portArg(), '127.0.0.1', () => ready(server.address().port));
