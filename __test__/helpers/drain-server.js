'use strict';
// An http.Server with the native transport and `drainOnSigterm: true`, for the SIGTERM drain test.
// Prints `READY <port>`; no SIGTERM listener of its own (the adapter's drain re-raises SIGTERM).

const http = require('node:http');
const { createNativeTransport } = require('../../meteor');
const { DdpServer } = require('../../demo/ddp-session');

const server = http.createServer((req, res) => res.end('app'));
const ddp = new DdpServer();
createNativeTransport({ settings: { drainOnSigterm: true } })
  .setup(server, '', { websocketExtensions: () => [] })
  .on('connection', (socket) => ddp.handle(socket));
server.listen(0, '127.0.0.1', () => console.log(`READY ${server.address().port}`));
setTimeout(() => { console.log('ERROR lifetime exceeded'); process.exit(4); }, 60000).unref();
