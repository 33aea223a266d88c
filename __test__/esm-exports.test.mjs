// ES module programs import every export by name: `import { App, SHARED_COMPRESSOR } from
// 'ddp-transport-native/uws'`, the same line against real uWS.js (uws-pack), and the main, Meteor
// and Redis bridge entries. Node finds a CommonJS module's named exports by reading its source
// (cjs-module-lexer); an export it cannot see would be undefined here.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import {
  App, SSLApp, DISABLED, SHARED_COMPRESSOR, SHARED_DECOMPRESSOR, DEDICATED_DECOMPRESSOR_512B,
  DEDICATED_DECOMPRESSOR_1KB, DEDICATED_DECOMPRESSOR_2KB, DEDICATED_DECOMPRESSOR_4KB, DEDICATED_DECOMPRESSOR_8KB,
  DEDICATED_DECOMPRESSOR_16KB, DEDICATED_DECOMPRESSOR_32KB, DEDICATED_DECOMPRESSOR, DEDICATED_COMPRESSOR_3KB,
  DEDICATED_COMPRESSOR_4KB, DEDICATED_COMPRESSOR_8KB, DEDICATED_COMPRESSOR_16KB, DEDICATED_COMPRESSOR_32KB,
  DEDICATED_COMPRESSOR_64KB, DEDICATED_COMPRESSOR_128KB, DEDICATED_COMPRESSOR_256KB, DEDICATED_COMPRESSOR,
  LIBUS_LISTEN_EXCLUSIVE_PORT, us_listen_socket_close, us_socket_local_port,
} from 'ddp-transport-native/uws';
import * as uwsNamespace from 'ddp-transport-native/uws';
import { App as MainApp, SendStatus, compressionOptions } from 'ddp-transport-native';
import * as mainNamespace from 'ddp-transport-native';
import { createNativeTransport, compressionFromEnv, validateSettings, NativeSocket } from 'ddp-transport-native/meteor';
import * as meteorNamespace from 'ddp-transport-native/meteor';
import { bridge } from 'ddp-transport-native/redis';
import * as redisNamespace from 'ddp-transport-native/redis';

const require = createRequire(import.meta.url);

const uwsImports = {
  App, SSLApp, DISABLED, SHARED_COMPRESSOR, SHARED_DECOMPRESSOR, DEDICATED_DECOMPRESSOR_512B,
  DEDICATED_DECOMPRESSOR_1KB, DEDICATED_DECOMPRESSOR_2KB, DEDICATED_DECOMPRESSOR_4KB, DEDICATED_DECOMPRESSOR_8KB,
  DEDICATED_DECOMPRESSOR_16KB, DEDICATED_DECOMPRESSOR_32KB, DEDICATED_DECOMPRESSOR, DEDICATED_COMPRESSOR_3KB,
  DEDICATED_COMPRESSOR_4KB, DEDICATED_COMPRESSOR_8KB, DEDICATED_COMPRESSOR_16KB, DEDICATED_COMPRESSOR_32KB,
  DEDICATED_COMPRESSOR_64KB, DEDICATED_COMPRESSOR_128KB, DEDICATED_COMPRESSOR_256KB, DEDICATED_COMPRESSOR,
  LIBUS_LISTEN_EXCLUSIVE_PORT, us_listen_socket_close, us_socket_local_port,
};

test('every CommonJS export of each entry is a named ES export', () => {
  for (const [id, ns] of [['ddp-transport-native/uws', uwsNamespace], ['ddp-transport-native', mainNamespace],
    ['ddp-transport-native/meteor', meteorNamespace], ['ddp-transport-native/redis', redisNamespace]]) {
    const cjs = require(id);
    // Node 23 and later also name the whole exports object 'module.exports' in a CommonJS module's namespace.
    const named = Object.keys(ns).filter((k) => k !== 'default' && k !== 'module.exports').sort();
    assert.deepEqual(named, Object.keys(cjs).sort(), id);
    for (const k of named) assert.equal(ns[k], cjs[k], `${id} ${k}`);
  }
});

test('/uws: each name imported is defined, and the constants equal uws-pack\'s', async (t) => {
  for (const [k, v] of Object.entries(uwsImports)) assert.notEqual(v, undefined, k);
  assert.equal(typeof App().ws, 'function');
  let real;
  try {
    real = await import('uws-pack');
  } catch (e) {
    return t.skip(`uws-pack did not load: ${e.message}`);
  }
  for (const [k, v] of Object.entries(uwsImports)) {
    assert.equal(typeof real[k], typeof v, `uws-pack exports ${k} with the same type`);
    if (typeof v === 'number') assert.equal(v, real[k], k);
  }
});

test('main, Meteor and Redis bridge entries: named imports are the functions and objects they document', () => {
  assert.equal(typeof bridge, 'function');
  assert.equal(typeof MainApp, 'function');
  assert.equal(SendStatus.DROPPED, 2);
  assert.equal(typeof compressionOptions, 'function');
  assert.equal(createNativeTransport().name, 'native');
  assert.equal(compressionFromEnv('false'), false);
  assert.equal(typeof validateSettings, 'function');
  assert.equal(typeof NativeSocket, 'function');
});
