/**
 * The GCN's row-block plan on the CPU kernels: the same training as the plain plan (losses and
 * accuracy within float reassociation), any number of blocks, bf16 features within a stated
 * change, a lower measured peak, and bad plan options refused before anything is allocated.
 */
import { describe, expect, it } from 'vitest';
import { HostAllocator, createTrackedAllocator } from '@gpumem/allocator-core';
import { train } from '../../training/train.js';
import type { GcnTrainOptions } from './options.js';
import { allocationTags } from '../../framework/runtime.js';

const base: GcnTrainOptions = { model: 'gcn', allocator: 'host', nodes: 3000, hidden: 32, features: 16, epochs: 4, seed: 5 };
const losses = (o: Partial<GcnTrainOptions>) => train({ ...base, ...o }).epochs.map((e) => e.loss);

describe('gcn row-block plan (CPU)', () => {
  let plainLosses: number[] | undefined;
  /** The plain plan's losses, computed once. */
  const plain = () => (plainLosses ??= losses({}));

  it.each([1, 3, 7, 3000, 5000])('%i row blocks train as the plain plan does (relative difference < 1e-5)', (rowBlocks) => {
    const blocked = losses({ rowBlocks });
    const expected = plain();
    expect(blocked).toHaveLength(expected.length);
    blocked.forEach((l, i) => {
      expect(Math.abs(l - expected[i]!)).toBeLessThan(1e-5 * Math.max(1, Math.abs(expected[i]!)));
    });
  });

  it('learns the SBM far above chance in row blocks', () => {
    const r = train({ model: 'gcn', dataset: 'sbm', allocator: 'host', nodes: 1200, hidden: 32, epochs: 60, seed: 2, rowBlocks: 5 });
    expect(r.epochs.at(-1)!.accuracy).toBeGreaterThan(0.8);
  });

  it('bf16 features change the losses by less than 1% (random graph) and still learn the SBM', () => {
    const bf16 = losses({ rowBlocks: 4, featureDtype: 'bf16' });
    const expected = plain();
    bf16.forEach((l, i) => {
      expect(Math.abs(l - expected[i]!) / expected[i]!).toBeLessThan(0.01);
    });
    const sbm = train({
      model: 'gcn',
      dataset: 'sbm',
      allocator: 'host',
      nodes: 1200,
      hidden: 32,
      epochs: 60,
      seed: 2,
      rowBlocks: 3,
      featureDtype: 'bf16',
    });
    expect(sbm.epochs.at(-1)!.accuracy).toBeGreaterThan(0.8);
  });

  it('lowers the peak: one N x H activation instead of two, and bf16 halves the features', () => {
    const nodes = 20_000;
    // the highest epoch peak of three: every epoch after validation must be as the first
    const peak = (o: Partial<GcnTrainOptions>) =>
      Math.max(...train({ ...base, nodes, hidden: 64, features: 32, epochs: 3, ...o }).epochs.map((e) => e.peakAllocatedBytes));
    const activation = nodes * 64 * 4;
    const small = nodes * 10 * 4; // an N x C tensor: the row-block plan's backward holds one more of them at its peak
    const plainPeak = peak({});
    const blockedPeak = peak({ rowBlocks: 8 });
    const bf16Peak = peak({ rowBlocks: 8, featureDtype: 'bf16' });
    expect(plainPeak - blockedPeak).toBeGreaterThanOrEqual(activation - small);
    expect(blockedPeak - bf16Peak).toBeGreaterThanOrEqual(nodes * 32 * 2 * 0.99);
  });

  it('tags the dataset, the graph and the saved activation for placement', () => {
    const tracked = createTrackedAllocator('host', {}, 1 << 16);
    const heard = new Set<string>();
    const listening = Object.assign(tracked.allocator, { setPlacementTag: (tag: string) => void heard.add(tag) });
    const seen = new Set<string>();
    try {
      train({ ...base, epochs: 1, allocator: listening, rowBlocks: 2, tagAllocations: tracked.setTag });
      for (const e of tracked.events().events) if (e.action === 'alloc') seen.add(allocationTags[e.tag]!);
    } finally {
      tracked.allocator.dispose();
    }
    for (const tag of ['features', 'graph', 'activations', 'forward', 'backward']) {
      expect(seen).toContain(tag);
      expect(heard).toContain(tag);
    }
  });

  it.each([
    [{ rowBlocks: 0 }, /positive integer for rowBlocks/],
    [{ rowBlocks: 2.5 }, /positive integer for rowBlocks/],
    [{ rowBlocks: 2, aggregation: 'scatter' as const }, /aggregation 'spmm' with rowBlocks/],
    [{ featureDtype: 'bf16' as const }, /rowBlocks with featureDtype 'bf16'/],
    [{ rowBlocks: 2, featureDtype: 'f16' as unknown as 'bf16' }, /'f32' or 'bf16' for featureDtype/],
  ])('refuses %o before allocating', (o, message) => {
    const allocator = new HostAllocator();
    try {
      expect(() => train({ ...base, ...o, allocator })).toThrow(message);
      expect(allocator.stats().allocatedBytes).toBe(0);
    } finally {
      allocator.dispose();
    }
  });
});
