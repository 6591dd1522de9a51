/**
 * The GCN's first layer on the CPU kernels, with the input aggregated once ((A·x)·W1ᵀ, A·x taken at
 * setup: the default with the CSR product) against every epoch (A·(x·W1ᵀ), the seed's plan): the
 * same training up to float reassociation, the defaults per aggregation, the allocations each plan
 * makes, the memory estimate following the plan, and the combinations refused before anything is
 * allocated.
 */
import { describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { train } from '../../training/train.js';
import { estimateTrainingMemory, trainingShape } from '../../training/memory-estimate.js';
import type { GcnTrainOptions } from './options.js';

const base: GcnTrainOptions = { model: 'gcn', allocator: 'host', nodes: 3000, hidden: 32, features: 16, epochs: 5, seed: 5 };
const run = (o: Partial<GcnTrainOptions>) => train({ ...base, ...o });
/** Relative difference, for losses that are equal up to the order of float sums. */
const relative = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);

describe('gcn: the input aggregated once or every epoch (CPU)', () => {
  it.each(['random', 'sbm'] as const)(
    'the %s graph trains the same: losses within 1e-5 relative over 5 epochs, same accuracy',
    (dataset) => {
      const everyEpoch = run({ dataset, inputAggregation: 'every-epoch' });
      const once = run({ dataset, inputAggregation: 'once' });
      expect(once.epochs).toHaveLength(5);
      once.epochs.forEach((e, i) => {
        const expected = everyEpoch.epochs[i]!;
        // (A·x)·W1ᵀ against A·(x·W1ᵀ), and dW1 = dᵀ·(A·x) against (Aᵀ·d)ᵀ·x: the same sums in another order
        expect(relative(e.loss, expected.loss), `epoch ${i}`).toBeLessThan(1e-5);
        expect(Math.abs(e.accuracy - expected.accuracy)).toBeLessThan(0.01);
      });
      expect(once.epochs.at(-1)!.loss).toBeLessThan(once.epochs[0]!.loss); // it trains
    },
  );

  it("is the default with 'spmm' and not with 'scatter' (the seed's E x hidden messages every epoch)", () => {
    const losses = (o: Partial<GcnTrainOptions>) => run({ ...o, epochs: 3 }).epochs.map((e) => e.loss);
    expect(losses({})).toEqual(losses({ inputAggregation: 'once' }));
    expect(losses({ aggregation: 'scatter' })).toEqual(losses({ aggregation: 'scatter', inputAggregation: 'every-epoch' }));
    expect(trainingShape({ model: 'gcn' })).toMatchObject({ inputAggregation: 'once' });
    expect(trainingShape({ model: 'gcn', aggregation: 'scatter' })).toMatchObject({ inputAggregation: 'every-epoch' });
    expect(trainingShape({ model: 'gcn', rowBlocks: 4 })).not.toHaveProperty('inputAggregation');
  });

  it('allocates less per epoch (no x·W1ᵀ), with the same epoch peak; A·x stands where x stood', () => {
    const perEpoch = (o: Partial<GcnTrainOptions>) => {
      const r = run({ ...o, epochs: 3 });
      const counts = r.epochs.map((e) => e.stats.allocCount);
      return { allocations: counts[2]! - counts[1]!, peak: Math.max(...r.epochs.map((e) => e.peakAllocatedBytes)) };
    };
    const everyEpoch = perEpoch({ inputAggregation: 'every-epoch' });
    const once = perEpoch({ inputAggregation: 'once' });
    // x·W1ᵀ in training and in evaluation (A·x·W1ᵀ is one output, as A·(x·W1ᵀ) is), and backward's Aᵀ·d
    expect(everyEpoch.allocations - once.allocations).toBe(3);
    expect(once.peak).toBe(everyEpoch.peak);
  });

  it('the memory estimate follows the plan: A·x beside x at setup, a lower bound of the measured peak', () => {
    const o = { nodes: 20_000, hidden: 8, features: 64, epochs: 2 }; // F > 2H: A·x beside x is the run's peak
    const r = run({ ...o, inputAggregation: 'once' });
    const measured = Math.max(r.setupPeakAllocatedBytes!, ...r.epochs.map((e) => e.peakAllocatedBytes));
    expect(r.setupPeakAllocatedBytes).toBe(measured);
    const once = estimateTrainingMemory(trainingShape({ model: 'gcn', ...o, inputAggregation: 'once' }));
    expect(once.total).toBeLessThanOrEqual(measured);
    expect(once.total).toBeGreaterThan(0.99 * measured);
    const everyEpoch = estimateTrainingMemory(trainingShape({ model: 'gcn', ...o, inputAggregation: 'every-epoch' }));
    expect(once.parts['graph build and A·x (transient)']).toBeGreaterThan(0);
    expect(once.total).toBeGreaterThan(everyEpoch.total);
    expect(once.describe).toMatch(/\(spmm, A·x once\)/);
    expect(everyEpoch.describe).toMatch(/\(spmm, input aggregated every epoch\)/);
    // at the seed's sizes the step's two N x H activations are the peak either way
    const seed = (inputAggregation: 'once' | 'every-epoch') =>
      estimateTrainingMemory(trainingShape({ model: 'gcn', nodes: 2_000_000, inputAggregation })).total;
    expect(seed('once')).toBe(seed('every-epoch'));
  });

  it.each([
    [{ inputAggregation: 'never' as 'once' }, /'once' or 'every-epoch' for inputAggregation but received 'never'/],
    [{ inputAggregation: 'once' as const, aggregation: 'scatter' as const }, /aggregation 'spmm' with inputAggregation 'once'/],
    [{ inputAggregation: 'every-epoch' as const, rowBlocks: 2 }, /no inputAggregation with rowBlocks/],
  ])('refuses %o before allocating', (o, message) => {
    const allocator = new HostAllocator();
    try {
      expect(() => train({ ...base, ...o, allocator })).toThrow(RangeError);
      expect(() => train({ ...base, ...o, allocator })).toThrow(message);
      expect(allocator.stats().allocCount).toBe(0);
    } finally {
      allocator.dispose();
    }
  });
});
