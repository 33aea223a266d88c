'use strict';
// `npm start`: one http.Server serving the demo page at / and DDP over the `native` transport on
// the same port (/websocket), with the shared DDP session module.
//
//   PORT=3000 HOST=127.0.0.1 node demo/server.js
//   require('./demo/server').start({ port: 0 }) → Promise<{ server, port, ddp, close() }>

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { createNativeTransport } = require('../meteor');
const { DdpServer } = require('./ddp-session');

const STATIC = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/index.html': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/client.js': { file: 'client.js', type: 'text/javascript; charset=utf-8' },
};

function serveStatic(req, res) {
  const q = req.url.indexOf('?');
  const entry = STATIC[q === -1 ? req.url : req.url.slice(0, q)];
  if (!entry || (req.method !== 'GET' && req.method !== 'HEAD')) {
    res.writeHead(entry ? 405 : 404, { 'Content-Type': 'text/plain' });
    res.end(entry ? 'Method not allowed' : 'Not found');
    return;
  }
  fs.readFile(path.join(__dirname, entry.file), (err, body) => {
    if (err) {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end('Internal server error');
      return;
    }
    res.writeHead(200, { 'Content-Type': entry.type, 'Content-Length': body.length, 'Cache-Control': 'no-cache' });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
}

/**
 * Start the demo.
 * @param {{ port?: number, host?: string, methods?: object, settings?: object, logger?: object }} [options]
 * @returns {Promise<{ server: http.Server, port: number, host: string, ddp: DdpServer, transport: EventEmitter, close(): Promise<void> }>}
 */
function start(options = {}) {
  const port = options.port === undefined ? Number(process.env.PORT || 3000) : Number(options.port);
  const host = options.host || process.env.HOST || '127.0.0.1';
  const server = http.createServer(serveStatic);
  const ddp = new DdpServer({ methods: options.methods });
  // Compression follows SERVER_WEBSOCKET_COMPRESSION, on by default as in Meteor.
  const transport = createNativeTransport({ settings: options.settings, logger: options.logger })
    .setup(server, '', {});
  transport.on('connection', (socket) => ddp.handle(socket));

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.removeListener('error', reject);
      const actual = server.address().port;
      let closing = null;
      // Graceful: end the WebSockets (queued frames first, then a 1001 close), then the http.Server.
      const close = () => {
        if (!closing) {
          const app = transport._app;
          const drained = Promise.race([
            Promise.resolve().then(() => app.drain({ batch: 1000, intervalMs: 1 })).catch(() => {}),
            new Promise((r) => setTimeout(r, 2000).unref()),
          ]);
          closing = drained.then(() => new Promise((done) => {
            try { app.close(); } catch (e) { /* already closed */ }
            server.close(() => done());
            if (typeof server.closeAllConnections === 'function') server.closeAllConnections();
          }));
        }
        return closing;
      };
      resolve({ server, port: actual, host, ddp, transport, close });
    });
  });
}

if (require.main === module) {
  start().then((demo) => {
    const shownHost = demo.host.includes(':') ? `[${demo.host}]` : demo.host;
    console.log(`demo listening on http://${shownHost}:${demo.port}`);
    let stopping = false;
    const stop = (signal) => {
      if (stopping) return;
      stopping = true;
      console.log(`demo: ${signal}, shutting down`);
      const force = setTimeout(() => process.exit(1), 5000);
      force.unref();
      demo.close().then(() => process.exit(0));
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  }, (err) => {
    console.error(`demo: cannot start: ${err && err.message}`);
    process.exit(1);
  });
}

module.exports = { start };
