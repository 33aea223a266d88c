'use strict';
// What the Redis bridge sends: the Redis channel is the bridge's prefix + the topic; the Redis
// message is a batch of the messages one instance published on that topic in one tick:
//   byte 0        format version (2)
//   bytes 1..16   the publishing bridge's instance id (16 random bytes): an instance skips its own
//                 batches when Redis hands them back (it delivered them locally when published)
//   then, per message: 1 byte flags (1 = binary, else UTF-8 text; 2 = compress), 4 bytes length
//   (u32 little-endian), the payload as published (no re-encoding)

const { isUtf8 } = require('node:buffer');

const VERSION = 2;
const BINARY = 1;
const COMPRESS = 2;
const ID_BYTES = 16;
const HEADER_BYTES = 1 + ID_BYTES;
const RECORD_BYTES = 5; // flags + length, before each payload

/** A batch being built: the payloads (a string is encoded when the batch is written, bytes were
 *  copied when published) and the batch's size on the wire. */
class Batch {
  constructor() {
    this.items = []; // flags, payload, byteLength, ...
    this.bytes = HEADER_BYTES;
    this.count = 0;
  }

  /** `payload`: a string or a Buffer the caller will not change; `byteLength` its UTF-8 length. */
  add(payload, byteLength, isBinary, compress) {
    this.items.push((isBinary ? BINARY : 0) | (compress ? COMPRESS : 0), payload, byteLength);
    this.bytes += RECORD_BYTES + byteLength;
    this.count++;
  }

  /** The batch as one Buffer: each payload written (a string UTF-8 encoded) once, into it. */
  encode(id) {
    const frame = Buffer.allocUnsafe(this.bytes);
    frame[0] = VERSION;
    id.copy(frame, 1);
    let at = HEADER_BYTES;
    const items = this.items;
    for (let i = 0; i < items.length; i += 3) {
      const payload = items[i + 1];
      const len = items[i + 2];
      frame[at] = items[i];
      frame.writeUInt32LE(len, at + 1);
      at += RECORD_BYTES;
      if (typeof payload === 'string') frame.write(payload, at, len);
      else payload.copy(frame, at);
      at += len;
    }
    return frame;
  }
}

/** A published message's length in bytes (a string's in UTF-8). */
function byteLengthOf(message) {
  return typeof message === 'string' ? Buffer.byteLength(message) : message.byteLength;
}

/** A published message as a payload a Batch can hold: a string as it is (encoded when the batch
 *  is written), bytes copied now (the caller may reuse its buffer once publish returns). */
function payloadOf(message) {
  if (typeof message === 'string') return message;
  const view = ArrayBuffer.isView(message)
    ? Buffer.from(message.buffer, message.byteOffset, message.byteLength)
    : Buffer.from(message);
  return Buffer.from(view);
}

/** Whether `frame` came from the bridge with this `id`; null when it is not a batch of ours. */
function isOwn(id, frame) {
  if (frame.length < HEADER_BYTES || frame[0] !== VERSION) return null;
  return frame.compare(id, 0, ID_BYTES, 1, HEADER_BYTES) === 0;
}

/** How many messages a batch holds (its records' lengths only are read). */
function countMessages(frame) {
  let n = 0;
  for (let at = HEADER_BYTES; at + RECORD_BYTES <= frame.length; at += RECORD_BYTES + frame.readUInt32LE(at + 1)) n++;
  return n;
}

/** Call `fn(payload, isBinary, compress)` for each message of a batch of another instance (each
 *  `payload` a view into `frame`); false when the batch is malformed (nothing after the bad record
 *  is delivered; a text payload that is not UTF-8 is malformed). */
function eachMessage(frame, fn) {
  let at = HEADER_BYTES;
  while (at < frame.length) {
    if (at + RECORD_BYTES > frame.length) return false;
    const flags = frame[at];
    const len = frame.readUInt32LE(at + 1);
    at += RECORD_BYTES;
    if (at + len > frame.length) return false;
    const payload = frame.subarray(at, at + len);
    at += len;
    const isBinary = (flags & BINARY) !== 0;
    if (!isBinary && isUtf8 !== undefined && !isUtf8(payload)) return false;
    fn(payload, isBinary, (flags & COMPRESS) !== 0);
  }
  return true;
}

module.exports = { Batch, byteLengthOf, payloadOf, isOwn, countMessages, eachMessage, ID_BYTES, HEADER_BYTES, RECORD_BYTES };
