/**
 * The GCN, full batch: one step an epoch, then accuracy outside the training mask.
 * @module
 */
import type { Runtime } from '../../framework/runtime.js';
import { gcnDataset, gcnDefaults, gcnHiddenWidth, gcnInputAggregation, graphDefaults } from './defaults.js';
import { Adam, softmaxCrossEntropy } from '../../framework/nn.js';
import { Gcn } from '../../models/gcn.js';
import { BlockedGcn } from '../../models/gcn-blocked.js';
import { featuresToBf16, sbmGraph, randomGraph, type Graph } from '../../datasets/graphs.js';
import type { Tensor } from '../../framework/tensor.js';
import { preparePartitionedGcn } from './train-gcn-partitioned.js';
import { partitionGraph } from '../../datasets/graph-part.js';
import { randomGraphPart } from '../../datasets/random-graph-part.js';
import { beginEpoch, checkPositiveInt, endFullBatchStep } from '../../training/train-common.js';
import type { RunContext, WorkloadRun } from '../workload.js';
import type { GcnTrainOptions } from './options.js';
import { epochRecordHead } from '../epoch-record.js';
import { correctInRows } from './correct-rows.js';

/** The gcn, ready for its epochs; with `comm`, this rank's part of a run split by rows over the communicator's ranks. */
export function prepareGcn(rt: Runtime, o: GcnTrainOptions, { epochs, seed, comm }: RunContext): WorkloadRun {
  const dataset = gcnDataset(o.dataset);
  if (dataset !== 'random' && dataset !== 'sbm')
    throw new RangeError(`Expected 'random' or 'sbm' for dataset of the gcn but received '${dataset}'`);
  const hidden = gcnHiddenWidth(o.hidden);
  checkPositiveInt(hidden ?? 0, 'hidden');
  const aggregation = o.aggregation ?? gcnDefaults.aggregation;
  if (aggregation !== 'spmm' && aggregation !== 'scatter') {
    throw new RangeError(`Expected 'spmm' or 'scatter' for aggregation but received '${String(aggregation)}'`);
  }
  const { rowBlocks, featureDtype = 'f32', layerPrefetch = false } = o;
  checkGcnPlan(rowBlocks, featureDtype, aggregation, o.inputAggregation);
  if (comm) checkPartitionedPlan(o, aggregation);
  const graphDefault = graphDefaults(dataset);
  const nodes = o.nodes ?? graphDefault.nodes;
  checkPositiveInt(nodes, 'nodes');
  const randomGraphOptions = {
    nodes,
    edgesPerNode: o.edgesPerNode ?? gcnDefaults.random.edgesPerNode,
    features: o.features ?? graphDefault.features,
    classes: o.classes ?? graphDefault.classes,
    seed,
    featureDtype,
  };
  const makeGraph = (): Graph => {
    const g =
      dataset === 'random'
        ? randomGraph(rt, randomGraphOptions)
        : sbmGraph(rt, { nodes, classes: o.classes ?? graphDefault.classes, features: o.features ?? graphDefault.features, seed });
    if (aggregation === 'spmm') g.dropEdgeLists();
    return g;
  };
  if (comm) {
    // the random graph is drawn by rows (no rank holds it whole); the sbm is made whole, then cut
    const part = dataset === 'random' ? randomGraphPart(rt, randomGraphOptions, comm) : partitionGraph(rt, makeGraph(), comm);
    const run = preparePartitionedGcn(rt, o, part, hidden!, epochs, seed, comm);
    return { ...run, dataset, samplesPerEpoch: nodes, resultExtras: () => ({ remoteRows: part.remoteRows }) };
  }
  const graph = makeGraph();
  if (featureDtype === 'bf16') graph.features = featuresToBf16(rt, graph.features);
  const dropout = o.dropout ?? gcnDefaults.dropout;
  const model =
    rowBlocks === undefined
      ? new Gcn(rt, graph.numFeatures, hidden!, graph.numClasses, dropout, aggregation, seed, layerPrefetch, gcnInputAggregation(o))
      : new BlockedGcn(rt, graph.numFeatures, hidden!, graph.numClasses, dropout, rowBlocks, seed, layerPrefetch);
  if (model instanceof Gcn && model.inputAggregation === 'once') {
    model.aggregateInput(graph); // A·x, once: the features never change
    graph.features.dispose(); // never read again: A·x takes their place
  }
  const optimizer = new Adam(rt, model.params, o.lr ?? gcnDefaults.lr);
  const n = graph.numNodes;
  return {
    dataset,
    parameters: model.params.size,
    samplesPerEpoch: nodes,
    trainEpoch(epoch) {
      const begun = beginEpoch(rt);
      const scalars = rt.scope(() => {
        const out = rt.zeros([2], 'i32'); // [loss as f32 bits, correct]
        rt.tag('forward');
        const logits = model.forward(graph, true, seed + 7, epoch * n * hidden!);
        rt.tag('loss');
        const dLogits = softmaxCrossEntropy(rt, logits, graph.labels, graph.trainNodes, out.ptr, out.ptr + 4);
        logits.dispose(); // not needed once the loss kernel has its gradient
        rt.tag('backward');
        model.backward(dLogits, graph);
        rt.tag('optimizer');
        optimizer.step();
        return rt.keep(out);
      });
      const { epochMs, stats, loss, correct } = endFullBatchStep(rt, o, epoch, begun, scalars);
      rt.tag('validation');
      const accuracy = evaluateGcn(rt, model, graph, seed);
      const record = { ...epochRecordHead(epoch, begun.t0, epochMs, [loss], correct / graph.trainNodes, accuracy), ...stats };
      o.onProgress?.({ epoch, epochs, step: 1, steps: 1 });
      return record;
    },
    dispose() {
      optimizer.dispose();
      model.dispose();
      graph.dispose();
    },
  };
}

/** Accuracy on the nodes outside the training mask, without dropout. */
function evaluateGcn(rt: Runtime, model: Gcn | BlockedGcn, graph: Graph, seed: number): number {
  const rest = graph.numNodes - graph.trainNodes;
  if (rest <= 0) return 0;
  return rt.scope(() => {
    const logits: Tensor = model.forward(graph, false, seed, 0);
    return correctInRows(rt, logits, graph.labels, graph.trainNodes, rest, graph.numClasses) / rest;
  });
}

/** What a run split by rows supports, checked before anything is allocated: the CSR product, A·x once, f32 features, no row blocks, no layer prefetch. */
function checkPartitionedPlan(o: GcnTrainOptions, aggregation: string): void {
  const why = 'a run over several devices splits the graph by rows and computes (A·x)·W1ᵀ with the CSR product';
  if (aggregation !== 'spmm') throw new RangeError(`Expected aggregation 'spmm' with devices but received '${aggregation}': ${why}`);
  if ((o.inputAggregation ?? 'once') !== 'once')
    throw new RangeError(`Expected inputAggregation 'once' with devices but received '${o.inputAggregation}': ${why}, A·x once`);
  if (o.rowBlocks !== undefined)
    throw new RangeError(`Expected no rowBlocks with devices: ${why}, and each rank holds its rows' activations only`);
  if ((o.featureDtype ?? 'f32') !== 'f32')
    throw new RangeError(`Expected featureDtype 'f32' with devices but received '${o.featureDtype}'`);
  if (o.layerPrefetch) throw new RangeError('Expected layerPrefetch off with devices');
}

/** The gcn's memory-plan options, checked before anything is allocated. */
function checkGcnPlan(
  rowBlocks: number | undefined,
  featureDtype: string,
  aggregation: string,
  inputAggregation: string | undefined,
): void {
  if (inputAggregation !== undefined) {
    if (inputAggregation !== 'once' && inputAggregation !== 'every-epoch')
      throw new RangeError(`Expected 'once' or 'every-epoch' for inputAggregation but received '${inputAggregation}'`);
    if (rowBlocks !== undefined)
      throw new RangeError(
        'Expected no inputAggregation with rowBlocks: the row-block plan computes (A·x)·W1ᵀ and takes A·x again per block in backward',
      );
    if (inputAggregation === 'once' && aggregation !== 'spmm')
      throw new RangeError(
        `Expected aggregation 'spmm' with inputAggregation 'once' but received '${aggregation}': the scatter form materialises the first layer's E x hidden messages every epoch, as the seed does`,
      );
  }
  if (rowBlocks !== undefined) {
    checkPositiveInt(rowBlocks, 'rowBlocks');
    if (aggregation !== 'spmm')
      throw new RangeError(
        `Expected aggregation 'spmm' with rowBlocks (the row-block plan aggregates with the CSR product) but received '${aggregation}'`,
      );
  }
  if (featureDtype !== 'f32' && featureDtype !== 'bf16')
    throw new RangeError(`Expected 'f32' or 'bf16' for featureDtype but received '${featureDtype}'`);
  if (featureDtype === 'bf16' && rowBlocks === undefined) {
    throw new RangeError(
      "Expected rowBlocks with featureDtype 'bf16': only the row-block plan reads bf16 features (its aggregation widens them to f32)",
    );
  }
}
