'use strict';
// A burst of raw WebSocket clients for the memory test (and for measuring by hand): `n`
// connections opened `concurrency` at a time, each sends one message and reads its echo (with
// `deflate`: permessage-deflate offered as Chromium does, the message sent compressed and the
// echo compressed, so the server holds an inflater and a deflater for every connection), all held
// at once, then all closed with a close frame (the server answers and ends the TCP connection).

const raw = require('./raw');
const pmd = require('./pmd');
const { pool, deadline } = require('./common');

const CHROMIUM_OFFER = 'permessage-deflate; client_max_window_bits';

async function openOne(port, { path, deflate, text }) {
  const c = await raw.connectRaw(port, { path, extensions: deflate ? CHROMIUM_OFFER : undefined, timeout: 10000 });
  try {
    if (deflate && !/permessage-deflate/.test(c.headers['sec-websocket-extensions'] || '')) {
      throw new Error(`permessage-deflate not accepted: ${c.headers['sec-websocket-extensions']}`);
    }
    const payload = deflate ? pmd.deflateMessage(text) : Buffer.from(text);
    c.socket.write(raw.buildFrame({ opcode: raw.OP.TEXT, payload, rsv1: deflate }));
    const msg = await pmd.readMessage(c.reader, 10000);
    if (deflate && !msg.rsv1) throw new Error('echo not compressed');
    if (pmd.messageData(msg).toString() !== text) throw new Error('echo differs');
    return c;
  } catch (e) {
    c.socket.destroy();
    throw e;
  }
}

/** Open `n` clients on `path`; resolves {clients, errors}. */
async function openBurst(port, { n, path = '/echo', deflate = false, concurrency = 200 }) {
  const text = `burst message ${'abcdefgh'.repeat(32)}`;
  const clients = [];
  const { errors } = await pool(n, concurrency, async () => {
    clients.push(await openOne(port, { path, deflate, text }));
  });
  return { clients, errors };
}

/** Close every client with a close frame and wait (bounded) for each TCP connection to end. */
async function closeBurst(clients, timeout = 15000) {
  await deadline(Promise.all(clients.map((c) => new Promise((resolve) => {
    if (c.socket.destroyed) return resolve();
    c.socket.once('close', resolve);
    c.socket.on('error', () => {});
    c.socket.resume();
    c.socket.write(raw.buildFrame({ opcode: raw.OP.CLOSE, payload: raw.closePayload(1000) }));
    c.socket.end();
  }))), timeout, 'burst clients closed').catch(() => {});
  for (const c of clients) c.socket.destroy();
}

module.exports = { openBurst, closeBurst, CHROMIUM_OFFER };
