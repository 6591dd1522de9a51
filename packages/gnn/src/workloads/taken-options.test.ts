/**
 * Each workload declares the options it takes (Workload.options); train() and trainDistributed()
 * refuse any other that is set, with an OptionNotTakenError naming the option, the workload and
 * what it takes, before anything is allocated or any rank starts; and every workload still trains
 * with every option it declares.
 */
import { describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { train } from '../training/train.js';
import { trainDistributed } from '../training/train-distributed.js';
import type { TrainOptions, TrainOptionsBag } from '../training/train-types.js';
import { asTrainOptions, getWorkload, listWorkloads, registerWorkload } from './index.js';
import { OptionNotTakenError, optionNotTakenProblem } from './taken-options.js';

/** train() with `options` on a fresh host allocator: the error it throws, and the allocations it made. */
function refused(options: TrainOptionsBag & Record<string, unknown>): { error: unknown; allocCount: number } {
  const allocator = new HostAllocator();
  try {
    let error: unknown;
    try {
      train(asTrainOptions({ ...options, allocator }));
    } catch (e) {
      error = e;
    }
    return { error, allocCount: allocator.stats().allocCount };
  } finally {
    allocator.dispose();
  }
}

describe('options a workload does not take', () => {
  it("refuses another workload's option, naming it, the workload and what the workload takes", () => {
    const { error, allocCount } = refused({ model: 'gcn', nodes: 100, batchSize: 32 });
    expect(error).toBeInstanceOf(OptionNotTakenError);
    expect(error).toBeInstanceOf(RangeError); // what callers already catch for bad options
    const e = error as OptionNotTakenError;
    expect(e.name).toBe('OptionNotTakenError');
    expect(e).toMatchObject({ option: 'batchSize', model: 'gcn' });
    expect(e.takes).toEqual(Object.keys(getWorkload('gcn').options));
    expect(e.takes).toEqual(expect.arrayContaining(['hidden', 'nodes', 'aggregation', 'inputAggregation', 'layerPrefetch']));
    expect(e.message).toBe(
      `Expected only options that the gcn takes: 'batchSize' applies to the mlp only (received model gcn); besides the options of every workload, the gcn takes ${e.takes.join(', ')}`,
    );
    expect(allocCount).toBe(0);
  });

  it('refuses an option several workloads take, for the one that does not, with its hint', () => {
    for (const [option, value, message] of [
      [
        'hidden',
        64,
        /'hidden' does not apply to the transformer: its width is 'embed'; besides the options of every workload, the transformer takes vocab, embed/,
      ],
      ['layerPrefetch', true, /'layerPrefetch' does not apply to the transformer: it has no trainer-inserted prefetch/],
    ] as const) {
      const { error, allocCount } = refused({ model: 'transformer', [option]: value });
      expect(error, option).toBeInstanceOf(OptionNotTakenError);
      expect((error as Error).message).toMatch(message);
      expect(allocCount).toBe(0);
    }
  });

  it('refuses an option of no workload (a misspelt one), and one set to false; undefined is not set', () => {
    const misspelt = refused({ model: 'mlp', trainSubset: 64, layerPrefech: true });
    expect(misspelt.error).toBeInstanceOf(OptionNotTakenError);
    expect((misspelt.error as Error).message).toMatch(/'layerPrefech' is an option of no workload \(received model mlp\)/);
    const off = refused({ model: 'gcn', nodes: 100, cudaGraph: false });
    expect((off.error as OptionNotTakenError).option).toBe('cudaGraph');
    expect((off.error as Error).message).toMatch(/'cudaGraph' applies to the mlp only/);
    const unset = train({ model: 'gcn', allocator: 'host', nodes: 200, hidden: 4, epochs: 1, ...{ cudaGraph: undefined } });
    expect(unset.epochs).toHaveLength(1);
  });

  it('trainDistributed() refuses it before any rank starts', async () => {
    const error = await trainDistributed({ model: 'gcn', dataset: 'sbm', allocator: 'host', devices: 2, checkpoint: 2 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OptionNotTakenError);
    expect(error).toMatchObject({ option: 'checkpoint', model: 'gcn' });
    expect((error as Error).message).toMatch(/'checkpoint' applies to the mlp only \(received model gcn\)/);
  });

  it('names options as the caller does, and lists only those it has names for', () => {
    const flag = (o: string) => `--${o.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    const withCheckpoint = { model: 'gcn', checkpoint: 2 };
    const problem = optionNotTakenProblem(withCheckpoint, flag, (o) => o !== 'dropout');
    expect(problem).toMatch(
      /^'--checkpoint' applies to the mlp only \(received --model gcn\); besides the options of every workload, the gcn takes --hidden, --nodes/,
    );
    expect(problem).not.toMatch(/--dropout/);
    expect(problem).toMatch(/--input-aggregation/);
    const gcnOnly = { model: 'gcn', nodes: 10, lr: 0.1, seed: 1, epochs: 2 };
    expect(optionNotTakenProblem(gcnOnly)).toBeUndefined();
  });

  it('registerWorkload() refuses a workload without its options, or with a flag whose option it does not declare', () => {
    const gcn = getWorkload('gcn');
    expect(() => registerWorkload({ ...gcn, name: 'no-options', options: undefined as never })).toThrow(
      /Expected an object of the options it takes for workload.options of 'no-options'/,
    );
    const { nodes: _nodes, ...withoutNodes } = gcn.options;
    expect(() => registerWorkload({ ...gcn, name: 'undeclared-flag', options: withoutNodes })).toThrow(
      /Expected workload.options of 'undeclared-flag' to declare 'nodes', the option of its flag '--nodes'/,
    );
    expect(listWorkloads().map((w) => w.name)).not.toEqual(expect.arrayContaining(['no-options']));
  });
});

describe('every workload trains with every option it declares', () => {
  const runs: Array<[string, Record<string, unknown>]> = [
    [
      'mlp',
      {
        model: 'mlp',
        hidden: 16,
        hiddenLayers: 2,
        batchSize: 32,
        cudaGraph: false,
        graphSteps: 2,
        checkpoint: 1,
        nanoBatches: 2,
        trainSubset: 128,
        testSubset: 64,
        layerPrefetch: true,
      },
    ],
    [
      'gcn',
      {
        model: 'gcn',
        hidden: 8,
        nodes: 300,
        edgesPerNode: 4,
        features: 8,
        classes: 3,
        aggregation: 'spmm',
        inputAggregation: 'every-epoch',
        dropout: 0.25,
        layerPrefetch: true,
      },
    ],
    ['gcn', { model: 'gcn', hidden: 8, nodes: 300, rowBlocks: 3, featureDtype: 'bf16' }],
    [
      'transformer',
      {
        model: 'transformer',
        vocab: 16,
        embed: 16,
        heads: 2,
        layers: 1,
        context: 16,
        minLen: 4,
        maxLen: 8,
        minBatch: 1,
        maxBatch: 2,
        stepsPerEpoch: 2,
      },
    ],
  ];

  it.each(runs)('%s', (_model, options) => {
    const r = train({ ...options, allocator: 'host', epochs: 1, seed: 3, lr: 0.01 } as TrainOptions);
    expect(r.epochs).toHaveLength(1);
    expect(Number.isFinite(r.epochs[0]!.loss)).toBe(true);
  });

  it('and those runs cover every declared option of every workload', () => {
    for (const w of listWorkloads().filter((x) => ['mlp', 'gcn', 'transformer'].includes(x.name))) {
      const used = new Set(runs.filter(([m]) => m === w.name).flatMap(([, o]) => Object.keys(o)));
      expect(
        Object.keys(w.options).filter((o) => !used.has(o)),
        w.name,
      ).toEqual([]);
    }
  });
});
