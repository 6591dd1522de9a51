import { createTrackedAllocator } from '@gpumem/allocator-core';
import { allocationTags } from '../framework/runtime.js';
/**
 * The trainer on the CPU kernels (CI): the MLP learns MNIST on a subset, the GCN learns an SBM
 * graph, both aggregations agree, no step leaks memory under any host allocator, and bad input is
 * rejected before anything large is allocated.
 */
import { describe, expect, it } from 'vitest';
import { HostAllocator, createAllocator, type AllocatorStats } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import '@gpumem/examples/arena';
import { train } from './train.js';
import { Runtime } from '../framework/runtime.js';

describe('trainer on the CPU', () => {
  it('mlp: the loss falls and test accuracy beats 80% on a 3,000-image subset in 2 epochs', () => {
    const r = train({ model: 'mlp', allocator: 'host', hidden: [128, 128], epochs: 2, trainSubset: 3000, testSubset: 1000, seed: 1 });
    const [first, second] = r.epochs as [(typeof r.epochs)[0], (typeof r.epochs)[0]];
    expect(first.losses).toHaveLength(Math.ceil(3000 / 64));
    const early = first.losses.slice(0, 5).reduce((a, b) => a + b) / 5;
    expect(early).toBeGreaterThan(1.5); // about ln 10 at the start
    expect(second.loss).toBeLessThan(first.loss);
    expect(second.loss).toBeLessThan(0.5);
    expect(second.accuracy).toBeGreaterThan(0.8);
    expect(r.parameters).toBe(784 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10);
  });

  it('gcn on a stochastic block model learns far above chance (25%)', () => {
    const r = train({ model: 'gcn', dataset: 'sbm', allocator: 'host', nodes: 1200, hidden: 32, epochs: 60, seed: 2 });
    const last = r.epochs[r.epochs.length - 1]!;
    expect(last.loss).toBeLessThan(r.epochs[0]!.loss);
    expect(last.accuracy).toBeGreaterThan(0.8);
  });

  it("gcn: 'random' is the default dataset, and 'seed' (its old name, deprecated) trains the same graph", () => {
    const run = (dataset?: 'random' | 'seed') =>
      train({ model: 'gcn', allocator: 'host', ...(dataset && { dataset }), nodes: 500, hidden: 8, features: 8, epochs: 2, seed: 4 });
    const byDefault = run();
    expect(byDefault.dataset).toBe('random');
    const byOldName = run('seed');
    expect(byOldName.dataset).toBe('random');
    expect(byOldName.epochs.map((e) => e.loss)).toEqual(byDefault.epochs.map((e) => e.loss));
    expect(run('random').epochs.map((e) => e.loss)).toEqual(byDefault.epochs.map((e) => e.loss));
  });

  it('gcn: spmm and scatter aggregation give the same losses', () => {
    const run = (aggregation: 'spmm' | 'scatter') =>
      train({ model: 'gcn', allocator: 'host', nodes: 3000, hidden: 16, features: 8, epochs: 3, aggregation, seed: 3 }).epochs.map(
        (e) => e.loss,
      );
    const spmm = run('spmm');
    const scatter = run('scatter');
    spmm.forEach((l, i) => {
      expect(Math.abs(l - scatter[i]!)).toBeLessThan(1e-5 * Math.max(1, Math.abs(l)));
    });
  });

  describe.each([
    ['host', {}],
    ['pool', { upstream: 'host' }],
    ['arena', { upstream: 'host' }],
  ])('no leak on %s', (name, options) => {
    it('every step returns allocatedBytes to the same baseline, and the run frees everything', () => {
      const allocator = createAllocator(name, options);
      try {
        const seen: AllocatorStats[] = [];
        train({
          model: 'mlp',
          allocator,
          hidden: [32],
          epochs: 1,
          trainSubset: 640,
          testSubset: 100,
          onStep: (_s, stats) => seen.push(stats),
        });
        expect(seen).toHaveLength(10);
        expect(new Set(seen.map((s) => s.allocatedBytes)).size).toBe(1);
        const gcnSeen: number[] = [];
        train({
          model: 'gcn',
          allocator,
          nodes: 500,
          hidden: 8,
          features: 8,
          epochs: 3,
          onStep: (_s, stats) => gcnSeen.push(stats.allocatedBytes),
        });
        expect(new Set(gcnSeen).size).toBe(1);
        expect(allocator.stats().allocatedBytes).toBe(0);
      } finally {
        allocator.dispose();
      }
    });
  });

  it('rejects bad options with typed errors naming them', () => {
    expect(() => train({ model: 'mlp', allocator: 'host', epochs: 0 })).toThrow(/epochs/);
    expect(() => train({ model: 'mlp', allocator: 'host', batchSize: 1.5 })).toThrow(/batchSize/);
    expect(() => train({ model: 'gcn', allocator: 'host', nodes: -1 })).toThrow(/nodes/);
    expect(() => train({ model: 'gcn', allocator: 'host', aggregation: 'gather' as 'spmm' })).toThrow(/aggregation/);
    expect(() => train({ model: 'mlp', allocator: 'no-such' })).toThrow(/registered/);
    expect(() => train({ model: 'mlp', allocator: 'host', cudaGraph: true, trainSubset: 64, testSubset: 10 })).toThrow(
      /cudaGraph.*CUDA device/,
    );
  });
});

describe('runtime scopes', () => {
  it('free every intermediate that does not escape, and keep what is returned', () => {
    const allocator = new HostAllocator();
    const rt = new Runtime(allocator);
    try {
      const kept = rt.scope(() => {
        rt.empty([100]);
        rt.zeros([10, 10]);
        const inner = rt.scope(() => [rt.empty([3]), rt.empty([4])]);
        expect(rt.liveTensors).toBe(4);
        return { a: inner[0]!, b: rt.empty([5]) };
      });
      expect(rt.liveTensors).toBe(2);
      expect(allocator.stats().allocatedBytes).toBe(12 + 20);
      kept.a.dispose();
      kept.b.dispose();
      kept.b.dispose(); // idempotent
      expect(() =>
        rt.scope(() => {
          rt.empty([8]);
          throw new Error('boom');
        }),
      ).toThrow('boom');
      expect(allocator.stats().allocatedBytes).toBe(0);
      expect(() => rt.fromArray(new Float32Array(3), [2, 2])).toThrow(RangeError);
    } finally {
      rt.dispose();
      allocator.dispose();
    }
  });
});

describe('allocation tags', () => {
  it('every recorded allocation says which phase of training asked for it', () => {
    const tracked = createTrackedAllocator('host', {}, 1 << 16);
    try {
      train({
        model: 'mlp',
        allocator: tracked.allocator,
        epochs: 1,
        trainSubset: 128,
        testSubset: 64,
        hidden: [16],
        tagAllocations: tracked.setTag,
      });
      const { events, dropped } = tracked.events();
      expect(dropped).toBe(0);
      const seen = new Set(events.filter((e) => e.action === 'alloc').map((e) => allocationTags[e.tag]));
      expect([...seen].sort()).toEqual(['backward', 'forward', 'loss', 'optimizer', 'setup', 'validation']);
      // parameters and data are set up first, then the first step's forward pass allocates
      expect(allocationTags[events[0]!.tag]).toBe('setup');
    } finally {
      tracked.allocator.dispose();
    }
  });
});
