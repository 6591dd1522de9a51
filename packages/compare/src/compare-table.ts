/**
 * `gpumem compare`'s table for the terminal: one row per run (and per baseline), the marks of each
 * column's best and of the runs tied for it, a run's peaks split into device and host where it has a
 * host tier, the notes under the table (why the times are not ranked, where they are not) and the
 * recommendation. The HTML report's table is report-table.ts.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import { baselineThroughput, type BaselineRun } from './baseline.js';
import { anyDevices, devicePeaksText } from './devices.js';
import { quartilesFrom } from './spread.js';
import { formatTable } from './text-table.js';
import { anyHostTier, anyTierMoves } from './tiers.js';
import type { CompareResult, CompareRun, TierSplit } from './types.js';

const bestMark = ' *';
const tiedMark = ' =';

function cell(run: CompareRun, result: CompareResult, column: keyof CompareResult['best'], text: string): string {
  if (result.best[column]?.includes(run.allocator)) return text + bestMark;
  return result.tied?.[column]?.includes(run.allocator) ? text + tiedMark : text;
}

/**
 * In a column where some cell carries a mark (` *`, ` =`), the other cells get two spaces in its
 * place, so that the figures of a right-aligned column line up.
 */
function alignMarks(rows: string[][]): void {
  const marked = (c: string | undefined) => c !== undefined && (c.endsWith(bestMark) || c.endsWith(tiedMark));
  const columns = Math.max(0, ...rows.map((r) => r.length));
  for (let i = 1; i < columns; i++) {
    if (!rows.some((r) => marked(r[i]))) continue;
    for (const row of rows) if (row[i] !== undefined && !marked(row[i])) row[i] += ' '.repeat(bestMark.length);
  }
}

/** The median epoch with its spread: `340.0 ms (332.1–351.2)`, min–max of the measured epochs. */
function epochCell(run: CompareRun): string {
  if (run.medianEpochMs === null) return '-';
  const s = run.epochSpread;
  return s && s.n > 1
    ? `${run.medianEpochMs.toFixed(1)} ms (${s.min.toFixed(1)}\u2013${s.max.toFixed(1)})`
    : `${run.medianEpochMs.toFixed(1)} ms`;
}

/** A baseline's row: its figures where it reported them, '-' elsewhere; never ranked. */
function baselineRow(baseline: BaselineRun, throughput: number | null): string[] {
  const n = (v: number | null, f: (x: number) => string) => (v === null ? '-' : f(v));
  const s = baseline.epochSpread;
  const epoch =
    baseline.medianEpochMs === null
      ? '-'
      : s && s.n > 1
        ? `${baseline.medianEpochMs.toFixed(1)} ms (${s.min.toFixed(1)}\u2013${s.max.toFixed(1)})`
        : `${baseline.medianEpochMs.toFixed(1)} ms`;
  return [
    baseline.name,
    'baseline',
    epoch,
    n(throughput, (v) => `${Math.round(v).toLocaleString('en-US')}`),
    n(baseline.peakAllocatedBytes, formatBytes),
    n(baseline.peakReservedBytes, formatBytes),
    baseline.peakAllocatedBytes && baseline.peakReservedBytes !== null
      ? `${(baseline.peakReservedBytes / baseline.peakAllocatedBytes).toFixed(2)}x`
      : '-',
    '-',
    '-',
    n(baseline.finalLoss, (v) => v.toFixed(4)),
    n(baseline.accuracy, (v) => `${(v * 100).toFixed(2)}%`),
  ];
}

/** A peak, and for a run with a host tier its split: `61.20 GiB (41.20 GiB device + 20.00 GiB host)`. */
function peakText(peak: number | null, split: TierSplit | undefined): string {
  if (peak === null) return '-';
  return split
    ? `${formatBytes(peak)} (${formatBytes(split.deviceBytes)} device + ${formatBytes(split.hostBytes)} host)`
    : formatBytes(peak);
}

/**
 * Under the table of runs over several devices: what their row's figures are, then each run's
 * devices with their peaks, one line per run.
 */
function devicesNotes(runs: readonly CompareRun[]): string[] {
  if (!anyDevices(runs)) return [];
  return [
    `over several devices: epoch times are the slowest rank's; peaks, upstream calls and OOMs the largest of any one device`,
    ...runs
      .filter((r) => r.devices && r.devices.length > 0)
      .map((r) => `${r.allocator} per device (peak allocated / reserved): ${devicePeaksText(r.devices!)}`),
  ];
}

/** Where the bytes-moved column goes when some run moved bytes between its tiers: after reserved/alloc. */
const movedColumnAt = 7;

/**
 * The comparison table, one row per run. Runs of a strategy with a host tier show their peaks split
 * between device and host, and a column of the bytes moved between the tiers appears when some run
 * moved any; with no such run the table is as it always was.
 */
export function formatCompareTable(result: CompareResult): string {
  const moves = anyTierMoves(result.runs);
  const rows = result.runs.map((r) => {
    const status = r.status === 'ok' ? 'ok' : r.status === 'oom' ? 'OOM' : 'error';
    const n = (v: number | null, f: (x: number) => string) => (v === null ? '-' : f(v));
    const upstream =
      r.upstreamAllocCalls === null || r.upstreamFreeCalls === null ? '-' : `${r.upstreamAllocCalls} / ${r.upstreamFreeCalls}`;
    return [
      r.allocator,
      status,
      cell(r, result, 'medianEpochMs', epochCell(r)),
      cell(
        r,
        result,
        'throughput',
        n(r.throughput, (v) => `${Math.round(v).toLocaleString('en-US')}`),
      ),
      cell(r, result, 'peakAllocatedBytes', peakText(r.peakAllocatedBytes, r.tiers?.peakAllocated)),
      cell(r, result, 'peakReservedBytes', peakText(r.peakReservedBytes, r.tiers?.peakReserved)),
      cell(
        r,
        result,
        'overhead',
        n(r.overhead, (v) => `${v.toFixed(2)}x`),
      ),
      cell(r, result, 'upstreamCalls', upstream),
      cell(r, result, 'oomCount', String(r.oomCount)),
      cell(
        r,
        result,
        'finalLoss',
        n(r.finalLoss, (v) => v.toFixed(4)),
      ),
      cell(
        r,
        result,
        'accuracy',
        n(r.accuracy, (v) => `${(v * 100).toFixed(2)}%`),
      ),
    ];
  });
  for (const baseline of result.baselines ?? []) rows.push(baselineRow(baseline, baselineThroughput(baseline, result)));
  alignMarks(rows);
  const header = [
    'allocator',
    'status',
    'median epoch (min\u2013max)',
    result.throughputUnit,
    'peak allocated',
    'peak reserved',
    'reserved/alloc',
    'upstream calls',
    'OOMs',
    'final loss',
    'accuracy',
  ];
  if (moves) {
    header.splice(movedColumnAt, 0, 'moved to host / device');
    rows.forEach((row, i) => {
      const tiers = result.runs[i]?.tiers;
      row.splice(movedColumnAt, 0, tiers ? `${formatBytes(tiers.bytesMovedToHost)} / ${formatBytes(tiers.bytesMovedToDevice)}` : '-');
    });
  }
  const table = formatTable(header, rows);
  const failures = result.runs
    .filter((r) => r.status !== 'ok')
    .map((r) => `${r.allocator}: ${r.status === 'oom' ? 'out of memory' : 'error'}: ${r.error ?? ''}`);
  const measured = result.runs.find((r) => r.status === 'ok');
  const warmup = measured && (measured.warmupEpochs ?? 0) > 0 ? `; epoch times leave out each run's first (warm-up) epoch` : '';
  const repeats = measured && (measured.repeats ?? 1) > 1 ? `; each row pools ${measured.repeats} runs, interleaved (a1 b1 a2 b2 ...)` : '';
  const measuredEpochs = measured?.epochSpread?.n ?? 0;
  const spread =
    measuredEpochs >= quartilesFrom
      ? ` (with ${measuredEpochs} measured epochs a row, the spread compared is their middle half, from the first to the third quartile; the table shows min–max)`
      : '';
  const notRanked = result.timesNotRanked
    ? [`median epoch and ${result.throughputUnit}: no best marked: ${result.timesNotRanked.reason}`]
    : [];
  const notes = [
    `* best in its column; = tied for best within the spread of the epoch times${spread} (no clear winner)${warmup}${repeats}`,
    ...notRanked,
    `upstream calls: allocations / frees the strategy asked of what it allocates from (the driver for the native strategies, the upstream allocator for a plug-in over another)`,
    ...(anyHostTier(result.runs)
      ? [
          `device + host: a strategy with a host tier; the host part of a peak is the host tier's own peak, the device part the rest (the total is what is ranked)`,
        ]
      : []),
    ...(moves ? [`moved to host / device: bytes the strategy moved between its tiers over the run`] : []),
    ...devicesNotes(result.runs),
    ...(result.notes ?? []),
    ...((result.baselines ?? []).length > 0
      ? [`baseline: another framework's run of the same workload (--baseline), shown for reference and not ranked`]
      : []),
    ...failures,
  ];
  const recommendation =
    (result.recommendation ?? []).length > 0 ? `\n\nrecommendation:\n${result.recommendation!.map((l) => `  ${l}`).join('\n')}` : '';
  return `${result.workload.title}, on ${result.device}\n${table}\n${notes.join('\n')}${recommendation}`;
}
