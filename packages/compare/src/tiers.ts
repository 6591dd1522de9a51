/**
 * Strategies that keep memory in two tiers (device and host, e.g. 'tiered'): their stats carry the
 * host part of the allocated and reserved bytes; the device part is the total less it. Here the
 * run's peaks are split between the tiers, for the table, the JSON file and the report.
 * @module
 */
import type { AllocatorStats } from '@gpumem/allocator-core';
import type { CompareRun, HostTierSummary, TierSplit } from './types.js';

/** True when the stats come from a strategy with a host tier (they have `hostAllocatedBytes`). */
export function hasHostTier(stats: AllocatorStats | null | undefined): stats is AllocatorStats & { hostAllocatedBytes: number } {
  return stats !== null && stats !== undefined && typeof stats.hostAllocatedBytes === 'number';
}

/** `peak` split into the host tier's peak (at most the peak) and the rest, on the device. */
export function splitPeak(peak: number, hostPeak: number): TierSplit {
  const hostBytes = Math.max(0, Math.min(peak, hostPeak));
  return { deviceBytes: peak - hostBytes, hostBytes };
}

/**
 * The host-tier summary of a run: `peakAllocated` and `peakReserved` (the run's peaks) split with
 * the highest host peaks of `peaks` (each epoch's stats, or the stats at a failure), and the bytes
 * moved between the tiers from `final` (the stats at the end). Undefined when none of the stats
 * has a host tier.
 */
export function hostTierSummary(
  peakAllocated: number | null,
  peakReserved: number | null,
  peaks: readonly AllocatorStats[],
  final: AllocatorStats | null,
): HostTierSummary | undefined {
  const tiered = peaks.filter(hasHostTier);
  if (!hasHostTier(final) && tiered.length === 0) return undefined;
  if (hasHostTier(final)) tiered.push(final);
  const highest = (f: (s: AllocatorStats) => number | undefined) => tiered.reduce((m, s) => Math.max(m, f(s) ?? 0), 0);
  const hostAllocated = highest((s) => s.peakHostAllocatedBytes ?? s.hostAllocatedBytes);
  const hostReserved = highest((s) => s.peakHostReservedBytes ?? s.hostReservedBytes);
  const last = hasHostTier(final) ? final : tiered.at(-1)!;
  return {
    peakAllocated: splitPeak(peakAllocated ?? last.peakAllocatedBytes, hostAllocated),
    peakReserved: splitPeak(peakReserved ?? last.peakReservedBytes, hostReserved),
    bytesMovedToHost: last.bytesMovedToHost ?? 0,
    bytesMovedToDevice: last.bytesMovedToDevice ?? 0,
  };
}

/** True when some run has a host tier. */
export function anyHostTier(runs: readonly Pick<CompareRun, 'tiers'>[]): boolean {
  return runs.some((r) => r.tiers !== undefined);
}

/** True when some run moved bytes between its tiers. */
export function anyTierMoves(runs: readonly Pick<CompareRun, 'tiers'>[]): boolean {
  return runs.some((r) => r.tiers !== undefined && (r.tiers.bytesMovedToHost > 0 || r.tiers.bytesMovedToDevice > 0));
}
