/**
 * Memory timelines: allocated and reserved bytes over time, built from tracking events, cleaned
 * and thinned (one thinning for the table's run, the report and the Perfetto trace).
 * @module
 */
import type { TrackingEvent } from '@gpumem/allocator-core';
import { LiveBytesByTag } from '@gpumem/trace';
import type { TimelineSeries } from './types.js';

/**
 * A strategy's host tier sampled over a run (see {@link TimelineSeries.hostAllocatedBytes}): the
 * host part of its allocated and reserved bytes at each sample, on the timeline's clock
 * (milliseconds, ascending).
 */
export interface HostSamples {
  tMs: number[];
  allocatedBytes: number[];
  reservedBytes: number[];
}

/**
 * Allocated and reserved bytes over time from tracking events. Allocated is the running sum of
 * allocs and frees, anchored so that it ends at `finalAllocated` (right when the events are read),
 * which stays exact when the ring dropped the oldest events. With `tagNames` (what each event tag
 * means), allocated bytes are also split by the phase that allocated them: a free is charged to
 * the tag its allocation had, and bytes live before the first event to 'before'. With `host`
 * (a strategy with a host tier), each point also holds the host part of its allocated and reserved
 * bytes: the latest sample at or before it (see {@link alignHostSamples}), at most the point's
 * total. Thinned to at most
 * `maxPoints` by {@link capTimeline}, so peaks and troughs survive.
 */
export function buildTimeline(
  events: readonly TrackingEvent[],
  finalAllocated: number,
  maxPoints: number,
  originNs = 0,
  tagNames?: readonly string[],
  host?: HostSamples,
): TimelineSeries {
  const n = events.length;
  let running = 0;
  for (const e of events) {
    if (e.action === 'alloc') running += e.bytes;
    else if (e.action === 'free') running -= e.bytes;
  }
  const before = finalAllocated - running;
  let allocated = before;
  const series: TimelineSeries = { tMs: new Array<number>(n), allocatedBytes: new Array<number>(n), reservedBytes: new Array<number>(n) };
  // per tag: index 0 is 'before', then one per tag name (unknown tags go to 'before' too)
  const tagCount = tagNames ? tagNames.length + 1 : 0;
  const byTag = tagNames && new LiveBytesByTag(tagCount, n, before);
  for (let i = 0; i < n; i++) {
    const e = events[i]!;
    if (e.action === 'alloc') allocated += e.bytes;
    else if (e.action === 'free') allocated -= e.bytes;
    if (byTag) {
      if (e.action === 'alloc') byTag.alloc(e.ptr, e.bytes, e.tag >= 0 && e.tag < tagCount - 1 ? e.tag + 1 : 0);
      else if (e.action === 'free') byTag.free(e.ptr, e.bytes);
      byTag.record(i);
    }
    series.tMs[i] = (e.timeNs - originNs) / 1e6;
    series.allocatedBytes[i] = allocated;
    series.reservedBytes[i] = e.reservedBytes;
  }
  if (byTag && tagNames) {
    series.tags = ['before', ...tagNames];
    series.byTag = byTag.series;
  }
  if (host && host.tMs.length > 0) {
    // a sample may be older than the point (bytes freed since): the host part is at most the total
    series.hostAllocatedBytes = alignHostSamples(series.tMs, host.tMs, host.allocatedBytes).map((b, i) =>
      Math.min(b, series.allocatedBytes[i]!),
    );
    series.hostReservedBytes = alignHostSamples(series.tMs, host.tMs, host.reservedBytes).map((b, i) =>
      Math.min(b, series.reservedBytes[i]!),
    );
  }
  return n <= maxPoints ? series : capTimeline(series, maxPoints);
}

/**
 * Samples taken at times `sampleMs` (ascending) read at times `tMs` (ascending): at each time, the
 * latest sample at or before it, or the first sample for times before any.
 */
export function alignHostSamples(tMs: readonly number[], sampleMs: readonly number[], values: readonly number[]): number[] {
  const out = new Array<number>(tMs.length);
  let k = 0;
  for (let i = 0; i < tMs.length; i++) {
    while (k + 1 < sampleMs.length && sampleMs[k + 1]! <= tMs[i]!) k++;
    out[i] = values[k] ?? 0;
  }
  return out;
}

/** Allocated bytes by tag at the point of highest allocated bytes, largest first (empty without tags). */
export function peakBreakdown(series: TimelineSeries): { tag: string; bytes: number }[] {
  if (!series.tags || !series.byTag || series.allocatedBytes.length === 0) return [];
  let peak = 0;
  for (let i = 1; i < series.allocatedBytes.length; i++) if (series.allocatedBytes[i]! > series.allocatedBytes[peak]!) peak = i;
  return series.tags
    .map((tag, k) => ({ tag, bytes: series.byTag![k]![peak]! }))
    .filter((p) => p.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes);
}

/** The host arrays of a timeline, when it has both. */
function hostOf(series: TimelineSeries): [number[], number[]] | undefined {
  return series.hostAllocatedBytes && series.hostReservedBytes ? [series.hostAllocatedBytes, series.hostReservedBytes] : undefined;
}

/**
 * A timeline fit to draw: points with a non-finite value dropped, time ascending, and the three
 * arrays (five with a host tier) of one length (the shortest given).
 */
export function cleanTimeline(series: TimelineSeries): TimelineSeries {
  const host = hostOf(series);
  const arrays = [series.tMs, series.allocatedBytes, series.reservedBytes, ...(host ?? [])];
  const n = Math.min(...arrays.map((a) => a.length));
  const keep: number[] = [];
  for (let i = 0; i < n; i++) {
    if (arrays.every((a) => Number.isFinite(a[i]))) keep.push(i);
  }
  const sorted = keep.every((index, k) => k === 0 || series.tMs[keep[k - 1]!]! <= series.tMs[index]!);
  if (!sorted) keep.sort((a, b) => series.tMs[a]! - series.tMs[b]! || a - b);
  return pick(series, keep);
}

function pick(series: TimelineSeries, indices: readonly number[]): TimelineSeries {
  const picked: TimelineSeries = {
    tMs: indices.map((i) => series.tMs[i]!),
    allocatedBytes: indices.map((i) => series.allocatedBytes[i]!),
    reservedBytes: indices.map((i) => series.reservedBytes[i]!),
  };
  if (series.tags && series.byTag) {
    picked.tags = [...series.tags];
    picked.byTag = series.byTag.map((values) => indices.map((i) => values[i] ?? 0));
  }
  const host = hostOf(series);
  if (host) {
    picked.hostAllocatedBytes = indices.map((i) => host[0][i] ?? 0);
    picked.hostReservedBytes = indices.map((i) => host[1][i] ?? 0);
  }
  return picked;
}

/**
 * At most `maxPoints` points of a clean timeline (see {@link cleanTimeline}). Longer series are cut
 * into buckets, and each bucket keeps its first point and the points of its highest allocated,
 * highest reserved and lowest allocated bytes (and, with a host tier, of its highest host allocated
 * and host reserved bytes), so peaks and troughs survive; the last point is kept.
 */
export function capTimeline(series: TimelineSeries, maxPoints: number): TimelineSeries {
  if (!Number.isSafeInteger(maxPoints) || maxPoints < 6) {
    throw new RangeError(`Expected an integer of at least 6 for maxPoints but received ${String(maxPoints)}`);
  }
  const n = series.tMs.length;
  if (n <= maxPoints)
    return pick(
      series,
      series.tMs.map((_, i) => i),
    );
  const host = hostOf(series);
  const buckets = Math.floor((maxPoints - 1) / (host ? 6 : 4));
  const keep = new Set<number>([n - 1]);
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor((b * n) / buckets);
    const hi = Math.floor(((b + 1) * n) / buckets);
    let maxAllocated = lo;
    let maxReserved = lo;
    let minAllocated = lo;
    for (let i = lo + 1; i < hi; i++) {
      if (series.allocatedBytes[i]! > series.allocatedBytes[maxAllocated]!) maxAllocated = i;
      if (series.reservedBytes[i]! > series.reservedBytes[maxReserved]!) maxReserved = i;
      if (series.allocatedBytes[i]! < series.allocatedBytes[minAllocated]!) minAllocated = i;
    }
    for (const i of [lo, maxAllocated, maxReserved, minAllocated]) keep.add(i);
    if (host) {
      let maxHostAllocated = lo;
      let maxHostReserved = lo;
      for (let i = lo + 1; i < hi; i++) {
        if (host[0][i]! > host[0][maxHostAllocated]!) maxHostAllocated = i;
        if (host[1][i]! > host[1][maxHostReserved]!) maxHostReserved = i;
      }
      keep.add(maxHostAllocated).add(maxHostReserved);
    }
  }
  return pick(
    series,
    [...keep].sort((a, b) => a - b),
  );
}
