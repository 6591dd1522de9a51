/**
 * The trainer: the same model, the same seed, any allocator. Every tensor and intermediate of a
 * step is allocated and freed through the chosen allocator on the trainer's stream. A step does
 * not synchronise the host: per-step losses and correct counts are written to device buffers and
 * read once per epoch.
 * @module
 */
import { CudaGraph, createAllocator, type Allocator, type AllocatorStats } from '@gpumem/allocator-core';
import { Runtime } from './runtime.js';
import { Adam, SGD, softmaxCrossEntropy, type Optimizer } from './nn.js';
import { Mlp } from './models/mlp.js';
import { Gcn, type Aggregation } from './models/gcn.js';
import { loadMnist, normalisedPixels } from './datasets/mnist.js';
import { sbmGraph, seedGraph, type Graph } from './datasets/graphs.js';
import type { Tensor } from './tensor.js';

export type ModelName = 'mlp' | 'gcn';
export type DatasetName = 'mnist' | 'seed' | 'sbm';

export interface TrainOptions {
  model: ModelName;
  /** mlp: 'mnist' (default). gcn: 'seed' (the seed's random graph, default) or 'sbm'. */
  dataset?: DatasetName;
  /** An allocator, or the registered name of one (created and disposed by train). */
  allocator: Allocator | string;
  allocatorOptions?: Record<string, unknown>;
  epochs?: number; // default 1
  /** mlp only (default 64). */
  batchSize?: number;
  /** default: 0.1 (mlp, SGD), 0.01 (gcn, Adam). */
  lr?: number;
  seed?: number; // default 0
  /** mlp: hidden layer sizes (default four of 784). gcn: hidden width (default 256). */
  hidden?: number[] | number;
  /** gcn graph size (default 100,000 nodes), edges per node (10), features (128), classes (10). */
  nodes?: number;
  edgesPerNode?: number;
  features?: number;
  classes?: number;
  aggregation?: Aggregation; // default 'spmm'
  dropout?: number; // gcn, default 0.5
  /**
   * mlp on a GPU: capture one training step as a CUDA Graph and replay it for every full batch
   * (one launch instead of ~40). Needs an allocator whose malloc and free make no driver calls
   * ('pool'): the graph keeps the step's memory at fixed addresses for the whole run.
   */
  cudaGraph?: boolean;
  /** mlp: train on the first N training images / validate on the first M test images (default all). */
  trainSubset?: number;
  testSubset?: number;
  /** Called after every step (mlp) or epoch (gcn), from the training loop. */
  onProgress?: (progress: Progress) => void;
  /** Called after every step with the allocator's stats (leak checks, timelines). */
  onStep?: (step: number, stats: AllocatorStats) => void;
}

export interface Progress {
  epoch: number;
  epochs: number;
  step: number;
  steps: number;
}

export interface EpochRecord {
  epoch: number;
  /** When the epoch started, on the `performance.now()` clock (milliseconds). */
  startMs: number;
  /** Wall time of the epoch (training, and validation for the mlp), synchronised. */
  epochMs: number;
  /** Mean training loss over the epoch's steps. */
  loss: number;
  /** Every step's loss, in order. */
  losses: number[];
  /** Accuracy on the training rows seen this epoch. */
  trainAccuracy: number;
  /** mlp: test-set accuracy. gcn: accuracy on the nodes outside the training mask. */
  accuracy: number;
  /** Allocator statistics over the epoch (peaks reset at its start). */
  peakAllocatedBytes: number;
  peakReservedBytes: number;
  upstreamAllocCalls: number;
  upstreamFreeCalls: number;
  stats: AllocatorStats;
}

export interface TrainResult {
  model: ModelName;
  dataset: DatasetName;
  allocator: string;
  device: string;
  epochs: EpochRecord[];
  parameters: number;
  /** Training samples per epoch: images (mlp) or nodes (gcn, full batch). */
  samplesPerEpoch: number;
}

function checkPositiveInt(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`Expected positive integer for ${name} but received ${String(value)}`);
  }
}

/** xorshift32: the epoch's shuffle order, from the seed. */
function permutation(n: number, seed: number): Int32Array {
  const p = new Int32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  let x = (seed * 2654435761 + 12345) >>> 0 || 1;
  for (let i = n - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const j = (x >>> 0) % (i + 1);
    const t = p[i]!;
    p[i] = p[j]!;
    p[j] = t;
  }
  return p;
}

function mean(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i]!;
  return values.length ? s / values.length : 0;
}

function sum(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i]!;
  return s;
}

/** Trains a model and reports per-epoch time, loss, accuracy and allocator statistics. */
export function train(options: TrainOptions): TrainResult {
  const epochs = options.epochs ?? 1;
  checkPositiveInt(epochs, 'epochs');
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Expected non-negative integer for seed but received ${seed}`);
  const owned = typeof options.allocator === 'string';
  const allocator = typeof options.allocator === 'string' ? createAllocator(options.allocator, options.allocatorOptions ?? {}) : options.allocator;
  const rt = new Runtime(allocator);
  try {
    return options.model === 'mlp' ? trainMlp(rt, options, epochs, seed) : trainGcn(rt, options, epochs, seed);
  } finally {
    rt.dispose();
    if (owned) allocator.dispose();
  }
}

/** Waits for earlier work, resets the allocator's peaks, and starts the epoch's clock. */
function beginEpoch(rt: Runtime): { before: AllocatorStats; t0: number } {
  rt.synchronize();
  rt.allocator.resetPeak();
  return { before: rt.allocator.stats(), t0: performance.now() };
}

function epochStats(allocator: Allocator, before: AllocatorStats): Pick<EpochRecord, 'peakAllocatedBytes' | 'peakReservedBytes' | 'upstreamAllocCalls' | 'upstreamFreeCalls' | 'stats'> {
  const stats = allocator.stats();
  return {
    peakAllocatedBytes: stats.peakAllocatedBytes,
    peakReservedBytes: stats.peakReservedBytes,
    upstreamAllocCalls: stats.upstreamAllocCount - before.upstreamAllocCount,
    upstreamFreeCalls: stats.upstreamFreeCount - before.upstreamFreeCount,
    stats,
  };
}

function trainMlp(rt: Runtime, o: TrainOptions, epochs: number, seed: number): TrainResult {
  if ((o.dataset ?? 'mnist') !== 'mnist') throw new RangeError(`Expected 'mnist' for dataset of the mlp but received '${o.dataset}'`);
  const batch = o.batchSize ?? 64;
  checkPositiveInt(batch, 'batchSize');
  const lr = o.lr ?? 0.1;
  const hidden = Array.isArray(o.hidden) ? o.hidden : o.hidden !== undefined ? [o.hidden] : [784, 784, 784, 784];
  for (const h of hidden) checkPositiveInt(h, 'hidden');
  const mnist = loadMnist();
  const nTrain = Math.min(o.trainSubset ?? mnist.train.count, mnist.train.count);
  const nTest = Math.min(o.testSubset ?? mnist.test.count, mnist.test.count);
  checkPositiveInt(nTrain, 'trainSubset');
  checkPositiveInt(nTest, 'testSubset');
  const features = mnist.rows * mnist.cols;
  const { allocator } = rt;

  // Data lives on the device for the whole run (as the peers' "data already on the GPU").
  const xTrain = rt.keep(rt.fromArray(normalisedPixels(mnist.train, nTrain), [nTrain, features]));
  const yTrain = rt.keep(rt.fromArray(Int32Array.from(mnist.train.labels.subarray(0, nTrain)), [nTrain]));
  const xTest = rt.keep(rt.fromArray(normalisedPixels(mnist.test, nTest), [nTest, features]));
  const yTest = rt.keep(rt.fromArray(Int32Array.from(mnist.test.labels.subarray(0, nTest)), [nTest]));
  const model = new Mlp(rt, [features, ...hidden, 10], seed);
  const optimizer: Optimizer = new SGD(rt, model.params, lr);
  const steps = Math.ceil(nTrain / batch);
  const evalBatch = 1000;
  const evalSteps = Math.ceil(nTest / evalBatch);
  const records: EpochRecord[] = [];
  const ops = rt.ops;

  /** One training step on the rows listed at indexPtr, writing its loss and correct count. */
  const step = (indexPtr: number, rows: number, lossPtr: number, correctPtr: number) => {
    const x = rt.empty([rows, features]);
    const y = rt.empty([rows], 'i32');
    ops.gatherRows(rt.onDevice, rt.s, xTrain.ptr, indexPtr, x.ptr, rows, features);
    ops.gatherRows(rt.onDevice, rt.s, yTrain.ptr, indexPtr, y.ptr, rows, 1);
    const logits = model.forward(x);
    const dLogits = softmaxCrossEntropy(rt, logits, y, rows, lossPtr, correctPtr);
    model.backward(dLogits);
    optimizer.step();
  };

  // CUDA Graph mode: the captured step reads its batch's indices from a fixed buffer and writes
  // its loss and correct count to fixed slots; copies in and out go around each replay.
  const graphMode = o.cudaGraph === true;
  if (graphMode && !rt.onDevice) throw new RangeError('Expected a GPU allocator for cudaGraph: CUDA Graphs need a CUDA device');
  if (graphMode && rt.allocator.name !== 'pool') {
    throw new RangeError(
      `Expected the 'pool' allocator for cudaGraph but received '${rt.allocator.name}': a captured step must allocate without driver calls`,
    );
  }
  const graphIndex = graphMode ? rt.keep(rt.empty([batch], 'i32')) : undefined;
  const graphSlots = graphMode ? rt.keep(rt.zeros([2], 'i32')) : undefined; // [loss (f32 bits), correct]
  let graph: CudaGraph | undefined;
  let graphTensors: Tensor[] = [];
  let warmedUp = false;

  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      const { before, t0 } = beginEpoch(rt);
      const { losses, correct, testCorrect } = rt.scope(() => {
        const perm = rt.fromArray(permutation(nTrain, seed * 1000 + epoch), [nTrain]);
        const lossBuf = rt.empty([steps]);
        const correctBuf = rt.zeros([steps], 'i32');
        for (let s = 0; s < steps; s++) {
          const rows = Math.min(batch, nTrain - s * batch);
          const index = perm.rows(s * batch, rows);
          if (graphIndex && graphSlots && rows === batch && warmedUp) {
            ops.copy(true, rt.s, graphIndex.ptr, index.ptr, rows * 4);
            if (!graph) {
              graphTensors = rt.collect(() => {
                graph = CudaGraph.capture(rt.stream, () => step(graphIndex.ptr, rows, graphSlots.ptr, graphSlots.ptr + 4));
              });
            }
            graph!.launch();
            ops.copy(true, rt.s, lossBuf.ptr + 4 * s, graphSlots.ptr, 4);
            ops.copy(true, rt.s, correctBuf.ptr + 4 * s, graphSlots.ptr + 4, 4);
          } else {
            rt.scope(() => step(index.ptr, rows, lossBuf.ptr + 4 * s, correctBuf.ptr + 4 * s));
            warmedUp = true; // an eager step first: segments, library handles and caches exist before capture
          }
          o.onStep?.(s, allocator.stats());
          o.onProgress?.({ epoch, epochs, step: s + 1, steps });
        }
        // validation, part of the epoch
        const testBuf = rt.zeros([evalSteps], 'i32');
        for (let i = 0; i < evalSteps; i++) {
          const rows = Math.min(evalBatch, nTest - i * evalBatch);
          rt.scope(() => {
            const logits = model.forward(xTest.rows(i * evalBatch, rows));
            const labels = yTest.rows(i * evalBatch, rows);
            ops.accuracy(rt.onDevice, rt.s, logits.ptr, labels.ptr, 0, rows, rows, 10, testBuf.ptr + 4 * i);
          });
        }
        return { losses: lossBuf.toFloat32(), correct: correctBuf.toArray(), testCorrect: testBuf.toArray() };
      });
      rt.synchronize();
      const epochMs = performance.now() - t0;
      records.push({
        epoch,
        startMs: t0,
        epochMs,
        loss: mean(losses),
        losses: [...losses],
        trainAccuracy: sum(correct) / nTrain,
        accuracy: sum(testCorrect) / nTest,
        ...epochStats(allocator, before),
      });
    }
  } finally {
    rt.synchronize();
    (graph as CudaGraph | undefined)?.destroy();
    for (const t of graphTensors) t.dispose();
    graphIndex?.dispose();
    graphSlots?.dispose();
    optimizer.dispose();
    model.dispose();
    for (const t of [xTrain, yTrain, xTest, yTest]) t.dispose();
  }
  return { model: 'mlp', dataset: 'mnist', allocator: allocator.name, device: allocator.device.id, epochs: records, parameters: model.params.size, samplesPerEpoch: nTrain };
}

function trainGcn(rt: Runtime, o: TrainOptions, epochs: number, seed: number): TrainResult {
  const dataset = o.dataset ?? 'seed';
  if (dataset !== 'seed' && dataset !== 'sbm') throw new RangeError(`Expected 'seed' or 'sbm' for dataset of the gcn but received '${dataset}'`);
  const hidden = Array.isArray(o.hidden) ? o.hidden[0] : o.hidden ?? 256;
  checkPositiveInt(hidden ?? 0, 'hidden');
  const aggregation = o.aggregation ?? 'spmm';
  if (aggregation !== 'spmm' && aggregation !== 'scatter') {
    throw new RangeError(`Expected 'spmm' or 'scatter' for aggregation but received '${String(aggregation)}'`);
  }
  const nodes = o.nodes ?? (dataset === 'sbm' ? 2000 : 100_000);
  checkPositiveInt(nodes, 'nodes');
  const { allocator } = rt;
  const graph: Graph =
    dataset === 'seed'
      ? seedGraph(rt, { nodes, edgesPerNode: o.edgesPerNode ?? 10, features: o.features ?? 128, classes: o.classes ?? 10, seed })
      : sbmGraph(rt, { nodes, classes: o.classes ?? 4, features: o.features ?? 16, seed });
  if (aggregation === 'spmm') graph.dropEdgeLists();
  const model = new Gcn(rt, graph.numFeatures, hidden!, graph.numClasses, o.dropout ?? 0.5, aggregation, seed);
  const optimizer = new Adam(rt, model.params, o.lr ?? 0.01);
  const n = graph.numNodes;
  const records: EpochRecord[] = [];
  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      const { before, t0 } = beginEpoch(rt);
      const scalars = rt.scope(() => {
        const out = rt.zeros([2], 'i32'); // [loss as f32 bits, correct]
        const logits = model.forward(graph, true, seed + 7, epoch * n * hidden!);
        const dLogits = softmaxCrossEntropy(rt, logits, graph.labels, graph.trainNodes, out.ptr, out.ptr + 4);
        logits.dispose(); // not needed once the loss kernel has its gradient
        model.backward(dLogits, graph);
        optimizer.step();
        return rt.keep(out);
      });
      rt.synchronize();
      const epochMs = performance.now() - t0;
      const stats = epochStats(allocator, before);
      o.onStep?.(epoch, allocator.stats());
      const raw = scalars.toArray() as Int32Array;
      scalars.dispose();
      const loss = new Float32Array(raw.buffer, 0, 1)[0]!;
      const accuracy = evaluateGcn(rt, model, graph, seed);
      records.push({
        epoch,
        startMs: t0,
        epochMs,
        loss,
        losses: [loss],
        trainAccuracy: raw[1]! / graph.trainNodes,
        accuracy,
        ...stats,
      });
      o.onProgress?.({ epoch, epochs, step: 1, steps: 1 });
    }
  } finally {
    optimizer.dispose();
    model.dispose();
    graph.dispose();
  }
  return { model: 'gcn', dataset, allocator: allocator.name, device: allocator.device.id, epochs: records, parameters: model.params.size, samplesPerEpoch: nodes };
}

/** Accuracy on the nodes outside the training mask, without dropout. */
function evaluateGcn(rt: Runtime, model: Gcn, graph: Graph, seed: number): number {
  const rest = graph.numNodes - graph.trainNodes;
  if (rest <= 0) return 0;
  return rt.scope(() => {
    const logits: Tensor = model.forward(graph, false, seed, 0);
    const correct = rt.zeros([1], 'i32');
    rt.ops.accuracy(
      rt.onDevice,
      rt.s,
      logits.rows(graph.trainNodes, rest).ptr,
      graph.labels.rows(graph.trainNodes, rest).ptr,
      0,
      rest,
      rest,
      graph.numClasses,
      correct.ptr,
    );
    return (correct.toArray()[0] ?? 0) / rest;
  });
}
