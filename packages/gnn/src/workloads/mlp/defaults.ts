/**
 * The mlp's defaults, defined once: train(), the memory estimate, the command line's help and the
 * comparison's workload titles read them from here. `hidden` is the width of each hidden layer:
 * the MLP has `hiddenLayers` of them (default 4); an array gives each layer's width instead.
 * @module
 */

/** mlp-seed: 4 hidden layers of 784, batch 64, SGD lr 0.1, on all of MNIST. */
export const mlpDefaults = {
  dataset: 'mnist',
  hidden: 784,
  hiddenLayers: 4,
  batchSize: 64,
  lr: 0.1,
  /** Steps captured into one CUDA graph in cudaGraph mode. */
  graphSteps: 4,
  /** Activation checkpointing: 0, off (every layer's input kept for backward). */
  checkpoint: 0,
  /** Nano-batches per batch: 1, the whole batch at once. */
  nanoBatches: 1,
  features: 784,
  classes: 10,
} as const;

/**
 * The MLP's hidden layer widths from the `hidden` and `hiddenLayers` options (defaults filled in):
 * an array as given, a number repeated `hiddenLayers` times.
 */
export function mlpHiddenWidths(hidden: number[] | number | undefined, hiddenLayers: number | undefined): number[] {
  if (Array.isArray(hidden)) {
    if (hiddenLayers !== undefined && hiddenLayers !== hidden.length) {
      throw new RangeError(
        `Expected hiddenLayers to match the ${hidden.length} widths given in hidden but received ${String(hiddenLayers)}`,
      );
    }
    return [...hidden];
  }
  const layers = hiddenLayers ?? mlpDefaults.hiddenLayers;
  if (!Number.isSafeInteger(layers) || layers < 0)
    throw new RangeError(`Expected non-negative integer for hiddenLayers but received ${String(layers)}`);
  return new Array<number>(layers).fill(hidden ?? mlpDefaults.hidden);
}
