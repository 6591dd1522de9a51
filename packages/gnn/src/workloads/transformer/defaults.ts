/**
 * The transformer's defaults, defined once: train(), the memory estimate, the command line's help and
 * bench/baselines/transformer_torch.py (which repeats them) read them from here.
 * @module
 */

/**
 * A small GPT-style decoder (vocab 256, embed 256, 4 heads, 4 layers, context 1024) trained with
 * Adam lr 1e-3 on sequences of 64 to 1024 tokens in batches of 4 to 12, 20 steps an epoch.
 *
 * The learning rate: at 3e-3 this model (no warm-up, every weight N(0, 0.02)) is past the edge of
 * stable training. Most initialisations then sit on a plateau near the unigram loss (about 5.47) for
 * one to three epochs, PyTorch's as well as gpumem's (PyTorch on an H100, epoch 2 mean loss: 4.53 for
 * seed 0 but 5.46, 5.48 and 5.48 for seeds 1 to 3), so that two runs that differ only in their
 * initial values, as gpumem's and PyTorch's always do, learned at very different speeds. At 1e-3
 * every seed learns at once (PyTorch, seeds 0 to 3: epoch 2 mean loss 3.51 to 3.76).
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
  lr: 1e-3,
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
