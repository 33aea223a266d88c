'use strict';
// The server of `npm run soak` (scripts/soak.js): an App attached to a Node http.Server (the way
// a Meteor app runs it), 127.0.0.1, port 0. Routes:
//   /echo   echo; text arrives as a string (permessage-deflate when offered, threshold 16 bytes; maxBackpressure 256 KiB,
//           closeOnBackpressureLimit). Commands as text messages: "cmd:end" → ws.end(4000),
//           "cmd:flood" → 64 KiB sends until one is refused (a non-reading client gets 1013).
//   /idle   idle timeout 1 s (a client that never answers the ping is closed 1001).
// stdout: {type:'listening', port}, then one JSON line per stdin command
// ({cmd:'stats', gc?} → {type:'stats', mem, stats}; gc: global.gc() first, under --expose-gc);
// exits when stdin closes.

const http = require('node:http');
const readline = require('node:readline');
const { App } = require('..');

const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const BIG = Buffer.alloc(64 * 1024, 0x62);
const app = App();
const base = {
  idleTimeout: 0,
  maxPayloadLength: 1024 * 1024,
  maxBackpressure: 256 * 1024,
  closeOnBackpressureLimit: true,
  compression: { threshold: 16 },
};

app.ws('/echo', {
  ...base,
  message(ws, data, isBinary) {
    if (typeof data === 'string' && data.length < 16) {
      const cmd = data;
      if (cmd === 'cmd:end') return ws.end(4000, 'soak end');
      if (cmd === 'cmd:flood') {
        for (let i = 0; i < 4000 && ws.send(BIG, true) !== 2; i++);
        return undefined;
      }
    }
    ws.send(data, isBinary);
    return undefined;
  },
});
app.ws('/idle', { ...base, open(ws) { ws.setIdleTimeout(1000); } });

const server = http.createServer((req, res) => res.end('soak'));
app.attach(server);
server.listen(0, '127.0.0.1', () => out({ type: 'listening', port: server.address().port }));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.cmd === 'stats' && m.gc && typeof global.gc === 'function') global.gc();
  if (m.cmd === 'stats') out({ type: 'stats', id: m.id, mem: process.memoryUsage(), stats: app.stats() });
});
rl.on('close', () => process.exit(0));
