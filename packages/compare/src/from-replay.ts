/**
 * `gpumem replay`'s results in the shape of a comparison, so that its HTML report is drawn by the
 * same code as `gpumem compare`'s: one row per strategy (and one for the allocator the trace was
 * recorded under, when known), the replay's columns, each strategy's memory over the trace's time.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { Advice, CompiledTrace, MinCapacity, ReadTrace, RecordedBaseline, StrategyReplay } from '@gpumem/trace';
import type { ReplayRun } from './replay-run.js';
import { capTimeline, peakBreakdown } from './timeline.js';
import { originOf, traceSummary } from './trace-description.js';
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
  /**
   * The recommendation (recommendStrategy): its lines above the table, and its picks the table's
   * marks, so that the two never disagree; without it no cell is marked.
   */
  advice?: Advice;
  /** Points kept per timeline (default 4000; peaks survive the thinning). */
  timelinePoints?: number;
  createdAt?: string;
}

/** Columns of `gpumem compare` that a replay has nothing for. */
const hiddenColumns: CompareColumn[] = ['medianEpochMs', 'throughput', 'finalLoss', 'accuracy'];

const unusedNote =
  'Unused at peak reserved: reserved minus allocated bytes at the moment the strategy reserved the most (after a call), from one tracked pass. It is not taken at the peak of allocated bytes: a strategy that keeps freed blocks cached reaches its peak reserved when far less may be allocated.';

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

/** A row's memory columns, the same for a replayed strategy and the recorded allocator: peaks, their ratio, driver calls, OOMs. */
function setMemoryFigures(
  run: CompareRun,
  peaks: { peakAllocatedBytes: number; peakReservedBytes: number },
  calls: { driverAllocs: number; driverFrees: number },
  ooms: number,
): void {
  run.peakAllocatedBytes = peaks.peakAllocatedBytes;
  run.peakReservedBytes = peaks.peakReservedBytes;
  run.overhead = peaks.peakAllocatedBytes > 0 ? peaks.peakReservedBytes / peaks.peakAllocatedBytes : null;
  run.upstreamAllocCalls = calls.driverAllocs;
  run.upstreamFreeCalls = calls.driverFrees;
  run.oomCount = ooms;
}

const share = (part: number, whole: number) => (whole > 0 ? ` (${((100 * part) / whole).toFixed(1)}%)` : '');
const ns = (v: number) => (v >= 10_000 ? `${(v / 1000).toFixed(1)} µs` : `${v.toFixed(0)} ns`);

/** The minimum-capacity cell: the bytes, or "> cap" when the trace never fitted under the cap. */
export function minCapacityText(m: MinCapacity): string {
  return m.bytes === undefined ? `> ${formatBytes(m.capBytes)}` : formatBytes(m.bytes);
}

/** Mean time of one call of a replay, allocations and frees together (what the advice ranks for speed). */
function nsPerCall(r: NonNullable<StrategyReplay['result']>): number {
  const calls = r.allocs + r.frees;
  return calls > 0 ? (r.nsPerAlloc * r.allocs + r.nsPerFree * r.frees) / calls : 0;
}

/** Turns replay results into a {@link CompareResult} for renderHtmlReport. */
export function replayToCompareResult(input: ReplayReportInput): CompareResult {
  const points = input.timelinePoints ?? 4000;
  const { compiled, baseline } = input;
  const searched = input.rows.some((r) => r.minCapacity !== undefined);
  const anyOom = input.rows.some((r) => (r.profile?.ooms ?? 0) > 0);
  const runs: CompareRun[] = [];

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
    setMemoryFigures(run, r, p, r.ooms);
    // A trace with tags (a snapshot's allocation frames) stacks allocated bytes by them.
    run.timeline = seriesOf(p.timeline.timeNs, p.timeline.allocatedBytes, p.timeline.reservedBytes, points, p.timeline);
    const breakdown = peakBreakdown(run.timeline);
    if (breakdown.length > 0) run.peakBreakdown = breakdown;
    run.eventsRecorded = p.timeline.timeNs.length;
    run.extra = {
      unusedAtPeakReserved: {
        text: `${formatBytes(p.fragmentationAtPeakBytes)}${share(p.fragmentationAtPeakBytes, p.reservedAtPeakBytes)}`,
      },
      nsPerCall: { text: ns(nsPerCall(r)) },
      nsPerAlloc: { text: ns(r.nsPerAlloc) },
      nsPerFree: { text: ns(r.nsPerFree) },
    };
    const first = p.oomSnapshots[0];
    if (first) {
      run.extra.oomLargestFree = { text: first.largestFreeBlock === undefined ? 'not reported' : formatBytes(first.largestFreeBlock) };
      run.extra.oomUnallocated = { text: formatBytes(first.unallocatedReservedBytes) };
    }
    if (row.minCapacity) run.extra.minCapacity = { text: minCapacityText(row.minCapacity) };
    runs.push(run);
  }

  const notes: string[] = [];
  if (baseline) {
    const run = baseRun(baseline.label);
    setMemoryFigures(run, baseline, baseline, compiled.traceOoms);
    run.timeline = baselineTimeline(baseline, compiled, points);
    run.eventsRecorded = compiled.action.length;
    run.extra = {
      unusedAtPeakReserved: {
        text: `${formatBytes(baseline.fragmentationAtPeakBytes)}${share(baseline.fragmentationAtPeakBytes, baseline.fragmentationAtPeakBytes + baseline.allocatedAtPeakBytes)}`,
      },
    };
    if (searched) {
      run.extra.minCapacity = { text: formatBytes(baseline.peakReservedBytes), mark: '\u2020' };
      notes.push(baselineNote(baseline.label));
    }
    runs.push(run);
  }

  // The marks are the recommendation's picks, nothing else: the least memory (by minimum capacity
  // where it was searched, else by peak reserved) among the strategies that keep their memory on the
  // device, the fewest driver calls and the fastest calls among those that use it. Host strategies
  // and the recorded allocator are never marked: the advice does not rank them.
  const picks = input.advice;
  const memory = picks?.memory?.labels;
  const extraColumns: ExtraColumn[] = [];
  if (searched)
    extraColumns.push({
      key: 'minCapacity',
      heading: 'Min capacity',
      subheading: 'no OOM at or above',
      ...(memory && { best: [...memory] }),
    });
  extraColumns.push(
    { key: 'unusedAtPeakReserved', heading: 'Unused at peak reserved', subheading: 'reserved − allocated then' },
    { key: 'nsPerCall', heading: 'ns/call', subheading: 'allocs and frees', ...(picks?.speed && { best: [...picks.speed.labels] }) },
    { key: 'nsPerAlloc', heading: 'ns/alloc' },
    { key: 'nsPerFree', heading: 'ns/free' },
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
  notes.push(unusedNote);

  const best: CompareResult['best'] = {};
  if (memory && !searched) best.peakReservedBytes = [...memory];
  if (picks?.driverCalls) best.upstreamCalls = [...picks.driverCalls.labels];
  const result: CompareResult = {
    version: 1,
    createdAt: input.createdAt ?? new Date().toISOString(),
    device: input.device,
    workload: { model: 'trace', dataset: input.file, title: input.file, epochs: 0, options: {} },
    throughputUnit: 'calls/s',
    runs,
    best,
    tied: {},
    replay: { trace: input.file, format: input.format, origin: input.origin, summary: input.summary },
    hiddenColumns,
    extraColumns,
    notes,
  };
  if (input.capacityBytes !== undefined) result.replay!.capacityBytes = input.capacityBytes;
  if (picks && picks.lines.length > 0) result.recommendation = [...picks.lines];
  return result;
}

/** The report of a replay of `file` (read as `trace`), for renderHtmlReport: its rows, its recommendation, the trace described. */
export function replayReport(
  file: string,
  trace: ReadTrace,
  compiled: CompiledTrace,
  { rows, baseline, advice }: ReplayRun,
  o: { device: string; capacityBytes?: number | undefined },
): CompareResult {
  return replayToCompareResult({
    file,
    format: trace.format,
    origin: originOf(trace),
    summary: traceSummary(trace, compiled),
    compiled,
    rows,
    ...(baseline && { baseline }),
    device: o.device,
    ...(o.capacityBytes !== undefined && { capacityBytes: o.capacityBytes }),
    advice,
  });
}
