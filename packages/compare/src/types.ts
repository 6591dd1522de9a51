/**
 * What `gpumem compare` produces: one run per allocator of the same model with the same seed,
 * and a memory timeline of each. The JSON file (`--json`), the HTML report (`--report`) and the
 * Chrome trace (`--trace-json`) are all made from a {@link CompareResult}.
 * @module
 */
import type { AllocatorStats } from '@gpumem/allocator-core';
import type { EpochRecord, ModelName } from '@gpumem/gnn';
import type { Spread } from './spread.js';
import type { BaselineRun } from './baseline.js';

/** Allocated and reserved bytes over time (same length arrays, time ascending). */
export interface TimelineSeries {
  /** Milliseconds since the run's allocator was created (a device of a run over several: since the ranks were started). */
  tMs: number[];
  allocatedBytes: number[];
  reservedBytes: number[];
  /**
   * Allocated bytes split by the phase that allocated them (the trainer's tags: setup, forward,
   * loss, backward, optimizer, validation; bytes live before recording began count as 'before'):
   * `byTag[k][i]` is the bytes of `tags[k]` at point i; they add up to allocatedBytes[i].
   */
  tags?: string[];
  byTag?: number[][];
  /**
   * Strategies with a host tier (stats with `hostAllocatedBytes`): the host part of allocatedBytes
   * and reservedBytes at each point (the device part is the total less it). Sampled from the
   * allocator's stats when the run began, after each training step and at the end, so a point holds
   * the latest sample at or before it (the first sample before that). Absent for other strategies.
   */
  hostAllocatedBytes?: number[];
  hostReservedBytes?: number[];
}

/** A peak split between the tiers: `deviceBytes + hostBytes` is the peak. */
export interface TierSplit {
  deviceBytes: number;
  hostBytes: number;
}

/**
 * What a strategy with a host tier beside the device (its stats have `hostAllocatedBytes`, e.g.
 * 'tiered') did with it over a run: the peaks split between the tiers, and the bytes moved between
 * them. Each epoch's own figures are in its `stats` (peaks reset at the epoch's start).
 */
export interface HostTierSummary {
  /**
   * The run's peak allocated bytes ({@link CompareRun.peakAllocatedBytes}) split: the host part is
   * the host tier's own peak (the highest `peakHostAllocatedBytes` of the epochs), the device part
   * the rest of the peak.
   */
  peakAllocated: TierSplit;
  /** The same for the peak reserved bytes (`peakHostReservedBytes`). */
  peakReserved: TierSplit;
  /** Bytes moved from the device tier to the host tier over the run (the stats at its end). */
  bytesMovedToHost: number;
  /** Bytes moved from the host tier to the device tier over the run. */
  bytesMovedToDevice: number;
}

/** How the run ended. */
export type RunStatus = 'ok' | 'oom' | 'error';

/** One allocator's run. Figures are null where the run produced none (it failed first). */
export interface CompareRun {
  allocator: string;
  status: RunStatus;
  /** The failure's message (status 'oom' or 'error'). */
  error?: string;
  /** Every completed epoch, as `train()` reports it (of every repeat, in order, with --repeat). */
  epochs: EpochRecord[];
  /** Epochs left out of the median and the spread as warm-up: the first of each repeat when it had more than one. */
  warmupEpochs?: number;
  /** Median epoch time over the measured epochs (warm-up left out). */
  medianEpochMs: number | null;
  /** The spread of the measured epochs' times; null when none finished. */
  epochSpread?: Spread | null;
  /** Runs of this allocator pooled into the row (fresh processes, interleaved with the others); 1 by default. */
  repeats?: number;
  /** Training samples per second over the median epoch (images for the mlp, nodes for the gcn). */
  throughput: number | null;
  /** Highest over the run's epochs (or the stats at the failure). */
  peakAllocatedBytes: number | null;
  peakReservedBytes: number | null;
  /** peakReservedBytes / peakAllocatedBytes: what the strategy keeps on top of what is used. */
  overhead: number | null;
  /**
   * Strategies with a host tier: the peaks split between device and host, and the bytes moved
   * between the tiers. Absent for strategies without a host tier (and when no stats were taken).
   */
  tiers?: HostTierSummary;
  /** Driver (upstream) allocations and frees over the whole run. */
  upstreamAllocCalls: number | null;
  upstreamFreeCalls: number | null;
  oomCount: number;
  /** The last epoch's mean loss and accuracy (test accuracy for the mlp, held-out for the gcn). */
  finalLoss: number | null;
  accuracy: number | null;
  /** The allocator's stats at the end of the run, or at the failure. */
  stats: AllocatorStats | null;
  /** Wall time of the whole run (set-up, data, epochs), milliseconds. */
  wallMs: number;
  /** Allocated and reserved bytes over time, from the recorded events; null when recording was off. */
  timeline: TimelineSeries | null;
  /**
   * Each epoch's span, on the timeline's clock (milliseconds since the allocator was created; for a
   * run over several devices, since the ranks were started: from the first rank's start of the epoch
   * to the last rank's end).
   */
  phases: { name: string; startMs: number; endMs: number }[];
  /**
   * GPU memory the process used outside the allocator (the CUDA context, kernels, cuBLAS's handle
   * and its own state: what a tool cannot route through an allocator), from cudaMemGetInfo, right
   * after the allocator was made and at the end of the run; absent on the host.
   */
  outsideAllocator?: { atStartBytes: number; atEndBytes: number };
  /** Where the memory goes: allocated bytes by allocating phase at the peak of allocated bytes, largest first. */
  peakBreakdown?: { tag: string; bytes: number }[];
  /** Events recorded and events lost to the ring buffer's bound. */
  eventsRecorded: number;
  eventsDropped: number;
  /** Cells of the result's {@link CompareResult.extraColumns}, by column key (`gpumem replay`). */
  extra?: Record<string, ExtraCell>;
  /**
   * A run over several devices (`--devices`): each rank's device, its peaks and its memory over
   * time, in rank order. The run's own figures are then combined: the slowest rank's epoch times,
   * the largest peaks and upstream calls of any one device. Such a run records no allocation events
   * (its `timeline` is null): each device's timeline is sampled from its allocator's stats.
   */
  devices?: DeviceRun[];
}

/** One rank of a run over several devices (see {@link CompareRun.devices}). */
export interface DeviceRun {
  rank: number;
  /** The rank's device, e.g. "cuda:1", or "host". */
  device: string;
  /** The highest over the rank's epochs (its allocator's own peaks). */
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  /**
   * The rank's allocated and reserved bytes, sampled after every training step (mlp) or epoch
   * (gcn), in milliseconds since the ranks were started (one clock for every rank of the run).
   * Samples miss what a step allocates and frees within itself: the peaks above are exact.
   */
  timeline: TimelineSeries;
  /** Each of the rank's epochs, on the timeline's clock. */
  phases: { name: string; startMs: number; endMs: number }[];
  /** gcn: the other ranks' rows this rank's edges read (forward, backward) of the `remote` rows owned elsewhere. */
  remoteRows?: { forward: number; backward: number; remote: number };
}

/** A column beyond the built-in ones (`gpumem replay`'s minimum capacity, fragmentation at peak, ...). */
export interface ExtraColumn {
  key: string;
  heading: string;
  subheading?: string;
  /** The runs (by label) holding the column's best value. */
  best?: string[];
}

/** One cell of an {@link ExtraColumn}: its text, and a footnote mark where the text needs one. */
export interface ExtraCell {
  text: string;
  /** Shown after the text, e.g. '*' pointing at a note under the table. */
  mark?: string;
}

/** What a report made from `gpumem replay` says about the replayed trace. */
export interface ReplayReportInfo {
  /** The trace file. */
  trace: string;
  /** Its form ('jsonl', 'rmm-csv', 'torch-snapshot') and where it came from. */
  format: string;
  origin: string;
  /** A line about what it holds: events, allocations, streams, peak live bytes. */
  summary: string;
  /** The simulated capacity of the timed replay, if one was given. */
  capacityBytes?: number;
}

/** The recommendation of `gpumem compare` as data: what the table's marks say, picked out. */
export interface ComparePicks {
  /** The runs holding the smallest peak reserved (the column's `*`), and that peak. */
  leastMemory?: { allocators: string[]; peakReservedBytes: number };
  /**
   * The fastest, and how sure: `clear`, faster than every other run beyond the spread of the epochs
   * (the column's `*`); `within-noise`, the runs whose spreads overlap the fastest's (the column's
   * `=`), none of them faster; `not-enough-samples`, times not ranked (`reason` says why).
   */
  fastest?: {
    verdict: 'clear' | 'within-noise' | 'not-enough-samples';
    /** The fastest (clear), the runs tied with it (within-noise), or none. */
    allocators: string[];
    /** The fastest's median epoch (clear). */
    medianEpochMs?: number;
    reason?: string;
  };
}

/** The columns of the comparison table that have a best value. */
export type CompareColumn =
  | 'medianEpochMs'
  | 'throughput'
  | 'peakAllocatedBytes'
  | 'peakReservedBytes'
  | 'overhead'
  | 'upstreamCalls'
  | 'oomCount'
  | 'finalLoss'
  | 'accuracy';

export interface CompareResult {
  /** Format version of this object. */
  version: 1;
  /** ISO 8601. */
  createdAt: string;
  /** The device the runs used, e.g. "NVIDIA H100 80GB HBM3 (cuda:0)" or "host (CPU kernels)". */
  device: string;
  /** What was trained: the model, dataset and every train flag that was set. */
  workload: {
    /** A registered workload's name, or 'trace' for a report of `gpumem replay`. */
    model: ModelName | 'trace';
    dataset: string;
    /** A one-line description, e.g. "mlp on mnist, 4x784 hidden, batch 64, 1 epoch". */
    title: string;
    epochs: number;
    options: Record<string, unknown>;
  };
  /** What a second of training gets through: the workload's samples ('images/s', 'nodes/s'), or 'calls/s' for a replay. */
  throughputUnit: `${string}/s`;
  runs: CompareRun[];
  /**
   * For each column, the allocators holding its best value (exact ties included; failed runs
   * excluded). For the time columns, only a best that is better beyond the spread of the others.
   */
  best: Partial<Record<CompareColumn, string[]>>;
  /** For the time columns: the allocators tied for best within the spread (then none is marked best). */
  tied?: Partial<Record<CompareColumn, string[]>>;
  /**
   * Set when the time columns are not ranked (no best, no tie): some completed row has fewer epochs
   * measured after its warm-up than `minimum` (see minMeasuredEpochs).
   */
  timesNotRanked?: {
    /** The fewest measured epochs of any completed row. */
    measuredEpochs: number;
    minimum: number;
    /** "not enough samples (1 measured epoch after the warm-up, at least 5 needed)". */
    reason: string;
  };
  /** Other frameworks' runs of the same workload (`--baseline`), shown beside the allocators; not ranked. */
  baselines?: BaselineRun[];
  /** Set for a report of `gpumem replay`: the trace, instead of a trained model. */
  replay?: ReplayReportInfo;
  /** Built-in columns left out of the table (those with nothing to show for a replay: epochs, loss, ...). */
  hiddenColumns?: CompareColumn[];
  /** Columns after the built-in ones. */
  extraColumns?: ExtraColumn[];
  /** Notes under the table (footnotes). */
  notes?: string[];
  /** The recommendation, one sentence a line, shown above the table (from the same ranking as its marks). */
  recommendation?: string[];
  /** What the recommendation of `gpumem compare` picked, as data (see recommendRuns). */
  picks?: ComparePicks;
}
