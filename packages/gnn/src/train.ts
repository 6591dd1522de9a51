/**
 * The trainer: the same model, the same seed, any allocator. Every tensor and intermediate of a
 * step is allocated and freed through the chosen allocator on the trainer's stream. A step does
 * not synchronise the host: per-step losses and correct counts are written to device buffers and
 * read once per epoch.
 * @module
 */
import { CudaGraph, Stream, createAllocator, hasAllocator, listAllocators, strategyInfo, type Allocator, type AllocatorStats, type Device } from '@gpumem/allocator-core';
import { Runtime } from './runtime.js';
import { checkTrainingFits } from './memory-estimate.js';
import { commonDefaults, gcnDefaults, gcnHiddenWidth, graphDefaults, mlpDefaults, mlpHiddenWidths } from './defaults.js';
import { Adam, SGD, softmaxCrossEntropy, softmaxCrossEntropyBiasGrad } from './nn.js';
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
  /**
   * The width of each hidden layer (mlp: default 784, `hiddenLayers` of them; gcn: default 256, one
   * layer). For the mlp an array gives each layer's width instead.
   */
  hidden?: number[] | number;
  /** mlp: how many hidden layers of width `hidden` (default 4). */
  hiddenLayers?: number;
  /** gcn graph size (default 100,000 nodes), edges per node (10), features (128), classes (10). */
  nodes?: number;
  edgesPerNode?: number;
  features?: number;
  classes?: number;
  aggregation?: Aggregation; // default 'spmm'
  dropout?: number; // gcn, default 0.5
  /**
   * mlp on a GPU: replay the full batches' training steps as CUDA Graphs, `graphSteps` steps per
   * graph launch. Needs a capturable allocator (the registry's `capturable` flag, e.g. 'pool'): a graph
   * keeps one step's memory at fixed addresses for the whole run.
   */
  cudaGraph?: boolean;
  /** With cudaGraph: training steps captured into one graph, so one launch runs them all (default 4). */
  graphSteps?: number;
  /** mlp: train on the first N training images / validate on the first M test images (default all). */
  trainSubset?: number;
  testSubset?: number;
  /** Called after every step (mlp) or epoch (gcn), from the training loop. */
  onProgress?: (progress: Progress) => void;
  /**
   * Called with an index into `allocationTags` whenever the trainer moves to another phase (setup,
   * forward, loss, backward, optimizer, validation), e.g. a tracker's setTag, so that recorded
   * allocation events say what they were for.
   */
  tagAllocations?: (tag: number) => void;
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
  const epochs = options.epochs ?? commonDefaults.epochs;
  checkPositiveInt(epochs, 'epochs');
  const seed = options.seed ?? commonDefaults.seed;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`Expected non-negative integer for seed but received ${seed}`);
  const owned = typeof options.allocator === 'string';
  const allocator = typeof options.allocator === 'string' ? createAllocator(options.allocator, options.allocatorOptions ?? {}) : options.allocator;
  const rt = new Runtime(allocator, trainerStream(allocator.device, 'main'));
  rt.setTagger(options.tagAllocations);
  try {
    rt.tag('setup');
    checkTrainingFits(options, allocator); // sizes past the kernels' limits or the memory there: refused before any allocation
    rt.bindWorkspace(rt.stream); // the ops' scratch and cuBLAS workspace come from the run's allocator too
    return options.model === 'mlp' ? trainMlp(rt, options, epochs, seed) : trainGcn(rt, options, epochs, seed);
  } finally {
    rt.dispose();
    if (owned) allocator.dispose();
  }
}

/** Waits for earlier work, resets the allocator's peaks, and starts the epoch's clock. */
function beginEpoch(rt: Runtime): { before: AllocatorStats; t0: number } {
  rt.tag('setup');
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

/**
 * The mlp's full training steps replayed as CUDA Graphs. A step reads its batch's indices at
 * perm + counter·batch, writes its loss and correct count to slot `counter` of fixed arrays and
 * advances the counter on the device, so every step is the same launch sequence with the same
 * arguments: `graphSteps` of them are captured into one graph, and the host launches a handful of
 * graphs per epoch with no copies around them. The weight gradients and updates run on a second
 * stream beside the chain of input gradients, which the graph keeps as parallel branches.
 */
class GraphedSteps {
  /** The epoch's order, the step counter, and the per-step losses and correct counts (fixed addresses). */
  readonly perm: Tensor;
  readonly counter: Tensor;
  readonly losses: Tensor;
  readonly correct: Tensor;
  readonly side: Stream;
  /** Whether a step ran eagerly before the first capture. */
  warmedUp = false;
  readonly #graphs = new Map<number, { graph: CudaGraph; tensors: Tensor[] }>();

  constructor(
    private readonly rt: Runtime,
    nTrain: number,
    steps: number,
    private readonly graphSteps: number,
  ) {
    this.perm = rt.keep(rt.empty([nTrain], 'i32'));
    this.counter = rt.keep(rt.zeros([1], 'i32'));
    this.losses = rt.keep(rt.zeros([steps]));
    this.correct = rt.keep(rt.zeros([steps], 'i32'));
    this.side = trainerStream(rt.allocator.device, 'side');
    rt.bindWorkspace(this.side);
  }

  /** Writes the epoch's order and resets the counter to step 0; returns the order's tensor. */
  beginEpoch(order: Int32Array): Tensor {
    this.perm.write(order);
    this.rt.ops.fillI32(this.rt.onDevice, this.rt.s, this.counter.ptr, 1, 0);
    return this.perm;
  }

  /** Runs `graphSteps` steps, or one when fewer remain, with one graph launch; returns how many. */
  launch(remaining: number, step: () => void): number {
    let n = remaining >= this.graphSteps ? this.graphSteps : 1;
    let entry = this.#graphs.get(n) ?? this.#capture(n, step);
    if (!entry) {
      n = 1; // the pool handed the captured steps different blocks: one step per graph instead
      entry = this.#graphs.get(1) ?? this.#capture(1, step)!;
    }
    entry.graph.launch();
    return n;
  }

  /**
   * Captures `count` steps into one graph. Each step but the last frees its tensors when it ends
   * (in stream order, after all of its work, on the stream the next step allocates on), so the
   * pool hands every step the same blocks, and the last step's tensors stay allocated for the
   * graph's life. Undefined (and nothing kept) if a step got other addresses than the last one,
   * since the graph would then use memory it does not hold.
   */
  #capture(count: number, step: () => void): { graph: CudaGraph; tensors: Tensor[] } | undefined {
    const { rt } = this;
    const earlier: string[] = [];
    let kept: Tensor[] = [];
    const addresses = (ts: Tensor[]) => ts.map((t) => `${t.ptr}+${t.bytes}`).join(',');
    let graph: CudaGraph;
    try {
      graph = CudaGraph.capture(rt.stream, () => {
        for (let k = 0; k < count; k++) {
          const made = rt.collect(step);
          if (k + 1 === count) {
            kept = made;
          } else {
            earlier.push(addresses(made));
            for (const t of made) t.dispose();
          }
        }
      });
    } catch (e) {
      for (const t of kept) t.dispose();
      throw e;
    }
    const last = addresses(kept);
    if (!earlier.every((a) => a === last)) {
      graph.destroy();
      for (const t of kept) t.dispose();
      return undefined;
    }
    const entry = { graph, tensors: kept };
    this.#graphs.set(count, entry);
    return entry;
  }

  /** Destroys the graphs, then frees their memory and the fixed tensors (the stream must be idle). */
  dispose(): void {
    for (const { graph, tensors } of this.#graphs.values()) {
      graph.destroy();
      for (const t of tensors) t.dispose();
    }
    this.#graphs.clear();
    for (const t of [this.perm, this.counter, this.losses, this.correct]) t.dispose();
    this.side.synchronize();
  }
}

const trainerStreams = new Map<string, Stream>();

/**
 * The trainer's streams on a device ('main': the runtime's; 'side': the second stream of graph
 * mode), made once and kept for the process's life (each run binds a workspace from its own
 * allocator to the streams it uses, and gives it back when it ends). A caching allocator keeps its free blocks
 * per stream, so an allocator that outlives a run (one passed to train() and used again) must never
 * be left holding blocks of a stream that has been destroyed: with one stream per device, later
 * runs find those blocks on their own stream.
 */
function trainerStream(device: Device, role: 'main' | 'side'): Stream {
  const key = `${device.id}/${role}`;
  let stream = trainerStreams.get(key);
  if (!stream) {
    stream = Stream.create(device);
    trainerStreams.set(key, stream);
  }
  return stream;
}

/** True when the registry says strategy `name` can allocate inside a CUDA-graph capture. */
function isCapturable(name: string): boolean {
  return hasAllocator(name) && strategyInfo(name).capturable;
}

function trainMlp(rt: Runtime, o: TrainOptions, epochs: number, seed: number): TrainResult {
  if ((o.dataset ?? mlpDefaults.dataset) !== 'mnist') throw new RangeError(`Expected 'mnist' for dataset of the mlp but received '${o.dataset}'`);
  const batch = o.batchSize ?? mlpDefaults.batchSize;
  checkPositiveInt(batch, 'batchSize');
  const lr = o.lr ?? mlpDefaults.lr;
  const hidden = mlpHiddenWidths(o.hidden, o.hiddenLayers);
  for (const h of hidden) checkPositiveInt(h, 'hidden');
  // CUDA Graph mode: checked before anything is allocated.
  const graphMode = o.cudaGraph === true;
  if (graphMode && !rt.onDevice) throw new RangeError('Expected a GPU allocator for cudaGraph: CUDA Graphs need a CUDA device');
  if (graphMode && !isCapturable(rt.allocator.name)) {
    const capturable = listAllocators().filter((a) => a.capturable).map((a) => a.name);
    throw new RangeError(
      `Expected a capturable allocator (registered with capturable: true; here: ${capturable.join(', ') || 'none'}) for cudaGraph but received '${rt.allocator.name}': a captured step must allocate without driver calls`,
    );
  }
  const graphSteps = o.graphSteps ?? mlpDefaults.graphSteps;
  checkPositiveInt(graphSteps, 'graphSteps');
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
  const optimizer = new SGD(rt, model.params, lr);
  const steps = Math.ceil(nTrain / batch);
  const fullSteps = Math.floor(nTrain / batch);
  const evalBatch = 1000;
  const evalSteps = Math.ceil(nTest / evalBatch);
  const records: EpochRecord[] = [];
  const ops = rt.ops;

  /**
   * One training step on `rows` rows listed at `index` (from row (*step)·rows on, when `step`, the
   * address of a device-side step counter, is not 0), writing its loss and correct count to
   * lossOut[k] and correctOut[k] (k = *step, or 0). With `side`, a stream, the weight gradients and
   * updates overlap the input gradients (Mlp.backwardAndStep); the results are the same.
   */
  const step = (index: number, rows: number, lossOut: number, correctOut: number, stepCounter = 0, side?: Stream) => {
    const x = rt.empty([rows, features]);
    const y = rt.empty([rows], 'i32');
    ops.gatherBatch(rt.onDevice, rt.s, xTrain.ptr, yTrain.ptr, index, stepCounter, rows, features, x.ptr, y.ptr);
    rt.tag('forward');
    const logits = model.forward(x);
    rt.tag('loss');
    const dLogits = softmaxCrossEntropyBiasGrad(rt, logits, y, model.output.bias.grad, lossOut, correctOut, stepCounter);
    rt.tag('backward');
    if (!side) {
      model.backward(dLogits, true);
      rt.tag('optimizer');
      optimizer.step();
      return;
    }
    if (stepCounter) {
      ops.streamWait(rt.onDevice, side.handle, rt.s); // the counter's last reader has run
      ops.addI32(rt.onDevice, side.handle, stepCounter, 1);
    }
    model.backwardAndStep(dLogits, optimizer, side.handle, true);
  };

  const graphs = graphMode ? new GraphedSteps(rt, nTrain, steps, graphSteps) : undefined;
  /** A full step of graph mode: its batch, loss slot and counter all come from the device. */
  const graphStep = graphs ? () => step(graphs.perm.ptr, batch, graphs.losses.ptr, graphs.correct.ptr, graphs.counter.ptr, graphs.side) : undefined;

  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      const { before, t0 } = beginEpoch(rt);
      const order = permutation(nTrain, seed * 1000 + epoch);
      const reportSteps = (first: number, count: number) => {
        if (o.onStep) {
          const stats = allocator.stats();
          for (let k = first; k < first + count; k++) o.onStep(k, stats);
        }
        o.onProgress?.({ epoch, epochs, step: first + count, steps });
      };
      const { losses, correct, testCorrect } = rt.scope(() => {
        // eager: the epoch's order, losses and counts in tensors of the epoch; graph mode: in the
        // fixed tensors that the captured steps read and write
        const perm = graphs ? graphs.beginEpoch(order) : rt.fromArray(order, [nTrain]);
        const lossBuf = graphs ? graphs.losses : rt.empty([steps]);
        const correctBuf = graphs ? graphs.correct : rt.empty([steps], 'i32');
        let s = 0;
        if (graphs && graphStep && fullSteps > 0) {
          if (!graphs.warmedUp) {
            // one step eagerly first: segments, library handles, events and caches exist before capture
            rt.scope(graphStep);
            graphs.warmedUp = true;
            reportSteps(s++, 1);
          }
          while (s < fullSteps) {
            const n = graphs.launch(fullSteps - s, graphStep);
            reportSteps(s, n);
            s += n;
          }
        }
        for (; s < steps; s++) {
          const rows = Math.min(batch, nTrain - s * batch);
          rt.scope(() => step(perm.ptr + 4 * s * batch, rows, lossBuf.ptr + 4 * s, correctBuf.ptr + 4 * s));
          reportSteps(s, 1);
        }
        // validation, part of the epoch
        rt.tag('validation');
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
    graphs?.dispose();
    optimizer.dispose();
    model.dispose();
    for (const t of [xTrain, yTrain, xTest, yTest]) t.dispose();
  }
  return { model: 'mlp', dataset: 'mnist', allocator: allocator.name, device: allocator.device.id, epochs: records, parameters: model.params.size, samplesPerEpoch: nTrain };
}

function trainGcn(rt: Runtime, o: TrainOptions, epochs: number, seed: number): TrainResult {
  const dataset = o.dataset ?? gcnDefaults.dataset;
  if (dataset !== 'seed' && dataset !== 'sbm') throw new RangeError(`Expected 'seed' or 'sbm' for dataset of the gcn but received '${dataset}'`);
  const hidden = gcnHiddenWidth(o.hidden);
  checkPositiveInt(hidden ?? 0, 'hidden');
  const aggregation = o.aggregation ?? gcnDefaults.aggregation;
  if (aggregation !== 'spmm' && aggregation !== 'scatter') {
    throw new RangeError(`Expected 'spmm' or 'scatter' for aggregation but received '${String(aggregation)}'`);
  }
  const graphDefault = graphDefaults(dataset);
  const nodes = o.nodes ?? graphDefault.nodes;
  checkPositiveInt(nodes, 'nodes');
  const { allocator } = rt;
  const graph: Graph =
    dataset === 'seed'
      ? seedGraph(rt, { nodes, edgesPerNode: o.edgesPerNode ?? gcnDefaults.seed.edgesPerNode, features: o.features ?? graphDefault.features, classes: o.classes ?? graphDefault.classes, seed })
      : sbmGraph(rt, { nodes, classes: o.classes ?? graphDefault.classes, features: o.features ?? graphDefault.features, seed });
  if (aggregation === 'spmm') graph.dropEdgeLists();
  const model = new Gcn(rt, graph.numFeatures, hidden!, graph.numClasses, o.dropout ?? gcnDefaults.dropout, aggregation, seed);
  const optimizer = new Adam(rt, model.params, o.lr ?? gcnDefaults.lr);
  const n = graph.numNodes;
  const records: EpochRecord[] = [];
  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      const { before, t0 } = beginEpoch(rt);
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
      rt.synchronize();
      const epochMs = performance.now() - t0;
      const stats = epochStats(allocator, before);
      o.onStep?.(epoch, allocator.stats());
      const raw = scalars.toArray() as Int32Array;
      scalars.dispose();
      const loss = new Float32Array(raw.buffer, 0, 1)[0]!;
      rt.tag('validation');
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
