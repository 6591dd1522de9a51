/**
 * The mlp on MNIST: mini-batch SGD, eager or with the steps replayed as CUDA Graphs, with activation
 * checkpointing, nano-batches and trainer-inserted prefetch as options.
 * @module
 */
import { listAllocators } from '@gpumem/allocator-core';
import { xorshift32 } from '@gpumem/allocator-core/tools';
import type { Runtime } from '../../framework/runtime.js';
import { mlpDefaults, mlpHiddenWidths } from './defaults.js';
import { SGD, softmaxCrossEntropy, softmaxCrossEntropyBiasGrad } from '../../framework/nn.js';
import { Mlp, type MlpStepPlan } from '../../models/mlp.js';
import type { Tensor } from '../../framework/tensor.js';
import { loadMnist, normalisedPixels } from '../../datasets/mnist.js';
import { GraphedSteps } from '../../training/graphed-steps.js';
import { beginEpoch, checkPositiveInt, epochStats, isCapturable, sum } from '../../training/train-common.js';
import type { WorkloadRun, RunContext } from '../workload.js';
import type { MlpTrainOptions } from './options.js';
import { epochRecordHead } from '../epoch-record.js';
import type { Communicator } from '@gpumem/distributed';

/** xorshift32: the epoch's shuffle order, from the seed. */
function permutation(n: number, seed: number): Int32Array {
  const p = new Int32Array(n);
  for (let i = 0; i < n; i++) p[i] = i;
  const next = xorshift32((seed * 2654435761 + 12345) >>> 0 || 1);
  for (let i = n - 1; i > 0; i--) {
    const j = next() % (i + 1);
    const t = p[i]!;
    p[i] = p[j]!;
    p[j] = t;
  }
  return p;
}

/**
 * The epoch's order for a data-parallel rank's captured steps: its slice [first, rows] of each of
 * the `fullSteps` steps, one after another, so that step k reads rows k·rows .. (k+1)·rows - 1.
 */
export function rankOrder(order: Int32Array, fullSteps: number, batch: number, [first, rows]: [number, number]): Int32Array {
  const out = new Int32Array(order.length);
  for (let k = 0; k < fullSteps; k++) out.set(order.subarray(k * batch + first, k * batch + first + rows), k * rows);
  return out;
}

/**
 * This rank's share of each step's mean loss over `nTrain` rows in steps of `batch`: from the mean
 * losses of its nano-batches of the step (slot s·nanoBatches + j of `raw`), each weighted by its
 * rows over the step's rows, so that the ranks' shares add up to the step's mean loss (0 where the
 * rank has no rows of the step). `slice` gives the rank's [first row, rows] of a step of that many
 * rows ([0, rows] on one device).
 */
export function rankStepLosses(
  raw: ArrayLike<number>,
  nTrain: number,
  batch: number,
  nanoBatches: number,
  slice: (stepRows: number) => [number, number],
): number[] {
  return Array.from({ length: Math.ceil(nTrain / batch) }, (_, s) => {
    const stepRows = Math.min(batch, nTrain - s * batch);
    const [, rows] = slice(stepRows);
    return rows === 0
      ? 0
      : nanoBatchSlices(rows, nanoBatches).reduce((sum, [, r], j) => sum + (r / stepRows) * raw[s * nanoBatches + j]!, 0);
  });
}

/**
 * A step's rows as `count` slices of near-equal rows (the first `rows % count` one row longer), or
 * fewer when the step has fewer rows: [first row, rows] of each.
 */
export function nanoBatchSlices(rows: number, count: number): Array<[number, number]> {
  const k = Math.min(count, rows);
  const base = Math.floor(rows / k);
  const longer = rows % k;
  const slices: Array<[number, number]> = [];
  for (let j = 0, start = 0; j < k; j++) {
    const n = base + (j < longer ? 1 : 0);
    slices.push([start, n]);
    start += n;
  }
  return slices;
}

/**
 * The loss of a pass over `logits`' rows, which are all of a step's `stepRows` rows or a slice of
 * them (a nano-batch, or a data-parallel rank's share), and its gradient dLogits, scaled by
 * rows/stepRows for a slice so that the slices' gradients add up to that of the step's mean loss.
 * The slice's mean loss and correct count go to lossOut[k] and correctOut[k], where k is 0, or the
 * value of the i32 step counter at `stepCounter` (an address, 0 for none) when the kernel runs.
 * With the whole step or a counter, the loss kernel also writes the output layer's bias gradient
 * to `outputBiasGrad` (overwriting it: the step's first pass only), and outputBiasGradDone says so.
 */
export function sliceLoss(
  rt: Runtime,
  logits: Tensor,
  labels: Tensor,
  outputBiasGrad: Tensor,
  stepRows: number,
  lossOut: number,
  correctOut: number,
  stepCounter = 0,
): { dLogits: Tensor; outputBiasGradDone: boolean } {
  const rows = logits.shape[0]!;
  if (rows === stepRows) {
    return {
      dLogits: softmaxCrossEntropyBiasGrad(rt, logits, labels, outputBiasGrad, lossOut, correctOut, stepCounter),
      outputBiasGradDone: true,
    };
  }
  const share = rows / stepRows;
  if (stepCounter) {
    // A rank's slice of a captured data-parallel step: softmaxCrossEntropy has no step counter and
    // would write every step's loss and count to slot 0 (the epoch's losses then read the last
    // step's loss at step 0 and zeros after it), so the counter-indexed kernel writes the slot,
    // and its bias gradient (the column sums of the unscaled dLogits) is scaled like dLogits: the
    // same values as the column sums of the scaled dLogits, bit for bit when rows/stepRows is a
    // power of two (two ranks, an even batch), else up to rounding.
    const dLogits = softmaxCrossEntropyBiasGrad(rt, logits, labels, outputBiasGrad, lossOut, correctOut, stepCounter);
    rt.ops.scale(rt.onDevice, rt.s, share, dLogits.ptr, dLogits.ptr, dLogits.size);
    rt.ops.scale(rt.onDevice, rt.s, share, outputBiasGrad.ptr, outputBiasGrad.ptr, outputBiasGrad.size);
    return { dLogits, outputBiasGradDone: true };
  }
  const dLogits = softmaxCrossEntropy(rt, logits, labels, rows, lossOut, correctOut);
  rt.ops.scale(rt.onDevice, rt.s, share, dLogits.ptr, dLogits.ptr, dLogits.size);
  return { dLogits, outputBiasGradDone: false };
}

/**
 * The mlp's activation options (checkpoint, nanoBatches, layerPrefetch) checked against the model
 * and the batch, with their defaults; before anything is allocated.
 */
function checkMlpPlan(
  o: MlpTrainOptions,
  layers: number,
  batch: number,
  graphMode: boolean,
): { checkpoint: number; nanoBatches: number; layerPrefetch: boolean } {
  const checkpoint = o.checkpoint ?? mlpDefaults.checkpoint;
  if (!Number.isSafeInteger(checkpoint) || checkpoint < 0 || checkpoint > layers) {
    throw new RangeError(
      `Expected an integer from 0 (off) to ${layers} (the mlp's layers: ${layers - 1} hidden and the output layer) for checkpoint but received ${String(checkpoint)}`,
    );
  }
  const nanoBatches = o.nanoBatches ?? mlpDefaults.nanoBatches;
  if (!Number.isSafeInteger(nanoBatches) || nanoBatches < 1 || nanoBatches > batch) {
    throw new RangeError(`Expected an integer from 1 to the batch size (${batch}) for nanoBatches but received ${String(nanoBatches)}`);
  }
  const layerPrefetch = o.layerPrefetch ?? false;
  if (typeof layerPrefetch !== 'boolean') throw new TypeError(`Expected a boolean for layerPrefetch but received ${typeof layerPrefetch}`);
  if (graphMode && nanoBatches > 1) {
    throw new RangeError(
      `Expected nanoBatches 1 with cudaGraph but received ${nanoBatches}: a captured step reads its batch and writes its loss by the step counter, one slot a step; drop cudaGraph or nanoBatches`,
    );
  }
  if (graphMode && layerPrefetch) {
    throw new RangeError(
      'Expected layerPrefetch off with cudaGraph: prefetches are not captured into graphs (and a capturable allocator has nothing to move); drop cudaGraph or layerPrefetch',
    );
  }
  return { checkpoint, nanoBatches, layerPrefetch };
}

/** CUDA Graph mode's needs, checked before anything is allocated: a device, a capturable allocator and, over ranks, capturable collectives. */
function checkGraphMode(rt: Runtime, comm: Communicator | undefined): void {
  if (!rt.onDevice) throw new RangeError('Expected a GPU allocator for cudaGraph: CUDA Graphs need a CUDA device');
  if (comm && !comm.capturable) {
    throw new RangeError(
      `Expected a communicator whose collectives can be captured (nccl) with cudaGraph but received '${comm.backend}': drop cudaGraph or use the nccl communicator`,
    );
  }
  if (!isCapturable(rt.allocator.name)) {
    const capturable = listAllocators()
      .filter((a) => a.capturable)
      .map((a) => a.name);
    throw new RangeError(
      `Expected a capturable allocator (registered with capturable: true; here: ${capturable.join(', ') || 'none'}) for cudaGraph but received '${rt.allocator.name}': a captured step must allocate without driver calls`,
    );
  }
}

/**
 * The mlp; with `comm`, this rank's part of a data-parallel run: every global batch is split into
 * one slice per rank (as nano-batches are), each rank's gradients are those of its slice's share
 * of the batch's mean loss, and one all-reduce of the flat gradient buffer sums them before every
 * rank's identical optimizer step (inside the captured step in graph mode). Validation is split
 * the same way. Each record then holds this rank's share (see RankShare).
 */
export function prepareMlp(rt: Runtime, o: MlpTrainOptions, { epochs, seed, comm }: RunContext): WorkloadRun {
  if ((o.dataset ?? mlpDefaults.dataset) !== 'mnist')
    throw new RangeError(`Expected 'mnist' for dataset of the mlp but received '${o.dataset}'`);
  const batch = o.batchSize ?? mlpDefaults.batchSize;
  checkPositiveInt(batch, 'batchSize');
  if (comm && batch < comm.size)
    throw new RangeError(
      `Expected batchSize of at least the ranks (${comm.size}) but received ${batch}: every rank takes a slice of each batch`,
    );
  const lr = o.lr ?? mlpDefaults.lr;
  const hidden = mlpHiddenWidths(o.hidden, o.hiddenLayers);
  for (const h of hidden) checkPositiveInt(h, 'hidden');
  // CUDA Graph mode: checked before anything is allocated.
  const graphMode = o.cudaGraph === true;
  const { checkpoint, nanoBatches, layerPrefetch } = checkMlpPlan(o, hidden.length + 1, batch, graphMode);
  const plan: MlpStepPlan = { checkpoint, prefetch: layerPrefetch };
  if (graphMode) checkGraphMode(rt, comm);
  const graphSteps = o.graphSteps ?? mlpDefaults.graphSteps;
  checkPositiveInt(graphSteps, 'graphSteps');
  const mnist = loadMnist();
  const nTrain = Math.min(o.trainSubset ?? mnist.train.count, mnist.train.count);
  const nTest = Math.min(o.testSubset ?? mnist.test.count, mnist.test.count);
  checkPositiveInt(nTrain, 'trainSubset');
  checkPositiveInt(nTest, 'testSubset');
  const features = mnist.rows * mnist.cols;
  const { allocator } = rt;

  // Data lives on the device for the whole run (as the PyTorch baselines' "data already on the GPU").
  const xTrain = rt.keep(rt.fromArray(normalisedPixels(mnist.train, nTrain), [nTrain, features]));
  const yTrain = rt.keep(rt.fromArray(Int32Array.from(mnist.train.labels.subarray(0, nTrain)), [nTrain]));
  const xTest = rt.keep(rt.fromArray(normalisedPixels(mnist.test, nTest), [nTest, features]));
  const yTest = rt.keep(rt.fromArray(Int32Array.from(mnist.test.labels.subarray(0, nTest)), [nTest]));
  const model = new Mlp(rt, [features, ...hidden, 10], seed);
  comm?.broadcast(model.params.values.ptr, model.params.size, 0, rt.stream); // rank 0's initial values everywhere
  const [rank, ranks] = comm ? [comm.rank, comm.size] : [0, 1];
  /** This rank's slice [first row, rows] of a step of `stepRows` rows ([0, 0] when the step has fewer rows than ranks). */
  const rankSlice = (stepRows: number): [number, number] => nanoBatchSlices(stepRows, ranks)[rank] ?? [0, 0];
  const allReduceGrads = () =>
    comm && rt.tagged('communication', () => comm.allReduce(model.params.grads.ptr, model.params.size, rt.stream));
  const optimizer = new SGD(rt, model.params, lr);
  const steps = Math.ceil(nTrain / batch);
  const fullSteps = Math.floor(nTrain / batch);
  const evalBatch = 1000;
  const evalSteps = Math.ceil(nTest / evalBatch);
  const ops = rt.ops;
  const stepLosses = (raw: Float32Array): number[] => rankStepLosses(raw, nTrain, batch, nanoBatches, rankSlice);

  /**
   * Forward, loss and backward of `rows` rows listed at `index` (from row (*stepCounter)·rows on,
   * when `stepCounter`, the address of a device-side step counter, is not 0), which are all of a
   * step's `stepRows` rows or one nano-batch of them, writing the loss and correct count of these
   * rows to lossOut[k] and correctOut[k] (k = *stepCounter, or 0). The gradients are written when
   * `first`, else added to. A nano-batch's loss gradient is scaled by rows/stepRows, so that the
   * nano-batches' gradients add up to the gradient of the whole step's mean loss. Activations are
   * kept, dropped and recomputed as `plan` says, and freed as soon as nothing later needs them.
   */
  const pass = (index: number, rows: number, stepRows: number, lossOut: number, correctOut: number, first: boolean, stepCounter = 0) => {
    const x = rt.empty([rows, features]);
    const y = rt.empty([rows], 'i32');
    ops.gatherBatch(rt.onDevice, rt.s, xTrain.ptr, yTrain.ptr, index, stepCounter, rows, features, x.ptr, y.ptr);
    rt.tag('forward');
    const { logits, kept } = model.forwardTraining(x, plan);
    rt.tag('loss');
    if (stepCounter && !first) throw new Error('a step read by the step counter has one pass (nanoBatches 1 with cudaGraph)');
    const { dLogits, outputBiasGradDone } = sliceLoss(rt, logits, y, model.output.bias.grad, stepRows, lossOut, correctOut, stepCounter);
    if (stepCounter) ops.addI32(rt.onDevice, rt.s, stepCounter, 1); // after its last reader, the loss
    logits.dispose();
    y.dispose();
    rt.tag('backward');
    model.backwardTraining(kept, dLogits, plan, { outputBiasGradDone, accumulate: !first });
    x.dispose();
  };

  /**
   * One eager training step: step s of the epoch's order `perm`, its nano-batches one after
   * another (each with its loss and correct count in slot s·nanoBatches + j), then one update.
   */
  const eagerStep = (perm: Tensor, s: number, lossBuf: Tensor, correctBuf: Tensor) => {
    const stepRows = Math.min(batch, nTrain - s * batch);
    const [first, rankRows] = rankSlice(stepRows);
    if (rankRows === 0)
      ops.fillF32(rt.onDevice, rt.s, model.params.grads.ptr, model.params.size, 0); // nothing of this step here
    else {
      nanoBatchSlices(rankRows, nanoBatches).forEach(([start, rows], j) => {
        const slot = 4 * (s * nanoBatches + j);
        rt.scope(() =>
          pass(perm.ptr + 4 * (s * batch + first + start), rows, stepRows, lossBuf.ptr + slot, correctBuf.ptr + slot, j === 0),
        );
      });
    }
    allReduceGrads();
    rt.tag('optimizer');
    optimizer.step();
  };

  /**
   * A full step of graph mode without checkpointing: the weight gradients and updates run on the
   * `side` stream beside the input gradients (Mlp.backwardAndStep), so the step keeps its tensors
   * until its end; the results are the eager step's. Its batch, loss slot and counter all come from
   * the device.
   */
  const sideStep = (g: GraphedSteps) => {
    const x = rt.empty([batch, features]);
    const y = rt.empty([batch], 'i32');
    ops.gatherBatch(rt.onDevice, rt.s, xTrain.ptr, yTrain.ptr, g.perm.ptr, g.counter.ptr, batch, features, x.ptr, y.ptr);
    rt.tag('forward');
    const logits = model.forward(x);
    rt.tag('loss');
    const dLogits = softmaxCrossEntropyBiasGrad(rt, logits, y, model.output.bias.grad, g.losses.ptr, g.correct.ptr, g.counter.ptr);
    rt.tag('backward');
    ops.streamWait(rt.onDevice, g.side.handle, rt.s); // the counter's last reader has run
    ops.addI32(rt.onDevice, g.side.handle, g.counter.ptr, 1);
    model.backwardAndStep(dLogits, optimizer, g.side.handle, true);
  };

  const graphs = graphMode ? new GraphedSteps(rt, nTrain, steps, graphSteps) : undefined;
  /**
   * A full step of graph mode. With checkpointing, the eager step's pass on the main stream only (its
   * tensors are freed mid-step, which the side stream's readers would race with), then the update.
   */
  const [, graphRows] = rankSlice(batch); // data parallel: this rank's rows of every full step
  const graphStep = graphs
    ? comm
      ? () => {
          // data parallel: the rank's slice (its rows of the step laid out one after another in
          // perm, see rankOrder), the gradients' all-reduce, then the update, all captured
          pass(graphs.perm.ptr, graphRows, batch, graphs.losses.ptr, graphs.correct.ptr, true, graphs.counter.ptr);
          allReduceGrads();
          rt.tag('optimizer');
          optimizer.step();
        }
      : checkpoint === 0
        ? () => sideStep(graphs)
        : () => {
            pass(graphs.perm.ptr, batch, batch, graphs.losses.ptr, graphs.correct.ptr, true, graphs.counter.ptr);
            rt.tag('optimizer');
            optimizer.step();
          }
    : undefined;

  /**
   * The epoch's training steps in `order` (in graph mode the full steps as graph launches, then the
   * rest eagerly), each reported as it ends; returns the buffers of their losses and correct counts
   * (tensors of the caller's scope).
   */
  const trainSteps = (order: Int32Array, reportSteps: (first: number, count: number) => void): { lossBuf: Tensor; correctBuf: Tensor } => {
    // eager: the epoch's order, losses and counts in tensors of the epoch; graph mode: in the
    // fixed tensors that the captured steps read and write
    // (nano-batches: one slot per nano-batch, zero where a short last step has fewer)
    // (data parallel: the captured steps read this rank's rows of each full step, one after another)
    const perm = graphs
      ? graphs.beginEpoch(comm ? rankOrder(order, fullSteps, batch, rankSlice(batch)) : order)
      : rt.fromArray(order, [nTrain]);
    const eagerPerm = graphs && comm ? rt.fromArray(order, [nTrain]) : perm;
    const slots = steps * nanoBatches;
    const zeroed = nanoBatches > 1 || comm !== undefined;
    const lossBuf = graphs ? graphs.losses : zeroed ? rt.zeros([slots]) : rt.empty([steps]);
    const correctBuf = graphs ? graphs.correct : zeroed ? rt.zeros([slots], 'i32') : rt.empty([steps], 'i32');
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
      rt.scope(() => eagerStep(eagerPerm, s, lossBuf, correctBuf));
      reportSteps(s, 1);
    }
    return { lossBuf, correctBuf };
  };

  /** Validation, part of the epoch: correct predictions of each evaluation batch (this rank's rows of it), in a tensor of the caller's scope. */
  const evaluate = (): Tensor => {
    rt.tag('validation');
    const testBuf = rt.zeros([evalSteps], 'i32');
    for (let i = 0; i < evalSteps; i++) {
      const [at, rows] = rankSlice(Math.min(evalBatch, nTest - i * evalBatch)); // data parallel: this rank's rows of each
      if (rows === 0) continue;
      rt.scope(() => {
        const logits = model.forward(xTest.rows(i * evalBatch + at, rows));
        const labels = yTest.rows(i * evalBatch + at, rows);
        ops.accuracy(rt.onDevice, rt.s, logits.ptr, labels.ptr, 0, rows, rows, 10, testBuf.ptr + 4 * i);
      });
    }
    return testBuf;
  };

  /** This rank's rows of `total` rows taken `per` at a time (all of them on one device). */
  const rankRows = (total: number, per: number): number =>
    comm
      ? Array.from({ length: Math.ceil(total / per) }, (_, k) => rankSlice(Math.min(per, total - k * per))[1]).reduce((a, b) => a + b, 0)
      : total;

  return {
    dataset: 'mnist',
    parameters: model.params.size,
    samplesPerEpoch: nTrain,
    trainEpoch(epoch) {
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
        const { lossBuf, correctBuf } = trainSteps(order, reportSteps);
        const testBuf = evaluate();
        const raw = lossBuf.toFloat32();
        return { losses: nanoBatches > 1 || comm ? stepLosses(raw) : raw, correct: correctBuf.toArray(), testCorrect: testBuf.toArray() };
      });
      rt.synchronize();
      const epochMs = performance.now() - t0;
      const trainCount = rankRows(nTrain, batch);
      const evalCount = rankRows(nTest, evalBatch);
      return {
        ...epochRecordHead(
          epoch,
          t0,
          epochMs,
          losses,
          trainCount > 0 ? sum(correct) / trainCount : 0,
          evalCount > 0 ? sum(testCorrect) / evalCount : 0,
        ),
        ...epochStats(allocator, before),
        ...(comm
          ? {
              share: {
                lossWeights: Array.from(losses, () => 1),
                trainCorrect: sum(correct),
                trainCount,
                evalCorrect: sum(testCorrect),
                evalCount,
              },
            }
          : {}),
      };
    },
    dispose() {
      rt.synchronize();
      graphs?.dispose();
      optimizer.dispose();
      model.dispose();
      for (const t of [xTrain, yTrain, xTest, yTest]) t.dispose();
    },
  };
}
