'use strict';
// Markdown tables and a hand-written SVG bar chart from a runner report.

const BASELINES = ['sockjs', 'uws-direct'];
/** The memory workloads: measured once, never redone, not part of the CPU-disturbance figure. */
const RSS_WORKLOADS = ['idle', 'idle_deflate'];
/** The project's target for idle RSS with permessage-deflate negotiated vs without. */
const DEFLATE_RSS_TARGET = 2;

/** The app workloads' tables: the figures per transport, and native ÷ uws against issue #22's targets. */
const appColumns = (withP99) => [
  { key: 'calls_per_s', label: 'calls/s', digits: 0 },
  { key: 'server_cpu_us_per_call', label: 'process CPU µs/call', digits: 1 },
  { key: 'js_us_per_call', label: 'JS-thread µs/call', digits: 1 },
  { key: 'lat_p50_ms', label: 'p50 ms', digits: 2 },
  { key: 'lat_p95_ms', label: 'p95 ms', digits: 2 },
  ...(withP99 ? [{ key: 'lat_p99_ms', label: 'p99 ms', digits: 2 }] : []),
  { key: 'rss_end_mib', label: 'RSS MiB', digits: 1 },
];
const APP_COLUMNS = { 'app-rate': appColumns(true), 'app-saturated': appColumns(false) };
const APP_NATIVE = ['native-attach', 'native-listen', 'native-raw'];
const APP_UWS = [['uws-proxied', "as Meteor runs uWS: shim + proxy hop"], ['uws-raw', 'uWS.js direct, no shim']];
/** native ÷ uws must be `op` target (issue #22). */
const APP_TARGETS = [
  { workload: 'app-rate', key: 'js_us_per_call', label: 'JS-thread µs/call', op: '≤', target: 0.8 },
  { workload: 'app-rate', key: 'lat_p50_ms', label: 'p50 latency', op: '≤', target: 1.0 },
  { workload: 'app-rate', key: 'server_cpu_us_per_call', label: 'process CPU µs/call', op: '≤', target: 0.95 },
  { workload: 'app-saturated', key: 'calls_per_s', label: 'calls/s', op: '≥', target: 1.2 },
  { workload: 'app-saturated', key: 'js_us_per_call', label: 'JS-thread µs/call', op: '≤', target: 0.8 },
  { workload: 'app-saturated', key: 'server_cpu_us_per_call', label: 'process CPU µs/call', op: '≤', target: 0.95 },
  { workload: 'app-saturated', key: 'lat_p50_ms', label: 'p50 latency', op: '≤', target: 1.0 },
];

const COLORS = {
  sockjs: '#8c8c8c',
  ws: '#6b8fb3',
  'uws-direct': '#d9822b',
  'uws-raw': '#a8591a',
  'uws-proxied': '#f0b86e',
  'native-attach': '#1f8a4c',
  'native-listen': '#4cbf7a',
  'native-raw': '#8fd9a8',
  'native-rust': '#145a32',
};

function cellOf(report, transport, col) {
  const row = report.medians[transport] || {};
  return row[col.workload] || { status: 'n/a', reason: 'not run' };
}

function valueOf(report, transport, col) {
  const c = cellOf(report, transport, col);
  if (c.status !== 'ok' || !c.metrics) return null;
  const v = c.metrics[col.key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return '–';
  if (Math.abs(v) >= 1000 && digits === 0) return Math.round(v).toLocaleString('en-US');
  const d = Math.abs(v) < 10 && digits === 0 ? 1 : digits;
  return v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

function show(report, transport, col) {
  const c = cellOf(report, transport, col);
  if (c.status === 'n/a') return 'n/a';
  if (c.status === 'failed' && !c.metrics) return 'FAILED';
  const v = valueOf(report, transport, col);
  return fmt(v, col.digits) + (c.status === 'failed' ? ' (some runs failed)' : '');
}

/** How many times better than the baseline (> 1 = better), whichever direction the metric runs. */
function factor(report, transport, base, col) {
  const v = valueOf(report, transport, col);
  const b = valueOf(report, base, col);
  if (v === null || b === null || v === 0 || b === 0) return null;
  return col.better === 'higher' ? v / b : b / v;
}

function mdTable(head, rows, align) {
  const out = [`| ${head.join(' | ')} |`, `| ${head.map((_, i) => (align && align[i] === 'l' ? ':--' : '--:')).join(' | ')} |`];
  for (const r of rows) out.push(`| ${r.join(' | ')} |`);
  return out.join('\n');
}

/** A median with its spread over rounds, `median (min–max)`, when there was more than one round. */
function showSpread(report, transport, col) {
  const c = cellOf(report, transport, col);
  const base = show(report, transport, col);
  const sp = c.status === 'ok' && c.spread && c.runs > 1 ? c.spread[col.key] : null;
  return sp ? `${base} (${fmt(sp[0], col.digits)}–${fmt(sp[1], col.digits)})` : base;
}

/** value(a) ÷ value(b) of each round where both ran (kept runs only). */
function roundRatios(report, a, b, workload, key) {
  const byRound = (t) => {
    const m = new Map();
    for (const r of report.runs) {
      if (r.final && r.ok && r.transport === t && r.workload === workload && r.metrics && typeof r.metrics[key] === 'number') m.set(r.round, r.metrics[key]);
    }
    return m;
  };
  const va = byRound(a);
  const vb = byRound(b);
  const out = [];
  for (const [round, x] of va) if (vb.has(round) && vb.get(round) > 0) out.push(x / vb.get(round));
  return out;
}

function appSection(report) {
  const has = (n) => report.workloads.some((w) => w.name === n);
  if (!has('app-rate') && !has('app-saturated')) return [];
  const cfg = report.config;
  const names = report.transports.map((t) => t.name).filter((n) => {
    const row = report.medians[n] || {};
    return ['app-rate', 'app-saturated'].some((w) => row[w] && row[w].status !== 'n/a');
  });
  const lines = ['## App level: the tasks app (`addTask`)', ''];
  lines.push('Every server runs the same small tasks app (bench/servers/common.js): clients subscribe to `tasks`, then call ' +
    '`addTask(text)`, answered with `added`, `result`, `updated`. Compression off. "process CPU" = the server process\'s ' +
    'user+system CPU (all threads) ÷ calls; "JS-thread" = its event-loop utilization × the window ÷ calls (the time its JS ' +
    'thread was busy, whatever ran there); latency = call → `result`; RSS at the end of the window. ' +
    (cfg.rounds > 1 ? `Medians over ${cfg.rounds} rounds, (min–max) over rounds.` : 'One round.'));
  lines.push('');
  for (const w of ['app-rate', 'app-saturated']) {
    if (!has(w)) continue;
    const cols = APP_COLUMNS[w].map((c) => ({ ...c, workload: w }));
    lines.push(w === 'app-rate'
      ? `**app-rate**: ${cfg.appRateClients} clients, ${cfg.appRate} calls/s in all (fixed rate), ${cfg.appSeconds} s`
      : `**app-saturated**: ${cfg.appSatClients} clients × ${cfg.appSatInflight} calls in flight, ${cfg.appSeconds} s`);
    lines.push('');
    lines.push(mdTable(['transport', ...cols.map((c) => c.label)], names.map((n) => [n, ...cols.map((c) => showSpread(report, n, c))]), ['l']));
    lines.push('');
  }
  const natives = APP_NATIVE.filter((n) => names.includes(n));
  const bases = APP_UWS.filter(([b]) => names.includes(b));
  const targets = APP_TARGETS.filter((t) => has(t.workload));
  if (natives.length && bases.length && targets.length) {
    lines.push('**native ÷ uws** (the native figure divided by the uWS one, so < 1 is better for time and latency, > 1 for calls/s): ' +
      bases.map(([b, what]) => `${b} = ${what}`).join('; ') + '. The target column is issue #22\'s, set against uws-proxied; ' +
      'the uws-raw columns hold native to the same numbers against uWS.js without any shim. ' +
      `A cell: ratio of the medians${cfg.rounds > 1 ? ' (min–max of the per-round ratios)' : ''}, then whether it meets the target.`);
    lines.push('');
    const head = ['workload', 'metric', 'target'];
    for (const [b] of bases) for (const n of natives) head.push(`${n} ÷ ${b}`);
    const rows = targets.map((t) => {
      const col = { workload: t.workload, key: t.key };
      const row = [t.workload, t.label, `${t.op} ${t.target.toFixed(2)}`];
      for (const [b] of bases) {
        for (const n of natives) {
          const v = valueOf(report, n, col);
          const bv = valueOf(report, b, col);
          if (v === null || bv === null || bv === 0) { row.push('–'); continue; }
          const r = v / bv;
          const rr = roundRatios(report, n, b, t.workload, t.key);
          const spread = cfg.rounds > 1 && rr.length > 1 ? ` (${Math.min(...rr).toFixed(2)}–${Math.max(...rr).toFixed(2)})` : '';
          const met = t.op === '≤' ? r <= t.target : r >= t.target;
          row.push(`${r.toFixed(2)}${spread} ${met ? 'yes' : '**no**'}`);
        }
      }
      return row;
    });
    lines.push(mdTable(head, rows, ['l', 'l', 'l']));
    lines.push('');
  }
  return lines;
}

function renderMarkdown(report, W, svgName) {
  const cfg = report.config;
  const cols = W.columns(cfg).filter((c) => report.workloads.some((w) => w.name === c.workload));
  const names = report.transports.map((t) => t.name);
  const m = report.machine;
  const lines = [];
  lines.push(`# ddp-transport-native benchmark — ${report.date}${cfg.smoke ? ' (smoke run: sizes too small to compare)' : ''}`);
  lines.push('');
  lines.push(`Machine: ${m.cores} cores (${m.cpu}), ${m.memGiB} GiB, Linux ${m.kernel}; Node ${m.node}; ${m.rustc}; uws-pack ${m.uwsPack || 'n/a'}.  `);
  lines.push(`${cfg.rounds} round(s), transports interleaved, a fresh server process per run; medians over rounds. ` +
    (cfg.smoke ? 'Smoke run: no redos, no thresholds.'
      : `Runs with more than ${cfg.otherCpuLimitCores} cores of other processes' CPU were redone (at most ${cfg.maxRedos}×).`));
  const dist = disturbance(report);
  if (dist !== null && dist > cfg.otherCpuLimitCores && !cfg.smoke) {
    lines.push('');
    lines.push(`**Disturbed run:** other processes used a median ${dist.toFixed(2)} cores during the measured windows ` +
      `(limit ${cfg.otherCpuLimitCores}; redos could not get below it). Throughput and latency are indicative only; ` +
      'server CPU µs per call is the least affected figure.');
  }
  lines.push('');
  lines.push('## Medians');
  lines.push('');
  lines.push(mdTable(['transport', ...cols.map((c) => `${c.label} ${c.better === 'higher' ? '↑' : '↓'}`)],
    names.map((n) => [n, ...cols.map((c) => show(report, n, c))]), ['l']));
  lines.push('');
  lines.push('↑ higher is better, ↓ lower is better. "server CPU µs/call" = the server process\'s user+system CPU ' +
    '(all its threads) during the measured window divided by the calls completed in it.');
  lines.push('');
  lines.push('## Ratios');
  lines.push('');
  lines.push(`Each cell: times better than ${BASELINES.join(' / ')} (> 1 = better, whichever way the metric runs).`);
  lines.push('');
  const rcols = cols.filter((c) => c.key !== 'p99_us');
  lines.push(mdTable(['transport', ...rcols.map((c) => c.label)],
    names.map((n) => [n, ...rcols.map((c) => BASELINES.map((b) => {
      const f = factor(report, n, b, c);
      return f === null ? '–' : `${f.toFixed(2)}×`;
    }).join(' / '))]), ['l']));
  lines.push('');
  lines.push(...appSection(report));
  const hasW = (n) => report.workloads.some((w) => w.name === n);
  if (hasW('idle') && hasW('idle_deflate')) {
    lines.push('## Idle memory with permessage-deflate');
    lines.push('');
    lines.push('Server RSS per idle DDP connection when the client negotiates permessage-deflate as Chromium offers it ' +
      '(and sends its `connect` compressed), against the same without the extension. ' +
      `The project's target is deflate / plain ≤ ${DEFLATE_RSS_TARGET}×.`);
    lines.push('');
    const idleCol = { workload: 'idle', key: 'kib_per_conn' };
    const defCol = { workload: 'idle_deflate', key: 'kib_per_conn' };
    lines.push(mdTable(['transport', 'plain KiB/conn', 'deflate KiB/conn', 'deflate / plain', `≤ ${DEFLATE_RSS_TARGET}×`],
      names.map((n) => {
        const ratio = deflateRssRatio(report, n);
        return [n, show(report, n, { ...idleCol, digits: 1 }), show(report, n, { ...defCol, digits: 1 }),
          ratio === null ? '–' : `${ratio.toFixed(2)}×`, ratio === null ? '–' : (ratio <= DEFLATE_RSS_TARGET ? 'yes' : '**no**')];
      }), ['l']));
    lines.push('');
  }
  if (report.workloads.some((w) => w.name.startsWith('throughput'))) {
  lines.push('## Where the CPU went (throughput, per-frame / coalesced)');
  lines.push('');
  const tw = ['throughput', 'throughput-coalesced'];
  const split = (n, w, k) => {
    const c = (report.medians[n] || {})[w];
    return c && c.status === 'ok' && c.metrics && c.metrics[k] != null ? fmt(c.metrics[k], k.endsWith('cores') ? 2 : 1) : '–';
  };
  lines.push(mdTable(['transport', 'server cores', 'loadgen cores', 'other processes (cores)', 'loadgen CPU µs/call'],
    names.map((n) => [n, ...['server_cores', 'loadgen_cores', 'other_cores', 'loadgen_cpu_us_per_call']
      .map((k) => tw.map((w) => split(n, w, k)).join(' / '))]), ['l']));
  lines.push('');
  }
  const notes = [];
  for (const n of names) {
    for (const w of report.workloads) {
      const c = (report.medians[n] || {})[w.name];
      if (!c) continue;
      if (c.status === 'n/a') notes.push(`- ${n} / ${w.name}: n/a — ${c.reason}`);
      if (c.status === 'failed') notes.push(`- ${n} / ${w.name}: FAILED (${c.ok}/${c.runs} runs ok) — ${(c.errors || []).join('; ')}`);
    }
  }
  if (notes.length) {
    lines.push('## Not measured / failed');
    lines.push('');
    lines.push(...dedupeNa(notes));
    lines.push('');
  }
  lines.push('## Workloads');
  lines.push('');
  const sizes = {
    burst: `${cfg.burstClients} clients`,
    rtt: `${cfg.rttCalls} calls`,
    throughput: `${cfg.tpClients} clients × ${cfg.tpInflight} in flight, ${cfg.tpSeconds} s`,
    'throughput-coalesced': `${cfg.tpClients} clients × ${cfg.tpInflight} in flight, ${cfg.tpSeconds} s`,
    fanout: `${cfg.fanoutSubscribers} subscribers, ${cfg.fanoutWrites} writes`,
    idle: `${cfg.idleClients} clients`,
    idle_deflate: `${cfg.idleClients} clients`,
    compressed: `${cfg.compClients} clients × ${cfg.compInflight} in flight, ${cfg.compSeconds} s, ${cfg.compPayload}-byte documents`,
    'compressed-methods': `${cfg.compClients} clients × ${cfg.compInflight} in flight, ${cfg.compSeconds} s, ${cfg.docBytes}-byte documents`,
    'compressed-fan-out': `${cfg.fanoutSubscribers} subscribers, ${cfg.fanoutWrites} writes, ${cfg.docBytes}-byte documents`,
    'fan-out-4k': `${cfg.fanoutSubscribers} subscribers, ${cfg.fanoutWrites} writes, ${cfg.docBytes}-byte documents`,
    'app-rate': `${cfg.appRateClients} clients, ${cfg.appRate} calls/s in all, ${cfg.appSeconds} s`,
    'app-saturated': `${cfg.appSatClients} clients × ${cfg.appSatInflight} in flight, ${cfg.appSeconds} s`,
  };
  for (const w of report.workloads) lines.push(`- **${w.name}** (${sizes[w.name] || ''}): ${w.description}`);
  lines.push('');
  lines.push('## Transports');
  lines.push('');
  for (const t of report.transports) lines.push(`- **${t.name}**: ${t.description}`);
  lines.push('');
  if (svgName) {
    lines.push(`![benchmark chart](${svgName})`);
    lines.push('');
  }
  return lines.join('\n');
}

/** idle_deflate KiB/conn ÷ idle KiB/conn of one transport (null unless both are positive). */
function deflateRssRatio(report, transport) {
  const p = valueOf(report, transport, { workload: 'idle', key: 'kib_per_conn' });
  const d = valueOf(report, transport, { workload: 'idle_deflate', key: 'kib_per_conn' });
  return p !== null && d !== null && p > 0 && d > 0 ? d / p : null;
}

/** Median "other processes" cores over the kept runs whose window was long enough to measure it. */
function disturbance(report) {
  const v = report.runs
    .filter((r) => r.final && r.ok && r.window && r.window.wall_s >= 1 && !RSS_WORKLOADS.includes(r.workload))
    .map((r) => r.window.other_cores)
    .sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Collapse "n/a" notes of a transport that is unavailable altogether into one line. */
function dedupeNa(notes) {
  const byT = new Map();
  const out = [];
  for (const n of notes) {
    const m = /^- (\S+) \/ (\S+): n\/a — (.*)$/.exec(n);
    if (!m) { out.push(n); continue; }
    const key = `${m[1]}\u0000${m[3]}`;
    if (!byT.has(key)) { byT.set(key, []); out.push(key); }
    byT.get(key).push(m[2]);
  }
  return out.map((x) => {
    if (!byT.has(x)) return x;
    const [t, reason] = x.split('\u0000');
    return `- ${t} / ${byT.get(x).join(', ')}: n/a — ${reason}`;
  });
}

// ------------------------------------------------------------------------------------------------
// SVG: one panel per headline metric, a horizontal bar per transport, value labels.

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function renderSvg(report, W) {
  const cfg = report.config;
  const cols = W.columns(cfg).filter((c) => report.workloads.some((w) => w.name === c.workload));
  const names = report.transports.map((t) => t.name);
  const perRow = 3;
  const panelW = 420;
  const labelW = 104;
  const barH = 16;
  const gap = 6;
  const panelH = 44 + names.length * (barH + gap) + 8;
  const top = 70;
  const width = perRow * panelW + 20;
  const height = top + Math.ceil(cols.length / perRow) * (panelH + 16) + 10;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="12" y="28" font-size="20" font-weight="bold" fill="#222">ddp-transport-native benchmark — ${esc(report.date)}${cfg.smoke ? ' (smoke run)' : ''}</text>`);
  const m = report.machine;
  out.push(`<text x="12" y="50" font-size="12" fill="#555">${esc(`${m.cores} cores, ${m.cpu}; Node ${m.node}; ${m.rustc}; medians of ${cfg.rounds} round(s); fresh server per run, transports interleaved`)}</text>`);
  const dist = disturbance(report);
  if (dist !== null && dist > cfg.otherCpuLimitCores && !cfg.smoke) {
    out.push(`<text x="${width - 12}" y="28" font-size="12" text-anchor="end" fill="#c0392b">${esc(`disturbed: other processes used ${dist.toFixed(2)} cores (median)`)}</text>`);
  }
  cols.forEach((c, i) => {
    const px = 10 + (i % perRow) * panelW;
    const py = top + Math.floor(i / perRow) * (panelH + 16);
    out.push(`<g transform="translate(${px},${py})">`);
    out.push(`<rect x="0" y="0" width="${panelW - 10}" height="${panelH}" fill="#fafafa" stroke="#ddd" rx="4"/>`);
    out.push(`<text x="10" y="20" font-size="13" font-weight="bold" fill="#222">${esc(c.label)}</text>`);
    out.push(`<text x="10" y="35" font-size="11" fill="#777">${esc(`${c.workload} · ${c.better} is better`)}</text>`);
    const vals = names.map((n) => valueOf(report, n, c));
    const max = Math.max(0, ...vals.filter((v) => v !== null));
    const barMax = panelW - 10 - labelW - 80;
    names.forEach((n, j) => {
      const y = 44 + j * (barH + gap);
      out.push(`<text x="${labelW - 6}" y="${y + barH - 4}" font-size="11" text-anchor="end" fill="#333">${esc(n)}</text>`);
      const v = vals[j];
      const cell = cellOf(report, n, c);
      if (v === null) {
        const txt = cell.status === 'failed' ? 'failed' : 'n/a';
        out.push(`<text x="${labelW + 2}" y="${y + barH - 4}" font-size="11" font-style="italic" fill="${txt === 'failed' ? '#c0392b' : '#999'}">${txt}</text>`);
        return;
      }
      const w = max > 0 ? Math.max(1, (v / max) * barMax) : 1;
      out.push(`<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[n] || '#555'}" rx="2"/>`);
      out.push(`<text x="${(labelW + w + 4).toFixed(1)}" y="${y + barH - 4}" font-size="11" fill="#222">${esc(fmt(v, c.digits))}</text>`);
    });
    out.push('</g>');
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

module.exports = { renderMarkdown, renderSvg, factor, valueOf, disturbance, deflateRssRatio };
