'use strict';
// Meteor 3.5's `uws` transport design: uWS on an internal loopback port, and the app's Node
// http.Server piping every /websocket upgrade to it — net.connect to the internal port, write the
// original request head and the `head` bytes, then pipe both ways. Like Meteor's code, the upstream
// socket keeps Node's default (Nagle on); BENCH_PROXY_NODELAY=1 sets noDelay on both sides.
const http = require('node:http');
const net = require('node:net');
const { portArg, ready, exitRules, loadDdp, isWebsocketPath } = require('./common');
const { createUwsApp, listen } = require('./uws-app');

const NODELAY = process.env.BENCH_PROXY_NODELAY === '1';

exitRules();
(async () => {
  const { uws, app } = await createUwsApp(loadDdp());
  const internalPort = await listen(uws, app, '127.0.0.1', 0);

  const server = http.createServer((req, res) => {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('not found');
  });
  server.on('upgrade', (req, socket, head) => {
    if (!isWebsocketPath(req.url)) { socket.destroy(); return; }
    const upstream = net.connect(internalPort, '127.0.0.1', () => {
      let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      upstream.write(text + '\r\n');
      if (head && head.length) upstream.write(head);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
    if (NODELAY) { upstream.setNoDelay(true); socket.setNoDelay(true); }
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
    upstream.on('close', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  });
  await new Promise((resolve) => server.listen(portArg(), '127.0.0.1', resolve));
  ready(server.address().port);
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
