'use strict';
// uWebSockets.js-compatible surface (the WebSocket part): require('ddp-transport-native/uws').
//   app.js        App/SSLApp: routes with uWS matching, listen forms, publish, close
//   websocket.js  the WebSocket with uWS's methods and defaults
//   http.js       res/req of the upgrade handler
//   topics.js     pub/sub (one native call per publish, message encoded once)
// Differences from uWS.js are listed in docs/uws-compat.md.

const fs = require('fs');
const https = require('https');
const { UApp, ListenSocket } = require('./app');
const O = require('../options');

function App(options) {
  return new UApp(options);
}

/** TLS terminated by Node (https.Server) with the WebSocket traffic handed to the core. */
class USSLApp extends UApp {
  constructor(options) {
    const o = options || {};
    const { key_file_name: key, cert_file_name: cert, passphrase, ...rest } = o;
    if (typeof key !== 'string' || typeof cert !== 'string') {
      throw new TypeError('SSLApp: key_file_name and cert_file_name must be paths of PEM files');
    }
    for (const k of ['ca_file_name', 'dh_params_file_name', 'ssl_prefer_low_memory_usage', 'ssl_ciphers']) delete rest[k];
    super(rest);
    this._tls = { key: fs.readFileSync(key), cert: fs.readFileSync(cert), passphrase };
  }

  listen(a, b, c) {
    let args = [a, b, c];
    if (typeof a === 'number' && typeof b === 'number') args = [a, c];
    const { host, port, cb } = O.listenArgs(...args);
    const server = https.createServer(this._tls, (req, res) => {
      res.writeHead(404).end();
    });
    this._inner.attach(server);
    this._servers = (this._servers || []).concat(server);
    server.once('error', () => cb(false));
    server.listen(port, host, () => {
      cb(new ListenSocket(this, server.address().port, () => server.close()));
    });
    return this;
  }

  close() {
    for (const s of this._servers || []) s.close();
    return super.close();
  }
}

function SSLApp(options) {
  return new USSLApp(options);
}

function us_listen_socket_close(listenSocket) {
  if (listenSocket && listenSocket._close) {
    const close = listenSocket._close;
    listenSocket._close = null;
    close();
  }
}

function us_socket_local_port(listenSocket) {
  return listenSocket ? listenSocket.port : -1;
}

// Every export by name, so that Node's detection of CommonJS exports (cjs-module-lexer) sees them
// and `import { App, SHARED_COMPRESSOR } from 'ddp-transport-native/uws'` works: it reads names
// written in the object literal, not a spread. The values are defined once, in lib/options.js.
const {
  DISABLED, SHARED_COMPRESSOR, SHARED_DECOMPRESSOR, DEDICATED_DECOMPRESSOR_512B, DEDICATED_DECOMPRESSOR_1KB,
  DEDICATED_DECOMPRESSOR_2KB, DEDICATED_DECOMPRESSOR_4KB, DEDICATED_DECOMPRESSOR_8KB, DEDICATED_DECOMPRESSOR_16KB,
  DEDICATED_DECOMPRESSOR_32KB, DEDICATED_DECOMPRESSOR, DEDICATED_COMPRESSOR_3KB, DEDICATED_COMPRESSOR_4KB,
  DEDICATED_COMPRESSOR_8KB, DEDICATED_COMPRESSOR_16KB, DEDICATED_COMPRESSOR_32KB, DEDICATED_COMPRESSOR_64KB,
  DEDICATED_COMPRESSOR_128KB, DEDICATED_COMPRESSOR_256KB, DEDICATED_COMPRESSOR,
} = O.UWS_COMPRESS;
const { LIBUS_LISTEN_EXCLUSIVE_PORT } = O;

module.exports = {
  App,
  SSLApp,
  DISABLED, SHARED_COMPRESSOR, SHARED_DECOMPRESSOR, DEDICATED_DECOMPRESSOR_512B, DEDICATED_DECOMPRESSOR_1KB,
  DEDICATED_DECOMPRESSOR_2KB, DEDICATED_DECOMPRESSOR_4KB, DEDICATED_DECOMPRESSOR_8KB, DEDICATED_DECOMPRESSOR_16KB,
  DEDICATED_DECOMPRESSOR_32KB, DEDICATED_DECOMPRESSOR, DEDICATED_COMPRESSOR_3KB, DEDICATED_COMPRESSOR_4KB,
  DEDICATED_COMPRESSOR_8KB, DEDICATED_COMPRESSOR_16KB, DEDICATED_COMPRESSOR_32KB, DEDICATED_COMPRESSOR_64KB,
  DEDICATED_COMPRESSOR_128KB, DEDICATED_COMPRESSOR_256KB, DEDICATED_COMPRESSOR,
  LIBUS_LISTEN_EXCLUSIVE_PORT,
  us_listen_socket_close,
  us_socket_local_port,
};
