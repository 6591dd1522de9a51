/**
 * train() of the transformer on the CPU kernels: the loss falls, every step gives its memory back,
 * the estimate is a lower bound of the measured peak, the allocators differ where the shapes vary,
 * and bad options are typed errors before anything is allocated.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, createTrackedAllocator, HostAllocator, type AllocatorStats } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import { allocationTags } from '../../framework/runtime.js';
import { estimateTrainingMemory, trainingShape } from '../../training/memory-estimate.js';
import { train } from '../../training/train.js';
import { getWorkload, listWorkloads } from '../registry.js';
import { optionNotTakenProblem } from '../taken-options.js';
import { transformerDefaults } from './defaults.js';
import type { TransformerTrainOptions } from './options.js';

/** A tiny configuration for the CPU kernels. */
const tiny = {
  model: 'transformer',
  vocab: 32,
  embed: 32,
  heads: 2,
  layers: 2,
  context: 64,
  minLen: 8,
  maxLen: 64,
  minBatch: 2,
  maxBatch: 6,
  stepsPerEpoch: 10,
} as const satisfies Partial<TransformerTrainOptions>;

describe('the transformer workload on the CPU', () => {
  it('is registered, with its dataset, its flags and its own options', () => {
    expect(listWorkloads().map((w) => w.name)).toContain('transformer');
    const w = getWorkload('transformer');
    expect(w.datasets).toEqual(['markov']);
    expect(w.samples).toBe('tokens');
    expect(Object.keys(w.flags ?? {})).toEqual(
      expect.arrayContaining([
        'vocab',
        'embed',
        'heads',
        'layers',
        'context',
        'min-len',
        'max-len',
        'min-batch',
        'max-batch',
        'steps-per-epoch',
      ]),
    );
    expect(w.options).toHaveProperty('maxLen');
    expect(w.describe({ model: 'transformer', allocator: 'host' }, '2 epochs')).toBe(
      'transformer on markov (vocab 256, embed 256, 4 heads, 4 layers, length 64-1024, batch 4-12, 20 steps an epoch), 2 epochs',
    );
  });

  it('learns the Markov chain: the loss falls from ln V, train and held-out alike, and every step gives its memory back', () => {
    const seen: AllocatorStats[] = [];
    const allocator = new HostAllocator();
    try {
      const r = train({ ...tiny, allocator, epochs: 2, lr: 1e-2, seed: 3, onStep: (_s, stats) => seen.push(stats) });
      expect(r.model).toBe('transformer');
      expect(r.dataset).toBe('markov');
      const [first, second] = r.epochs as [(typeof r.epochs)[0], (typeof r.epochs)[0]];
      expect(first.losses).toHaveLength(10);
      expect(first.losses[0]).toBeGreaterThan(Math.log(32) - 0.2); // about ln V at the start
      expect(second.loss).toBeLessThan(first.loss);
      expect(second.losses.at(-1)!).toBeLessThan(first.losses[0]! - 0.5);
      expect(second.evaluationLoss!).toBeLessThan(first.evaluationLoss!);
      expect(second.accuracy).toBeGreaterThan(1 / 32);
      expect(r.samplesPerEpoch).toBeGreaterThan(10 * 2 * 8);
      // after every step the same bytes are allocated: the setup's and the epoch's loss buffers
      expect(seen).toHaveLength(20);
      expect(new Set(seen.map((s) => s.allocatedBytes)).size).toBe(1);
      expect(allocator.stats().allocatedBytes).toBe(0);
    } finally {
      allocator.dispose();
    }
  });

  it('is deterministic on the CPU: the same seed gives the same losses, another seed others', () => {
    const run = (seed: number) => train({ ...tiny, allocator: 'host', stepsPerEpoch: 4, seed }).epochs[0]!.losses;
    expect(run(5)).toEqual(run(5));
    expect(run(6)).not.toEqual(run(5));
  });

  it("the memory estimate is a lower bound of the measured peak, within a factor of 2, and the shapes' changes show in a caching allocator", () => {
    const options = { ...tiny, seed: 1 };
    const estimate = estimateTrainingMemory(trainingShape(options));
    expect(Object.keys(estimate.parts)).toEqual(['parameters', 'data', 'activations']);
    const host = train({ ...options, allocator: 'host' });
    const peak = Math.max(...host.epochs.map((e) => e.peakAllocatedBytes));
    expect(estimate.total).toBeLessThanOrEqual(peak);
    expect(estimate.total).toBeGreaterThan(peak / 2);
    // the pool over host memory reserves more than what is allocated at the peak: its cached blocks do not fit every shape
    const pool = createAllocator('pool', { upstream: 'host' });
    try {
      const pooled = train({ ...options, allocator: pool });
      expect(pooled.epochs[0]!.losses).toEqual(host.epochs[0]!.losses);
      expect(pooled.epochs[0]!.peakReservedBytes).toBeGreaterThan(pooled.epochs[0]!.peakAllocatedBytes);
      expect(pool.stats().allocatedBytes).toBe(0);
    } finally {
      pool.dispose();
    }
  });

  it('tags every allocation with its phase, the tokens as features (Adam allocates its moments at setup, nothing per step)', () => {
    const tracked = createTrackedAllocator('host', {}, 1 << 18);
    try {
      train({ ...tiny, allocator: tracked.allocator, stepsPerEpoch: 2, tagAllocations: tracked.setTag });
      const { events, dropped } = tracked.events();
      expect(dropped).toBe(0);
      const seen = new Set(events.filter((e) => e.action === 'alloc').map((e) => allocationTags[e.tag]));
      expect([...seen].sort()).toEqual(['backward', 'features', 'forward', 'loss', 'setup', 'validation']);
    } finally {
      tracked.allocator.dispose();
    }
  });

  it('refuses bad options with typed errors naming them, before anything is allocated', () => {
    const allocator = new HostAllocator();
    try {
      const bad: Array<[Partial<TransformerTrainOptions> & { hidden?: number; batchSize?: number; cudaGraph?: boolean }, RegExp]> = [
        [{ embed: 30, heads: 4 }, /'embed' 30 must be a multiple of 'heads' 4/],
        [{ minLen: 65, maxLen: 64 }, /'minLen' 65 must be at most 'maxLen' 64/],
        [{ maxLen: 128, context: 64 }, /'maxLen' 128 must be at most 'context' 64/],
        [{ minBatch: 7, maxBatch: 6 }, /'minBatch' 7 must be at most 'maxBatch' 6/],
        [{ vocab: 1 }, /'vocab' must be an integer from 2 to 2097152 \(received 1\)/],
        [{ layers: 1.5 }, /'layers' must be an integer from 1 to 1024 \(received 1.5\)/],
        [{ stepsPerEpoch: 0 }, /'stepsPerEpoch' must be an integer/],
        [{ maxBatch: 2 ** 20, maxLen: 64, vocab: 2 ** 21 }, /32-bit integers/],
        [{ hidden: 64 }, /'hidden' does not apply to the transformer: its width is 'embed'/],
        [{ batchSize: 8 }, /'batchSize' does not apply to the transformer/],
        [{ cudaGraph: true }, /'cudaGraph' does not apply to the transformer: its shapes change every step/],
        [{ dataset: 'mnist' as 'markov' }, /'dataset' must be 'markov'/],
        [{ lr: -1 }, /positive finite number for lr/],
      ];
      for (const [options, message] of bad) {
        expect(() => train({ ...tiny, ...options, allocator } as TransformerTrainOptions), JSON.stringify(options)).toThrow(RangeError);
        expect(() => train({ ...tiny, ...options, allocator } as TransformerTrainOptions)).toThrow(message);
      }
      expect(() => train({ model: 'mlp', allocator, maxLen: 64 } as never)).toThrow(
        /Expected only options that the mlp takes: 'maxLen' applies to the transformer only \(received model mlp\)/,
      );
      expect(allocator.stats().allocCount).toBe(0);
    } finally {
      allocator.dispose();
    }
  });

  it('names its problems through the caller, refuses several devices and gives tiny sizes without a GPU', () => {
    const w = getWorkload('transformer');
    const flag = (o: string) => `--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    expect(w.optionProblem({ model: 'transformer', minLen: 9, maxLen: 8 }, flag)).toBe("'--min-len' 9 must be at most '--max-len' 8");
    const withBatch = { model: 'transformer', batchSize: 8 }; // the mlp's batch, as a command line's flags may set it
    expect(optionNotTakenProblem(withBatch, flag)).toMatch(
      /'--batch-size' does not apply to the transformer: .* from \['--min-batch', '--max-batch'\]/,
    );
    expect(w.optionProblem({ model: 'transformer' }, flag)).toBeUndefined();
    expect(w.ranksProblem({ model: 'transformer' }, 2, flag)).toMatch(/'--devices' 2: the transformer trains on one device only/);
    const host = w.hostDefaults({ model: 'transformer' }, flag);
    expect(host?.options).toMatchObject({ embed: 64, maxLen: 128 });
    expect(host?.note).toMatch(/--embed/);
    expect(w.hostDefaults({ model: 'transformer', layers: 1 }, flag)).toBeUndefined();
    expect(w.hostDefaults({ model: 'transformer', stepsPerEpoch: 3 }, flag)?.options).toMatchObject({ embed: 64 }); // not a size
    expect(transformerDefaults.maxLen).toBeLessThanOrEqual(transformerDefaults.context);
  });
});
