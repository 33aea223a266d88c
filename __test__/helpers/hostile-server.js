'use strict';
// Child-process server for hostile.test.js, on its own listener (MODE=own, default) or attached
// to a Node http.Server (MODE=attach); 127.0.0.1, port 0. Routes:
//   /echo      echo; every socket is kept so its buffered amount can be read
//   /limited   echo, maxBackpressure 64 KiB, closeOnBackpressureLimit (CLOSE_ON_LIMIT=0: off)
//   /big       on the message "go": 64 KiB binary sends until one is refused (maxBackpressure
//              1 MiB, closeOnBackpressureLimit): a slow client is closed for backpressure
//   /deflate   echo with permessage-deflate (context takeover, threshold 16 bytes)
// Every open reports {type:'open', route, url}; every close {type:'close', route, code, reason}.
// Commands (stdin JSON lines; gc: true runs global.gc() first when started with --expose-gc):
//   {cmd:'stats', id, gc?} → {id, mem, stats, buffered: [bufferedAmount of each open socket]};
//   {cmd:'exit', id}.

const http = require('node:http');
const { out, onCommand, loadPackage } = require('./child-lib');

const { App } = loadPackage();
const mode = process.env.MODE || 'own';
const quiet = process.env.QUIET === '1';

const app = App();
const open = new Set();
const BIG = Buffer.alloc(64 * 1024, 0x62);

function behavior(route, extra = {}) {
  return {
    idleTimeout: 0,
    ...extra,
    open(ws) {
      open.add(ws);
      if (!quiet) out({ type: 'open', route, url: ws.getUrl() });
    },
    message(ws, data, isBinary) {
      if (route === 'big' && data === 'go') {
        let n = 0;
        while (ws.send(BIG, true) !== 2 && n < 10000) n++;
        out({ type: 'big-sent', n });
        return;
      }
      ws.send(data, isBinary);
    },
    close(ws, code, reason) {
      open.delete(ws);
      if (!quiet) out({ type: 'close', route, code, reason: Buffer.from(reason).toString() });
    },
  };
}

app.ws('/echo', behavior('echo'));
app.ws('/limited', behavior('limited', {
  maxBackpressure: 64 * 1024,
  closeOnBackpressureLimit: process.env.CLOSE_ON_LIMIT !== '0',
}));
app.ws('/big', behavior('big', { maxBackpressure: 1024 * 1024, closeOnBackpressureLimit: true }));
app.ws('/deflate', behavior('deflate', { compression: { threshold: 16, noContextTakeover: false } }));

const ready = (port) => out({ type: 'listening', port, rss: process.memoryUsage().rss });
if (mode === 'attach') {
  const server = http.createServer((req, res) => res.end(`plain ${req.url}`));
  app.attach(server);
  server.listen(0, '127.0.0.1', () => ready(server.address().port));
} else {
  app.listen('127.0.0.1', 0, (token) => ready(token ? token.port : 0));
}

onCommand((m) => {
  if (m.cmd === 'stats') {
    if (m.gc && typeof global.gc === 'function') global.gc();
    const buffered = [...open].map((ws) => ws.getBufferedAmount());
    out({ id: m.id, mem: process.memoryUsage(), stats: app.stats(), buffered });
  } else if (m.cmd === 'exit') {
    app.close();
    out({ id: m.id, type: 'bye' });
    setImmediate(() => process.exit(0));
  }
});
