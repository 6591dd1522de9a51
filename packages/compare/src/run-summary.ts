/**
 * A comparison's row from one run: the figures of a completed run from the trainer's result, or a
 * failed run's row with the stats at its failure.
 * @module
 */
import type { AllocatorStats } from '@gpumem/allocator-core';
import type { TrainResult } from '@gpumem/gnn';
import type { AllocatorSpec } from './spec.js';
import type { CompareRun } from './types.js';
import { hostTierSummary } from './tiers.js';
import { spreadOf, warmupEpochsOf } from './spread.js';

/** A failed run's row: its status and message, and the stats at the failure where there are some. */
export function failureRun(
  spec: AllocatorSpec,
  status: 'oom' | 'error',
  error: string,
  stats: AllocatorStats | null,
  wallMs: number,
): CompareRun {
  const tiers = stats ? hostTierSummary(stats.peakAllocatedBytes, stats.peakReservedBytes, [stats], stats) : undefined;
  return {
    allocator: spec.label,
    status,
    error,
    epochs: [],
    medianEpochMs: null,
    throughput: null,
    peakAllocatedBytes: stats?.peakAllocatedBytes ?? null,
    peakReservedBytes: stats?.peakReservedBytes ?? null,
    overhead: null,
    ...(tiers ? { tiers } : {}),
    upstreamAllocCalls: stats?.upstreamAllocCount ?? null,
    upstreamFreeCalls: stats?.upstreamFreeCount ?? null,
    oomCount: stats?.oomCount ?? (status === 'oom' ? 1 : 0),
    finalLoss: null,
    accuracy: null,
    stats,
    wallMs,
    phases: [],
    timeline: null,
    eventsRecorded: 0,
    eventsDropped: 0,
  };
}

/** An error's message, or the thrown value as text. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * One successful run's row, from the trainer's result. `originMs`: when the allocator was created
 * (performance.now()), the timeline's zero.
 */
export function summariseRun(
  spec: AllocatorSpec,
  result: TrainResult,
  stats: AllocatorStats,
  wallMs: number,
  originMs: number,
): CompareRun {
  const epochs = result.epochs;
  const warmupEpochs = warmupEpochsOf(epochs.length);
  const epochSpread = spreadOf(epochs.slice(warmupEpochs).map((e) => e.epochMs));
  const medianEpochMs = epochSpread?.median ?? null;
  const peakAllocated = Math.max(...epochs.map((e) => e.peakAllocatedBytes));
  const peakReserved = Math.max(...epochs.map((e) => e.peakReservedBytes));
  const last = epochs.at(-1)!;
  const tiers = hostTierSummary(
    peakAllocated,
    peakReserved,
    epochs.map((e) => e.stats),
    stats,
  );
  return {
    allocator: spec.label,
    status: 'ok',
    epochs,
    warmupEpochs,
    medianEpochMs,
    epochSpread,
    repeats: 1,
    throughput: medianEpochMs ? result.samplesPerEpoch / (medianEpochMs / 1000) : null,
    peakAllocatedBytes: peakAllocated,
    peakReservedBytes: peakReserved,
    overhead: peakAllocated > 0 ? peakReserved / peakAllocated : null,
    ...(tiers ? { tiers } : {}),
    upstreamAllocCalls: stats.upstreamAllocCount,
    upstreamFreeCalls: stats.upstreamFreeCount,
    oomCount: stats.oomCount,
    finalLoss: last.loss,
    accuracy: last.accuracy,
    stats,
    wallMs,
    phases: epochs.map((e) => ({ name: `epoch ${e.epoch + 1}`, startMs: e.startMs - originMs, endMs: e.startMs - originMs + e.epochMs })),
    timeline: null,
    eventsRecorded: 0,
    eventsDropped: 0,
  };
}
