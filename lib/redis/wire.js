'use strict';
// One message of the Redis bridge on the wire: the Redis channel is the bridge's prefix + the
// topic; the Redis message is this header and the payload, as published (no re-encoding):
//   byte 0       format version (1)
//   byte 1       flags: 1 = binary (else text: the payload is UTF-8), 2 = compress
//   bytes 2..17  the publishing bridge's instance id (16 random bytes): an instance skips its own
//                messages when Redis hands them back (it delivered them locally when published)
//   bytes 18..   the payload

const { isUtf8 } = require('node:buffer');

const VERSION = 1;
const BINARY = 1;
const COMPRESS = 2;
const ID_BYTES = 16;
const HEADER_BYTES = 2 + ID_BYTES;

/** The message as one Buffer with the header in front: a string is UTF-8 encoded into it, bytes
 *  are copied into it (one copy either way). */
function encode(id, message, isBinary, compress) {
  let frame;
  if (typeof message === 'string') {
    frame = Buffer.allocUnsafe(HEADER_BYTES + Buffer.byteLength(message));
    frame.write(message, HEADER_BYTES);
  } else {
    const bytes = ArrayBuffer.isView(message)
      ? new Uint8Array(message.buffer, message.byteOffset, message.byteLength)
      : new Uint8Array(message);
    frame = Buffer.allocUnsafe(HEADER_BYTES + bytes.length);
    frame.set(bytes, HEADER_BYTES);
  }
  frame[0] = VERSION;
  frame[1] = (isBinary ? BINARY : 0) | (compress ? COMPRESS : 0);
  id.copy(frame, 2);
  return frame;
}

/** `null` when it is not one of ours (wrong version, too short, text that is not UTF-8); else
 *  `{ own, payload, isBinary, compress }` with `payload` a view into `frame`. */
function decode(id, frame) {
  if (frame.length < HEADER_BYTES || frame[0] !== VERSION) return null;
  const flags = frame[1];
  const own = frame.compare(id, 0, ID_BYTES, 2, HEADER_BYTES) === 0;
  const payload = frame.subarray(HEADER_BYTES);
  const isBinary = (flags & BINARY) !== 0;
  if (!own && !isBinary && isUtf8 !== undefined && !isUtf8(payload)) return null;
  return { own, payload, isBinary, compress: (flags & COMPRESS) !== 0 };
}

module.exports = { encode, decode, ID_BYTES, HEADER_BYTES };
