/**
 * The trainer: the same model, the same seed, any allocator. Every tensor and intermediate of a
 * step is allocated and freed through the chosen allocator on the trainer's stream. A step does
 * not synchronise the host: per-step losses and correct counts are written to device buffers and
 * read once per epoch.
 * @module
 */
import { createAllocator, type Allocator } from '@gpumem/allocator-core';
import type { Communicator } from '@gpumem/distributed';
import { Runtime } from '../framework/runtime.js';
import { checkTrainingFits } from './memory-estimate.js';
import { commonDefaults } from './defaults.js';
import { trainMlp } from '../workloads/mlp/train-mlp.js';
import { trainGcn } from '../workloads/gcn/train-gcn.js';
import { checkModelOptions, checkPositiveInt, trainerStream } from './train-common.js';
import type { TrainOptions, TrainResult } from './train-types.js';

export type { ModelName, DatasetName, TrainOptions, Progress, EpochRecord, TrainResult, RankShare, RankRecord, RankSamples } from './train-types.js';

/** Trains a model and reports per-epoch time, loss, accuracy and allocator statistics. */
export function train(options: TrainOptions): TrainResult {
  const { devices } = options;
  if (devices !== undefined && devices !== 1) {
    throw new RangeError(`Expected devices 1 or undefined for train() but received ${JSON.stringify(devices)}: runs over several devices are asynchronous, use trainDistributed()`);
  }
  return trainOn(options);
}

/**
 * train()'s body, also run by each rank of trainDistributed() with its communicator: the mlp then
 * trains data parallel and the gcn on the rank's rows (see trainMlp, trainGcn). The memory plan is
 * checked against the device for single-device runs only (a rank's part is smaller).
 */
export function trainOn(options: TrainOptions, comm?: Communicator): TrainResult {
  const epochs = options.epochs ?? commonDefaults.epochs;
  checkPositiveInt(epochs, 'epochs');
  const seed = options.seed ?? commonDefaults.seed;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Expected non-negative integer for seed but received ${seed}`);
  checkModelOptions(options);
  const owned = typeof options.allocator === 'string';
  const allocator: Allocator = typeof options.allocator === 'string' ? createAllocator(options.allocator, options.allocatorOptions ?? {}) : options.allocator;
  const rt = new Runtime(allocator, trainerStream(allocator.device, 'main'));
  rt.setTagger(options.tagAllocations);
  try {
    rt.tag('setup');
    if (!comm) checkTrainingFits(options, allocator); // sizes past the kernels' limits or the memory there: refused before any allocation
    rt.bindWorkspace(rt.stream); // the ops' scratch and cuBLAS workspace come from the run's allocator too
    const result = options.model === 'mlp' ? trainMlp(rt, options, epochs, seed, comm) : trainGcn(rt, options, epochs, seed, comm);
    return rt.setupPeakBytes === undefined ? result : { ...result, setupPeakAllocatedBytes: rt.setupPeakBytes };
  } finally {
    rt.dispose();
    if (owned) allocator.dispose();
  }
}
