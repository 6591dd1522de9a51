/**
 * The gcn workload: a two-layer GCN on a generated graph, full batch, Adam (see train-gcn.ts).
 * Registers itself as 'gcn'.
 * @module
 */
import { registerWorkload } from '../registry.js';
import type { Workload } from '../workload.js';
import { gcnDefaults, graphDefaults } from './defaults.js';
import { estimateGcn, gcnShape } from './memory-estimate.js';
import type { GcnTrainOptions, GcnTrainingShape } from './options.js';
import { prepareGcn } from './train-gcn.js';

/** Nodes of the seed graph without a GPU (the CPU kernels), unless the options say how many. */
const gcnHostNodes = 10_000;

const gcnWorkload: Workload<GcnTrainOptions, GcnTrainingShape> = {
  name: 'gcn',
  description: 'a two-layer GCN on a generated graph (seed: random; sbm: a learnable stochastic block model), full batch, Adam',
  datasets: ['seed', 'sbm'],
  samples: 'nodes',
  evaluationLabel: 'held-out acc',
  ownOptions: [],
  timesCollectives: true,
  memoryAdvice: ", the row-block plan (rowBlocks), bf16 features, or a strategy that spills to host memory ('tiered')",
  optionProblem: () => undefined,
  ranksProblem(o, ranks, name) {
    const nodes = o.nodes ?? graphDefaults(o.dataset ?? gcnDefaults.dataset).nodes;
    const stride = Math.ceil(nodes / ranks);
    if ((ranks - 1) * stride < nodes) return undefined;
    return `'${name('devices')}' ${ranks} ranks need at least one node each, but ${nodes} nodes in rows of ${stride} leave the last rank none; use fewer devices or more ${name('nodes')}`;
  },
  hostDefaults(o, name) {
    if (o.nodes !== undefined || (o.dataset ?? gcnDefaults.dataset) !== 'seed') return undefined;
    return {
      options: { nodes: gcnHostNodes },
      note: `the CPU kernels on a ${gcnHostNodes.toLocaleString('en-US')}-node graph (${name('nodes')} to change)`,
    };
  },
  describe(o, run) {
    const dataset = o.dataset ?? gcnDefaults.dataset;
    const nodes = o.nodes ?? graphDefaults(dataset).nodes;
    const graph = dataset === 'seed' ? 'a random graph' : 'a stochastic block model graph';
    return `gcn on ${dataset} (${graph}, ${nodes.toLocaleString('en-US')} nodes, ${o.aggregation ?? gcnDefaults.aggregation} aggregation), ${run}`;
  },
  shape: gcnShape,
  estimate: estimateGcn,
  prepare: prepareGcn,
};

registerWorkload(gcnWorkload);
