/**
 * The gcn's memory plan: the graph as it is built and as it trains, A·x beside x where the input is
 * aggregated once, the step's activations by plan, Adam's parameters (see
 * training/memory-estimate.ts for what an estimate is). For the 2M-node gcn-seed benchmark it gives
 * 5.46 GB against 5.54 GB measured, and 26.2 GB for its scatter form against 26.2 GB
 * (bench/RESULTS.md; the input aggregated every epoch, whose step peak A·x once shares).
 * @module
 */
import { count, denseParameters, f32, positiveInt, type MemoryEstimate } from '../../training/memory-estimate.js';
import { maxIndex, maxSbmNodes } from '../../datasets/graphs.js';
import { gcnDataset, gcnDefaults, gcnHiddenWidth, gcnInputAggregation, graphDefaults } from './defaults.js';
import type { GcnTrainingShape } from './options.js';

/** What of the gcn's options decides its memory (strings where train() checks them later). */
export interface GcnShapeOptions {
  dataset?: string;
  hidden?: number[] | number;
  nodes?: number;
  edgesPerNode?: number;
  features?: number;
  classes?: number;
  aggregation?: string;
  inputAggregation?: string;
  rowBlocks?: number;
  featureDtype?: string;
}

/** train()'s defaults filled in, and the sizes checked against the 32-bit indices of the kernels. */
export function gcnShape(o: GcnShapeOptions): GcnTrainingShape {
  const dataset = gcnDataset(o.dataset) === 'sbm' ? 'sbm' : 'random';
  const graphDefault = graphDefaults(dataset);
  const nodes = positiveInt(o.nodes ?? graphDefault.nodes, 'nodes');
  const hidden = positiveInt(gcnHiddenWidth(o.hidden), 'hidden');
  const features = positiveInt(o.features ?? graphDefault.features, 'features');
  const classes = positiveInt(o.classes ?? graphDefault.classes, 'classes');
  if (nodes > maxIndex)
    throw new RangeError(`Expected at most ${count(maxIndex)} for nodes (node ids are 32-bit) but received ${count(nodes)}`);
  if (dataset === 'sbm' && nodes > maxSbmNodes) {
    throw new RangeError(
      `Expected at most ${count(maxSbmNodes)} nodes for the sbm dataset (it is generated on the host) but received ${count(nodes)}; use the random dataset for larger graphs`,
    );
  }
  // the random graph: nodes x edgesPerNode; the SBM: 8 in-block and 2 cross-block edges and a self loop per node
  const perNode = dataset === 'sbm' ? 11 : positiveInt(o.edgesPerNode ?? gcnDefaults.random.edgesPerNode, 'edgesPerNode');
  const edges = nodes * perNode;
  if (edges > maxIndex) {
    throw new RangeError(
      `Expected nodes x edgesPerNode <= ${count(maxIndex)} (edge indices are 32-bit) but received ${count(nodes)} x ${perNode} = ${count(edges)}`,
    );
  }
  const inputAggregation = gcnInputAggregation(o);
  return {
    model: 'gcn',
    dataset,
    nodes,
    edges,
    features,
    hidden,
    classes,
    aggregation: o.aggregation === 'scatter' ? 'scatter' : 'spmm',
    ...(inputAggregation === undefined ? {} : { inputAggregation }),
    ...(o.rowBlocks === undefined ? {} : { rowBlocks: positiveInt(o.rowBlocks, 'rowBlocks') }),
    featureDtype: o.featureDtype === 'bf16' ? 'bf16' : 'f32',
  };
}

/** The estimated peak of the gcn's shape. */
export function estimateGcn(shape: GcnTrainingShape): MemoryEstimate {
  const { nodes: n, edges: e, features: f, hidden: h, classes: c, rowBlocks } = shape;
  const csr = 2 * ((n + 1) * f32 + 2 * e * f32); // the aggregation and its transpose: rowptr, col, val
  const edgeLists = 3 * e * f32; // src, dst, weight
  const nodeData = n * f * (shape.featureDtype === 'bf16' ? 2 : f32) + n * f32; // features, labels
  const parameters = 4 * denseParameters([f, h, c]) * f32; // Adam: weights, gradients and two moments
  // building, before the model exists: edge lists, both CSR forms and the sort's temporaries (about
  // one more key array); then, where the input is aggregated once, A·x beside x (x is freed after:
  // A·x takes its place), with the model's weights and gradients but not yet Adam's moments
  const build = Math.max(
    nodeData + edgeLists + csr + e * f32,
    shape.inputAggregation === 'once' ? nodeData + csr + n * f * f32 + parameters / 2 : 0,
  );
  // training, plain plan: at most two N x H activations (the logits come and go below that peak),
  // whether the input is aggregated every epoch (x·W1ᵀ and A·(x·W1ᵀ) in forward) or once (a1 and
  // its gradient in backward); scatter keeps the edge lists and materialises E x H messages
  // (the input aggregated every epoch; conv2's E x C are less). Row-block plan: one N x H
  // activation, two N x C tensors and one block's buffers (models/gcn-blocked.ts).
  const blockRows = rowBlocks === undefined ? 0 : Math.ceil(n / Math.min(rowBlocks, n));
  const step =
    rowBlocks !== undefined
      ? n * h * f32 + 2 * n * c * f32 + blockRows * Math.max(f * f32 + h, h * f32)
      : 2 * n * h * f32 + (shape.aggregation === 'scatter' ? edgeLists + e * h * f32 : 0);
  const train = nodeData + csr + step + parameters;
  const parts = {
    graph: nodeData + csr + (shape.aggregation === 'scatter' ? edgeLists : 0),
    [shape.inputAggregation === 'once' ? 'graph build and A·x (transient)' : 'graph build (transient)']: Math.max(0, build - train),
    activations: Math.max(0, step - (shape.aggregation === 'scatter' ? edgeLists : 0)),
    parameters,
  };
  return {
    total: Math.max(build, train),
    parts,
    describe:
      `gcn on the ${shape.dataset} graph with ${count(n)} nodes, ${count(e)} edges, ${count(f)} features, ` +
      `hidden ${count(h)}, ${count(c)} classes (${shape.aggregation}` +
      `${shape.inputAggregation === undefined ? '' : shape.inputAggregation === 'once' ? ', A·x once' : ', input aggregated every epoch'}` +
      `${rowBlocks === undefined ? '' : `, ${count(rowBlocks)} row blocks`}${shape.featureDtype === 'bf16' ? ', bf16 features' : ''})`,
  };
}
