/**
 * Pooling repeated runs of one allocator into one row: every repeat's epochs, their warm-up left
 * out of each, one median and spread over all of them; peaks the highest of any repeat (each
 * device's too, for runs over several devices).
 * @module
 */
import { spreadOf, warmupEpochsOf } from './spread.js';
import { splitPeak } from './tiers.js';
import type { CompareRun } from './types.js';
import { mergeDeviceRepeats } from './devices.js';

/**
 * One row from the runs of one allocator. A failed repeat makes the row fail (its status, error
 * and stats), since a strategy that fails one time in K is not a strategy that works.
 */
export function mergeRepeats(runs: readonly CompareRun[]): CompareRun {
  if (runs.length === 0) throw new RangeError('Expected at least one run to merge but received none');
  if (runs.length === 1) return runs[0]!;
  const failed = runs.find((r) => r.status !== 'ok');
  if (failed) return { ...failed, repeats: runs.length };
  const first = runs[0]!;
  const measured = runs.flatMap((r) => r.epochs.slice(warmupEpochsOf(r.epochs.length)).map((e) => e.epochMs));
  const epochSpread = spreadOf(measured);
  const medianEpochMs = epochSpread?.median ?? null;
  const max = (f: (r: CompareRun) => number | null): number | null => {
    const values = runs.map(f).filter((v): v is number => v !== null);
    return values.length > 0 ? Math.max(...values) : null;
  };
  const peakAllocatedBytes = max((r) => r.peakAllocatedBytes);
  const peakReservedBytes = max((r) => r.peakReservedBytes);
  // A host tier's peaks: the highest of any repeat, splitting the pooled peaks; bytes moved are the
  // first run's, as the upstream calls are.
  const tiered = runs.filter((r) => r.tiers !== undefined);
  const tiers =
    first.tiers && peakAllocatedBytes !== null && peakReservedBytes !== null
      ? {
          ...first.tiers,
          peakAllocated: splitPeak(peakAllocatedBytes, Math.max(...tiered.map((r) => r.tiers!.peakAllocated.hostBytes))),
          peakReserved: splitPeak(peakReservedBytes, Math.max(...tiered.map((r) => r.tiers!.peakReserved.hostBytes))),
        }
      : undefined;
  // Runs over several devices: each rank's peaks the highest of any repeat.
  const devices = mergeDeviceRepeats(runs);
  // Throughput from the pooled median: samples per epoch are the same in every repeat.
  const samplesPerEpoch = first.throughput !== null && first.medianEpochMs ? (first.throughput * first.medianEpochMs) / 1000 : null;
  return {
    ...first,
    epochs: runs.flatMap((r) => r.epochs),
    warmupEpochs: runs.reduce((n, r) => n + warmupEpochsOf(r.epochs.length), 0),
    medianEpochMs,
    epochSpread,
    repeats: runs.length,
    throughput: samplesPerEpoch !== null && medianEpochMs ? samplesPerEpoch / (medianEpochMs / 1000) : null,
    peakAllocatedBytes,
    peakReservedBytes,
    overhead: peakAllocatedBytes && peakReservedBytes !== null ? peakReservedBytes / peakAllocatedBytes : null,
    ...(tiers ? { tiers } : {}),
    ...(devices ? { devices } : {}),
    oomCount: Math.max(...runs.map((r) => r.oomCount)),
    wallMs: runs.reduce((t, r) => t + r.wallMs, 0),
    ...(runs.every((r) => r.outsideAllocator)
      ? {
          outsideAllocator: {
            atStartBytes: Math.max(...runs.map((r) => r.outsideAllocator!.atStartBytes)),
            atEndBytes: Math.max(...runs.map((r) => r.outsideAllocator!.atEndBytes)),
          },
        }
      : {}),
  };
}
