/**
 * The HTML report's comparison table: a row per run (its failure's message under it), a row per
 * baseline, each column's best value marked and the values tied within the spread.
 * @module
 */
import { formatBytes, formatMs } from '@gpumem/allocator-core';
import { baselineThroughput, type BaselineRun } from './baseline.js';
import { anyTierMoves } from './tiers.js';
import { colorOf } from './report-colors.js';
import { DASH, escapeHtml, formatCount, orDash } from './report-text.js';
import type { CompareColumn, CompareResult, CompareRun, TierSplit } from './types.js';

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

const columns: Column[] = [
  // A spec such as pool:maxReservedBytes=64MiB may break after each ':'.
  {
    heading: 'Allocator',
    numeric: false,
    cell: (run) =>
      escapeHtml(run.allocator).replace(/:/g, ':<wbr>') +
      (run.devices && run.devices.length > 0 ? `<br><small class="devices">over ${run.devices.length} devices</small>` : ''),
  },
  { heading: 'Status', numeric: false, cell: statusCell },
  { heading: 'Median epoch', subheading: 'min\u2013max', best: 'medianEpochMs', numeric: true, cell: epochCell },
  {
    heading: 'Throughput',
    best: 'throughput',
    numeric: true,
    cell: (run, result) => orDash(run.throughput, (v) => `${formatCount(v)} ${escapeHtml(result.throughputUnit)}`),
  },
  {
    heading: 'Peak allocated',
    best: 'peakAllocatedBytes',
    numeric: true,
    cell: (run) => peakCell(run.peakAllocatedBytes, run.tiers?.peakAllocated),
  },
  {
    heading: 'Peak reserved',
    best: 'peakReservedBytes',
    numeric: true,
    cell: (run) => peakCell(run.peakReservedBytes, run.tiers?.peakReserved),
  },
  {
    heading: 'Overhead',
    subheading: 'reserved / allocated',
    best: 'overhead',
    numeric: true,
    cell: (run) => orDash(run.overhead, (v) => `${v.toFixed(3)}\u00d7`),
  },
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

/** A run's status as a coloured label. */
export function statusCell(run: CompareRun): string {
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

/** The table: a heading per shown column, a row per run and per baseline. */
export function tableHtml(result: CompareResult): string {
  const columns = columnsOf(result);
  const head = columns
    .map(
      (c) =>
        `<th scope="col"${c.numeric ? ' class="num"' : ''}>${escapeHtml(c.heading)}${c.subheading ? `<br><small>${escapeHtml(c.subheading)}</small>` : ''}</th>`,
    )
    .join('');
  const rows = result.runs.map((run, index) => {
    const cells = columns.map((column, k) => {
      const classes = [
        column.numeric ? 'num' : '',
        (column.best && isBest(result, column.best, run)) || (run.status === 'ok' && column.bestRuns?.includes(run.allocator))
          ? 'best'
          : '',
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
  rows.push(
    ...(result.baselines ?? []).map((baseline, k) =>
      baselineRowHtml(
        baseline,
        columns.map((c) => c.heading),
        result,
        result.runs.length + k,
      ),
    ),
  );
  return `<table class="compare"><thead><tr>${head}</tr></thead><tbody>\n${rows.join('\n')}\n</tbody></table>`;
}

/** A baseline's row (another framework's run, `--baseline`): its figures under the columns it has, a dash elsewhere; never ranked. */
function baselineRowHtml(baseline: BaselineRun, headings: readonly string[], result: CompareResult, index: number): string {
  const throughput = baselineThroughput(baseline, result);
  const spread = baseline.epochSpread;
  const cells: Record<string, string> = {
    Allocator: `<span class="swatch" style="background:${colorOf(index)}"></span>${escapeHtml(baseline.name)}`,
    Status: '<span class="status status-baseline">baseline</span>',
    'Median epoch':
      orDash(baseline.medianEpochMs, formatMs) +
      (spread && spread.n > 1
        ? `<br><small class="spread">${escapeHtml(formatMs(spread.min))}\u2013${escapeHtml(formatMs(spread.max))}</small>`
        : ''),
    Throughput: throughput !== null ? `${formatCount(throughput)} ${escapeHtml(result.throughputUnit)}` : DASH,
    'Peak allocated': orDash(baseline.peakAllocatedBytes, formatBytes),
    'Peak reserved': orDash(baseline.peakReservedBytes, formatBytes),
    Overhead:
      baseline.peakAllocatedBytes && baseline.peakReservedBytes !== null
        ? `${(baseline.peakReservedBytes / baseline.peakAllocatedBytes).toFixed(3)}\u00d7`
        : DASH,
    'Final loss': orDash(baseline.finalLoss, (v) => v.toPrecision(4)),
    Accuracy: orDash(baseline.accuracy, (v) => `${(v * 100).toFixed(2)}%`),
  };
  const tds = headings.map((h, k) => {
    const tag = k === 0 ? 'th scope="row"' : 'td';
    return `<${tag}${k > 1 ? ' class="num"' : ''}>${cells[h] ?? DASH}</${tag.split(' ')[0]}>`;
  });
  return `<tr class="baseline" data-baseline="${escapeHtml(baseline.name)}" title="${escapeHtml(baseline.file)}">${tds.join('')}</tr>`;
}
