/**
 * `gpumem compare` as a library: the same model, the same seed, under each allocator in turn.
 *
 * Each allocator runs in a child process of its own by default (`isolate: true`): every strategy
 * starts from an empty device, so memory one strategy keeps cached never counts against the next,
 * and a run that breaks its process (a sticky CUDA error, an abort) becomes an error row while the
 * others go on. The cost is a process start and a dataset load per allocator, about a second.
 * A run over several devices (`train.devices`) is started from here instead: its ranks are
 * processes of their own (see distributed-run.ts).
 * @module
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  createTrackedAllocator,
  createAllocator,
  OutOfMemoryError,
  type Allocator,
  type AllocatorStats,
  type TrackedAllocator,
  strategyInfo,
  memoryInfo,
  formatBytes,
} from '@gpumem/allocator-core';
import { allocationTags, asTrainOptions, getWorkload, train, type Progress, type TrainOptionsBag, type TrainResult } from '@gpumem/gnn';
import type { AllocatorSpec } from './spec.js';
import type { CompareColumn, CompareResult, CompareRun } from './types.js';
import { buildTimeline, peakBreakdown, type HostSamples } from './timeline.js';
import { hasHostTier } from './tiers.js';
import { mergeRepeats } from './repeat.js';
import type { BaselineRun } from './baseline.js';
import { epochsAfterWarmup, minMeasuredEpochs, notEnoughSamplesText, spreadsOverlap } from './spread.js';
import { failureRun, messageOf, summariseRun } from './run-summary.js';
import { isDistributed, runDistributed } from './distributed-run.js';
import { recommendRuns } from './recommendation.js';

/**
 * The training configuration shared by every run (everything but the allocator): any workload's
 * options in one object (its `model` names the workload, which refuses what does not apply to it).
 */
export type CompareTrainOptions = Omit<TrainOptionsBag, 'allocator' | 'allocatorOptions' | 'onProgress' | 'onStep'>;

export interface CompareOptions {
  train: CompareTrainOptions;
  allocators: AllocatorSpec[];
  /**
   * Record allocation events for the memory timeline (default true). Runs over several devices
   * (`train.devices`) record none: their devices' timelines are sampled from the ranks' stats.
   */
  record?: boolean;
  /** The ring buffer's size in events (default 2^20); older events are dropped past it. */
  trackingCapacity?: number;
  /** Points kept per timeline series (default 4000; per device over several): peaks and troughs survive the thinning. */
  timelinePoints?: number;
  /**
   * Run each allocator in a child process (default true). A run over several devices starts its
   * ranks, processes of their own, from this process either way.
   */
  isolate?: boolean;
  /**
   * Runs of each allocator (default {@link defaultRepeat}), interleaved (A B C A B C ...) so that
   * drift of the machine spreads over all of them rather than landing on one allocator; each in a
   * fresh process (or, with `isolate: false`, in this one); a row pools its runs' epochs.
   */
  repeat?: number;
  /** The device's description for the report. */
  device: string;
  /** A one-line description of the workload for the report. */
  title: string;
  /** Flags as given, for the record. */
  flags?: Record<string, unknown>;
  /**
   * Plug-in modules each run's process imports before it runs (resolved specifiers: file URLs or
   * package names resolvable from here). The caller registers them in its own process too.
   */
  plugins?: string[];
  /** Other frameworks' runs of the same workload, added to the result as they are (see readBaseline). */
  baselines?: BaselineRun[];
  onRunStart?: (spec: AllocatorSpec, index: number, total: number) => void;
  onProgress?: (spec: AllocatorSpec, progress: Progress) => void;
  onRunEnd?: (run: CompareRun) => void;
}

/** What one run needs, sent to a child process as is. */
export interface RunRequest {
  spec: AllocatorSpec;
  train: CompareTrainOptions;
  record: boolean;
  trackingCapacity: number;
  timelinePoints: number;
  /** Plug-in modules to import first (see CompareOptions.plugins). */
  plugins: string[];
}

export const defaultTrackingCapacity = 2 ** 20;

/**
 * Runs of each allocator when `repeat` is not given: 3, interleaved. With 3 epochs a run (the first
 * warm-up) that is 6 measured epochs a row, past {@link minMeasuredEpochs}.
 */
export const defaultRepeat = 3;
export const defaultTimelinePoints = 4000;

/**
 * Bytes in use on the allocator's GPU (cudaMemGetInfo: total − free) that the allocator does not
 * hold; null on the host. The runs of a comparison each have the device to themselves (a child
 * process each), so this is the process's own memory outside the allocator.
 */
function outsideBytes(allocator: Allocator): number | null {
  if (allocator.device.kind !== 'cuda') return null;
  const { freeBytes, totalBytes } = memoryInfo(allocator.device.index);
  return Math.max(0, totalBytes - freeBytes - allocator.stats().reservedBytes);
}

/** Runs the workload once on one allocator, in this process. Never throws for a failed run. */
export function runOne(request: RunRequest, onProgress?: (p: Progress) => void): CompareRun {
  const { spec } = request;
  const start = performance.now();
  let tracked: TrackedAllocator | undefined;
  let allocator: Allocator;
  try {
    if (request.record) {
      tracked = createTrackedAllocator(spec.name, spec.options, request.trackingCapacity);
      allocator = tracked.allocator;
    } else {
      allocator = createAllocator(spec.name, spec.options);
    }
  } catch (e) {
    return failureRun(spec, e instanceof OutOfMemoryError ? 'oom' : 'error', messageOf(e), null, performance.now() - start);
  }
  // The timeline's zero: the tracking layer's clock starts as the allocator is made, which may be
  // long after `start` where making it first initialises CUDA (a few hundred ms on a GPU host), so
  // the host samples and the epochs' phases are timed from here to line up with the events.
  const zero = performance.now();
  // Device memory used outside the allocator (CUDA context, kernels, library handles): the
  // device's used bytes less what the allocator holds, right after it is made and at the end.
  const outsideAtStart = outsideBytes(allocator);
  // A strategy with a host tier: its host bytes sampled for the timeline, now, after each step and
  // at the end (tracking events carry the total only). Other strategies are not sampled, so their
  // steps cost what they did.
  let host: HostSamples | undefined;
  let onStep: ((step: number, stats: AllocatorStats) => void) | undefined;
  if (tracked) {
    try {
      const first = allocator.stats();
      if (hasHostTier(first)) {
        const samples: HostSamples = { tMs: [], allocatedBytes: [], reservedBytes: [] };
        onStep = (_step, s) => {
          samples.tMs.push(performance.now() - zero);
          samples.allocatedBytes.push(s.hostAllocatedBytes ?? 0);
          samples.reservedBytes.push(s.hostReservedBytes ?? 0);
        };
        onStep(0, first);
        host = samples;
      }
    } catch {
      // no samples: the run itself reports what is wrong with the allocator
    }
  }
  let result: TrainResult | undefined;
  let failure: unknown;
  try {
    // CUDA graphs only where the strategy can allocate inside a capture; the others run eagerly.
    const cudaGraph = request.train.cudaGraph === true && strategyInfo(spec.name).capturable;
    result = train(
      asTrainOptions({
        ...request.train,
        ...(request.train.cudaGraph === undefined ? {} : { cudaGraph }), // unset stays unset: a workload refuses options it does not take
        allocator,
        onProgress,
        tagAllocations: tracked?.setTag,
        ...(onStep ? { onStep } : {}),
      }),
    );
  } catch (e) {
    failure = e;
  }
  let run: CompareRun;
  try {
    const stats = allocator.stats();
    onStep?.(0, stats);
    const wallMs = performance.now() - start;
    if (!result) {
      const oom = failure instanceof OutOfMemoryError;
      run = failureRun(spec, oom ? 'oom' : 'error', messageOf(failure), oom ? (failure as OutOfMemoryError).stats : stats, wallMs);
    } else {
      run = summariseRun(spec, result, stats, wallMs, zero);
    }
    const outsideAtEnd = outsideBytes(allocator);
    if (outsideAtStart !== null && outsideAtEnd !== null) run.outsideAllocator = { atStartBytes: outsideAtStart, atEndBytes: outsideAtEnd };
    if (tracked) {
      const { events, dropped } = tracked.events(true);
      run.timeline = buildTimeline(events, stats.allocatedBytes, request.timelinePoints, 0, allocationTags, host);
      run.peakBreakdown = peakBreakdown(run.timeline);
      run.eventsRecorded = events.length;
      run.eventsDropped = dropped;
    }
  } finally {
    allocator.dispose();
  }
  return run;
}

const columns: Array<{ column: CompareColumn; value: (r: CompareRun) => number | null; higherIsBetter: boolean }> = [
  { column: 'medianEpochMs', value: (r) => r.medianEpochMs, higherIsBetter: false },
  { column: 'throughput', value: (r) => r.throughput, higherIsBetter: true },
  { column: 'peakAllocatedBytes', value: (r) => r.peakAllocatedBytes, higherIsBetter: false },
  { column: 'peakReservedBytes', value: (r) => r.peakReservedBytes, higherIsBetter: false },
  { column: 'overhead', value: (r) => r.overhead, higherIsBetter: false },
  {
    column: 'upstreamCalls',
    value: (r) => (r.upstreamAllocCalls === null || r.upstreamFreeCalls === null ? null : r.upstreamAllocCalls + r.upstreamFreeCalls),
    higherIsBetter: false,
  },
  { column: 'oomCount', value: (r) => r.oomCount, higherIsBetter: false },
  { column: 'finalLoss', value: (r) => r.finalLoss, higherIsBetter: false },
  { column: 'accuracy', value: (r) => r.accuracy, higherIsBetter: true },
];

/** Columns measured in time, whose best must stand out of the spread of the epochs. */
const timeColumns = new Set<CompareColumn>(['medianEpochMs', 'throughput']);

/** How a comparison's rows rank: each column's best, the runs tied for it, and why the times are not ranked when they are not. */
export interface Ranking {
  best: CompareResult['best'];
  tied: NonNullable<CompareResult['tied']>;
  /** Set when the time columns have no best and no tie: too few measured epochs in some row. */
  timesNotRanked?: NonNullable<CompareResult['timesNotRanked']>;
}

/**
 * The allocators holding each column's best value among the completed runs (exact ties included).
 * For the time columns, a best is marked only when its epochs' spread does not overlap any other
 * run's; otherwise the runs whose spreads overlap the fastest one are returned as tied. Times are
 * not ranked at all (neither best nor tied, `timesNotRanked` says why) while a completed row has
 * fewer than {@link minMeasuredEpochs} epochs measured after its warm-up. The other columns are
 * counts and peaks, the same in every repeat of a run, and are ranked from one epoch.
 */
export function rankRuns(runs: readonly CompareRun[]): Ranking {
  const best: CompareResult['best'] = {};
  const tied: NonNullable<CompareResult['tied']> = {};
  const ok = runs.filter((r) => r.status === 'ok');
  const timed = ok.filter((r) => r.medianEpochMs !== null);
  const fewest = timed.length > 0 ? Math.min(...timed.map(epochsAfterWarmup)) : undefined;
  const timesNotRanked =
    fewest !== undefined && fewest < minMeasuredEpochs
      ? { measuredEpochs: fewest, minimum: minMeasuredEpochs, reason: notEnoughSamplesText(fewest) }
      : undefined;
  for (const { column, value, higherIsBetter } of columns) {
    if (timesNotRanked && timeColumns.has(column)) continue;
    const values = ok.map((r) => [r, value(r)] as const).filter((p): p is readonly [CompareRun, number] => p[1] !== null);
    if (values.length === 0) continue;
    const target = higherIsBetter ? Math.max(...values.map((p) => p[1])) : Math.min(...values.map((p) => p[1]));
    const winners = values.filter((p) => p[1] === target).map((p) => p[0]);
    const lead = winners[0]!;
    if (timeColumns.has(column) && lead.epochSpread) {
      const close = values.map((p) => p[0]).filter((r) => r !== lead && r.epochSpread && spreadsOverlap(lead.epochSpread!, r.epochSpread));
      if (close.length > 0 || winners.length > 1) {
        tied[column] = [...new Set([...winners, ...close])].map((r) => r.allocator);
        continue;
      }
    }
    best[column] = winners.map((r) => r.allocator);
  }
  return { best, tied, ...(timesNotRanked ? { timesNotRanked } : {}) };
}

/** The allocators holding each column's best value (see {@link rankRuns}). */
export function bestOf(runs: readonly CompareRun[]): CompareResult['best'] {
  return rankRuns(runs).best;
}

const childPath = fileURLToPath(new URL('./child.js', import.meta.url));

/** Runs one request in a child process; a child that dies without a result becomes an error row. */
function runInChild(request: RunRequest, onProgress?: (p: Progress) => void): Promise<CompareRun> {
  return new Promise((resolve) => {
    const start = performance.now();
    const child = fork(childPath, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced' });
    let result: CompareRun | undefined;
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    child.on('message', (m: { type: 'progress'; progress: Progress } | { type: 'result'; run: CompareRun }) => {
      if (m.type === 'progress') onProgress?.(m.progress);
      else result = m.run;
    });
    child.on('error', (e) => {
      result ??= failureRun(request.spec, 'error', `could not start a child process: ${e.message}`, null, performance.now() - start);
    });
    child.on('exit', (code, signal) => {
      if (result) return resolve(result);
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      const detail = stderr.trim().split('\n').slice(-3).join(' | ');
      resolve(failureRun(request.spec, 'error', `the run's process ${how}${detail ? `: ${detail}` : ''}`, null, performance.now() - start));
    });
    child.send(request);
  });
}

/** The dataset a comparison trained on: the workload's default, or its new name where an old one was given. */
function datasetName(
  dataset: string | undefined,
  workload: { datasets: readonly string[]; datasetAliases?: Readonly<Record<string, string>> },
): string {
  if (dataset === undefined) return workload.datasets[0]!;
  return workload.datasetAliases?.[dataset] ?? dataset;
}

/** The note on GPU memory outside the allocators (the CUDA context and library handles), when measured. */
export function outsideAllocatorNote(runs: readonly CompareRun[]): string[] {
  const measured = runs.filter((r) => r.outsideAllocator);
  if (measured.length === 0) return [];
  const start = Math.max(...measured.map((r) => r.outsideAllocator!.atStartBytes));
  const end = Math.max(...measured.map((r) => r.outsideAllocator!.atEndBytes));
  return [
    `outside the allocators (not in the peaks above): ${formatBytes(start)} of GPU memory when each run began (the CUDA context and kernels), up to ${formatBytes(end)} at the end (with cuBLAS's handle and state); from cudaMemGetInfo`,
  ];
}

/**
 * Runs every allocator in turn, `repeat` rounds of them (a1 b1 c1 a2 b2 c2 ...), and gathers the
 * comparison, ranked and with its recommendation.
 */
export async function compareAllocators(o: CompareOptions): Promise<CompareResult> {
  const repeat = o.repeat ?? defaultRepeat;
  if (!Number.isSafeInteger(repeat) || repeat < 1)
    throw new RangeError(`Expected positive integer for repeat but received ${String(repeat)}`);
  const isolate = o.isolate ?? true;
  const byAllocator: CompareRun[][] = o.allocators.map(() => []);
  const total = o.allocators.length * repeat;
  for (let round = 0; round < repeat; round++) {
    for (const [index, spec] of o.allocators.entries()) {
      o.onRunStart?.(spec, round * o.allocators.length + index, total);
      const request: RunRequest = {
        spec,
        train: o.train,
        record: o.record ?? true,
        trackingCapacity: o.trackingCapacity ?? defaultTrackingCapacity,
        timelinePoints: o.timelinePoints ?? defaultTimelinePoints,
        plugins: o.plugins ?? [],
      };
      const onProgress = o.onProgress ? (p: Progress) => o.onProgress!(spec, p) : undefined;
      // over several devices the ranks are processes of their own: no child is needed to hold them
      const run = isDistributed(o.train)
        ? await runDistributed(request, onProgress)
        : isolate
          ? await runInChild(request, onProgress)
          : runOne(request, onProgress);
      byAllocator[index]!.push(run);
      o.onRunEnd?.(run);
    }
  }
  const runs = byAllocator.map((repeats) => mergeRepeats(repeats));
  const ranking = rankRuns(runs);
  const { picks, lines } = recommendRuns(runs, ranking);
  const outside = outsideAllocatorNote(runs);
  const workload = getWorkload(o.train.model);
  return {
    version: 1,
    createdAt: new Date().toISOString(),
    device: o.device,
    workload: {
      // the result's types name the workloads of this release; any registered one is reported
      model: o.train.model,
      dataset: datasetName(o.train.dataset, workload),
      title: o.title,
      epochs: o.train.epochs ?? 1,
      options: { ...(o.flags ?? {}) },
    },
    throughputUnit: `${workload.samples}/s`,
    runs,
    ...ranking,
    recommendation: lines,
    picks,
    ...(o.baselines && o.baselines.length > 0 ? { baselines: o.baselines } : {}),
    ...(outside.length > 0 ? { notes: outside } : {}),
  };
}
