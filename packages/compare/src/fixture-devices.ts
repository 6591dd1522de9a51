/**
 * Synthetic results of runs over several devices, for tests of what is made from them (the row, the
 * table, the HTML report, the Chrome trace): the ranks' records of a GCN split by rows, combined by
 * the trainer's own combineRanks(), and a {@link CompareResult} with one such run beside a plain one
 * and a failed one. Deterministic: every call returns an equal, fresh object.
 * @module
 */
import { combineRanks, type EpochRecord, type RankSamples, type TrainResult } from '@gpumem/gnn';
import { rankRuns } from './compare.js';
import { summariseDistributed } from './distributed-run.js';
import { failureRun } from './run-summary.js';
import { sampleCompareResult, stats } from './fixture.js';
import type { CompareResult, CompareRun } from './types.js';

const MiB = 2 ** 20;

/** Where each rank's process started on the launcher's clock (its epochs' startMs are on its own clock): 40 ms, 55 ms, ... */
export function sampleRankClockOffset(rank: number): number {
  return 40 + 15 * rank;
}

/**
 * One rank's result and samples: `epochs` epochs of 200 + 20·rank ms after 300 ms of set-up (on its
 * own clock), a sample as each epoch ends (as a gcn rank takes them), 100 + 10·rank MiB allocated
 * at the samples, 8 MiB more at each epoch's peak, reserved in 32 MiB segments, and upstream calls
 * that grow by 2 + rank an epoch.
 */
function rankResult(rank: number, ranks: number, epochs: number): { result: TrainResult; samples: RankSamples } {
  const epochMs = 200 + 20 * rank;
  const allocated = (100 + 10 * rank) * MiB;
  const reserved = Math.ceil((allocated + 8 * MiB) / (32 * MiB)) * 32 * MiB;
  const samples: RankSamples = { tMs: [], allocatedBytes: [], reservedBytes: [] };
  const records: EpochRecord[] = [];
  for (let epoch = 0; epoch < epochs; epoch++) {
    const startMs = 300 + epoch * epochMs;
    const calls = (2 + rank) * (epoch + 1);
    const s = stats({
      allocatedBytes: allocated,
      peakAllocatedBytes: allocated + 8 * MiB,
      reservedBytes: reserved,
      peakReservedBytes: reserved,
      allocCount: 50 * (epoch + 1),
      freeCount: 50 * (epoch + 1) - 10,
      upstreamAllocCount: calls,
      upstreamFreeCount: calls - 1,
    });
    records.push({
      epoch,
      startMs,
      epochMs,
      loss: 2 - 0.1 * epoch,
      losses: [2 - 0.1 * epoch],
      trainAccuracy: 0.5,
      accuracy: 0.5,
      peakAllocatedBytes: allocated + 8 * MiB,
      peakReservedBytes: reserved,
      upstreamAllocCalls: 2 + rank,
      upstreamFreeCalls: 1 + rank,
      stats: s,
      share: { lossWeights: [1 / ranks], trainCorrect: 40 + epoch, trainCount: 100, evalCorrect: 400 + epoch, evalCount: 1000 },
    });
    samples.tMs.push(sampleRankClockOffset(rank) + startMs + epochMs);
    samples.allocatedBytes.push(allocated);
    samples.reservedBytes.push(reserved);
  }
  return {
    result: {
      model: 'gcn',
      dataset: 'sbm',
      allocator: 'pool',
      device: `cuda:${rank}`,
      epochs: records,
      parameters: 34_570,
      samplesPerEpoch: 20_000,
      remoteRows: { forward: 900 + rank, backward: 880 + rank, remote: 1000 * (ranks - 1) },
    },
    samples,
  };
}

/** trainDistributed()'s result of a GCN over `ranks` ranks on cuda:0 .. cuda:N-1 (see rankResult), combined by combineRanks(). */
export function sampleDistributedTrainResult(options: { ranks?: number; epochs?: number } = {}): TrainResult {
  const ranks = options.ranks ?? 2;
  const parts = Array.from({ length: ranks }, (_, rank) => rankResult(rank, ranks, options.epochs ?? 4));
  return {
    ...combineRanks(
      parts.map((p) => p.result),
      parts.map((p) => p.samples),
    ),
    communicator: 'nccl',
  };
}

/**
 * A comparison of a GCN over two devices: 'pool' over cuda:0 and cuda:1 (with `devices`), 'async'
 * a plain run with a recorded timeline (sampleCompareResult's), and 'cuda' failed: its rank 1 ran
 * out of memory.
 */
export function sampleDevicesCompareResult(): CompareResult {
  const runs: CompareRun[] = [
    summariseDistributed({ label: 'pool', name: 'pool', options: {} }, sampleDistributedTrainResult(), 2500, 4000),
    sampleCompareResult().runs[2]!,
    failureRun(
      { label: 'cuda', name: 'cuda', options: {} },
      'oom',
      'rank 1 of 2 failed: OutOfMemoryError: out of memory allocating 64.00 MiB; every other rank was stopped',
      null,
      900,
    ),
  ];
  return {
    version: 1,
    createdAt: '2025-06-02T14:03:27.512Z',
    device: 'NVIDIA H100 80GB HBM3 (cuda:0, cuda:1)',
    workload: {
      model: 'gcn',
      dataset: 'sbm',
      title: 'gcn (GCN on the sbm graph, 20,000 nodes, spmm aggregation), 4 epochs, over 2 devices',
      epochs: 4,
      options: { model: 'gcn', dataset: 'sbm', epochs: 4, devices: '2' },
    },
    throughputUnit: 'nodes/s',
    runs,
    ...rankRuns(runs),
  };
}
