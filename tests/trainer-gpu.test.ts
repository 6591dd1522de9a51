/**
 * The trainer on a GPU: mlp-seed's accuracy, the GCN learning an SBM graph, bit-identical losses
 * under every allocator, and no leak per step. Skipped, with the reason, without a device.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, loadNative, type AllocatorStats } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import '@gpumem/allocator-uvm';
import '@gpumem/examples/arena';
import type { NativeOps } from '../packages/gnn/src/framework/native-ops.js';
import { train } from '../packages/gnn/src/training/train.js';
import { gpuAvailable, gpuTitle } from './gpu.js';

// Every GPU allocator; uvm capped well under any card's free memory.
const allocators: Array<[string, Record<string, unknown>]> = [
  ['cuda', {}],
  ['pool', { upstream: 'cuda' }],
  ['async', {}],
  ['uvm', { limitBytes: 8 * 2 ** 30, logThresholdBytes: false }],
  ['arena', { upstream: 'cuda' }],
];

describe.skipIf(!gpuAvailable)(gpuTitle('trainer on the GPU'), () => {
  it('mlp-seed reaches a best test accuracy of at least 97% within 3 epochs', () => {
    const r = train({ model: 'mlp', allocator: 'pool', epochs: 3, seed: 0 });
    const best = Math.max(...r.epochs.map((e) => e.accuracy));
    console.log(`mlp-seed: ${r.epochs.map((e) => `${(e.accuracy * 100).toFixed(2)}% in ${e.epochMs.toFixed(0)} ms`).join(', ')}`);
    expect(best).toBeGreaterThanOrEqual(0.97);
  });

  it('mlp with the steps captured as CUDA Graphs: the same losses and accuracies as eager', () => {
    // 200 full batches and a last one of 40 rows (run eagerly in graph mode too)
    const options = {
      model: 'mlp' as const,
      allocator: 'pool',
      allocatorOptions: { upstream: 'cuda' },
      epochs: 2,
      trainSubset: 12_840,
      testSubset: 2000,
      seed: 5,
    };
    const eager = train(options);
    const graphed = train({ ...options, cudaGraph: true }); // 4 steps a launch
    const single = train({ ...options, cudaGraph: true, graphSteps: 1 });
    const seven = train({ ...options, cudaGraph: true, graphSteps: 7 });
    expect(eager.epochs[0]!.losses).toHaveLength(201);
    expect(eager.epochs.every((e) => e.losses.every(Number.isFinite))).toBe(true);
    for (const [name, run] of [
      ['4 steps a graph', graphed],
      ['1 step a graph', single],
      ['7 steps a graph', seven],
    ] as const) {
      expect(
        run.epochs.map((e) => e.losses),
        name,
      ).toEqual(eager.epochs.map((e) => e.losses));
      expect(
        run.epochs.map((e) => e.accuracy),
        name,
      ).toEqual(eager.epochs.map((e) => e.accuracy));
      expect(
        run.epochs.map((e) => e.trainAccuracy),
        name,
      ).toEqual(eager.epochs.map((e) => e.trainAccuracy));
    }
    console.log(
      `mlp, 201 steps an epoch: eager ${eager.epochs[1]!.epochMs.toFixed(1)} ms, CUDA graphs of 4 steps ${graphed.epochs[1]!.epochMs.toFixed(1)} ms, of 1 step ${single.epochs[1]!.epochMs.toFixed(1)} ms, of 7 steps ${seven.epochs[1]!.epochMs.toFixed(1)} ms`,
    );
    // the times are printed, not asserted: one epoch of one process is not a measurement (an H100 once
    // gave 100.0 ms captured against 93.7 ms eager here); bench/train measures the captured step's speed
    expect(() => train({ ...options, allocator: 'cuda', allocatorOptions: {}, cudaGraph: true })).toThrow(
      /Expected a capturable allocator \(registered with capturable: true; here: [^)]*pool[^)]*\) for cudaGraph but received 'cuda'/,
    );
    expect(() => train({ ...options, cudaGraph: true, graphSteps: 0 })).toThrow(/graphSteps/);
  });

  it('mlp with CUDA graphs: onStep after every step, the same allocatedBytes each time, nothing left allocated', () => {
    const allocator = createAllocator('pool', { upstream: 'cuda' });
    try {
      const steps: AllocatorStats[] = [];
      const progress: number[][] = [[], []];
      train({
        model: 'mlp',
        allocator,
        epochs: 2,
        trainSubset: 64 * 40 + 10,
        testSubset: 500,
        cudaGraph: true,
        graphSteps: 16,
        onStep: (_s, stats) => steps.push(stats),
        onProgress: (p) => progress[p.epoch]!.push(p.step),
      });
      expect(steps).toHaveLength(2 * 41);
      // epoch 1 from its start: the graphs exist, so every step sees the same allocations
      expect(new Set(steps.slice(41).map((s) => s.allocatedBytes)).size).toBe(1);
      // progress once a launch: epoch 0 runs one step eagerly before the first capture; then graphs
      // of 16 steps, single steps for the rest of the 40 full batches, and the partial batch eagerly
      expect(progress[0]).toEqual([1, 17, 33, 34, 35, 36, 37, 38, 39, 40, 41]);
      expect(progress[1]).toEqual([16, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41]);
      expect(allocator.stats().allocatedBytes).toBe(0);
    } finally {
      allocator.dispose();
    }
  });

  it("every byte the trainer uses comes from the run's allocator: workspaces bound, none allocated by the ops", () => {
    const ops = (loadNative() as unknown as { ops: NativeOps }).ops;
    const { scratchBytes, blasBytes } = ops.workspaceBytes(true);
    expect(scratchBytes).toBeGreaterThan(0);
    const allocator = createAllocator('pool', { upstream: 'cuda' });
    try {
      const before = ops.unboundWorkspaceAllocations();
      const options = { model: 'mlp' as const, allocator, epochs: 1, trainSubset: 64 * 20, testSubset: 500, seed: 2 };
      const eager = train(options);
      const graphed = train({ ...options, cudaGraph: true }); // two streams, each with its workspace
      expect(ops.unboundWorkspaceAllocations()).toBe(before);
      // The peak covers the workspaces (one stream eager, two with graphs) on top of the model.
      const params = 4 * (784 * 784 * 4 + 784 * 10 + 784 * 4 + 10);
      expect(eager.epochs[0]!.peakAllocatedBytes).toBeGreaterThanOrEqual(scratchBytes + blasBytes + params);
      expect(graphed.epochs[0]!.peakAllocatedBytes).toBeGreaterThanOrEqual(2 * (scratchBytes + blasBytes) + params);
      expect(allocator.stats().allocatedBytes).toBe(0); // unbound and freed at the end of each run
    } finally {
      allocator.dispose();
    }
  });

  it('gcn on a stochastic block model learns far above chance', () => {
    const r = train({ model: 'gcn', dataset: 'sbm', allocator: 'pool', nodes: 20_000, hidden: 64, epochs: 60, seed: 2 });
    expect(r.epochs[r.epochs.length - 1]!.accuracy).toBeGreaterThan(0.8);
  });

  it('the allocator does not change the math: bit-identical losses under every allocator', () => {
    const runs = allocators.map(([name, options]) => {
      const mlp = train({
        model: 'mlp',
        allocator: name,
        allocatorOptions: options,
        epochs: 1,
        trainSubset: 6400,
        testSubset: 1000,
        seed: 4,
      });
      const gcn = train({ model: 'gcn', allocator: name, allocatorOptions: options, nodes: 50_000, epochs: 5, seed: 4 });
      return { name, losses: [...mlp.epochs.flatMap((e) => e.losses), ...gcn.epochs.map((e) => e.loss)] };
    });
    const reference = runs[0]!;
    expect(reference.losses.every(Number.isFinite)).toBe(true);
    for (const run of runs.slice(1)) expect(run.losses, run.name).toEqual(reference.losses);
  });

  describe.each(allocators)('no leak on %s', (name, options) => {
    it('every step returns allocatedBytes to the same baseline', () => {
      const allocator = createAllocator(name, options);
      try {
        const steps: AllocatorStats[] = [];
        train({ model: 'mlp', allocator, epochs: 1, trainSubset: 1280, testSubset: 500, onStep: (_s, stats) => steps.push(stats) });
        expect(steps).toHaveLength(20);
        expect(new Set(steps.map((s) => s.allocatedBytes)).size).toBe(1);
        const gcn: number[] = [];
        train({
          model: 'gcn',
          allocator,
          nodes: 20_000,
          epochs: 3,
          aggregation: 'scatter',
          onStep: (_s, stats) => gcn.push(stats.allocatedBytes),
        });
        expect(new Set(gcn).size).toBe(1);
        expect(allocator.stats().allocatedBytes).toBe(0);
      } finally {
        allocator.dispose();
      }
    });
  });
});
