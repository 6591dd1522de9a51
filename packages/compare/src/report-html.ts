/**
 * The HTML report of `gpumem compare` (`--report`): one self-contained file, the comparison
 * table, each allocator's memory over time and the epoch times side by side. The charts are drawn
 * by Chart.js, whose browser build is read from node_modules and inlined, so the file opens with
 * no network.
 * @module
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { formatBytes, formatMs } from '@gpumem/allocator-core';
import { capTimeline, cleanTimeline } from './timeline.js';
import { peerThroughput, type PeerRun } from './peer.js';
import { anyTierMoves, hasHostTier } from './tiers.js';
import { anyDevices, deviceLabels } from './devices.js';
import type { CompareColumn, CompareResult, CompareRun, DeviceRun, TierSplit, TimelineSeries } from './types.js';

/** At most this many points per timeline series go into the report (peaks are kept). */
export const MAX_REPORT_TIMELINE_POINTS = 5000;
/** Above this many epochs, epoch times are drawn as lines instead of grouped bars. */
const MAX_EPOCH_BARS = 60;
/** At most this many epochs per run go into the epoch-time chart. */
const MAX_EPOCH_POINTS = 5000;

/** One colour per run, in run order (repeats after ten). */
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];

/** Escapes text for HTML content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that is safe inside a `<script>` element: no `<` (so no `</script>` or `<!--`), no line separators. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

let chartLibrary: string | undefined;

/** Chart.js's minified browser (UMD) build, without its source-map comment, ready to inline. */
function chartLibrarySource(): string {
  if (chartLibrary === undefined) {
    // The package's exports map hides dist/; its main entry lies next to the UMD build.
    const entry = createRequire(import.meta.url).resolve('chart.js');
    const source = readFileSync(join(dirname(entry), 'chart.umd.min.js'), 'utf8');
    chartLibrary = source.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n').replace(/<\/(script)/gi, '<\\/$1');
  }
  return chartLibrary;
}

/** Every `step`-th value so that at most `max` remain (the last one included). */
function thin<T>(values: readonly T[], max: number): { index: number; value: T }[] {
  const step = Math.max(1, Math.ceil(values.length / max));
  const out: { index: number; value: T }[] = [];
  for (let i = 0; i < values.length; i += step) out.push({ index: i, value: values[i]! });
  const lastIndex = values.length - 1;
  if (lastIndex >= 0 && out.at(-1)!.index !== lastIndex) out[out.length - 1] = { index: lastIndex, value: values[lastIndex]! };
  return out;
}

const DASH = '\u2014';


function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function formatDate(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Colours of the phase tags' stacked areas (muted, so the run's own lines stay on top). */
const TAG_COLORS = ['#b0b7bf', '#8fb3d9', '#f2b36f', '#e88c8c', '#9fd49a', '#c7a6e0', '#d9cf7a', '#88d1c9'];

/** The host tier's colour on a run's tier chart (the device tier has the run's colour). */
const HOST_COLOR = '#00897b';

function tagColor(index: number): string {
  return TAG_COLORS[index % TAG_COLORS.length]!;
}

function colorOf(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}

/** `#rrggbb` with an alpha, as `rgba(...)`. */
function withAlpha(hex: string, alpha: number): string {
  const n = Number.parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

/** One table column: its heading (and a second line under it), how a run's cell reads, and the best-value column it marks. */
interface Column {
  heading: string;
  subheading?: string;
  best?: CompareColumn;
  /** For an extra column: the runs holding its best value. */
  bestRuns?: string[];
  numeric: boolean;
  cell(run: CompareRun, result: CompareResult): string;
}

function orDash<T>(value: T | null | undefined, format: (v: T) => string): string {
  return value === null || value === undefined ? DASH : format(value);
}

const columns: Column[] = [
  // A spec such as pool:maxReservedBytes=64MiB may break after each ':'.
  {
    heading: 'Allocator',
    numeric: false,
    cell: (run) =>
      escapeHtml(run.allocator).replace(/:/g, ':<wbr>') + (run.devices && run.devices.length > 0 ? `<br><small class="devices">over ${run.devices.length} devices</small>` : ''),
  },
  { heading: 'Status', numeric: false, cell: statusCell },
  { heading: 'Median epoch', subheading: 'min\u2013max', best: 'medianEpochMs', numeric: true, cell: epochCell },
  {
    heading: 'Throughput',
    best: 'throughput',
    numeric: true,
    cell: (run, result) => orDash(run.throughput, (v) => `${formatCount(v)} ${escapeHtml(result.throughputUnit)}`),
  },
  { heading: 'Peak allocated', best: 'peakAllocatedBytes', numeric: true, cell: (run) => peakCell(run.peakAllocatedBytes, run.tiers?.peakAllocated) },
  { heading: 'Peak reserved', best: 'peakReservedBytes', numeric: true, cell: (run) => peakCell(run.peakReservedBytes, run.tiers?.peakReserved) },
  { heading: 'Overhead', subheading: 'reserved / allocated', best: 'overhead', numeric: true, cell: (run) => orDash(run.overhead, (v) => `${v.toFixed(3)}\u00d7`) },
  {
    heading: 'Upstream calls',
    subheading: 'alloc / free',
    best: 'upstreamCalls',
    numeric: true,
    cell: (run) =>
      run.upstreamAllocCalls === null && run.upstreamFreeCalls === null
        ? DASH
        : `${orDash(run.upstreamAllocCalls, formatCount)} / ${orDash(run.upstreamFreeCalls, formatCount)}`,
  },
  { heading: 'OOMs', best: 'oomCount', numeric: true, cell: (run) => formatCount(run.oomCount) },
  { heading: 'Final loss', best: 'finalLoss', numeric: true, cell: (run) => orDash(run.finalLoss, (v) => v.toPrecision(4)) },
  { heading: 'Accuracy', best: 'accuracy', numeric: true, cell: (run) => orDash(run.accuracy, (v) => `${(v * 100).toFixed(2)}%`) },
];

/** A peak, and under it its split between device and host for a strategy with a host tier. */
function peakCell(peak: number | null, split: TierSplit | undefined): string {
  const total = orDash(peak, formatBytes);
  if (peak === null || !split) return total;
  return `${total}<br><small class="tiers" title="the host tier's peak, and the rest of the peak on the device">${tierSplitText(split)}</small>`;
}

/** `41.20 GiB device + 20.00 GiB host`. */
function tierSplitText(split: TierSplit): string {
  return `${formatBytes(split.deviceBytes)} device + ${formatBytes(split.hostBytes)} host`;
}

/** Shown after the overhead when some run moved bytes between its tiers. */
const tierMovesColumn: Column = {
  heading: 'Moved between tiers',
  subheading: 'to host / to device',
  numeric: true,
  cell: (run) => (run.tiers ? `${formatBytes(run.tiers.bytesMovedToHost)} / ${formatBytes(run.tiers.bytesMovedToDevice)}` : DASH),
};

/** The median epoch and, under it, the min–max of the measured epochs (warm-up left out). */
function epochCell(run: CompareRun): string {
  const median = orDash(run.medianEpochMs, formatMs);
  const s = run.epochSpread;
  if (!s || s.n < 2) return median;
  const repeats = (run.repeats ?? 1) > 1 ? `, ${run.repeats} runs` : '';
  return `${median}<br><small class="spread" title="${s.n} measured epochs${repeats}; quartiles ${escapeHtml(formatMs(s.q1))} to ${escapeHtml(formatMs(s.q3))}">${escapeHtml(formatMs(s.min))}\u2013${escapeHtml(formatMs(s.max))}</small>`;
}

const statusLabel: Record<CompareRun['status'], string> = { ok: 'OK', oom: 'OOM', error: 'error' };

function statusCell(run: CompareRun): string {
  return `<span class="status status-${escapeHtml(run.status)}">${statusLabel[run.status] ?? escapeHtml(String(run.status))}</span>`;
}

/**
 * The table's columns: the built-in ones the result does not hide, then its extra columns (a
 * replay's minimum capacity, fragmentation at peak, ...), each marking the runs it names as best.
 */
function columnsOf(result: CompareResult): Column[] {
  const hidden = new Set(result.hiddenColumns ?? []);
  const shown = columns.filter((c) => c.best === undefined || !hidden.has(c.best));
  if (anyTierMoves(result.runs)) {
    const after = shown.findIndex((c) => c.best === 'overhead');
    shown.splice(after >= 0 ? after + 1 : shown.length, 0, tierMovesColumn);
  }
  const extra = (result.extraColumns ?? []).map(
    (x): Column => ({
      heading: x.heading,
      ...(x.subheading !== undefined && { subheading: x.subheading }),
      numeric: true,
      bestRuns: x.best ?? [],
      cell: (run) => {
        const c = run.extra?.[x.key];
        return c === undefined ? DASH : `${escapeHtml(c.text)}${c.mark ? `<sup>${escapeHtml(c.mark)}</sup>` : ''}`;
      },
    }),
  );
  return [...shown, ...extra];
}

/** The row under a failed run's row: its message, across the table. */
function errorRow(run: CompareRun, columnCount = columns.length): string {
  if (run.status === 'ok') return '';
  return `<tr class="run-error-detail"><td></td><td colspan="${columnCount - 1}"><div class="error-message">${escapeHtml(run.error ?? 'no message')}</div></td></tr>`;
}

function isBest(result: CompareResult, column: CompareColumn, run: CompareRun): boolean {
  return run.status === 'ok' && (result.best[column] ?? []).includes(run.allocator);
}

function isTied(result: CompareResult, column: CompareColumn, run: CompareRun): boolean {
  return run.status === 'ok' && (result.tied?.[column] ?? []).includes(run.allocator);
}

function tableHtml(result: CompareResult): string {
  const columns = columnsOf(result);
  const head = columns
    .map((c) => `<th scope="col"${c.numeric ? ' class="num"' : ''}>${escapeHtml(c.heading)}${c.subheading ? `<br><small>${escapeHtml(c.subheading)}</small>` : ''}</th>`)
    .join('');
  const rows = result.runs.map((run, index) => {
    const cells = columns.map((column, k) => {
      const classes = [
        column.numeric ? 'num' : '',
        (column.best && isBest(result, column.best, run)) || (run.status === 'ok' && column.bestRuns?.includes(run.allocator)) ? 'best' : '',
        column.best && isTied(result, column.best, run) ? 'tied' : '',
      ].filter(Boolean);
      const attrs = `${classes.length > 0 ? ` class="${classes.join(' ')}"` : ''}${column.best ? ` data-column="${column.best}"` : ''}`;
      const mark = classes.includes('best')
        ? '<span class="best-mark" title="best">*</span> '
        : classes.includes('tied')
          ? '<span class="tied-mark" title="tied for best within the spread">=</span> '
          : '';
      const swatch = k === 0 ? `<span class="swatch" style="background:${colorOf(index)}"></span>` : '';
      const tag = k === 0 ? 'th scope="row"' : 'td';
      return `<${tag}${attrs}>${swatch}${mark}${column.cell(run, result)}</${tag.split(' ')[0]}>`;
    });
    return `<tr class="run run-${escapeHtml(run.status)}" data-allocator="${escapeHtml(run.allocator)}">${cells.join('')}</tr>${errorRow(run, columns.length)}`;
  });
  rows.push(...(result.peers ?? []).map((peer, k) => peerRowHtml(peer, columns.map((c) => c.heading), result, result.runs.length + k)));
  return `<table class="compare"><thead><tr>${head}</tr></thead><tbody>\n${rows.join('\n')}\n</tbody></table>`;
}

/** A peer's row (another framework's run, `--peer`): its figures under the columns it has, a dash elsewhere; never ranked. */
function peerRowHtml(peer: PeerRun, headings: readonly string[], result: CompareResult, index: number): string {
  const throughput = peerThroughput(peer, result);
  const spread = peer.epochSpread;
  const cells: Record<string, string> = {
    Allocator: `<span class="swatch" style="background:${colorOf(index)}"></span>${escapeHtml(peer.name)}`,
    Status: '<span class="status status-peer">peer</span>',
    'Median epoch':
      orDash(peer.medianEpochMs, formatMs) +
      (spread && spread.n > 1 ? `<br><small class="spread">${escapeHtml(formatMs(spread.min))}\u2013${escapeHtml(formatMs(spread.max))}</small>` : ''),
    Throughput: throughput !== null ? `${formatCount(throughput)} ${escapeHtml(result.throughputUnit)}` : DASH,
    'Peak allocated': orDash(peer.peakAllocatedBytes, formatBytes),
    'Peak reserved': orDash(peer.peakReservedBytes, formatBytes),
    Overhead: peer.peakAllocatedBytes && peer.peakReservedBytes !== null ? `${(peer.peakReservedBytes / peer.peakAllocatedBytes).toFixed(3)}\u00d7` : DASH,
    'Final loss': orDash(peer.finalLoss, (v) => v.toPrecision(4)),
    Accuracy: orDash(peer.accuracy, (v) => `${(v * 100).toFixed(2)}%`),
  };
  const tds = headings.map((h, k) => {
    const tag = k === 0 ? 'th scope="row"' : 'td';
    return `<${tag}${k > 1 ? ' class="num"' : ''}>${cells[h] ?? DASH}</${tag.split(' ')[0]}>`;
  });
  return `<tr class="peer" data-peer="${escapeHtml(peer.name)}" title="${escapeHtml(peer.file)}">${tds.join('')}</tr>`;
}

const bestMeaning =
  'fastest median epoch, highest throughput, lowest peak allocated and peak reserved bytes, lowest overhead, ' +
  'fewest upstream (driver) calls, allocations and frees together, fewest OOMs, lowest final loss and highest accuracy';

/** The header of a report of `gpumem replay`: the trace instead of a model. */
function replayHeaderHtml(result: CompareResult, replay: NonNullable<CompareResult['replay']>): string {
  const capacity = replay.capacityBytes !== undefined ? `<dt>Capacity</dt><dd>replayed as if the device had ${escapeHtml(formatBytes(replay.capacityBytes))}</dd>` : '';
  return `<header>
<h1>gpumem replay: ${escapeHtml(result.workload.title)}</h1>
<dl class="meta">
<dt>Device</dt><dd>${escapeHtml(result.device)}</dd>
<dt>Date</dt><dd><time datetime="${escapeHtml(result.createdAt)}">${escapeHtml(formatDate(result.createdAt))}</time></dd>
<dt>Trace</dt><dd><code>${escapeHtml(replay.trace)}</code> (${escapeHtml(replay.format)}; ${escapeHtml(replay.origin)})</dd>
<dt>Holds</dt><dd>${escapeHtml(replay.summary)}</dd>
${capacity}
<dt>Allocators</dt><dd>${result.runs.map((run) => escapeHtml(run.allocator)).join(', ') || DASH}</dd>
</dl>
<p class="best-note"><span class="best-mark">*</span> marks the best value of each column among the runs that finished
(lowest bytes, calls, times and OOMs). Ties are all marked; runs that failed are not ranked.</p>
</header>`;
}

/** The recommendation (above the table) and the notes (under it), where the result has them. */
function recommendationHtml(result: CompareResult): string {
  const lines = result.recommendation ?? [];
  return lines.length === 0 ? '' : `<div class="recommendation"><strong>Recommendation</strong><ul>${lines.map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul></div>`;
}

function notesHtml(result: CompareResult): string {
  const notes = result.notes ?? [];
  return notes.length === 0 ? '' : `<ul class="notes">${notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>`;
}

function headerHtml(result: CompareResult): string {
  if (result.replay) return replayHeaderHtml(result, result.replay);
  const { workload } = result;
  const options = Object.entries(workload.options)
    .map(([key, value]) => `<code>${escapeHtml(key)}=${escapeHtml(typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value)))}</code>`)
    .join(' ');
  return `<header>
<h1>gpumem compare: ${escapeHtml(workload.title)}</h1>
<dl class="meta">
<dt>Device</dt><dd>${escapeHtml(result.device)}</dd>
<dt>Date</dt><dd><time datetime="${escapeHtml(result.createdAt)}">${escapeHtml(formatDate(result.createdAt))}</time></dd>
<dt>Model</dt><dd>${escapeHtml(workload.model)} on ${escapeHtml(workload.dataset)}, ${formatCount(workload.epochs)} epoch${workload.epochs === 1 ? '' : 's'} per allocator</dd>
<dt>Allocators</dt><dd>${result.runs.map((run) => escapeHtml(run.allocator)).join(', ') || DASH}</dd>
${options ? `<dt>Options</dt><dd>${options}</dd>` : ''}
</dl>
<p class="best-note"><span class="best-mark">*</span> marks the best value of each column among the runs that finished:
${bestMeaning}. Ties are all marked; runs that failed are not ranked. Epoch times leave out each run's first
(warm-up) epoch; a time is marked best only when its spread does not overlap another run's, and
<span class="tied-mark">=</span> marks the runs tied within the spread.</p>
</header>`;
}

function statsTable(run: CompareRun): string {
  const stats = run.stats;
  if (stats === null) return '<p class="note">No statistics were taken before the failure.</p>';
  const rows: [string, string][] = [
    ['allocated', formatBytes(stats.allocatedBytes)],
    ['peak allocated', formatBytes(stats.peakAllocatedBytes)],
    ['reserved', formatBytes(stats.reservedBytes)],
    ['peak reserved', formatBytes(stats.peakReservedBytes)],
    ['allocations / frees', `${formatCount(stats.allocCount)} / ${formatCount(stats.freeCount)}`],
    ['upstream allocations / frees', `${formatCount(stats.upstreamAllocCount)} / ${formatCount(stats.upstreamFreeCount)}`],
    ['OOMs', formatCount(stats.oomCount)],
  ];
  if (stats.largestFreeBlock !== undefined) rows.push(['largest free block', formatBytes(stats.largestFreeBlock)]);
  if (stats.segmentCount !== undefined) rows.push(['segments', formatCount(stats.segmentCount)]);
  if (hasHostTier(stats)) {
    rows.push(
      ['host allocated', formatBytes(stats.hostAllocatedBytes)],
      ['peak host allocated', formatBytes(stats.peakHostAllocatedBytes ?? stats.hostAllocatedBytes)],
      ['host reserved', formatBytes(stats.hostReservedBytes ?? 0)],
      ['peak host reserved', formatBytes(stats.peakHostReservedBytes ?? stats.hostReservedBytes ?? 0)],
      ['moved to host / to device', `${formatBytes(stats.bytesMovedToHost ?? 0)} / ${formatBytes(stats.bytesMovedToDevice ?? 0)}`],
    );
  }
  return `<table class="stats"><caption>Statistics at the failure</caption><tbody>${rows
    .map(([name, value]) => `<tr><th scope="row">${name}</th><td class="num">${value}</td></tr>`)
    .join('')}</tbody></table>`;
}

function failureHtml(run: CompareRun, result: CompareResult): string {
  const completed = result.replay
    ? 'the replay did not finish'
    : `${run.epochs.length} of ${result.workload.epochs} epoch${result.workload.epochs === 1 ? '' : 's'} completed`;
  return `<div class="failure"><p><span class="status status-${escapeHtml(run.status)}">${statusLabel[run.status] ?? escapeHtml(String(run.status))}</span> ${completed}, after ${formatMs(run.wallMs)}.</p>
<pre class="error-message">${escapeHtml(run.error ?? 'no message')}</pre>
${statsTable(run)}</div>`;
}

/** Where the memory goes at the peak of allocated bytes: one row per phase that allocated it. */
function breakdownTable(run: CompareRun, byWhat = 'the phase that allocated them'): string {
  const parts = run.peakBreakdown ?? [];
  if (parts.length === 0) return '';
  const total = parts.reduce((t, p) => t + p.bytes, 0);
  const rows = parts
    .map((p) => `<tr><th scope="row">${escapeHtml(p.tag)}</th><td class="num">${formatBytes(p.bytes)}</td><td class="num">${((100 * p.bytes) / total).toFixed(1)}%</td></tr>`)
    .join('');
  return `<table class="stats breakdown"><caption>At the peak of allocated bytes (${formatBytes(total)}), by ${byWhat}</caption><tbody>${rows}</tbody></table>`;
}

/** A run with a host tier: its peaks and its bytes at the end split between device and host, and the bytes moved. */
function tierTable(run: CompareRun): string {
  const tiers = run.tiers;
  if (!tiers) return '';
  const row = (name: string, device: number, host: number) =>
    `<tr><th scope="row">${name}</th><td class="num">${formatBytes(device)}</td><td class="num">${formatBytes(host)}</td></tr>`;
  const rows = [row('peak allocated', tiers.peakAllocated.deviceBytes, tiers.peakAllocated.hostBytes), row('peak reserved', tiers.peakReserved.deviceBytes, tiers.peakReserved.hostBytes)];
  const end = run.stats;
  if (hasHostTier(end)) {
    const host = Math.min(end.hostAllocatedBytes, end.allocatedBytes);
    const hostReserved = Math.min(end.hostReservedBytes ?? 0, end.reservedBytes);
    rows.push(row('allocated at the end', end.allocatedBytes - host, host), row('reserved at the end', end.reservedBytes - hostReserved, hostReserved));
  }
  rows.push(
    `<tr><th scope="row">moved to host</th><td></td><td class="num">${formatBytes(tiers.bytesMovedToHost)}</td></tr>`,
    `<tr><th scope="row">moved to device</th><td class="num">${formatBytes(tiers.bytesMovedToDevice)}</td><td></td></tr>`,
  );
  return `<table class="stats tiers" title="the host part of a peak is the host tier's own peak, the device part the rest of the peak"><caption>Device and host tiers</caption><thead><tr><td></td><th scope="col" class="num">device</th><th scope="col" class="num">host</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function eventsNote(run: CompareRun): string {
  const dropped = run.eventsDropped > 0 ? `, <strong>${formatCount(run.eventsDropped)} lost</strong> to the recorder's bound (the timeline is incomplete)` : '';
  return `<p class="note">${formatCount(run.eventsRecorded)} allocator events recorded${dropped}.</p>`;
}

/** A run over several devices: each device's peaks (and, for the gcn, the other ranks' rows it read), in its chart colour. */
function deviceTable(devices: readonly DeviceRun[], index: number): string {
  const names = deviceLabels(devices);
  const remote = devices.some((d) => d.remoteRows);
  const rows = devices
    .map((d, k) => {
      const read = d.remoteRows ? `${formatCount(d.remoteRows.forward)} / ${formatCount(d.remoteRows.backward)} of ${formatCount(d.remoteRows.remote)}` : DASH;
      return `<tr><th scope="row"><span class="swatch" style="background:${colorOf(index + k)}"></span>${escapeHtml(names[k]!)}</th><td class="num">${formatBytes(d.peakAllocatedBytes)}</td><td class="num">${formatBytes(d.peakReservedBytes)}</td>${remote ? `<td class="num">${read}</td>` : ''}</tr>`;
    })
    .join('');
  const head = `<thead><tr><td></td><th scope="col" class="num">peak allocated</th><th scope="col" class="num">peak reserved</th>${remote ? '<th scope="col" class="num">remote rows read (fwd / bwd)</th>' : ''}</tr></thead>`;
  return `<table class="stats devices"><caption>Each device (its allocator's own peaks; the lines are sampled after every step or epoch)</caption>${head}<tbody>${rows}</tbody></table>`;
}

/** True when a timeline holds the host part of its bytes (a strategy with a host tier). */
function hasHostTimeline(series: TimelineSeries): boolean {
  return series.hostAllocatedBytes !== undefined && series.hostReservedBytes !== undefined;
}

/** The figure of one run in the timeline grid: its chart, or why there is none. */
function timelineFigure(run: CompareRun, index: number, result: CompareResult): string {
  const caption = `<figcaption><span class="swatch" style="background:${colorOf(index)}"></span>${escapeHtml(run.allocator)}</figcaption>`;
  if (run.status !== 'ok') return `<figure class="timeline failed" data-run="${index}">${caption}${failureHtml(run, result)}</figure>`;
  if (run.devices && run.devices.length > 0) {
    return `<figure class="timeline devices" data-run="${index}">${caption}
<div class="chart-box"><canvas id="timeline-${index}" role="img" aria-label="${escapeHtml(`Allocated and reserved bytes over time on each device, ${run.allocator}`)}"></canvas></div>
${deviceTable(run.devices, index)}${tierTable(run)}</figure>`;
  }
  if (run.timeline === null) {
    return `<figure class="timeline empty" data-run="${index}">${caption}<p class="note">No timeline: event recording was off for this run.</p>${tierTable(run)}</figure>`;
  }
  const tierChart = hasHostTimeline(run.timeline)
    ? `
<div class="chart-box tiers"><canvas id="timeline-${index}-tiers" role="img" aria-label="${escapeHtml(`Device and host bytes over time, ${run.allocator}`)}"></canvas></div>`
    : '';
  return `<figure class="timeline${tierChart ? ' tiered' : ''}" data-run="${index}">${caption}
<div class="chart-box"><canvas id="timeline-${index}" role="img" aria-label="${escapeHtml(`Allocated and reserved bytes over time, ${run.allocator}`)}"></canvas></div>${tierChart}
${eventsNote(run)}${breakdownTable(run, result.replay ? 'where they were allocated (the innermost user frame, for a snapshot recorded with stacks)' : undefined)}${tierTable(run)}</figure>`;
}

/** What the page's script draws, all numbers, names as plain strings (never HTML). */
/** At most this many points per loss curve go into the report. */
const MAX_LOSS_POINTS = 4000;

interface ChartData {
  /** Each run's (and peer's) measured epochs as a box: min–max bar, interquartile box, median; null without spreads. */
  spreadChart: { canvasId: string; labels: string[]; colors: string[]; range: [number, number][]; box: [number, number][]; median: number[] } | null;
  /** Training loss per step of each run and peer; null when none recorded step losses. */
  lossChart: { canvasId: string; datasets: { name: string; color: string; dash: boolean; step: number[]; loss: number[] }[] } | null;
  /** The byte axis shared by every timeline: top and tick step, round numbers in a binary unit. */
  yMax: number;
  yStep: number;
  timelines: {
    canvasId: string;
    allocator: string;
    color: string;
    fill: string;
    /** Seconds on the timeline's clock. */
    t: number[];
    /** The x axis's title: what the clock is. */
    xTitle: string;
    allocated: number[];
    reserved: number[];
    xMax: number;
    /** Allocated bytes by allocating phase, stacked under the allocated line (absent without tags). */
    tags: { name: string; color: string; bytes: number[] }[];
    /** This chart's own byte axis (the default view: a large run does not flatten a small one). */
    ownYMax: number;
    ownYStep: number;
    phases: { name: string; start: number; end: number }[];
    /**
     * A run over several devices: each device's allocated and reserved bytes, drawn as lines of its
     * own colour on the run's chart (the run's own t, allocated, reserved and tags are then empty).
     */
    devices?: { name: string; color: string; fill: string; t: number[]; allocated: number[]; reserved: number[] }[];
    /**
     * A strategy with a host tier: its allocated and reserved bytes split into device and host at
     * each point (device = total less host), drawn on a second chart; null for other strategies.
     */
    tiers: {
      canvasId: string;
      hostColor: string;
      hostFill: string;
      deviceAllocated: number[];
      hostAllocated: number[];
      deviceReserved: number[];
      hostReserved: number[];
      ownYMax: number;
      ownYStep: number;
    } | null;
  }[];
  epochChart: {
    canvasId: string;
    type: 'bar' | 'line';
    labels: string[];
    datasets: { allocator: string; color: string; epochMs: (number | null)[] }[];
  } | null;
}

function roundTo(value: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Each device's series of a run over several devices, thinned for drawing, in the colours from the run's own on. */
function deviceSeries(devices: readonly DeviceRun[], index: number): NonNullable<ChartData['timelines'][number]['devices']> {
  const names = deviceLabels(devices);
  return devices.map((d, k) => {
    const series = capTimeline(cleanTimeline(d.timeline), MAX_REPORT_TIMELINE_POINTS);
    return {
      name: names[k]!,
      color: colorOf(index + k),
      fill: withAlpha(colorOf(index + k), 0.12),
      t: series.tMs.map((ms) => roundTo(ms / 1000, 6)),
      allocated: series.allocatedBytes,
      reserved: series.reservedBytes,
    };
  });
}

/** The chart of a run over several devices: a pair of lines per device on the run's clock, the run's epochs shaded. */
function devicesTimelineData(run: CompareRun, index: number, devices: readonly DeviceRun[]): ChartData['timelines'][number] {
  const series = deviceSeries(devices, index);
  const phases = phasesData(run);
  let top = 0;
  let end = 1e-3;
  for (const d of series) {
    for (const v of d.allocated) top = Math.max(top, v);
    for (const v of d.reserved) top = Math.max(top, v);
    end = Math.max(end, d.t.at(-1) ?? 0);
  }
  const own = byteAxis(top);
  return {
    canvasId: `timeline-${index}`,
    allocator: run.allocator,
    color: colorOf(index),
    fill: withAlpha(colorOf(index), 0.12),
    t: [],
    xTitle: 'time since the ranks were started',
    allocated: [],
    reserved: [],
    xMax: phases.reduce((a, p) => Math.max(a, p.end), end),
    tags: [],
    ownYMax: own.max,
    ownYStep: own.step,
    phases,
    devices: series,
    tiers: null,
  };
}

/** A run's epochs in seconds on its timeline's clock (the bands of its charts). */
function phasesData(run: CompareRun): ChartData['timelines'][number]['phases'] {
  return (run.phases ?? [])
    .filter((p) => Number.isFinite(p.startMs) && Number.isFinite(p.endMs) && p.endMs >= p.startMs)
    .map((p) => ({ name: p.name, start: roundTo(p.startMs / 1000, 6), end: roundTo(p.endMs / 1000, 6) }));
}

function timelineData(result: CompareResult): ChartData['timelines'] {
  const out: ChartData['timelines'] = [];
  result.runs.forEach((run, index) => {
    if (run.status !== 'ok') return;
    if (run.devices && run.devices.length > 0) {
      out.push(devicesTimelineData(run, index, run.devices));
      return;
    }
    if (run.timeline === null) return;
    const series = capTimeline(cleanTimeline(run.timeline), MAX_REPORT_TIMELINE_POINTS);
    const phases = phasesData(run);
    const t = series.tMs.map((ms) => roundTo(ms / 1000, 6));
    const xMax = phases.reduce((a, p) => Math.max(a, p.end), Math.max(t.at(-1) ?? 0, 1e-3));
    let top = 0;
    for (const v of series.allocatedBytes) top = Math.max(top, v);
    for (const v of series.reservedBytes) top = Math.max(top, v);
    const own = byteAxis(top);
    out.push({
      tiers: tierData(series, index),
      canvasId: `timeline-${index}`,
      allocator: run.allocator,
      color: colorOf(index),
      fill: withAlpha(colorOf(index), 0.12),
      t,
      xTitle: result.replay ? "time in the trace (the recording's clock)" : 'time since the allocator was created',
      allocated: series.allocatedBytes,
      reserved: series.reservedBytes,
      xMax,
      tags: (series.tags ?? [])
        .map((name, k) => ({ name, color: tagColor(k), bytes: series.byTag?.[k] ?? [] }))
        .filter((tag) => tag.bytes.some((b) => b > 0)),
      ownYMax: own.max,
      ownYStep: own.step,
      phases,
    });
  });
  return out;
}

/** The device and host parts of a timeline with a host tier (host at most the total); null without one. */
function tierData(series: TimelineSeries, index: number): ChartData['timelines'][number]['tiers'] {
  if (!series.hostAllocatedBytes || !series.hostReservedBytes) return null;
  const hostAllocated = series.allocatedBytes.map((total, i) => Math.max(0, Math.min(total, series.hostAllocatedBytes![i]!)));
  const hostReserved = series.reservedBytes.map((total, i) => Math.max(0, Math.min(total, series.hostReservedBytes![i]!)));
  const deviceAllocated = series.allocatedBytes.map((total, i) => total - hostAllocated[i]!);
  const deviceReserved = series.reservedBytes.map((total, i) => total - hostReserved[i]!);
  let top = 0;
  for (const values of [hostAllocated, hostReserved, deviceAllocated, deviceReserved]) for (const v of values) top = Math.max(top, v);
  const own = byteAxis(top);
  return {
    canvasId: `timeline-${index}-tiers`,
    hostColor: HOST_COLOR,
    hostFill: withAlpha(HOST_COLOR, 0.12),
    deviceAllocated,
    hostAllocated,
    deviceReserved,
    hostReserved,
    ownYMax: own.max,
    ownYStep: own.step,
  };
}

function epochChartData(result: CompareResult): ChartData['epochChart'] {
  const runs = result.runs.map((run, index) => ({ run, index })).filter(({ run }) => run.epochs.length > 0);
  if (runs.length === 0) return null;
  const count = Math.max(...runs.map(({ run }) => run.epochs.length));
  const positions = thin([...Array(count).keys()], MAX_EPOCH_POINTS).map(({ value }) => value);
  return {
    canvasId: 'epoch-times',
    type: count > MAX_EPOCH_BARS ? 'line' : 'bar',
    // Counted from 1, as the timeline's epoch bands are.
    labels: positions.map((i) => `epoch ${i + 1}`),
    datasets: runs.map(({ run, index }) => ({
      allocator: run.allocator,
      color: colorOf(index),
      epochMs: positions.map((i) => {
        const ms = run.epochs[i]?.epochMs;
        return ms !== undefined && Number.isFinite(ms) ? roundTo(ms, 3) : null;
      }),
    })),
  };
}

/** A byte axis from 0 over `top` bytes in about six round steps of the binary unit that fits (e.g. 50 MiB). */
function byteAxis(top: number): { max: number; step: number } {
  if (!(top > 0)) return { max: 1024, step: 256 };
  let unit = 1;
  while (top / unit >= 1024 && unit < 2 ** 50) unit *= 1024;
  const raw = top / unit / 6;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude * unit;
  return { max: Math.ceil((top * 1.02) / step) * step, step };
}

function chartData(result: CompareResult): ChartData {
  const timelines = timelineData(result);
  let top = 0;
  for (const t of timelines) {
    for (const s of [t, ...(t.devices ?? [])]) {
      for (const v of s.allocated) top = Math.max(top, v);
      for (const v of s.reserved) top = Math.max(top, v);
    }
  }
  const axis = byteAxis(top);
  return { yMax: axis.max, yStep: axis.step, timelines, epochChart: epochChartData(result), lossChart: lossChartData(result), spreadChart: spreadChartData(result) };
}

/** Spreads of the measured epoch times (warm-up left out), one box per run and peer that has two or more. */
function spreadChartData(result: CompareResult): ChartData['spreadChart'] {
  const rows = [
    ...result.runs.map((run, index) => ({ name: run.allocator, color: colorOf(index), spread: run.status === 'ok' ? run.epochSpread : null })),
    ...(result.peers ?? []).map((peer, k) => ({ name: peer.name, color: colorOf(result.runs.length + k), spread: peer.epochSpread })),
  ].filter((r): r is { name: string; color: string; spread: NonNullable<typeof r.spread> } => r.spread !== null && r.spread !== undefined && r.spread.n >= 2);
  if (rows.length === 0) return null;
  return {
    canvasId: 'epoch-spread',
    labels: rows.map((r) => r.name),
    colors: rows.map((r) => r.color),
    range: rows.map((r) => [roundTo(r.spread.min, 3), roundTo(r.spread.max, 3)]),
    box: rows.map((r) => [roundTo(r.spread.q1, 3), roundTo(r.spread.q3, 3)]),
    median: rows.map((r) => roundTo(r.spread.median, 3)),
  };
}

/** Every run's and every peer's training loss per step, end to end over the epochs (thinned for drawing). */
function lossChartData(result: CompareResult): ChartData['lossChart'] {
  const series = [
    // with --repeat a row holds every repeat's epochs: the curve is the first run's (each repeat trains afresh)
    ...result.runs.map((run, index) => ({
      name: run.allocator,
      color: colorOf(index),
      dash: false,
      losses: run.epochs.slice(0, result.workload.epochs).flatMap((e) => e.losses ?? []),
    })),
    ...(result.peers ?? []).map((peer, k) => ({ name: peer.name, color: colorOf(result.runs.length + k), dash: true, losses: peer.epochs.flatMap((e) => e.losses) })),
  ].filter((s) => s.losses.length > 1);
  if (series.length === 0) return null;
  return {
    canvasId: 'loss-curves',
    datasets: series.map((s) => {
      const kept = thin(s.losses, MAX_LOSS_POINTS);
      return { name: s.name, color: s.color, dash: s.dash, step: kept.map((p) => p.index + 1), loss: kept.map((p) => roundTo(p.value, 6)) };
    }),
  };
}

const STYLE = `
:root { color-scheme: light; --fg: #1d232b; --muted: #5b6672; --line: #d9dee4; --best: #0b6b2f; --best-bg: #e3f4e8; --bad: #a4161a; --bad-bg: #fde8e8; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1400px; padding: 24px 28px 48px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: #fff; }
h1 { font-size: 22px; margin: 0 0 10px; }
h2 { font-size: 18px; margin: 32px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 10px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f3f5f7; padding: 1px 4px; border-radius: 3px; }
.best-note, .note { color: var(--muted); margin: 6px 0; }
.best-mark { color: var(--best); }
.tied-mark { color: #8a6d00; }
table.compare td.tied { background: #fff6d6; }
table.compare small.spread { color: var(--muted); font-weight: normal; }
.scale-toggle { color: var(--muted); font-size: 13px; }
.table-wrap { overflow-x: auto; }
table.compare { border-collapse: collapse; width: 100%; }
table.compare th, table.compare td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
table.compare thead th { font-weight: 600; border-bottom: 2px solid #aab3bd; vertical-align: bottom; }
table.compare tbody th { overflow-wrap: anywhere; min-width: 12em; }
table.compare .num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.compare td.best { background: var(--best-bg); color: var(--best); font-weight: 600; }
table.compare thead th small { font-weight: normal; color: var(--muted); }
table.compare tr.run-oom, table.compare tr.run-error, table.compare tr.run-error-detail { background: #fff8f8; }
table.compare tr.run-oom > *, table.compare tr.run-error > * { border-bottom: none; }
table.compare tr.run-error-detail td { padding-top: 0; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }
.status { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; font-weight: 600; }
.status-ok { background: var(--best-bg); color: var(--best); }
.status-peer { background: #eef1f4; color: var(--muted); }
table.compare tr.peer { background: #fafbfc; font-style: italic; }
.status-oom, .status-error { background: var(--bad-bg); color: var(--bad); }
.error-message { color: var(--bad); font-size: 12px; white-space: pre-wrap; word-break: break-word; max-height: 12em; overflow: auto; margin: 4px 0 0; }
pre.error-message { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bad-bg); padding: 6px 8px; border-radius: 4px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 18px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
figure.failed { border-color: #f1b5b5; background: #fffafa; }
figcaption { font-weight: 600; margin-bottom: 6px; }
.chart-box { position: relative; height: 280px; }
.chart-box.wide { height: 340px; }
.chart-box.tiers { height: 240px; margin-top: 8px; }
table.compare small.tiers, table.compare small.devices { color: var(--muted); font-weight: normal; }
table.stats.tiers thead td, table.stats.tiers thead th { color: var(--muted); padding-bottom: 0; }
table.stats th.num { text-align: right; }
.recommendation { border: 1px solid #b9d8c3; background: var(--best-bg); border-radius: 6px; padding: 8px 12px; margin: 0 0 12px; }
.recommendation ul, ul.notes { margin: 4px 0 0; padding-left: 20px; }
ul.notes { color: var(--muted); font-size: 13px; }
table.stats { border-collapse: collapse; margin-top: 8px; }
table.stats caption { text-align: left; color: var(--muted); padding-bottom: 2px; }
table.stats th, table.stats td { padding: 2px 10px 2px 0; text-align: left; font-weight: normal; }
table.stats td.num { text-align: right; font-variant-numeric: tabular-nums; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
`;

/** The page's own script: reads the embedded data and draws every chart with Chart.js. */
const CLIENT_SCRIPT = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('gpumem-data').textContent);
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  // Bytes in binary units with 'digits' decimals; 'trim' drops trailing zeros (axis ticks).
  function formatBytes(bytes, digits, trim) {
    var value = bytes, unit = 0;
    while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit++; }
    if (unit === 0) return Math.round(bytes) + ' B';
    var text = value.toFixed(digits);
    return (trim ? String(Number(text)) : text) + ' ' + UNITS[unit];
  }
  function axisBytes(v) { return formatBytes(v, 2, true); }
  function formatSeconds(s) {
    return s >= 1 ? String(Number(s.toFixed(2))) + ' s' : String(Number((s * 1000).toFixed(1))) + ' ms';
  }
  function formatMs(ms) { return ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : ms.toFixed(ms >= 10 ? 1 : 2) + ' ms'; }
  function axisMs(ms) { return ms >= 1000 ? String(Number((ms / 1000).toFixed(2))) + ' s' : String(Number(ms.toFixed(1))) + ' ms'; }

  // Shaded bands and a label for each epoch, on charts that pass options.plugins.epochBands.phases.
  var epochBands = {
    id: 'epochBands',
    beforeDatasetsDraw: function (chart, args, options) {
      var phases = (options && options.phases) || [];
      if (phases.length === 0) return;
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(area.left, area.top, area.right - area.left, area.bottom - area.top);
      ctx.clip();
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'top';
      phases.forEach(function (phase, i) {
        var x0 = x.getPixelForValue(phase.start), x1 = x.getPixelForValue(phase.end);
        ctx.fillStyle = i % 2 === 0 ? 'rgba(90, 110, 130, 0.10)' : 'rgba(90, 110, 130, 0.04)';
        ctx.fillRect(x0, area.top, Math.max(1, x1 - x0), area.bottom - area.top);
        ctx.strokeStyle = 'rgba(60, 70, 80, 0.55)';
        ctx.setLineDash([3, 3]);
        ctx.beginPath(); ctx.moveTo(x0, area.top); ctx.lineTo(x0, area.bottom); ctx.stroke();
        ctx.setLineDash([]);
        if (x1 - x0 > 40) { ctx.fillStyle = 'rgba(40, 48, 56, 0.8)'; ctx.fillText(phase.name, x0 + 4, area.top + 4); }
      });
      ctx.restore();
    }
  };
  Chart.register(epochBands);
  Chart.defaults.animation = false;
  Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  Chart.defaults.color = '#3a444f';

  function points(xs, ys) {
    var out = new Array(xs.length);
    for (var i = 0; i < xs.length; i++) out[i] = { x: xs[i], y: ys[i] };
    return out;
  }

  // A stepped line of bytes over time: reserved dashed and shaded (unless 'shade' is false), allocated solid.
  function bytesLine(label, t, bytes, color, fill, reserved, shade) {
    return { label: label, data: points(t, bytes), borderColor: color, backgroundColor: reserved ? fill : color,
             borderWidth: 1.5, borderDash: reserved ? [6, 3] : [], fill: reserved && shade !== false ? 'origin' : false,
             stepped: true, pointRadius: 0, pointHitRadius: 4 };
  }

  // A chart of bytes over time on the timeline's clock, with its epochs shaded and its own byte axis.
  function bytesChart(canvasId, datasets, tl, axis, yTitle, stacked) {
    return new Chart(document.getElementById(canvasId), {
      type: 'line',
      data: { datasets: datasets },
      options: {
        parsing: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: 'nearest', axis: 'x', intersect: false },
        scales: {
          x: { type: 'linear', min: 0, max: tl.xMax, title: { display: true, text: tl.xTitle },
               ticks: { callback: function (v) { return formatSeconds(v); }, maxTicksLimit: 10 } },
          y: { min: 0, max: axis.ownYMax, stacked: stacked, title: { display: true, text: yTitle },
               ticks: { stepSize: axis.ownYStep, callback: axisBytes } }
        },
        plugins: {
          legend: { position: 'top', align: 'end', labels: { boxWidth: 18 } },
          tooltip: { callbacks: {
            title: function (items) { return items.length ? formatSeconds(items[0].parsed.x) : ''; },
            label: function (item) { return item.dataset.label + ': ' + formatBytes(item.parsed.y, 2, false); }
          } },
          epochBands: { phases: tl.phases }
        }
      }
    });
  }

  var charts = [];
  data.timelines.forEach(function (tl) {
    var datasets;
    if (tl.devices) {
      // a run over several devices: each device's reserved (dashed) and allocated bytes, in its own colour
      datasets = [];
      tl.devices.forEach(function (d) {
        datasets.push(bytesLine(d.name + ' reserved', d.t, d.reserved, d.color, d.fill, true, false),
                      bytesLine(d.name + ' allocated', d.t, d.allocated, d.color, d.fill, false));
      });
    } else {
      var reserved = bytesLine('reserved', tl.t, tl.reserved, tl.color, tl.fill, true);
      var allocated = bytesLine('allocated', tl.t, tl.allocated, tl.color, tl.fill, false);
      reserved.stack = 'reserved';
      allocated.stack = 'allocated';
      datasets = [reserved, allocated].concat(tl.tags.map(function (tag, k) {
        // the phases that allocated the bytes, stacked: what to shrink
        return { label: tag.name, data: points(tl.t, tag.bytes), borderColor: tag.color, backgroundColor: tag.color,
                 borderWidth: 0, fill: k === 0 ? 'origin' : '-1', stepped: true, pointRadius: 0, pointHitRadius: 4, stack: 'phases' };
      }));
    }
    var chart = bytesChart(tl.canvasId, datasets, tl, tl, tl.devices ? 'bytes per device' : 'bytes', tl.tags.length > 0);
    charts.push({ kind: 'timeline', allocator: tl.allocator, canvasId: tl.canvasId, chart: chart, timeline: tl });
    var tiers = tl.tiers;
    if (tiers) {
      // a strategy with a host tier: device (the run's colour) and host bytes, each on its own
      var tierChart = bytesChart(tiers.canvasId, [
        bytesLine('device reserved', tl.t, tiers.deviceReserved, tl.color, tl.fill, true),
        bytesLine('device allocated', tl.t, tiers.deviceAllocated, tl.color, tl.fill, false),
        bytesLine('host reserved', tl.t, tiers.hostReserved, tiers.hostColor, tiers.hostFill, true),
        bytesLine('host allocated', tl.t, tiers.hostAllocated, tiers.hostColor, tiers.hostFill, false)
      ], tl, tiers, 'bytes by tier', false);
      charts.push({ kind: 'tiers', allocator: tl.allocator, canvasId: tiers.canvasId, chart: tierChart, timeline: tl });
    }
  });

  // Each chart has its own byte scale by default; the toggle puts every chart on the shared one.
  var toggle = document.getElementById('shared-scale');
  function applyScale() {
    var shared = toggle && toggle.checked;
    charts.forEach(function (c) {
      if (c.kind !== 'timeline' && c.kind !== 'tiers') return;
      var own = c.kind === 'tiers' ? c.timeline.tiers : c.timeline;
      var y = c.chart.options.scales.y;
      y.max = shared ? data.yMax : own.ownYMax;
      y.ticks.stepSize = shared ? data.yStep : own.ownYStep;
      c.chart.update();
    });
    document.body.setAttribute('data-byte-scale', shared ? 'shared' : 'own');
  }
  if (toggle) toggle.addEventListener('change', applyScale);
  applyScale();

  var ep = data.epochChart;
  if (ep) {
    var bars = ep.type === 'bar';
    var chart = new Chart(document.getElementById(ep.canvasId), {
      type: ep.type,
      data: {
        labels: ep.labels,
        datasets: ep.datasets.map(function (d) {
          return { label: d.allocator, data: d.epochMs, backgroundColor: d.color, borderColor: d.color,
                   borderWidth: bars ? 0 : 1.5, pointRadius: bars ? 0 : 1.5, spanGaps: false };
        })
      },
      options: {
        responsive: true, maintainAspectRatio: false,
        scales: {
          x: { title: { display: false } },
          y: { beginAtZero: true, grace: '5%', title: { display: true, text: 'epoch time' }, ticks: { callback: axisMs } }
        },
        plugins: {
          legend: { position: 'top' },
          tooltip: { callbacks: { label: function (item) { return item.dataset.label + ': ' + formatMs(item.parsed.y); } } }
        }
      }
    });
    charts.push({ kind: 'epochs', allocator: null, canvasId: ep.canvasId, chart: chart });
  }

  var sc = data.spreadChart;
  if (sc) {
    // floating bars: the thin one spans min–max, the wide one the quartiles; a point marks the median
    var spreadChart = new Chart(document.getElementById(sc.canvasId), {
      type: 'bar',
      data: {
        labels: sc.labels,
        datasets: [
          { type: 'bar', label: 'min–max', data: sc.range, backgroundColor: sc.colors.map(function (c) { return c + '55'; }),
            borderColor: sc.colors, borderWidth: 1, barPercentage: 0.25, grouped: false },
          { type: 'bar', label: 'quartiles', data: sc.box, backgroundColor: sc.colors, barPercentage: 0.6, grouped: false },
          { type: 'line', label: 'median', data: sc.median, showLine: false, pointStyle: 'line', pointRadius: 14,
            pointBorderWidth: 3, borderColor: '#1d232b', backgroundColor: '#1d232b' }
        ]
      },
      options: {
        responsive: true, maintainAspectRatio: false, indexAxis: 'x',
        scales: { y: { title: { display: true, text: 'epoch time (warm-up left out)' }, ticks: { callback: axisMs } } },
        plugins: {
          legend: { position: 'top' },
          tooltip: { callbacks: { label: function (item) {
            var v = item.raw;
            return item.dataset.label + ': ' + (Array.isArray(v) ? formatMs(v[0]) + ' to ' + formatMs(v[1]) : formatMs(v));
          } } }
        }
      }
    });
    charts.push({ kind: 'spread', allocator: null, canvasId: sc.canvasId, chart: spreadChart });
  }

  var lc = data.lossChart;
  if (lc) {
    var lossChart = new Chart(document.getElementById(lc.canvasId), {
      type: 'line',
      data: {
        datasets: lc.datasets.map(function (d) {
          return { label: d.name, data: points(d.step, d.loss), borderColor: d.color, backgroundColor: d.color,
                   borderWidth: 1.2, borderDash: d.dash ? [5, 3] : [], pointRadius: 0, pointHitRadius: 4 };
        })
      },
      options: {
        parsing: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: 'nearest', axis: 'x', intersect: false },
        scales: {
          x: { type: 'linear', min: 1, title: { display: true, text: 'training step' } },
          y: { title: { display: true, text: 'training loss' } }
        },
        plugins: { legend: { position: 'top' } }
      }
    });
    charts.push({ kind: 'loss', allocator: null, canvasId: lc.canvasId, chart: lossChart });
  }

  window.gpumemReport = { charts: charts };
  document.body.setAttribute('data-charts-ready', String(charts.length));
})();
`;

/**
 * The comparison as one self-contained HTML page: a header (workload, device, date, what "best"
 * means), the table with each column's best value marked, each successful run's allocated and
 * reserved bytes over time with its epochs shaded, the epoch times side by side, and each failed
 * run's message and statistics at the failure. Every script and style is inlined (Chart.js
 * included), so the page needs no network; every string from the result is escaped.
 */
export function renderHtmlReport(result: CompareResult): string {
  const data = chartData(result);
  const figures = result.runs.map((run, index) => timelineFigure(run, index, result)).join('\n');
  const tool = result.replay ? 'gpumem replay' : 'gpumem compare';
  const epochSection = data.epochChart
    ? `<div class="chart-box wide"><canvas id="${data.epochChart.canvasId}" role="img" aria-label="Epoch time per allocator"></canvas></div>`
    : '<p class="note">No run completed an epoch.</p>';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="${tool}">
<title>${tool}: ${escapeHtml(result.workload.title)}</title>
<style>${STYLE}</style>
</head>
<body>
${headerHtml(result)}
<main>
<section id="comparison">
<h2>Comparison</h2>
${recommendationHtml(result)}<div class="table-wrap">${tableHtml(result)}</div>
${notesHtml(result)}</section>
<section id="timelines">
<h2>Memory over time</h2>
<p class="note">Allocated bytes (solid) and reserved bytes (dashed, shaded) of each run, ${
    result.replay ? "on the trace's clock" : 'on its own clock'
  }
and its own byte scale.${result.replay ? '' : ' Shaded bands are epochs.'}${
    data.timelines.some((t) => t.tiers)
      ? ' A strategy with a host tier has a second chart splitting its bytes into device (its colour) and host (teal), each tier on its own line; its host part is sampled after each training step.'
      : ''
  }${
    anyDevices(result.runs)
      ? " A run over several devices has a pair of lines per device, sampled from the device's allocator after every training step (mlp) or epoch (gcn) on one clock for all its ranks; its epochs span the first rank's start to the last rank's end."
      : ''
  }
<label class="scale-toggle"><input type="checkbox" id="shared-scale"> same byte scale on every chart</label></p>
<div class="grid">
${figures}
</div>
</section>
${
  result.replay
    ? ''
    : `<section id="epochs">
<h2>Epoch time</h2>
${epochSection}${
        data.spreadChart
          ? `
<p class="note">The spread of each run's measured epochs (the first of each process left out): the thin bar spans the
fastest to the slowest, the wide bar the middle half, the line is the median. A best is marked in the table only
where these do not overlap.</p>
<div class="chart-box"><canvas id="${data.spreadChart.canvasId}" role="img" aria-label="Spread of the epoch times per allocator"></canvas></div>`
          : ''
      }
</section>${
        data.lossChart
          ? `
<section id="losses">
<h2>Training loss per step</h2>
<p class="note">Every run's loss at each training step, over all its epochs (the first run of each allocator; curves that coincide are the same losses)${(result.peers ?? []).length > 0 ? '; peers (other frameworks, dashed) on the same steps' : ''}.</p>
<div class="chart-box wide"><canvas id="${data.lossChart.canvasId}" role="img" aria-label="Training loss per step"></canvas></div>
</section>`
          : ''
      }`
}
</main>
<footer>${tool}, result format version ${escapeHtml(String(result.version))}; charts drawn with Chart.js (MIT).</footer>
<script type="application/json" id="gpumem-data">${scriptJson(data)}</script>
<script>${chartLibrarySource()}</script>
<script>${CLIENT_SCRIPT}</script>
</body>
</html>
`;
}
