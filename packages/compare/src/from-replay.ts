/**
 * `gpumem replay`'s results in the shape of a comparison, so that its HTML report is drawn by the
 * same code as `gpumem compare`'s: one row per strategy (and one for the allocator the trace was
 * recorded under, when known), the replay's columns, each strategy's memory over the trace's time.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { CompiledTrace, MinCapacity, RecordedBaseline, StrategyReplay } from '@gpumem/trace';
import { rankRuns } from './compare.js';
import { capTimeline, peakBreakdown } from './timeline.js';
import type { CompareColumn, CompareResult, CompareRun, ExtraColumn, TimelineSeries } from './types.js';

/** One strategy's replay, as replayStrategy returns it: its results, or the error that stopped it. */
export type ReplayReportRow = Pick<StrategyReplay, 'label' | 'error' | 'result' | 'profile' | 'minCapacity' | 'wallMs'>;

/** Everything the report says. */
export interface ReplayReportInput {
  /** The trace file, its form, where it came from, and a line about what it holds. */
  file: string;
  format: string;
  origin: string;
  summary: string;
  compiled: CompiledTrace;
  rows: readonly ReplayReportRow[];
  /** The allocator the trace was recorded under (PyTorch's, from a snapshot), when known. */
  baseline?: RecordedBaseline;
  /** The device's description. */
  device: string;
  capacityBytes?: number;
  /** The recommendation's lines. */
  recommendation?: string[];
  /** Points kept per timeline (default 4000; peaks survive the thinning). */
  timelinePoints?: number;
  createdAt?: string;
}

/** Columns of `gpumem compare` that a replay has nothing for. */
const hiddenColumns: CompareColumn[] = ['medianEpochMs', 'throughput', 'finalLoss', 'accuracy'];

const baselineNote = (label: string) =>
  `\u2020 ${label}: the program ran in the memory it reserved, so its minimum capacity is its recorded peak reserved (not searched).`;

function seriesOf(
  timeNs: readonly number[],
  allocated: readonly number[],
  reserved: readonly number[],
  points: number,
  tags?: { tags?: string[]; byTag?: number[][] },
): TimelineSeries {
  const series: TimelineSeries = { tMs: timeNs.map((t) => t / 1e6), allocatedBytes: [...allocated], reservedBytes: [...reserved] };
  if (tags?.tags && tags.byTag) {
    series.tags = tags.tags;
    series.byTag = tags.byTag;
  }
  return capTimeline(series, points);
}

/**
 * The recorded allocator's timeline: its reserved bytes as recorded, and the bytes the program held
 * (the trace's own requests), merged on the trace's clock as two step functions.
 */
function baselineTimeline(baseline: RecordedBaseline, c: CompiledTrace, points: number): TimelineSeries {
  const t: number[] = [];
  const allocated: number[] = [];
  const reserved: number[] = [];
  const rt = baseline.reservedTimeline;
  let i = 0;
  let j = 0;
  let live = 0;
  let res = 0;
  while (i < c.action.length || j < rt.timeNs.length) {
    const ti = i < c.action.length ? c.timeNs[i]! : Infinity;
    const tj = j < rt.timeNs.length ? rt.timeNs[j]! : Infinity;
    const now = Math.min(ti, tj);
    for (; i < c.action.length && c.timeNs[i] === now; i++) live += c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
    for (; j < rt.timeNs.length && rt.timeNs[j] === now; j++) res = rt.reservedBytes[j]!;
    t.push(now);
    allocated.push(live);
    reserved.push(res);
  }
  return seriesOf(t, allocated, reserved, points);
}

function baseRun(label: string): CompareRun {
  return {
    allocator: label,
    status: 'ok',
    epochs: [],
    medianEpochMs: null,
    throughput: null,
    peakAllocatedBytes: null,
    peakReservedBytes: null,
    overhead: null,
    upstreamAllocCalls: null,
    upstreamFreeCalls: null,
    oomCount: 0,
    finalLoss: null,
    accuracy: null,
    stats: null,
    wallMs: 0,
    timeline: null,
    phases: [],
    eventsRecorded: 0,
    eventsDropped: 0,
  };
}

const share = (part: number, whole: number) => (whole > 0 ? ` (${((100 * part) / whole).toFixed(1)}%)` : '');
const ns = (v: number) => (v >= 10_000 ? `${(v / 1000).toFixed(1)} µs` : `${v.toFixed(0)} ns`);

/** The minimum-capacity cell: the bytes, or "> cap" when the trace never fitted under the cap. */
export function minCapacityText(m: MinCapacity): string {
  return m.bytes === undefined ? `> ${formatBytes(m.capBytes)}` : formatBytes(m.bytes);
}

/** The runs holding the lowest value of `value` among those that have one (ties included). */
function lowest(runs: readonly { label: string; value: number | undefined }[]): string[] {
  const scored = runs.filter((r): r is { label: string; value: number } => r.value !== undefined);
  if (scored.length === 0) return [];
  const min = Math.min(...scored.map((r) => r.value));
  return scored.filter((r) => r.value === min).map((r) => r.label);
}

/** Turns replay results into a {@link CompareResult} for renderHtmlReport. */
export function replayToCompareResult(input: ReplayReportInput): CompareResult {
  const points = input.timelinePoints ?? 4000;
  const { compiled, baseline } = input;
  const searched = input.rows.some((r) => r.minCapacity !== undefined);
  const anyOom = input.rows.some((r) => (r.profile?.ooms ?? 0) > 0);
  const runs: CompareRun[] = [];
  const values: Record<string, { label: string; value: number | undefined }[]> = {
    minCapacity: [],
    fragmentationAtPeak: [],
    nsPerAlloc: [],
    nsPerFree: [],
  };

  for (const row of input.rows) {
    const run = baseRun(row.label);
    run.wallMs = row.wallMs ?? 0;
    if (row.error !== undefined || !row.result || !row.profile) {
      run.status = 'error';
      run.error = row.error ?? 'no result';
      runs.push(run);
      continue;
    }
    const r = row.result;
    const p = row.profile;
    run.peakAllocatedBytes = r.peakAllocatedBytes;
    run.peakReservedBytes = r.peakReservedBytes;
    run.overhead = r.peakAllocatedBytes > 0 ? r.peakReservedBytes / r.peakAllocatedBytes : null;
    run.upstreamAllocCalls = p.driverAllocs;
    run.upstreamFreeCalls = p.driverFrees;
    run.oomCount = r.ooms;
    // A trace with tags (a snapshot's allocation frames) stacks allocated bytes by them.
    run.timeline = seriesOf(p.timeline.timeNs, p.timeline.allocatedBytes, p.timeline.reservedBytes, points, p.timeline);
    const breakdown = peakBreakdown(run.timeline);
    if (breakdown.length > 0) run.peakBreakdown = breakdown;
    run.eventsRecorded = p.timeline.timeNs.length;
    run.extra = {
      fragmentationAtPeak: {
        text: `${formatBytes(p.fragmentationAtPeakBytes)}${share(p.fragmentationAtPeakBytes, p.reservedAtPeakBytes)}`,
      },
      nsPerAlloc: { text: ns(r.nsPerAlloc) },
      nsPerFree: { text: ns(r.nsPerFree) },
    };
    const first = p.oomSnapshots[0];
    if (first) {
      run.extra.oomLargestFree = { text: first.largestFreeBlock === undefined ? 'not reported' : formatBytes(first.largestFreeBlock) };
      run.extra.oomUnallocated = { text: formatBytes(first.unallocatedReservedBytes) };
    }
    if (row.minCapacity) run.extra.minCapacity = { text: minCapacityText(row.minCapacity) };
    values.minCapacity!.push({ label: row.label, value: row.minCapacity?.bytes });
    values.fragmentationAtPeak!.push({ label: row.label, value: p.fragmentationAtPeakBytes });
    values.nsPerAlloc!.push({ label: row.label, value: r.nsPerAlloc });
    values.nsPerFree!.push({ label: row.label, value: r.nsPerFree });
    runs.push(run);
  }

  const notes: string[] = [];
  if (baseline) {
    const run = baseRun(baseline.label);
    run.peakAllocatedBytes = baseline.peakAllocatedBytes;
    run.peakReservedBytes = baseline.peakReservedBytes;
    run.overhead = baseline.peakAllocatedBytes > 0 ? baseline.peakReservedBytes / baseline.peakAllocatedBytes : null;
    run.upstreamAllocCalls = baseline.driverAllocs;
    run.upstreamFreeCalls = baseline.driverFrees;
    run.oomCount = compiled.traceOoms;
    run.timeline = baselineTimeline(baseline, compiled, points);
    run.eventsRecorded = compiled.action.length;
    run.extra = {
      fragmentationAtPeak: {
        text: `${formatBytes(baseline.fragmentationAtPeakBytes)}${share(baseline.fragmentationAtPeakBytes, baseline.fragmentationAtPeakBytes + baseline.allocatedAtPeakBytes)}`,
      },
    };
    if (searched) {
      run.extra.minCapacity = { text: formatBytes(baseline.peakReservedBytes), mark: '\u2020' };
      values.minCapacity!.push({ label: baseline.label, value: baseline.peakReservedBytes });
      notes.push(baselineNote(baseline.label));
    }
    values.fragmentationAtPeak!.push({ label: baseline.label, value: baseline.fragmentationAtPeakBytes });
    runs.push(run);
  }

  const extraColumns: ExtraColumn[] = [];
  if (searched)
    extraColumns.push({ key: 'minCapacity', heading: 'Min capacity', subheading: 'no OOM at or above', best: lowest(values.minCapacity!) });
  extraColumns.push(
    {
      key: 'fragmentationAtPeak',
      heading: 'Fragmentation at peak',
      subheading: 'reserved − allocated',
      best: lowest(values.fragmentationAtPeak!),
    },
    { key: 'nsPerAlloc', heading: 'ns/alloc', best: lowest(values.nsPerAlloc!) },
    { key: 'nsPerFree', heading: 'ns/free', best: lowest(values.nsPerFree!) },
  );
  if (anyOom) {
    extraColumns.push(
      { key: 'oomLargestFree', heading: 'Largest free block', subheading: 'at the first OOM' },
      { key: 'oomUnallocated', heading: 'Reserved, unallocated', subheading: 'at the first OOM' },
    );
  }
  if (searched) {
    const res = input.rows.find((r) => r.minCapacity)?.minCapacity?.resolutionBytes;
    notes.unshift(
      `Min capacity: the smallest simulated device size at which the whole trace replays with no out-of-memory, found by bisection to within ${formatBytes(res ?? 0)}; no strategy can need less than the trace's peak live bytes (${formatBytes(compiled.peakAllocatedBytes)}).`,
    );
  }
  notes.push(
    'Fragmentation at peak: reserved minus allocated bytes at the moment the strategy reserved the most (after a call), from one tracked pass.',
  );

  const { best, tied } = rankRuns(runs);
  const result: CompareResult = {
    version: 1,
    createdAt: input.createdAt ?? new Date().toISOString(),
    device: input.device,
    workload: { model: 'trace', dataset: input.file, title: input.file, epochs: 0, options: {} },
    throughputUnit: 'calls/s',
    runs,
    best,
    tied,
    replay: { trace: input.file, format: input.format, origin: input.origin, summary: input.summary },
    hiddenColumns,
    extraColumns,
    notes,
  };
  if (input.capacityBytes !== undefined) result.replay!.capacityBytes = input.capacityBytes;
  if (input.recommendation && input.recommendation.length > 0) result.recommendation = [...input.recommendation];
  return result;
}
