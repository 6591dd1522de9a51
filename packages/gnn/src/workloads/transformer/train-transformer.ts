/**
 * The transformer's training: each step a batch of the schedule's shape (B sequences of T tokens,
 * drawn per step from the seed), its tokens generated on the host and uploaded into tensors of the
 * runtime, then forward, the mean cross-entropy over all B·T next-token targets, backward and one
 * Adam step. Every activation is allocated at the step's shape and freed within the step, so the
 * allocator sees the varying sizes a fine-tune asks for. The evaluation is the loss and next-token
 * accuracy on a fixed held-out batch.
 * @module
 */
import { Adam, softmaxCrossEntropy } from '../../framework/nn.js';
import type { Runtime } from '../../framework/runtime.js';
import type { Tensor } from '../../framework/tensor.js';
import { Transformer } from '../../models/transformer.js';
import { beginEpoch, epochStats, sum } from '../../training/train-common.js';
import type { RunContext, WorkloadRun } from '../workload.js';
import { transformerDefaults } from './defaults.js';
import type { TransformerTrainOptions } from './options.js';
import { epochRecordHead } from '../epoch-record.js';
import { baseShapes, epochOrder, heldOutTokens, MarkovChain, stepTokens, type StepShape } from './schedule.js';
import { checkedTransformerSizes } from './sizes.js';

/** The f32 whose bits an i32 holds (a loss written into an i32 buffer beside a count). */
function f32FromBits(bits: number): number {
  return new Float32Array(Int32Array.of(bits).buffer)[0]!;
}

/** The transformer, ready for its epochs. Checks every option before anything is allocated. */
export function prepareTransformer(rt: Runtime, o: TransformerTrainOptions, { epochs, seed, comm }: RunContext): WorkloadRun {
  if (comm)
    throw new RangeError(`Expected one device for the transformer but received a run over ${comm.size}: it trains on one device only`);
  const sizes = checkedTransformerSizes(o);
  const lr = o.lr ?? transformerDefaults.lr;
  if (typeof lr !== 'number' || !Number.isFinite(lr) || lr <= 0)
    throw new RangeError(`Expected a positive finite number for lr but received ${String(lr)}`);
  const { vocab, embed, heads, layers, context, stepsPerEpoch } = sizes;
  const chain = new MarkovChain(vocab, seed);
  const shapes = baseShapes(sizes, seed);
  const tokensPerEpoch = shapes.reduce((a, s) => a + s.batch * s.length, 0);
  const heldOutShape: StepShape = { batch: sizes.minBatch, length: sizes.maxLen };
  const heldOutRows = heldOutShape.batch * heldOutShape.length;

  const held = heldOutTokens(chain, seed, heldOutShape);
  const [heldInputs, heldTargets] = rt.tagged('features', () => [
    rt.keep(rt.fromArray(held.inputs, [heldOutRows])),
    rt.keep(rt.fromArray(held.targets, [heldOutRows])),
  ]);
  const model = new Transformer(rt, { vocab, embed, heads, layers, context }, seed);
  const optimizer = new Adam(rt, model.params, lr);

  /** One training step of `shape`, step `runStep` of the run: its loss and correct count go to lossOut and correctOut. */
  const trainStep = (shape: StepShape, runStep: number, lossOut: number, correctOut: number) =>
    rt.scope(() => {
      const { batch: B, length: T } = shape;
      const data = stepTokens(chain, seed, runStep, shape);
      const [inputs, targets] = rt.tagged('features', () => [rt.fromArray(data.inputs, [B * T]), rt.fromArray(data.targets, [B * T])]);
      rt.tag('forward');
      const logits = model.forward(inputs, B, T);
      rt.tag('loss');
      const dLogits = softmaxCrossEntropy(rt, logits, targets, B * T, lossOut, correctOut);
      logits.dispose();
      targets.dispose();
      rt.tag('backward');
      model.backward(dLogits); // frees dLogits and every activation
      inputs.dispose();
      rt.tag('optimizer');
      optimizer.step();
    });

  /** The held-out batch's mean loss and next-token accuracy, without keeping anything for backward. */
  const evaluate = (): { loss: number; accuracy: number } =>
    rt.tagged('validation', () =>
      rt.scope(() => {
        const out = rt.zeros([2], 'i32'); // [loss as f32 bits, correct]
        const logits = model.forward(heldInputs, heldOutShape.batch, heldOutShape.length, false);
        softmaxCrossEntropy(rt, logits, heldTargets, heldOutRows, out.ptr, out.ptr + 4).dispose();
        logits.dispose();
        const [lossBits, correct] = out.toArray() as Int32Array;
        return { loss: f32FromBits(lossBits!), accuracy: correct! / heldOutRows };
      }),
    );

  return {
    dataset: transformerDefaults.dataset,
    parameters: model.params.size,
    samplesPerEpoch: tokensPerEpoch,
    trainEpoch(epoch) {
      const { before, t0 } = beginEpoch(rt);
      const order = epochOrder(stepsPerEpoch, seed, epoch);
      const { losses, correct, evaluation } = rt.scope(() => {
        const lossBuf: Tensor = rt.empty([stepsPerEpoch]);
        const correctBuf: Tensor = rt.empty([stepsPerEpoch], 'i32');
        for (let s = 0; s < stepsPerEpoch; s++) {
          trainStep(shapes[order[s]!]!, epoch * stepsPerEpoch + s, lossBuf.ptr + 4 * s, correctBuf.ptr + 4 * s);
          o.onStep?.(s, rt.allocator.stats());
          o.onProgress?.({ epoch, epochs, step: s + 1, steps: stepsPerEpoch });
        }
        const evaluation = evaluate();
        return { losses: lossBuf.toFloat32(), correct: correctBuf.toArray(), evaluation };
      });
      rt.synchronize();
      const epochMs = performance.now() - t0;
      return {
        ...epochRecordHead(epoch, t0, epochMs, losses, sum(correct) / tokensPerEpoch, evaluation.accuracy),
        evaluationLoss: evaluation.loss,
        ...epochStats(rt.allocator, before),
      };
    },
    dispose() {
      rt.synchronize();
      optimizer.dispose();
      model.dispose();
      heldInputs.dispose();
      heldTargets.dispose();
    },
  };
}
