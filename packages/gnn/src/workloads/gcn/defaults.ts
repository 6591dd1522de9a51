/**
 * The gcn's defaults, defined once: train(), the memory estimate, the command line's help and the
 * comparison's workload titles read them from here. The GCN has one hidden layer, `hidden` wide.
 * @module
 */

/** gcn-seed (the original benchmark): 2 layers, hidden 256, dropout 0.5, Adam lr 0.01; graph sizes per dataset. */
export const gcnDefaults = {
  dataset: 'random',
  hidden: 256,
  lr: 0.01,
  dropout: 0.5,
  aggregation: 'spmm',
  random: { nodes: 100_000, edgesPerNode: 10, features: 128, classes: 10 },
  sbm: { nodes: 2000, features: 16, classes: 4 },
} as const;

/**
 * The plain plan's first-layer aggregation (see InputAggregation): the option's, else 'once' with
 * the CSR product and 'every-epoch' with the scatter form (whose per-epoch E x hidden messages are
 * the allocation pattern it exists for); undefined with rowBlocks (that plan has its own).
 */
export function gcnInputAggregation(o: {
  inputAggregation?: string;
  aggregation?: string;
  rowBlocks?: number;
}): 'once' | 'every-epoch' | undefined {
  if (o.rowBlocks !== undefined) return undefined;
  if (o.inputAggregation !== undefined) return o.inputAggregation === 'every-epoch' ? 'every-epoch' : 'once';
  return (o.aggregation ?? gcnDefaults.aggregation) === 'scatter' ? 'every-epoch' : 'once';
}

/** The GCN's hidden width from the `hidden` option (one hidden layer). */
export function gcnHiddenWidth(hidden: number[] | number | undefined): number {
  if (Array.isArray(hidden)) {
    if (hidden.length !== 1)
      throw new RangeError(`Expected one hidden width for the gcn (it has one hidden layer) but received ${hidden.length}`);
    return hidden[0]!;
  }
  return hidden ?? gcnDefaults.hidden;
}

/** The GCN's datasets: 'random' (N nodes, 10·N random directed edges) and 'sbm' (a stochastic block model). */
export type GcnDataset = 'random' | 'sbm';

/** Old dataset names accepted for one release, each with its new name. */
export const gcnDatasetAliases: Readonly<Record<string, GcnDataset>> = { seed: 'random' };

/** The dataset `dataset` names, old names ('seed') mapped to new ones; the default when undefined. */
export function gcnDataset(dataset: string | undefined): string {
  if (dataset === undefined) return gcnDefaults.dataset;
  return gcnDatasetAliases[dataset] ?? dataset;
}

/** The graph defaults of a GCN dataset. */
export function graphDefaults(dataset: string | undefined): { nodes: number; edgesPerNode?: number; features: number; classes: number } {
  return gcnDataset(dataset) === 'sbm' ? gcnDefaults.sbm : gcnDefaults.random;
}
