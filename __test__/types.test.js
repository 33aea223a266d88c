'use strict';
// A uWebSockets.js program in TypeScript (types/uws-program.ts, written against uWS.js's typings:
// typed user data, an async upgrade with `res.aborted`, us_socket_context_t, compression flags,
// listen sockets) type-checks unchanged with 'uWebSockets.js' mapped to this package's uws.d.ts
// (`tsc --noEmit`, strict). Its `@ts-expect-error` line makes the check fail if the types were
// loose (any). types/redis-program.ts checks redis.d.ts (the Redis bridge) the same way. uws-pack's
// bundled typings declare the compression flags as types only (uWS.js's
// own declare them as values too), so the program is not also checked against them.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('a uWS.js TypeScript program type-checks against uws.d.ts', { timeout: 180000 }, () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'tsconfig.json')], {
    encoding: 'utf8', timeout: 170000,
  });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});
