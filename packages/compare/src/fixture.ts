/**
 * A synthetic but realistic {@link CompareResult} for tests of what is made from one (the HTML
 * report, the Chrome trace, the JSON file): four allocators on a GCN workload, one of which runs out
 * of memory in its second epoch, with memory timelines of a few thousand points each; on request a
 * fifth, 'tiered', that keeps what does not fit its device tier in a host tier.
 * @module
 */
import type { AllocatorStats } from '@gpumem/allocator-core';
import { seededRandom } from '@gpumem/allocator-core/tools';
import type { EpochRecord } from '@gpumem/gnn';
import { rankRuns } from './compare.js';
import { spreadOf, warmupEpochsOf } from './spread.js';
import { hostTierSummary } from './tiers.js';
import type { CompareResult, CompareRun, TimelineSeries } from './types.js';

const MiB = 2 ** 20;

/** How one synthetic strategy turns allocated bytes into reserved bytes. */
interface StrategyShape {
  allocator: string;
  /** Milliseconds per allocator event (sets the epoch time). */
  msPerEvent: number;
  /** Reserved bytes given the allocated bytes now and the reserved bytes before. */
  reserve(allocated: number, reservedBefore: number): number;
  /** Stop with an OOM when allocated bytes would pass this bound. */
  capacity?: number;
  /**
   * A host tier beside the device: allocated bytes beyond `deviceBytes` live on the host, and
   * `reserve` is applied to the device tier's bytes only.
   */
  hostTier?: { deviceBytes: number };
}

function roundUp(bytes: number, granule: number): number {
  return Math.ceil(bytes / granule) * granule;
}

const shapes: StrategyShape[] = [
  // Every call goes to the driver: reserved follows allocated exactly.
  { allocator: 'cuda', msPerEvent: 0.9, reserve: (allocated) => allocated },
  // A caching pool: reserves 20 MiB segments and never gives them back.
  { allocator: 'pool', msPerEvent: 0.31, reserve: (allocated, before) => Math.max(before, Math.ceil(allocated / (20 * MiB)) * 20 * MiB) },
  // cudaMallocAsync with a 64 MiB release threshold: 2 MiB granules, keeps at most 64 MiB unused.
  {
    allocator: 'async',
    msPerEvent: 0.34,
    reserve: (allocated, before) => Math.min(Math.max(before, roundUp(allocated, 2 * MiB)), roundUp(allocated, 2 * MiB) + 64 * MiB),
  },
  // A fixed 200 MiB arena (a plug-in): the second epoch's peak does not fit.
  { allocator: 'arena', msPerEvent: 0.4, reserve: () => 200 * MiB, capacity: 200 * MiB },
];

/**
 * Two tiers: a 128 MiB device tier reserved in 2 MiB granules and kept, and what does not fit in
 * a host tier that keeps its reserve too; slower, for the bytes it moves.
 */
const tieredShape: StrategyShape = {
  allocator: 'tiered',
  msPerEvent: 0.5,
  reserve: (deviceAllocated, before) => Math.min(128 * MiB, Math.max(before, roundUp(deviceAllocated, 2 * MiB))),
  hostTier: { deviceBytes: 128 * MiB },
};

const EPOCHS = 6;
const EVENTS_PER_EPOCH = 550;
const NODES = 100_000;

/** Allocated bytes at event `i` of an epoch: activations built up in forward, freed in backward. */
function allocatedAt(i: number, epoch: number, noise: number): number {
  const weights = 36 * MiB;
  const half = EVENTS_PER_EPOCH / 2;
  const ramp = i < half ? i / half : (EVENTS_PER_EPOCH - i) / half;
  // The first three epochs' activations each somewhat larger (a growing cache of graph buffers), then steady.
  const activations = (150 + 30 * Math.min(epoch, 2)) * MiB * ramp;
  return Math.round(weights + activations + noise * 2 * MiB);
}

/** Allocator stats for fixtures: zeros but for `partial`. */
export function stats(partial: Partial<AllocatorStats>): AllocatorStats {
  return {
    allocatedBytes: 0,
    peakAllocatedBytes: 0,
    reservedBytes: 0,
    peakReservedBytes: 0,
    allocCount: 0,
    freeCount: 0,
    upstreamAllocCount: 0,
    upstreamFreeCount: 0,
    oomCount: 0,
    ...partial,
  };
}

/** Runs one synthetic strategy: its timeline, epochs, phases and the figures derived from them. */
function simulate(shape: StrategyShape, index: number): CompareRun {
  const next = seededRandom(1234 + index); // the same fixture on every call
  const timeline: TimelineSeries = { tMs: [], allocatedBytes: [], reservedBytes: [] };
  const tier = shape.hostTier;
  if (tier) {
    timeline.hostAllocatedBytes = [];
    timeline.hostReservedBytes = [];
  }
  let deviceReserved = 0;
  let hostAllocated = 0;
  let hostReserved = 0;
  let movedToHost = 0;
  let movedToDevice = 0;
  const hostStats = (peakHostAllocated: number, peakHostReserved: number): Partial<AllocatorStats> =>
    tier
      ? {
          hostAllocatedBytes: hostAllocated,
          peakHostAllocatedBytes: peakHostAllocated,
          hostReservedBytes: hostReserved,
          peakHostReservedBytes: peakHostReserved,
          bytesMovedToHost: movedToHost,
          bytesMovedToDevice: movedToDevice,
        }
      : {};
  const epochs: EpochRecord[] = [];
  const phases: CompareRun['phases'] = [];
  let t = 12 + 3 * index; // set-up before the first epoch
  let reserved = 0;
  let allocCount = 0;
  let upstreamAllocs = 0;
  let upstreamFrees = 0;
  let failure: string | undefined;
  // The counters an epoch's stats and the run's final stats report, as they stand when called.
  const counters = (peakAllocatedBytes: number, peakReservedBytes: number): Partial<AllocatorStats> => ({
    allocatedBytes: timeline.allocatedBytes.at(-1)!,
    peakAllocatedBytes,
    reservedBytes: reserved,
    peakReservedBytes,
    allocCount,
    freeCount: allocCount - 40,
    upstreamAllocCount: upstreamAllocs,
    upstreamFreeCount: upstreamFrees,
  });

  for (let epoch = 0; epoch < EPOCHS && failure === undefined; epoch++) {
    const startMs = t;
    const upstreamBefore = [upstreamAllocs, upstreamFrees] as const;
    let peakAllocated = 0;
    let peakReserved = 0;
    let peakHostAllocated = 0;
    let peakHostReserved = 0;
    for (let i = 0; i < EVENTS_PER_EPOCH; i++) {
      const allocated = allocatedAt(i, epoch, next());
      if (shape.capacity !== undefined && allocated > shape.capacity) {
        const requested = allocated - timeline.allocatedBytes.at(-1)!;
        failure =
          `${shape.allocator}: could not allocate ${requested} bytes: the upstream 'cuda' could not supply a chunk ` +
          `of ${2 * MiB} bytes (cuda: out of memory (limit ${shape.capacity} bytes))`;
        break;
      }
      let nextReserved: number;
      if (tier) {
        const host = Math.max(0, allocated - tier.deviceBytes);
        // spilled bytes go to the host; half of what leaves the host is moved back to the device
        if (host > hostAllocated) movedToHost += host - hostAllocated;
        else movedToDevice += Math.floor((hostAllocated - host) / 2);
        hostAllocated = host;
        hostReserved = Math.max(hostReserved, roundUp(host, 2 * MiB));
        deviceReserved = shape.reserve(allocated - host, deviceReserved);
        nextReserved = deviceReserved + hostReserved;
        timeline.hostAllocatedBytes!.push(hostAllocated);
        timeline.hostReservedBytes!.push(hostReserved);
        peakHostAllocated = Math.max(peakHostAllocated, hostAllocated);
        peakHostReserved = Math.max(peakHostReserved, hostReserved);
      } else {
        nextReserved = shape.reserve(allocated, reserved);
      }
      if (nextReserved > reserved) upstreamAllocs++;
      if (nextReserved < reserved) upstreamFrees++;
      reserved = nextReserved;
      allocCount++;
      t += shape.msPerEvent * (0.8 + 0.4 * next());
      timeline.tMs.push(Number(t.toFixed(3)));
      timeline.allocatedBytes.push(allocated);
      timeline.reservedBytes.push(reserved);
      peakAllocated = Math.max(peakAllocated, allocated);
      peakReserved = Math.max(peakReserved, reserved);
    }
    if (failure !== undefined) break;
    const epochMs = t - startMs;
    phases.push({ name: `epoch ${epoch + 1}`, startMs, endMs: t });
    const loss = 2.3 * Math.exp(-0.45 * (epoch + 1)) + 0.05 * index;
    epochs.push({
      epoch: epoch + 1,
      // train() reports it on the performance.now() clock; this run's allocator was created at 5,000 ms.
      startMs: 5000 + startMs,
      epochMs,
      loss,
      losses: [loss],
      trainAccuracy: 0.55 + 0.1 * epoch,
      accuracy: 0.5 + 0.1 * epoch - 0.01 * index,
      peakAllocatedBytes: peakAllocated,
      peakReservedBytes: peakReserved,
      upstreamAllocCalls: upstreamAllocs - upstreamBefore[0],
      upstreamFreeCalls: upstreamFrees - upstreamBefore[1],
      stats: stats({ ...counters(peakAllocated, peakReserved), ...hostStats(peakHostAllocated, peakHostReserved) }),
    });
    t += 2; // between epochs
  }

  const peakAllocated = Math.max(...timeline.allocatedBytes);
  const peakReserved = Math.max(...timeline.reservedBytes);
  const finalStats = stats({
    ...counters(peakAllocated, peakReserved),
    oomCount: failure === undefined ? 0 : 1,
    ...(shape.allocator === 'pool' ? { largestFreeBlock: 18 * MiB, segmentCount: Math.round(peakReserved / (20 * MiB)) } : {}),
    ...hostStats(Math.max(0, ...(timeline.hostAllocatedBytes ?? [])), Math.max(0, ...(timeline.hostReservedBytes ?? []))),
  });
  const tiers = hostTierSummary(
    peakAllocated,
    peakReserved,
    epochs.map((e) => e.stats),
    finalStats,
  );
  const ok = failure === undefined;
  const warmupEpochs = warmupEpochsOf(epochs.length);
  const epochSpread = spreadOf(epochs.slice(warmupEpochs).map((e) => e.epochMs));
  const medianEpochMs = epochSpread?.median ?? null;
  const last = epochs.at(-1);
  return {
    allocator: shape.allocator,
    status: ok ? 'ok' : 'oom',
    ...(ok ? {} : { error: failure }),
    epochs,
    warmupEpochs,
    medianEpochMs: ok ? medianEpochMs : null,
    epochSpread: ok ? epochSpread : null,
    repeats: 1,
    throughput: ok && medianEpochMs !== null ? NODES / (medianEpochMs / 1000) : null,
    peakAllocatedBytes: peakAllocated,
    peakReservedBytes: peakReserved,
    overhead: peakReserved / peakAllocated,
    ...(tiers ? { tiers } : {}),
    upstreamAllocCalls: upstreamAllocs,
    upstreamFreeCalls: upstreamFrees,
    oomCount: finalStats.oomCount,
    finalLoss: ok && last ? last.loss : null,
    accuracy: ok && last ? last.accuracy : null,
    stats: finalStats,
    wallMs: t + 40,
    timeline,
    phases,
    eventsRecorded: timeline.tMs.length * 2,
    eventsDropped: 0,
  };
}

/**
 * A {@link CompareResult} of a GCN on a generated graph under 'cuda', 'pool', 'async' and a
 * fixed-size 'arena' plug-in that runs out of memory in epoch 2: six epochs (five measured, the ranking's
 * minimum), about 3,300 timeline
 * points per successful run, epoch phases on the timeline's clock and `best` and `tied` derived from the runs by {@link rankRuns}.
 * With `tiered`, a fifth run, 'tiered', has a 128 MiB device tier and a host tier for the rest:
 * stats with the host fields, a timeline with its host part, and the peaks split (`tiers`).
 * Deterministic: every call returns an equal, fresh object.
 */
export function sampleCompareResult(options: { tiered?: boolean } = {}): CompareResult {
  const runs = (options.tiered ? [...shapes, tieredShape] : shapes).map(simulate);
  return {
    version: 1,
    createdAt: '2025-06-02T14:03:27.512Z',
    device: 'NVIDIA H100 80GB HBM3 (cuda:0)',
    workload: {
      model: 'gcn',
      dataset: 'random',
      title: `gcn on random graph, ${NODES} nodes, 10 edges per node, 128 features, 256 hidden, ${EPOCHS} epochs`,
      epochs: EPOCHS,
      options: { model: 'gcn', dataset: 'random', nodes: NODES, epochs: EPOCHS, aggregation: 'spmm', seed: 0 },
    },
    throughputUnit: 'nodes/s',
    runs,
    ...rankRuns(runs),
  };
}
