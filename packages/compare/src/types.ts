/**
 * What `gpumem compare` produces: one run per allocator of the same model with the same seed,
 * and a memory timeline of each. The JSON file (`--json`), the HTML report (`--report`) and the
 * Chrome trace (`--trace-json`) are all made from a {@link CompareResult}.
 * @module
 */
import type { AllocatorStats } from '@gpumem/allocator-core';
import type { EpochRecord } from '@gpumem/gnn';

/** Allocated and reserved bytes over time (same length arrays, time ascending). */
export interface TimelineSeries {
  /** Milliseconds since the run's allocator was created. */
  tMs: number[];
  allocatedBytes: number[];
  reservedBytes: number[];
}

/** How the run ended. */
export type RunStatus = 'ok' | 'oom' | 'error';

/** One allocator's run. Figures are null where the run produced none (it failed first). */
export interface CompareRun {
  allocator: string;
  status: RunStatus;
  /** The failure's message (status 'oom' or 'error'). */
  error?: string;
  /** Every completed epoch, as `train()` reports it. */
  epochs: EpochRecord[];
  medianEpochMs: number | null;
  /** Training samples per second over the median epoch (images for the mlp, nodes for the gcn). */
  throughput: number | null;
  /** Highest over the run's epochs (or the stats at the failure). */
  peakAllocatedBytes: number | null;
  peakReservedBytes: number | null;
  /** peakReservedBytes / peakAllocatedBytes: what the strategy keeps on top of what is used. */
  overhead: number | null;
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
  /** Each epoch's span, on the timeline's clock (milliseconds since the allocator was created). */
  phases: { name: string; startMs: number; endMs: number }[];
  /** Events recorded and events lost to the ring buffer's bound. */
  eventsRecorded: number;
  eventsDropped: number;
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
    model: 'mlp' | 'gcn';
    dataset: string;
    /** A one-line description, e.g. "mlp on mnist, 4x784 hidden, batch 64, 1 epoch". */
    title: string;
    epochs: number;
    options: Record<string, unknown>;
  };
  throughputUnit: 'images/s' | 'nodes/s';
  runs: CompareRun[];
  /** For each column, the allocators holding its best value (ties included; failed runs excluded). */
  best: Partial<Record<CompareColumn, string[]>>;
}
