/**
 * The mlp on MNIST: mini-batch SGD, eager or with the steps replayed as CUDA Graphs.
 * @module
 */
import { listAllocators, type Stream } from '@gpumem/allocator-core';
import type { Runtime } from './runtime.js';
import { mlpDefaults, mlpHiddenWidths } from './defaults.js';
import { SGD, softmaxCrossEntropyBiasGrad } from './nn.js';
import { Mlp } from './models/mlp.js';
import { loadMnist, normalisedPixels } from './datasets/mnist.js';
import { GraphedSteps } from './graphed-steps.js';
import { beginEpoch, checkPositiveInt, epochStats, isCapturable, mean, sum } from './train-common.js';
import type { EpochRecord, TrainOptions, TrainResult } from './train-types.js';

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

export function trainMlp(rt: Runtime, o: TrainOptions, epochs: number, seed: number): TrainResult {
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
