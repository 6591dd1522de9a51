/**
 * The transformer's defaults, defined once: train(), the memory estimate, the command line's help and
 * bench/baselines/transformer_torch.py (which repeats them) read them from here.
 * @module
 */

/**
 * A small GPT-style decoder (vocab 256, embed 256, 4 heads, 4 layers, context 1024) trained with
 * Adam lr 3e-3 on sequences of 64 to 1024 tokens in batches of 4 to 12, 20 steps an epoch.
 */
export const transformerDefaults = {
  dataset: 'markov',
  vocab: 256,
  embed: 256,
  heads: 4,
  layers: 4,
  context: 1024,
  minLen: 64,
  maxLen: 1024,
  minBatch: 4,
  maxBatch: 12,
  stepsPerEpoch: 20,
  lr: 3e-3,
} as const;

/** The sizes without a GPU (the CPU kernels), where the options leave them all to the defaults: an epoch in about a second. */
export const transformerHostDefaults = {
  vocab: 64,
  embed: 64,
  heads: 2,
  layers: 2,
  context: 128,
  minLen: 16,
  maxLen: 128,
  minBatch: 2,
  maxBatch: 8,
} as const;
