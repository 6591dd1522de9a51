/**
 * What a training configuration needs in memory, worked out from the models' memory plans before
 * anything is allocated, so that a configuration that cannot fit (`--nodes 2e9`, `--hidden 65536`)
 * is refused at once with the figures, instead of failing deep into graph generation, or worse.
 *
 * The estimate is a lower bound of the peak: the tensors the plan keeps live at its peak, in f32 or
 * i32, without the allocator's rounding or caching. For the 2M-node seed GCN it gives 5.46 GB
 * against 5.54 GB measured, and 26.2 GB for its scatter form against 26.2 GB (bench/RESULTS.md).
 * A configuration is refused only when this estimate exceeds the total memory of the device (or
 * host) the allocator uses.
 * @module
 */
import { freemem, totalmem } from 'node:os';
import { formatBytes, hasAllocator, memoryInfo, strategyInfo, type Allocator } from '@gpumem/allocator-core';
import { gcnDefaults, gcnHiddenWidth, graphDefaults, mlpDefaults, mlpHiddenWidths } from './defaults.js';

/** Largest index a CSR or edge list can hold: they are 32-bit. */
export const maxIndex = 2 ** 31 - 1;
/** Largest SBM the host-side generator builds (its edge lists are JavaScript arrays). */
export const maxSbmNodes = 2_000_000;

/** The configuration, with train()'s defaults filled in. */
export type TrainingShape =
  | { model: 'mlp'; trainRows: number; testRows: number; features: number; hidden: number[]; classes: number; batch: number }
  | {
      model: 'gcn';
      dataset: 'seed' | 'sbm';
      nodes: number;
      edges: number;
      features: number;
      hidden: number;
      classes: number;
      aggregation: 'spmm' | 'scatter';
      /** The row-block plan's blocks (undefined: the plain plan). */
      rowBlocks?: number;
      featureDtype: 'f32' | 'bf16';
    };

/** Bytes by what holds them; `total` is the estimated peak. */
export interface MemoryEstimate {
  total: number;
  parts: Record<string, number>;
  /** One line describing the configuration, for messages. */
  describe: string;
}

/** Thrown when a configuration's memory estimate exceeds what the device (or host) has. */
export class InsufficientMemoryError extends RangeError {
  override readonly name = 'InsufficientMemoryError';
  constructor(
    message: string,
    readonly estimate: MemoryEstimate,
    /** Bytes the device (or host) has in all. */
    readonly availableBytes: number,
    /** Where the memory would come from, e.g. 'cuda:0' or 'host'. */
    readonly where: string,
  ) {
    super(message);
  }
}

const f32 = 4;

function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** Parameters of dense layers of these widths (weights and biases). */
function denseParameters(widths: readonly number[]): number {
  let p = 0;
  for (let i = 0; i + 1 < widths.length; i++) p += widths[i]! * widths[i + 1]! + widths[i + 1]!;
  return p;
}

/** The estimated peak of a configuration. */
export function estimateTrainingMemory(shape: TrainingShape): MemoryEstimate {
  if (shape.model === 'mlp') {
    const widths = [shape.features, ...shape.hidden, shape.classes];
    const parts = {
      // data stays on the device for the run: pixels and labels of both splits
      data: (shape.trainRows + shape.testRows) * (shape.features + 1) * f32,
      // SGD: weights and gradients
      parameters: 2 * denseParameters(widths) * f32,
      // a step keeps every layer's output for backward, and one gradient as wide as the widest
      activations: Math.max(shape.batch, 1000) * (widths.reduce((a, b) => a + b, 0) + Math.max(...widths)) * f32,
    };
    return {
      total: parts.data + parts.parameters + parts.activations,
      parts,
      describe: `mlp with hidden layers [${shape.hidden.join(', ')}], batch ${shape.batch}, ${count(shape.trainRows)} training images`,
    };
  }
  const { nodes: n, edges: e, features: f, hidden: h, classes: c, rowBlocks } = shape;
  const csr = 2 * ((n + 1) * f32 + 2 * e * f32); // the aggregation and its transpose: rowptr, col, val
  const edgeLists = 3 * e * f32; // src, dst, weight
  const nodeData = n * f * (shape.featureDtype === 'bf16' ? 2 : f32) + n * f32; // features, labels
  // building: edge lists, both CSR forms and the sort's temporaries (about one more key array)
  const build = nodeData + edgeLists + csr + e * f32;
  // training, plain plan: at most two N x H activations (the logits come and go below that peak);
  // scatter keeps the edge lists and materialises E x H messages. Row-block plan: one N x H
  // activation, two N x C tensors and one block's buffers (models/gcn-blocked.ts).
  const blockRows = rowBlocks === undefined ? 0 : Math.ceil(n / Math.min(rowBlocks, n));
  const step =
    rowBlocks !== undefined
      ? n * h * f32 + 2 * n * c * f32 + blockRows * Math.max(f * f32 + h, h * f32)
      : 2 * n * h * f32 + (shape.aggregation === 'scatter' ? edgeLists + e * h * f32 : 0);
  const train = nodeData + csr + step;
  const parts = {
    graph: nodeData + csr + (shape.aggregation === 'scatter' ? edgeLists : 0),
    'graph build (transient)': Math.max(0, build - train),
    activations: Math.max(0, step - (shape.aggregation === 'scatter' ? edgeLists : 0)),
    // Adam: weights, gradients and two moments
    parameters: 4 * denseParameters([f, h, c]) * f32,
  };
  return {
    total: Math.max(build, train) + parts.parameters,
    parts,
    describe:
      `gcn on the ${shape.dataset} graph with ${count(n)} nodes, ${count(e)} edges, ${count(f)} features, ` +
      `hidden ${count(h)}, ${count(c)} classes (${shape.aggregation}` +
      `${rowBlocks === undefined ? '' : `, ${count(rowBlocks)} row blocks`}${shape.featureDtype === 'bf16' ? ', bf16 features' : ''})`,
  };
}

/** The options train() takes that decide the memory it needs. */
export interface ShapeOptions {
  model: 'mlp' | 'gcn';
  dataset?: string;
  batchSize?: number;
  hidden?: number[] | number;
  hiddenLayers?: number;
  nodes?: number;
  edgesPerNode?: number;
  features?: number;
  classes?: number;
  aggregation?: string;
  trainSubset?: number;
  testSubset?: number;
  rowBlocks?: number;
  featureDtype?: string;
}

function positiveInt(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`Expected positive integer for ${name} but received ${String(value)}`);
  return value;
}

/** train()'s defaults filled in, and the sizes checked against the 32-bit indices of the kernels. */
export function trainingShape(o: ShapeOptions): TrainingShape {
  if (o.model === 'mlp') {
    const hidden = mlpHiddenWidths(o.hidden, o.hiddenLayers);
    for (const width of hidden) positiveInt(width, 'hidden');
    return {
      model: 'mlp',
      trainRows: Math.min(positiveInt(o.trainSubset ?? 60_000, 'trainSubset'), 60_000),
      testRows: Math.min(positiveInt(o.testSubset ?? 10_000, 'testSubset'), 10_000),
      features: mlpDefaults.features,
      hidden,
      classes: mlpDefaults.classes,
      batch: positiveInt(o.batchSize ?? mlpDefaults.batchSize, 'batchSize'),
    };
  }
  const dataset = o.dataset === 'sbm' ? 'sbm' : 'seed';
  const graphDefault = graphDefaults(dataset);
  const nodes = positiveInt(o.nodes ?? graphDefault.nodes, 'nodes');
  const hidden = positiveInt(gcnHiddenWidth(o.hidden), 'hidden');
  const features = positiveInt(o.features ?? graphDefault.features, 'features');
  const classes = positiveInt(o.classes ?? graphDefault.classes, 'classes');
  if (nodes > maxIndex) throw new RangeError(`Expected at most ${count(maxIndex)} for nodes (node ids are 32-bit) but received ${count(nodes)}`);
  if (dataset === 'sbm' && nodes > maxSbmNodes) {
    throw new RangeError(
      `Expected at most ${count(maxSbmNodes)} nodes for the sbm dataset (it is generated on the host) but received ${count(nodes)}; use the seed dataset for larger graphs`,
    );
  }
  // the seed graph: nodes x edgesPerNode; the SBM: 8 in-block and 2 cross-block edges and a self loop per node
  const perNode = dataset === 'sbm' ? 11 : positiveInt(o.edgesPerNode ?? gcnDefaults.seed.edgesPerNode, 'edgesPerNode');
  const edges = nodes * perNode;
  if (edges > maxIndex) {
    throw new RangeError(
      `Expected nodes x edgesPerNode <= ${count(maxIndex)} (edge indices are 32-bit) but received ${count(nodes)} x ${perNode} = ${count(edges)}`,
    );
  }
  return {
    model: 'gcn',
    dataset,
    nodes,
    edges,
    features,
    hidden,
    classes,
    aggregation: o.aggregation === 'scatter' ? 'scatter' : 'spmm',
    ...(o.rowBlocks === undefined ? {} : { rowBlocks: positiveInt(o.rowBlocks, 'rowBlocks') }),
    featureDtype: o.featureDtype === 'bf16' ? 'bf16' : 'f32',
  };
}

/**
 * Host memory that may be pinned: what the kernel says is available less a tenth of the total, so
 * that pinning never starves the machine (the same rule as the pinned and tiered strategies').
 */
export function pinnableHostBytes(): number {
  return Math.max(0, freemem() - Math.floor(totalmem() / 10));
}

/**
 * The memory the device `allocator` allocates from offers a plan, and what to call it: the
 * device's total; for managed memory only what the device has free (oversubscribing managed
 * memory can hang a shared GPU); for a strategy that spills to the host (registry flag
 * spillsToHost), the device's total and the host memory that may be pinned.
 */
export function memoryOf(allocator: Allocator): { bytes: number; where: string } {
  if (allocator.device.kind === 'host') return { bytes: totalmem(), where: 'the host' };
  const device = memoryInfo(allocator.device.index);
  const info = hasAllocator(allocator.name) ? strategyInfo(allocator.name) : undefined;
  if (info?.managedMemory) {
    return { bytes: device.freeBytes, where: `${allocator.device.id}'s free memory (managed memory beyond it would oversubscribe the device)` };
  }
  if (info?.spillsToHost) {
    const host = pinnableHostBytes();
    return { bytes: device.totalBytes + host, where: `${allocator.device.id} (${formatBytes(device.totalBytes)}) with the host memory that may be pinned (${formatBytes(host)})` };
  }
  return { bytes: device.totalBytes, where: allocator.device.id };
}

/**
 * Refuses, before anything is allocated, a configuration whose estimated memory exceeds the total
 * memory of the allocator's device (or of the host): RangeError for sizes past the kernels' 32-bit
 * indices, {@link InsufficientMemoryError} with the estimate and the memory for the rest.
 */
export function checkTrainingFits(options: ShapeOptions, allocator: Allocator): MemoryEstimate {
  const estimate = estimateTrainingMemory(trainingShape(options));
  const memory = memoryOf(allocator);
  if (estimate.total > memory.bytes) {
    const parts = Object.entries(estimate.parts)
      .filter(([, bytes]) => bytes > 0)
      .map(([name, bytes]) => `${name} ${formatBytes(bytes)}`)
      .join(', ');
    throw new InsufficientMemoryError(
      `${estimate.describe} needs at least ${formatBytes(estimate.total)} (${parts}) but ${memory.where} has ${formatBytes(memory.bytes)} in all: ` +
        `use fewer nodes, features or hidden units${estimate.describe.startsWith('gcn') ? ", the row-block plan (rowBlocks), bf16 features, or a strategy that spills to host memory ('tiered')" : ''}`,
      estimate,
      memory.bytes,
      allocator.device.id,
    );
  }
  return estimate;
}
