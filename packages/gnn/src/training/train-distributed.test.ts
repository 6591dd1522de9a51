import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { RankFailedError } from '@gpumem/distributed';
import { combineRanks, planRanks, trainDistributed } from './train-distributed.js';
import { rowBlock } from '../datasets/graph-part.js';
import { nanoBatchSlices, rankOrder, rankStepLosses, sliceLoss } from '../workloads/mlp/train-mlp.js';
import { Runtime } from '../framework/runtime.js';
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

  it('a captured data-parallel step of 2 ranks reads, on each rank, the rows its eager step reads', () => {
    const [nTrain, batch] = [23, 6]; // 3 full steps and a short one (eager in graph mode)
    const order = Int32Array.from({ length: nTrain }, (_, i) => (i * 7) % nTrain);
    const fullSteps = Math.floor(nTrain / batch);
    const read: number[][] = Array.from({ length: fullSteps }, () => []);
    for (let rank = 0; rank < 2; rank++) {
      const [first, rows] = nanoBatchSlices(batch, 2)[rank]!;
      const perm = rankOrder(order, fullSteps, batch, [first, rows]);
      for (let k = 0; k < fullSteps; k++) {
        // step k reads perm[k·rows + r] (gatherBatch by the step counter); the eager step reads order[k·batch + first + r]
        const captured = [...perm.subarray(k * rows, (k + 1) * rows)];
        expect(captured).toEqual([...order.subarray(k * batch + first, k * batch + first + rows)]);
        read[k]!.push(...captured);
      }
    }
    for (let k = 0; k < fullSteps; k++)
      expect(read[k]!.sort((a, b) => a - b)).toEqual([...order.subarray(k * batch, (k + 1) * batch)].sort((a, b) => a - b));
  });

  it("combines the ranks' step losses of graph mode (each rank's mean at the step's slot) into each step's mean loss", () => {
    const [nTrain, batch] = [23, 6];
    const rowLoss = Array.from({ length: nTrain }, (_, i) => 0.25 + ((i * 37) % 11) / 7);
    const steps = Math.ceil(nTrain / batch);
    const stepMean = Array.from({ length: steps }, (_, s) => {
      const rows = rowLoss.slice(s * batch, Math.min(nTrain, (s + 1) * batch));
      return rows.reduce((a, b) => a + b, 0) / rows.length;
    });
    for (const ranks of [1, 2, 3]) {
      const records = Array.from({ length: ranks }, (_, rank) => {
        const slice = (stepRows: number): [number, number] => nanoBatchSlices(stepRows, ranks)[rank] ?? [0, 0];
        // what the loss kernel leaves in slot s: the mean over the rank's rows of step s
        const raw = Array.from({ length: steps }, (_, s) => {
          const [first, rows] = slice(Math.min(batch, nTrain - s * batch));
          const mine = rowLoss.slice(s * batch + first, s * batch + first + rows);
          return rows === 0 ? 0 : mine.reduce((a, b) => a + b, 0) / rows;
        });
        const losses = rankStepLosses(raw, nTrain, batch, 1, slice);
        const share = { lossWeights: losses.map(() => 1), trainCorrect: 0, trainCount: 1, evalCorrect: 0, evalCount: 1 };
        return {
          model: 'mlp',
          dataset: 'mnist',
          allocator: 'host',
          parameters: 1,
          samplesPerEpoch: nTrain,
          device: 'host',
          epochs: [epoch({ losses, share })],
        } satisfies TrainResult;
      });
      const combined = combineRanks(records, []).epochs[0]!.losses;
      expect(combined).toHaveLength(steps);
      for (const [s, l] of combined.entries()) expect(Math.abs(l - stepMean[s]!), `${ranks} ranks, step ${s}`).toBeLessThan(1e-12);
    }
  });

  it("a captured data-parallel rank's loss kernel writes the step counter's slot, with the eager slice's gradients (CPU kernels)", () => {
    const rt = new Runtime(new HostAllocator());
    try {
      const [rows, stepRows, classes, slots] = [5, 10, 10, 4];
      const logits = rt.fromArray(
        Float32Array.from({ length: rows * classes }, (_, i) => Math.sin(i * 1.7) * 3),
        [rows, classes],
      );
      const labels = rt.fromArray(
        Int32Array.from({ length: rows }, (_, i) => (i * 3) % classes),
        [rows],
      );
      const counter = rt.fromArray(Int32Array.of(2), [1]);
      const [loss, correct, bias] = [rt.zeros([slots]), rt.zeros([slots], 'i32'), rt.zeros([classes])];
      const captured = sliceLoss(rt, logits, labels, bias, stepRows, loss.ptr, correct.ptr, counter.ptr);
      // the eager slice: softmaxCrossEntropy into a scalar, dLogits scaled, then the layer's bias gradient
      const [eagerLoss, eagerCorrect, eagerBias] = [rt.zeros([1]), rt.zeros([1], 'i32'), rt.zeros([classes])];
      const eager = sliceLoss(rt, logits, labels, eagerBias, stepRows, eagerLoss.ptr, eagerCorrect.ptr);
      expect([captured.outputBiasGradDone, eager.outputBiasGradDone]).toEqual([true, false]);
      rt.ops.biasGrad(rt.onDevice, rt.s, eager.dLogits.ptr, eagerBias.ptr, rows, classes, false);
      const l = [...loss.toFloat32()];
      expect(l[2]).toBe(eagerLoss.toFloat32()[0]);
      expect(l[2]).toBeGreaterThan(0);
      expect([l[0], l[1], l[3]]).toEqual([0, 0, 0]);
      expect([...correct.toArray()]).toEqual([0, 0, eagerCorrect.toArray()[0], 0]);
      // rows/stepRows = 1/2: scaling before or after the column sums gives the same bits
      expect([...captured.dLogits.toFloat32()]).toEqual([...eager.dLogits.toFloat32()]);
      expect([...bias.toFloat32()]).toEqual([...eagerBias.toFloat32()]);
      // a whole step: the fused kernel, unscaled, at the counter's slot
      const whole = sliceLoss(rt, logits, labels, bias, rows, loss.ptr, correct.ptr, counter.ptr);
      expect(whole.outputBiasGradDone).toBe(true);
      for (const t of [
        logits,
        labels,
        counter,
        loss,
        correct,
        bias,
        eagerLoss,
        eagerCorrect,
        eagerBias,
        captured.dLogits,
        eager.dLogits,
        whole.dLogits,
      ])
        t.dispose();
    } finally {
      rt.dispose();
    }
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
        relClose(e.loss, one.epochs[i]!.loss, 1e-4); // the reduction order (partial sums per rank)
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

  it("one rank trains as train() does, on train()'s plan (A·x once): bench/multi's baseline", async () => {
    const o = { model: 'gcn', dataset: 'random', allocator: 'host', epochs: 4, nodes: 2000, hidden: 16, seed: 2 } as const;
    const one = train(o);
    const rank = await trainDistributed({ ...o, devices: 1 });
    for (const [i, e] of rank.epochs.entries()) relClose(e.loss, one.epochs[i]!.loss, 1e-5);
    const err = await trainDistributed({ ...o, devices: 2, inputAggregation: 'every-epoch' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RankFailedError);
    expect((err as Error).message).toMatch(/Expected inputAggregation 'once' with devices but received 'every-epoch'/);
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
