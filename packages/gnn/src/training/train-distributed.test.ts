import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RankFailedError } from '@gpumem/distributed';
import { combineRanks, planRanks, trainDistributed } from './train-distributed.js';
import { rowBlock } from '../datasets/graph-part.js';
import { nanoBatchSlices, rankOrder } from '../workloads/mlp/train-mlp.js';
import { train } from './train.js';
import { throttledProgress } from './train-common.js';
import type { EpochRecord, TrainResult } from './train-types.js';

// The ranks are processes running the built packages (as `gpumem train --devices` does).
const built = ['../../dist/training/rank-main.js', '../../../distributed/dist/index.js'].every((p) =>
  existsSync(fileURLToPath(new URL(p, import.meta.url))),
);
const needsBuild = built ? '' : 'packages/gnn or packages/distributed is not built (npm run build): the ranks run the built packages';

function epoch(over: Partial<EpochRecord>): EpochRecord {
  const stats = {
    allocatedBytes: 0,
    reservedBytes: 0,
    peakAllocatedBytes: 0,
    peakReservedBytes: 0,
    upstreamAllocCount: 0,
    upstreamFreeCount: 0,
  } as EpochRecord['stats'];
  return {
    epoch: 0,
    startMs: 0,
    epochMs: 1,
    loss: 0,
    losses: [0],
    trainAccuracy: 0,
    accuracy: 0,
    peakAllocatedBytes: 0,
    peakReservedBytes: 0,
    upstreamAllocCalls: 0,
    upstreamFreeCalls: 0,
    stats,
    ...over,
  };
}

describe('splitting work over ranks', () => {
  it('gives every rank a block of rows, `stride` apart, the last one shorter', () => {
    expect([0, 1, 2].map((r) => rowBlock(10, r, 3))).toEqual([
      { start: 0, count: 4, stride: 4 },
      { start: 4, count: 4, stride: 4 },
      { start: 8, count: 2, stride: 4 },
    ]);
    expect(() => rowBlock(5, 3, 4)).toThrow(/at least one node per rank.*5 nodes over 4 ranks/);
  });

  it("lays out a data-parallel rank's rows of each full step one after another", () => {
    const order = Int32Array.from({ length: 10 }, (_, i) => 100 + i);
    // batch 4, 2 full steps, rank 1 of 2 takes rows [2, 4) of each
    expect([...rankOrder(order, 2, 4, nanoBatchSlices(4, 2)[1]!).subarray(0, 4)]).toEqual([102, 103, 106, 107]);
  });

  it('combines ranks: weighted losses, summed counts, the slowest epoch and the largest peak', () => {
    const r0 = epoch({
      losses: [2],
      epochMs: 10,
      peakAllocatedBytes: 100,
      share: { lossWeights: [0.75], trainCorrect: 6, trainCount: 8, evalCorrect: 1, evalCount: 2 },
    });
    const r1 = epoch({
      losses: [4],
      epochMs: 12,
      peakAllocatedBytes: 300,
      share: { lossWeights: [0.25], trainCorrect: 1, trainCount: 2, evalCorrect: 3, evalCount: 6 },
    });
    const base: Omit<TrainResult, 'epochs' | 'device'> = {
      model: 'gcn',
      dataset: 'sbm',
      allocator: 'host',
      parameters: 1,
      samplesPerEpoch: 10,
    };
    const out = combineRanks(
      [
        { ...base, device: 'host', epochs: [r0] },
        { ...base, device: 'host', epochs: [r1] },
      ],
      [],
    );
    const e = out.epochs[0]!;
    expect(e.losses).toEqual([2 * 0.75 + 4 * 0.25]);
    expect([e.trainAccuracy, e.accuracy, e.epochMs, e.peakAllocatedBytes]).toEqual([0.7, 0.5, 12, 300]);
    expect(e.share).toBeUndefined();
    expect(out.ranks!.map((k) => k.epochs[0]!.peakAllocatedBytes)).toEqual([100, 300]);
    expect(() => combineRanks([{ ...base, device: 'host', epochs: [epoch({})] }], [])).toThrow(/no share/);
  });

  it('plans host ranks for a strategy over host memory, and refuses bad device lists', () => {
    expect(planRanks({ allocator: 'host', devices: 3 })).toEqual({ devices: [-1, -1, -1], backend: 'host' });
    expect(() => planRanks({ allocator: 'host', devices: 0 })).toThrow(/positive integer or a list of CUDA ordinals/);
    expect(() => planRanks({ allocator: 'host', devices: [0, 0] })).toThrow(/its memory is on the host/);
    expect(() => planRanks({ allocator: 'host', devices: 2, communicator: 'nccl' })).toThrow(/NCCL runs on GPUs only/);
  });

  it("sends progress to another process at most every 100 ms, but always an epoch's last step", () => {
    const sent: number[] = [];
    const send = throttledProgress((p) => sent.push(p.step));
    for (let step = 1; step <= 5; step++) send({ epoch: 0, epochs: 1, step, steps: 5 });
    expect(sent).toEqual([1, 5]); // a loop this quick takes well under 100 ms
  });

  it('keeps train() to one device', () => {
    expect(() => train({ model: 'gcn', dataset: 'sbm', allocator: 'host', devices: 2 })).toThrow(/use trainDistributed/);
  });
});

describe.skipIf(needsBuild)(`training over ranks on the host${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  const relClose = (a: number, b: number, tol: number) => expect(Math.abs(a - b) / Math.max(Math.abs(b), 1e-12)).toBeLessThan(tol);

  it('the gcn split by rows over 2 and 3 ranks matches one device', async () => {
    const o = { model: 'gcn', dataset: 'sbm', allocator: 'host', epochs: 4, nodes: 1500 } as const;
    const one = train(o);
    for (const devices of [2, 3]) {
      const many = await trainDistributed({ ...o, devices });
      expect(many.ranks!.length).toBe(devices);
      expect(many.communicator).toBe('host');
      for (const [i, e] of many.epochs.entries()) {
        relClose(e.loss, one.epochs[i]!.loss, 1e-4); // reduction order and (A·x)·W1ᵀ for A·(x·W1ᵀ)
        expect(Math.abs(e.accuracy - one.epochs[i]!.accuracy)).toBeLessThan(0.01);
      }
      // every rank holds about its share of the activations
      for (const r of many.ranks!) {
        expect(r.samples.allocatedBytes.length).toBe(o.epochs);
        expect(r.remoteRows!.remote).toBeGreaterThan(0);
        expect(r.remoteRows!.forward).toBeLessThanOrEqual(r.remoteRows!.remote);
      }
    }
  });

  it('the seed gcn, drawn by rows on every rank, over 2 and 3 ranks matches one device', async () => {
    const o = { model: 'gcn', dataset: 'random', allocator: 'host', epochs: 3, nodes: 3000, hidden: 32 } as const;
    const one = train(o);
    for (const devices of [2, 3]) {
      const many = await trainDistributed({ ...o, devices });
      for (const [i, e] of many.epochs.entries()) relClose(e.loss, one.epochs[i]!.loss, 1e-4);
    }
  });

  it('the mlp data parallel over 2 ranks matches one device with the same global batch', async () => {
    const o = {
      model: 'mlp',
      allocator: 'host',
      epochs: 2,
      trainSubset: 640,
      testSubset: 200,
      hidden: 64,
      hiddenLayers: 2,
      batchSize: 64,
    } as const;
    const one = train(o);
    const two = await trainDistributed({ ...o, devices: 2 });
    for (const [i, e] of two.epochs.entries()) {
      expect(e.losses.length).toBe(one.epochs[i]!.losses.length);
      e.losses.forEach((l, s) => {
        relClose(l, one.epochs[i]!.losses[s]!, 1e-4);
      });
      expect(Math.abs(e.accuracy - one.epochs[i]!.accuracy)).toBeLessThan(0.01);
    }
  });

  it('a rank that runs out of memory stops the run with a clear error', async () => {
    const err = await trainDistributed({
      model: 'gcn',
      dataset: 'sbm',
      allocator: 'host',
      allocatorOptions: { limitBytes: 64 * 1024 },
      epochs: 1,
      nodes: 1500,
      devices: 2,
      timeoutMs: 60_000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RankFailedError);
    expect((err as Error).message).toMatch(/rank \d of 2 failed: OutOfMemoryError/);
  });
});
