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
import { checkOptionsTaken, getWorkload } from '../workloads/index.js';
import { checkPositiveInt, trainerStream } from './train-common.js';
import type { EpochRecord, TrainOptions, TrainResult } from './train-types.js';

export type {
  ModelName,
  DatasetName,
  TrainOptions,
  CommonTrainOptions,
  HiddenLayerOptions,
  TrainOptionsBag,
  WorkloadTrainOptions,
  DistributiveOmit,
  UnionToIntersection,
  Progress,
  EpochRecord,
  TrainResult,
  RankShare,
  RankRecord,
  RankSamples,
} from './train-types.js';

/** Trains a model and reports per-epoch time, loss, accuracy and allocator statistics. */
export function train(options: TrainOptions): TrainResult {
  const { devices } = options;
  if (devices !== undefined && devices !== 1) {
    throw new RangeError(
      `Expected devices 1 or undefined for train() but received ${JSON.stringify(devices)}: runs over several devices are asynchronous, use trainDistributed()`,
    );
  }
  return trainOn(options);
}

/**
 * train()'s body, also run by each rank of trainDistributed() with its communicator: the workload
 * then trains its rank's part (the mlp data parallel, the gcn on the rank's rows). The memory plan
 * is checked against the device for single-device runs only (a rank's part is smaller).
 */
export function trainOn(options: TrainOptions, comm?: Communicator): TrainResult {
  const epochs = options.epochs ?? commonDefaults.epochs;
  checkPositiveInt(epochs, 'epochs');
  const seed = options.seed ?? commonDefaults.seed;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Expected non-negative integer for seed but received ${seed}`);
  const workload = getWorkload(options.model);
  checkOptionsTaken(options); // what the workload does not declare (Workload.options), before anything is allocated
  const owned = typeof options.allocator === 'string';
  const allocator: Allocator =
    typeof options.allocator === 'string' ? createAllocator(options.allocator, options.allocatorOptions ?? {}) : options.allocator;
  const rt = new Runtime(allocator, trainerStream(allocator.device, 'main'));
  rt.setTagger(options.tagAllocations);
  try {
    rt.tag('setup');
    if (!comm) checkTrainingFits(options, allocator); // sizes past the kernels' limits or the memory there: refused before any allocation
    rt.bindWorkspace(rt.stream); // the ops' scratch and cuBLAS workspace come from the run's allocator too
    const run = workload.prepare(rt, options, { epochs, seed, ...(comm ? { comm } : {}) });
    const records: EpochRecord[] = [];
    try {
      for (let epoch = 0; epoch < epochs; epoch++) records.push(run.trainEpoch(epoch));
    } finally {
      run.dispose();
    }
    const result: TrainResult = {
      model: workload.name as TrainResult['model'],
      dataset: run.dataset as TrainResult['dataset'],
      allocator: allocator.name,
      device: allocator.device.id,
      epochs: records,
      parameters: run.parameters,
      samplesPerEpoch: run.samplesPerEpoch,
      ...run.resultExtras?.(),
    };
    return rt.setupPeakBytes === undefined ? result : { ...result, setupPeakAllocatedBytes: rt.setupPeakBytes };
  } finally {
    rt.dispose();
    if (owned) allocator.dispose();
  }
}
