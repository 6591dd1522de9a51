/**
 * The transformer workload: a small GPT-style decoder trained on sequences whose length and batch
 * vary per step (see train-transformer.ts and schedule.ts). Registers itself as 'transformer'.
 * @module
 */
import { registerWorkload } from '../registry.js';
import type { Workload, WorkloadFlag } from '../workload.js';
import { transformerDefaults, transformerHostDefaults } from './defaults.js';
import { estimateTransformer, transformerShape } from './memory-estimate.js';
import type { TransformerTrainOptions, TransformerTrainingShape } from './options.js';
import { transformerSizes, type TransformerSizes } from './sizes.js';
import { prepareTransformer } from './train-transformer.js';

const d = transformerDefaults;

/** The command line's flags of the transformer's own options: `--min-len` sets minLen. */
const flags: Record<string, WorkloadFlag> = {
  vocab: { type: 'int', min: 2, max: 2 ** 21, help: `tokens of the vocabulary (default ${d.vocab})` },
  embed: { type: 'int', min: 1, max: 65536, help: `the model's width, a multiple of --heads (default ${d.embed})` },
  heads: { type: 'int', min: 1, max: 65536, help: `attention heads (default ${d.heads})` },
  layers: { type: 'int', min: 1, max: 1024, help: `transformer blocks (default ${d.layers})` },
  context: { type: 'int', min: 1, max: 2 ** 20, help: `the longest sequence: rows of the position embedding (default ${d.context})` },
  'min-len': { type: 'int', min: 1, max: 2 ** 20, help: `shortest sequence of a step (default ${d.minLen})` },
  'max-len': { type: 'int', min: 1, max: 2 ** 20, help: `longest sequence of a step, at most --context (default ${d.maxLen})` },
  'min-batch': { type: 'int', min: 1, max: 2 ** 20, help: `smallest batch of a step (default ${d.minBatch})` },
  'max-batch': { type: 'int', min: 1, max: 2 ** 20, help: `largest batch of a step (default ${d.maxBatch})` },
  'steps-per-epoch': { type: 'int', min: 1, max: 2 ** 24, help: `training steps in an epoch (default ${d.stepsPerEpoch})` },
};

/** The transformer's own options: its sizes. */
const options: { readonly [K in keyof TransformerSizes]: true } = {
  vocab: true,
  embed: true,
  heads: true,
  layers: true,
  context: true,
  minLen: true,
  maxLen: true,
  minBatch: true,
  maxBatch: true,
  stepsPerEpoch: true,
};

/** Options of the other workloads that a command line's shared flags may set, and what to use instead. */
const optionHints: Readonly<Record<string, string>> = {
  hidden: "its width is 'embed'",
  batchSize: "its batch is drawn per step from ['minBatch', 'maxBatch']",
  cudaGraph: 'its shapes change every step, so a captured step cannot be replayed',
  graphSteps: 'it is not captured into CUDA graphs',
  layerPrefetch: 'it has no trainer-inserted prefetch',
};

/** The options that size the model and its steps: without a GPU, the tiny ones apply only when none is given. */
const sizeOptions = Object.keys(transformerHostDefaults) as Array<keyof typeof transformerHostDefaults>;

/** The sizes for describe(): the options' own, or the defaults where they do not fit together (train() names the problem). */
function sizesOf(o: TransformerTrainOptions): TransformerSizes {
  const sizes = transformerSizes(o, (option) => option);
  return typeof sizes === 'string' ? { ...transformerDefaults } : sizes;
}

const transformerWorkload: Workload<TransformerTrainOptions, TransformerTrainingShape> = {
  name: 'transformer',
  description: 'a GPT-style decoder on sequences of varying length and batch per step (tokens from an order-2 Markov chain), Adam',
  datasets: ['markov'],
  trainsOn: 'generated token sequences',
  samples: 'tokens',
  evaluationLabel: 'held-out acc',
  options,
  optionHints,
  flags,
  timesCollectives: false,
  optimizer: { name: 'Adam', lr: transformerDefaults.lr },
  memoryAdvice: '; for the transformer: shorter sequences (maxLen), smaller batches (maxBatch) or a smaller model (embed, layers)',
  optionProblem(o, name) {
    const sizes = transformerSizes(o, name);
    return typeof sizes === 'string' ? sizes : undefined;
  },
  ranksProblem(_o, ranks, name) {
    return `'${name('devices')}' ${ranks}: the transformer trains on one device only`;
  },
  hostDefaults(o, name) {
    if (sizeOptions.some((option) => o[option] !== undefined)) return undefined; // sizes the caller chose, whole
    const h = transformerHostDefaults;
    return {
      options: { ...h },
      note: `the CPU kernels on a tiny transformer (vocab ${h.vocab}, embed ${h.embed}, ${h.heads} heads, ${h.layers} layers, sequences of ${h.minLen} to ${h.maxLen} tokens in batches of ${h.minBatch} to ${h.maxBatch}; set ${name('embed')}, ${name('maxLen')} and the others to change)`,
    };
  },
  describe(o, run) {
    const s = sizesOf(o);
    return `transformer on ${o.dataset ?? d.dataset} (vocab ${s.vocab}, embed ${s.embed}, ${s.heads} heads, ${s.layers} layers, length ${s.minLen}-${s.maxLen}, batch ${s.minBatch}-${s.maxBatch}, ${s.stepsPerEpoch} steps an epoch), ${run}`;
  },
  shape: transformerShape,
  estimate: estimateTransformer,
  prepare: prepareTransformer,
};

registerWorkload(transformerWorkload);
