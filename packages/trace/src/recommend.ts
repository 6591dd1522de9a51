/**
 * The recommendation after a replay: each strategy's replay, as the advice weighs it (where its
 * memory lives, what it spilled, its OOMs, peak reserved, minimum capacity, driver calls and mean
 * time per call), against the allocator the trace was recorded under when that is known.
 * @module
 */
import { adviseAllocator, type Advice, type AdviceCandidate, type SkippedStrategy } from './advice.js';
import type { RecordedBaseline } from './baseline.js';
import type { StrategyReplay } from './strategy-replay.js';

/** How the strategies were replayed, and what else the recommendation speaks of. */
export interface RecommendOptions {
  /** Whether the minimum capacity was searched: memory is then ranked by it, else by peak reserved. */
  minCapacity: boolean;
  /** The simulated capacity of the timed replay, if any. */
  capacityBytes?: number;
  /** The allocator the trace was recorded under (PyTorch's, from a snapshot), when known. */
  baseline?: RecordedBaseline;
  /** Strategies not replayed at all (no GPU), and why; those whose replay failed are added. */
  skipped?: readonly SkippedStrategy[];
  /** Whether the replay ran on a GPU (without one, device strategies ran on their host twins). */
  gpu: boolean;
}

/** A replay that finished, as a candidate; undefined for one that failed. */
function candidateOf(replay: StrategyReplay): AdviceCandidate | undefined {
  const r = replay.result;
  const p = replay.profile;
  if (replay.error !== undefined || !r || !p) return undefined;
  const calls = r.allocs + r.frees;
  return {
    label: replay.label,
    ...(replay.memory !== undefined && { memory: replay.memory }),
    ...(p.peakHostReservedBytes !== undefined && { spilledBytes: p.peakHostReservedBytes }),
    ooms: r.ooms,
    peakReservedBytes: r.peakReservedBytes,
    ...(replay.minCapacity?.bytes !== undefined && { minCapacityBytes: replay.minCapacity.bytes }),
    driverCalls: p.driverAllocs + p.driverFrees,
    nsPerCall: calls > 0 ? (r.nsPerAlloc * r.allocs + r.nsPerFree * r.frees) / calls : 0,
  };
}

/**
 * The recommendation from the replays that finished (see adviseAllocator), with the recorded
 * allocator as the baseline (named "PyTorch") and a caveat naming the strategies that were skipped
 * or failed (with the first line of their error).
 */
export function recommendStrategy(replays: readonly StrategyReplay[], o: RecommendOptions): Advice {
  const candidates = replays.flatMap((replay) => candidateOf(replay) ?? []);
  const { baseline } = o;
  return adviseAllocator(candidates, {
    minCapacity: o.minCapacity,
    ...(o.capacityBytes !== undefined && { capacityBytes: o.capacityBytes }),
    ...(baseline && {
      baseline: {
        name: 'PyTorch',
        peakReservedBytes: baseline.peakReservedBytes,
        driverCalls: baseline.driverAllocs + baseline.driverFrees,
      },
    }),
    skipped: [
      ...(o.skipped ?? []),
      ...replays.flatMap((replay) =>
        replay.error === undefined ? [] : [{ label: replay.label, reason: `failed: ${replay.error.split('\n')[0]}` }],
      ),
    ],
    withoutGpu: !o.gpu,
  });
}
