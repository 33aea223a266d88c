#!/usr/bin/env node
'use strict';
// The cost of one transport against another from one `npm run bench` run, as ratios per round:
//
//   node bench/ratio.js <results/latest.json> <base transport> <other transport>
//
// For every workload both ran and every metric of it: other ÷ base in each round (the rounds of a
// run are interleaved, so a round's two figures saw the same machine), then the median of those
// ratios and their min–max. > 1 means the other transport's figure is higher (worse for times,
// CPU and memory; better for calls/s). Prints a Markdown table.

const fs = require('node:fs');

const [file, base, other] = process.argv.slice(2);
if (!file || !base || !other) {
  process.stderr.write('usage: node bench/ratio.js <latest.json> <base transport> <other transport>\n');
  process.exit(2);
}
const run = JSON.parse(fs.readFileSync(file, 'utf8'));
const finals = run.runs.filter((r) => r.final && r.ok);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

const lines = [`| workload | metric | ${base} (median) | ${other} (median) | ${other} ÷ ${base}: median (min–max over rounds) | rounds |`,
  '| :-- | :-- | --: | --: | --: | --: |'];
for (const workload of [...new Set(finals.map((r) => r.workload))]) {
  const of = (t) => finals.filter((r) => r.workload === workload && r.transport === t);
  const a = of(base);
  const b = of(other);
  if (!a.length || !b.length) continue;
  for (const metric of Object.keys(a[0].metrics || {})) {
    const ratios = [];
    for (const ra of a) {
      const rb = b.find((x) => x.round === ra.round);
      const [va, vb] = [ra.metrics[metric], rb && rb.metrics[metric]];
      if (typeof va === 'number' && typeof vb === 'number' && va > 0) ratios.push(vb / va);
    }
    if (!ratios.length) continue;
    const ma = median(a.map((r) => r.metrics[metric]).filter((v) => typeof v === 'number'));
    const mb = median(b.map((r) => r.metrics[metric]).filter((v) => typeof v === 'number'));
    lines.push(`| ${workload} | ${metric} | ${fmt(ma)} | ${fmt(mb)} | ${median(ratios).toFixed(2)}× (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}) | ${ratios.length} |`);
  }
}
process.stdout.write(`${lines.join('\n')}\n`);
