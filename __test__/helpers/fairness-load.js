'use strict';
// Load for the fairness probe: CLIENTS `ws` clients, each keeping INFLIGHT messages of SIZE bytes
// in flight (echoed back by the server) once all are open, for SECONDS seconds at most. With
// COMPRESS=1 the clients offer permessage-deflate. Prints `{type:'done', echoed, errors}` when done.
//
//   node fairness-load.js <url> <clients> <inflight> <size> <seconds> <compress 0|1>

const WebSocket = require('ws');

const [url, clientsArg, inflightArg, sizeArg, secondsArg, compressArg] = process.argv.slice(2);
const CLIENTS = Number(clientsArg);
const INFLIGHT = Number(inflightArg);
const SECONDS = Number(secondsArg);
const COMPRESS = compressArg === '1';

// A JSON-ish text payload (compressible, as DDP is) of the requested size.
const unit = '{"msg":"result","id":"1234","result":{"name":"Ada Lovelace","n":42}},';
const PAYLOAD = unit.repeat(Math.ceil(Number(sizeArg) / unit.length)).slice(0, Number(sizeArg));

let echoed = 0;
let errors = 0;
let stopping = false;
const sockets = [];
const end = Date.now() + SECONDS * 1000;

function finish() {
  if (stopping) return;
  stopping = true;
  for (const ws of sockets) ws.terminate();
  process.stdout.write(JSON.stringify({ type: 'done', echoed, errors }) + '\n');
  setTimeout(() => process.exit(0), 50);
}

let open = 0;
for (let i = 0; i < CLIENTS; i++) {
  // With COMPRESS the server compresses every reply (2 KiB ≥ its 1 KiB threshold) and the clients
  // send uncompressed (threshold above the payload): one load process could not deflate fast
  // enough to saturate the server otherwise.
  const ws = new WebSocket(url, { perMessageDeflate: COMPRESS ? { threshold: 1 << 20 } : false });
  sockets.push(ws);
  ws.on('open', () => {
    if (++open < CLIENTS) return;
    process.stdout.write(JSON.stringify({ type: 'open' }) + '\n');
    // The load starts once every client is open: sent from the first open, it saturated the
    // server while later clients were still upgrading, and admission control (rightly) held and
    // then refused some of those upgrades, so `open` never came (CI, Meteor adapter + deflate).
    for (const s of sockets) for (let k = 0; k < INFLIGHT; k++) s.send(PAYLOAD);
  });
  ws.on('message', () => {
    echoed++;
    if (!stopping && Date.now() < end) ws.send(PAYLOAD);
  });
  ws.on('error', () => { errors++; });
}
setTimeout(finish, SECONDS * 1000 + 100);
process.stdin.on('end', finish);
process.stdin.resume();
