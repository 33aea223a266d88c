'use strict';
// Fairness at saturation (issue #20): the Node event loop's 10 ms timer lateness and a plain HTTP
// GET's latency while the server is offered more echo load than one core serves, for the own
// listener and the Meteor adapter, with and without permessage-deflate.
//
//   node bench/fairness.js [--pkg DIR] [--seconds S] [--rounds R] [--work-us U] [--label L]
// --pkg measures another checkout (e.g. the main branch) with the same probe.

const { measureFairness } = require('../__test__/helpers/fairness');

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

async function main() {
  const pkg = arg('--pkg', undefined);
  const label = arg('--label', '');
  const seconds = Number(arg('--seconds', '5'));
  const rounds = Number(arg('--rounds', '1'));
  const workUs = arg('--work-us', undefined) === undefined ? undefined : Number(arg('--work-us'));
  const f = (x) => x.toFixed(1);
  console.log('| round | server | deflate | timer lateness p50 / p99 / max ms | HTTP GET p50 / p99 / max ms (failed) | messages/s | event loop busy | idle control process lateness p99 / max ms |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (let r = 1; r <= rounds; r++) {
    for (const mode of ['listen', 'meteor']) {
      for (const compress of [false, true]) {
        const m = await measureFairness({ mode, compress, seconds, workUs, pkg });
        const l = m.lateness;
        const h = m.http;
        console.log(`| ${label}${r} | ${mode} | ${compress ? 'on' : 'off'} | ${f(l.p50)} / ${f(l.p99)} / ${f(l.max)} | ` +
          `${f(h.p50)} / ${f(h.p99)} / ${f(h.max)} (${h.failed}) | ${m.perSecond} | ${(m.utilization * 100).toFixed(0)}% | ${f(m.machine.p99)} / ${f(m.machine.max)} |`);
      }
    }
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
