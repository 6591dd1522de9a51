/**
 * The gcn workload: a two-layer GCN on a generated graph, full batch, Adam (see train-gcn.ts).
 * Registers itself as 'gcn'.
 * @module
 */
import { registerWorkload } from '../registry.js';
import type { Workload, WorkloadFlag } from '../workload.js';
import { gcnDataset, gcnDatasetAliases, gcnDefaults, gcnInputAggregation, graphDefaults } from './defaults.js';
import { estimateGcn, gcnShape } from './memory-estimate.js';
import type { GcnTrainOptions, GcnTrainingShape } from './options.js';
import { prepareGcn } from './train-gcn.js';

const d = gcnDefaults;

/** The command line's flags of the gcn's own options: `--edges-per-node` sets edgesPerNode. */
const flags: Record<string, WorkloadFlag<keyof GcnTrainOptions>> = {
  nodes: { type: 'int', min: 1, max: 2 ** 31 - 1, help: `nodes (default ${d.random.nodes} for random, ${d.sbm.nodes} for sbm)` },
  'edges-per-node': { type: 'int', min: 1, max: 1000, help: `random graph: edges per node (default ${d.random.edgesPerNode})` },
  features: { type: 'int', min: 1, max: 65536, help: `input features (default ${d.random.features} random, ${d.sbm.features} sbm)` },
  classes: { type: 'int', min: 2, max: 1000, help: `classes (default ${d.random.classes} random, ${d.sbm.classes} sbm)` },
  aggregation: {
    type: 'string',
    choices: ['spmm', 'scatter'],
    help: `CSR product or gcn-seed's gather + index_add (default ${d.aggregation})`,
  },
  'input-aggregation': {
    type: 'string',
    choices: ['once', 'every-epoch'],
    help: "the first layer as (A·x)·W1ᵀ with A·x taken once ('once', the default with spmm) or as A·(x·W1ᵀ) every epoch ('every-epoch': the seed's plan and allocation pattern, the default with scatter)",
  },
  'row-blocks': {
    type: 'int',
    min: 1,
    max: 2 ** 31 - 1,
    help: 'the first layer as (A·x)·W1ᵀ in this many blocks of rows (one N x H activation at the peak instead of two)',
  },
  'feature-dtype': {
    type: 'string',
    choices: ['f32', 'bf16'],
    help: 'store the input features as f32 (default) or bf16 (half the bytes; needs --row-blocks)',
  },
};

/** Nodes of the random graph without a GPU (the CPU kernels), unless the options say how many. */
const gcnHostNodes = 10_000;

const gcnWorkload: Workload<GcnTrainOptions, GcnTrainingShape> = {
  name: 'gcn',
  description:
    'a two-layer GCN on a generated graph (random: 10 random directed edges per node; sbm: a learnable stochastic block model), full batch, Adam',
  datasets: ['random', 'sbm'],
  trainsOn: 'a generated graph',
  datasetAliases: gcnDatasetAliases,
  samples: 'nodes',
  evaluationLabel: 'held-out acc',
  options: {
    hidden: true,
    nodes: true,
    edgesPerNode: true,
    features: true,
    classes: true,
    aggregation: true,
    inputAggregation: true,
    dropout: true,
    rowBlocks: true,
    featureDtype: true,
    layerPrefetch: true,
  },
  flags,
  timesCollectives: true,
  optimizer: { name: 'Adam', lr: gcnDefaults.lr },
  memoryAdvice: ", the row-block plan (rowBlocks), bf16 features, or a strategy that spills to host memory ('tiered')",
  optionProblem: () => undefined,
  ranksProblem(o, ranks, name) {
    const nodes = o.nodes ?? graphDefaults(o.dataset).nodes;
    const stride = Math.ceil(nodes / ranks);
    if ((ranks - 1) * stride < nodes) return undefined;
    return `'${name('devices')}' ${ranks} ranks need at least one node each, but ${nodes} nodes in rows of ${stride} leave the last rank none; use fewer devices or more ${name('nodes')}`;
  },
  hostDefaults(o, name) {
    if (o.nodes !== undefined || gcnDataset(o.dataset) !== 'random') return undefined;
    return {
      options: { nodes: gcnHostNodes },
      note: `the CPU kernels on a ${gcnHostNodes.toLocaleString('en-US')}-node graph (${name('nodes')} to change)`,
    };
  },
  describe(o, run) {
    const dataset = gcnDataset(o.dataset);
    const nodes = o.nodes ?? graphDefaults(dataset).nodes;
    const graph =
      dataset === 'random'
        ? `${o.edgesPerNode ?? gcnDefaults.random.edgesPerNode} random directed edges per node`
        : 'a stochastic block model graph';
    const input = gcnInputAggregation(o);
    const plan = input === undefined ? `, ${o.rowBlocks} row blocks` : input === 'once' ? ', A·x once' : ', input aggregated every epoch';
    return `gcn on ${dataset} (${graph}, ${nodes.toLocaleString('en-US')} nodes, ${o.aggregation ?? gcnDefaults.aggregation} aggregation${plan}), ${run}`;
  },
  shape: gcnShape,
  estimate: estimateGcn,
  prepare: prepareGcn,
};

registerWorkload(gcnWorkload);
