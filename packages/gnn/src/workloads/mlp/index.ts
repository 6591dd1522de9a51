/**
 * The mlp workload: an MLP on MNIST, mini-batch SGD (see train-mlp.ts). Registers itself as 'mlp'.
 * @module
 */
import { mnistAvailable, mnistInstallHint } from '../../datasets/mnist.js';
import { registerWorkload } from '../registry.js';
import type { OptionNames, Workload, WorkloadFlag } from '../workload.js';
import { mlpDefaults, mlpHiddenWidths } from './defaults.js';
import { estimateMlp, mlpShape } from './memory-estimate.js';
import type { MlpTrainOptions, MlpTrainingShape } from './options.js';
import { prepareMlp } from './train-mlp.js';

const d = mlpDefaults;

/** The command line's flags of the mlp's own options: `--hidden-layers` sets hiddenLayers, `--batch` batchSize. */
const flags: Record<string, WorkloadFlag<keyof MlpTrainOptions>> = {
  'hidden-layers': { type: 'int', min: 0, max: 64, help: `number of hidden layers (default ${d.hiddenLayers})` },
  batch: { type: 'int', min: 1, max: 60000, option: 'batchSize', help: `batch size (default ${d.batchSize})` },
  'cuda-graph': { type: 'boolean', help: 'on a GPU with a capturable allocator (e.g. pool): replay each step as a captured CUDA Graph' },
  checkpoint: {
    type: 'int',
    min: 0,
    max: 65,
    help: `activation checkpointing: keep every N-th layer's input only and recompute the others in backward (1 keeps every input; default ${d.checkpoint}: off); at most the layers (hidden + output)`,
  },
  'nano-batches': {
    type: 'int',
    min: 1,
    max: 60000,
    help: `run each batch as N slices of near-equal rows, their gradients summed before one update (default ${d.nanoBatches}); at most the batch`,
  },
  'train-subset': { type: 'int', min: 1, help: 'train on the first N images' },
  'test-subset': { type: 'int', min: 1, help: 'validate on the first N test images' },
};

/** MNIST images the mlp trains and validates on by default without a GPU (the CPU kernels take about a minute per full epoch). */
const mlpHostSubset = { train: 2048, test: 1000 } as const;

/** The activation options against the model and the batch: the first problem, naming options through `name`. */
function activationProblem(o: MlpTrainOptions, name: OptionNames): string | undefined {
  let layers: number;
  try {
    layers = mlpHiddenWidths(o.hidden, o.hiddenLayers).length + 1;
  } catch {
    return undefined; // train() names what is wrong with the widths
  }
  if (o.checkpoint !== undefined && o.checkpoint > layers) {
    return `'${name('checkpoint')}' must be at most ${layers}, the mlp's layers (${layers - 1} hidden and the output layer) (received ${o.checkpoint})`;
  }
  const batch = o.batchSize ?? mlpDefaults.batchSize;
  if (o.nanoBatches !== undefined && o.nanoBatches > batch)
    return `'${name('nanoBatches')}' must be at most the batch, ${batch} (received ${o.nanoBatches})`;
  if (o.cudaGraph && (o.nanoBatches ?? 1) > 1)
    return `'${name('nanoBatches')}' does not go with '${name('cudaGraph')}' (a captured step runs the whole batch)`;
  if (o.cudaGraph && o.layerPrefetch)
    return `'${name('layerPrefetch')}' does not go with '${name('cudaGraph')}' (prefetches are not captured into graphs)`;
  return undefined;
}

const mlpWorkload: Workload<MlpTrainOptions, MlpTrainingShape> = {
  name: 'mlp',
  description: 'an MLP on MNIST (mini-batch SGD)',
  datasets: ['mnist'],
  trainsOn: 'MNIST',
  // 53 MB that only this workload reads: an optional package the user installs to run it
  data: { available: mnistAvailable, installHint: mnistInstallHint },
  samples: 'images',
  evaluationLabel: 'test acc',
  options: {
    hidden: true,
    hiddenLayers: true,
    batchSize: true,
    cudaGraph: true,
    graphSteps: true,
    checkpoint: true,
    nanoBatches: true,
    trainSubset: true,
    testSubset: true,
    layerPrefetch: true,
  },
  flags,
  timesCollectives: false,
  optimizer: { name: 'SGD', lr: mlpDefaults.lr },
  memoryAdvice: '',
  optionProblem: activationProblem,
  ranksProblem(o, ranks, name) {
    const batch = o.batchSize ?? mlpDefaults.batchSize;
    if (batch >= ranks) return undefined;
    return `'${name('devices')}' ${ranks} ranks need a batch of at least ${ranks} (every rank takes a slice of each batch) but the batch is ${batch}; use fewer devices or a larger ${name('batchSize')}`;
  },
  hostDefaults(o, name) {
    if (o.trainSubset !== undefined || o.testSubset !== undefined) return undefined;
    return {
      options: { trainSubset: mlpHostSubset.train, testSubset: mlpHostSubset.test },
      note: `the CPU kernels on a subset of MNIST (${mlpHostSubset.train} training, ${mlpHostSubset.test} test images; ${name('trainSubset')} 60000 for all, about a minute an epoch)`,
    };
  },
  describe(o, run) {
    const hidden = mlpHiddenWidths(o.hidden, o.hiddenLayers);
    const batch = o.batchSize ?? mlpDefaults.batchSize;
    const subset = o.trainSubset !== undefined ? `, ${o.trainSubset} training images` : '';
    const activations = [
      ...(o.checkpoint ? [`checkpoint every ${o.checkpoint} layer${o.checkpoint === 1 ? '' : 's'}`] : []),
      ...((o.nanoBatches ?? 1) > 1 ? [`${o.nanoBatches} nano-batches`] : []),
      ...(o.layerPrefetch ? ['layer prefetch'] : []),
    ].map((a) => `, ${a}`);
    // the name gpumem train prints too: `<model> on <dataset>`
    return `mlp on ${o.dataset ?? mlpDefaults.dataset} (hidden ${hidden.join('x')}, batch ${batch}${subset}), ${run}${o.cudaGraph ? ', steps as CUDA graphs where the allocator is capturable' : ''}${activations.join('')}`;
  },
  shape: mlpShape,
  estimate: estimateMlp,
  prepare: prepareMlp,
};

registerWorkload(mlpWorkload);
