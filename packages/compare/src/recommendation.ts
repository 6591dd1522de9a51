/**
 * The recommendation after `gpumem compare`'s table, in words and as data, read off the same
 * ranking as the table's marks (rankRuns): the least memory is the peak reserved column's `*`, the
 * fastest the median epoch's `*`, or the runs its `=` marks as within noise of each other, or no
 * pick where the times were not ranked for want of measured epochs.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { Ranking } from './compare.js';
import { tieTolerance } from './spread.js';
import type { ComparePicks, CompareRun } from './types.js';

/** The recommendation: its picks and the lines that say them. */
export interface CompareRecommendation {
  picks: ComparePicks;
  lines: string[];
}

function names(labels: readonly string[]): string {
  return labels.length <= 1 ? (labels[0] ?? '') : `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}`;
}

const ms = (v: number) => `${v.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 })} ms`;

/** How much more `value` is than `base`: "14% more", "<1% more". */
function percentAbove(value: number, base: number): string {
  const percent = Math.round((100 * (value - base)) / base);
  return percent === 0 ? '<1%' : `${percent}%`;
}

/** The smallest of `value` among `runs` other than `except`, with the runs holding it. */
function runnerUp(runs: readonly CompareRun[], except: readonly string[], value: (r: CompareRun) => number | null) {
  const scored = runs
    .filter((r) => !except.includes(r.allocator))
    .map((r) => [r, value(r)] as const)
    .filter((p): p is readonly [CompareRun, number] => p[1] !== null);
  if (scored.length === 0) return undefined;
  const min = Math.min(...scored.map((p) => p[1]));
  return { allocators: scored.filter((p) => p[1] === min).map((p) => p[0].allocator), value: min };
}

function leastMemoryLine(ok: readonly CompareRun[], ranking: Ranking, picks: ComparePicks): string | undefined {
  const labels = ranking.best.peakReservedBytes;
  const lead = ok.find((r) => labels?.includes(r.allocator));
  if (!labels || lead?.peakReservedBytes == null) return undefined;
  picks.leastMemory = { allocators: [...labels], peakReservedBytes: lead.peakReservedBytes };
  const next = runnerUp(ok, labels, (r) => r.peakReservedBytes);
  const each = labels.length > 1 ? 'each ' : '';
  const after = next
    ? `; next: ${names(next.allocators)}, ${formatBytes(next.value)} (${percentAbove(next.value, lead.peakReservedBytes)} more)`
    : '';
  return `Least memory: ${names(labels)}, ${each}${formatBytes(lead.peakReservedBytes)} peak reserved${after}.`;
}

function fastestLine(ok: readonly CompareRun[], ranking: Ranking, picks: ComparePicks): string | undefined {
  if (ranking.timesNotRanked) {
    picks.fastest = { verdict: 'not-enough-samples', allocators: [], reason: ranking.timesNotRanked.reason };
    return `Fastest: not ranked: ${ranking.timesNotRanked.reason}; more epochs or repeats measure more.`;
  }
  const clear = ranking.best.medianEpochMs;
  const tied = ranking.tied.medianEpochMs;
  if (clear) {
    const lead = ok.find((r) => clear.includes(r.allocator))!;
    const median = lead.medianEpochMs!;
    picks.fastest = { verdict: 'clear', allocators: [...clear], medianEpochMs: median };
    const next = runnerUp(ok, clear, (r) => r.medianEpochMs);
    const n = lead.epochSpread?.n ?? 0;
    const after = next ? `; next: ${names(next.allocators)}, ${ms(next.value)} (${percentAbove(next.value, median)} slower)` : '';
    return `Fastest: ${names(clear)}, ${ms(median)} an epoch (median of ${n} measured epochs), faster than every other run beyond the spread of their epochs${after}.`;
  }
  if (tied) {
    picks.fastest = { verdict: 'within-noise', allocators: [...tied] };
    const medians = ok.filter((r) => tied.includes(r.allocator)).map((r) => r.medianEpochMs!);
    const others = ok.filter((r) => r.medianEpochMs !== null && !tied.includes(r.allocator));
    const rest = others.length > 0 ? `; ${names(others.map((r) => r.allocator))} slower beyond it` : '';
    return `Fastest: no clear winner: ${names(tied)} are within noise of each other (their epoch times overlap, or differ by less than ${tieTolerance * 100}%), medians ${ms(Math.min(...medians))} to ${ms(Math.max(...medians))}${rest}.`;
  }
  return undefined;
}

/**
 * The recommendation from the runs and their ranking (see rankRuns): least memory, fastest with how
 * sure (clear, within noise, or not enough samples), and the runs that failed, which are not ranked.
 */
export function recommendRuns(runs: readonly CompareRun[], ranking: Ranking): CompareRecommendation {
  const picks: ComparePicks = {};
  const ok = runs.filter((r) => r.status === 'ok');
  const failed = runs.filter((r) => r.status !== 'ok');
  const notRanked =
    failed.length > 0
      ? [`Not ranked: ${failed.map((r) => `${r.allocator} (${r.status === 'oom' ? 'out of memory' : 'failed'})`).join(', ')}.`]
      : [];
  if (ok.length === 0) return { picks, lines: notRanked };
  if (ok.length === 1) return { picks, lines: [`Only ${ok[0]!.allocator} finished: nothing to compare it with.`, ...notRanked] };
  const lines = [leastMemoryLine(ok, ranking, picks), fastestLine(ok, ranking, picks)].filter((l): l is string => l !== undefined);
  return { picks, lines: [...lines, ...notRanked] };
}
