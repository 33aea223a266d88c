'use strict';
// Echo server for conformance testing (Autobahn|Testsuite fuzzingclient), built on the PUBLIC
// API of ddp-transport-native so that the JS bridge is under test as well as the Rust core.
//
//   node scripts/echo-server.js [--port N] [--host H] [--compression max|meteor|off]
//
// Prints `READY <port> io <mode>` on stdout once listening (the I/O mode the app runs). Every message is echoed back with the same
// type (text → text, binary → binary). Compression (permessage-deflate, threshold 0 so every
// message is compressed):
//   max (default): server context takeover and a 15-bit window, so that every offer of
//     Autobahn's 12.* / 13.* cases is accepted with its server parameters as offered; the
//     client's window is bounded as the library's default does (client_max_window_bits=10 when
//     offered, else client_no_context_takeover), so those cases run through parked windows;
//   meteor: the library defaults Meteor uses (server_no_context_takeover added unilaterally,
//     8-bit server window), to check that clients accept those answers too;
//   off: no extension.

const path = require('path');
const { App } = require(path.join(__dirname, '..'));

function parseArgs(argv) {
  const opts = { host: '127.0.0.1', port: 0, compression: 'max' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') opts.port = Number(argv[++i]);
    else if (a === '--host') opts.host = argv[++i];
    else if (a === '--compression') opts.compression = argv[++i];
    else if (a === '--no-compression') opts.compression = 'off';
    else {
      process.stderr.write(`echo-server: unknown argument ${a}\n`);
      process.exit(2);
    }
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const COMPRESSION = {
  max: { threshold: 0, level: 6, noContextTakeover: false, maxWindowBits: 15 },
  meteor: { threshold: 0 },
  off: false,
};
if (!(opts.compression in COMPRESSION)) {
  process.stderr.write(`echo-server: --compression must be max, meteor or off\n`);
  process.exit(2);
}

const app = App();
app.ws('/*', {
  compression: COMPRESSION[opts.compression],
  maxPayloadLength: 16 * 1024 * 1024,
  idleTimeout: 0,
  message: (ws, message, isBinary) => {
    ws.send(message, isBinary);
  },
});

app.listen(opts.host, opts.port, (token, err) => {
  if (!token) {
    process.stderr.write(`echo-server: listen failed: ${err ? err.message : 'unknown error'}\n`);
    process.exit(1);
  }
  process.stdout.write(`READY ${token.port} io ${app.ioMode}\n`);
});

function shutdown() {
  app.close();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
