/**
 * The gcn's defaults, defined once: train(), the memory estimate, the command line's help and the
 * comparison's workload titles read them from here. The GCN has one hidden layer, `hidden` wide.
 * @module
 */

/** gcn-seed: 2 layers, hidden 256, dropout 0.5, Adam lr 0.01; graph sizes per dataset. */
export const gcnDefaults = {
  dataset: 'seed',
  hidden: 256,
  lr: 0.01,
  dropout: 0.5,
  aggregation: 'spmm',
  seed: { nodes: 100_000, edgesPerNode: 10, features: 128, classes: 10 },
  sbm: { nodes: 2000, features: 16, classes: 4 },
} as const;

/** The GCN's hidden width from the `hidden` option (one hidden layer). */
export function gcnHiddenWidth(hidden: number[] | number | undefined): number {
  if (Array.isArray(hidden)) {
    if (hidden.length !== 1)
      throw new RangeError(`Expected one hidden width for the gcn (it has one hidden layer) but received ${hidden.length}`);
    return hidden[0]!;
  }
  return hidden ?? gcnDefaults.hidden;
}

/** The graph defaults of a GCN dataset. */
export function graphDefaults(dataset: string | undefined): { nodes: number; edgesPerNode?: number; features: number; classes: number } {
  return dataset === 'sbm' ? gcnDefaults.sbm : gcnDefaults.seed;
}
