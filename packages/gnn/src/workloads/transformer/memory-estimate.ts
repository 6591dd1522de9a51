/**
 * The transformer's memory plan: Adam's parameters, the data of a step and the held-out batch, and
 * the activations that the schedule's largest step keeps at its peak (see
 * training/memory-estimate.ts for what an estimate is).
 * @module
 */
import { count, f32, type MemoryEstimate } from '../../training/memory-estimate.js';
import { transformerParameters } from '../../models/transformer.js';
import type { TransformerTrainOptions, TransformerTrainingShape } from './options.js';
import { baseShapes, type StepShape } from './schedule.js';
import { checkedTransformerSizes } from './sizes.js';

/**
 * f32 values that a step of B sequences of T tokens keeps live when its loss is computed (the
 * peak of a step: forward has kept everything backward needs, and the logits and their gradient both
 * exist): per block its input, LN1's output, q, k and v, the heads' output, x + Attn, LN2's output
 * (8 x B·T·C), the MLP's two 4C-wide activations (8 x B·T·C), the LayerNorms' mean and rstd
 * (4 x B·T) and the attention probabilities (B·H·T²); then the final LayerNorm's input and output,
 * the logits and their gradient.
 */
function stepActivations(s: Pick<TransformerTrainingShape, 'vocab' | 'embed' | 'heads' | 'layers'>, { batch, length }: StepShape): number {
  const rows = batch * length;
  const perBlock = 16 * rows * s.embed + 4 * rows + batch * s.heads * length * length;
  return s.layers * perBlock + 2 * rows * s.embed + 2 * rows + 2 * rows * s.vocab;
}

/** train()'s defaults filled in, the sizes checked (RangeError), and the schedule's largest step found. */
export function transformerShape(o: Partial<TransformerTrainOptions>): TransformerTrainingShape {
  const sizes = checkedTransformerSizes(o);
  const shapes = baseShapes(sizes, o.seed ?? 0);
  const model = { vocab: sizes.vocab, embed: sizes.embed, heads: sizes.heads, layers: sizes.layers };
  const largestStep = shapes.reduce((a, b) => (stepActivations(model, b) > stepActivations(model, a) ? b : a));
  return {
    model: 'transformer',
    ...model,
    context: sizes.context,
    largestStep,
    heldOut: { batch: sizes.minBatch, length: sizes.maxLen },
    stepsPerEpoch: sizes.stepsPerEpoch,
  };
}

/** The estimated peak of the transformer's shape. */
export function estimateTransformer(shape: TransformerTrainingShape): MemoryEstimate {
  const { largestStep: step, heldOut } = shape;
  const parts = {
    // Adam: values, gradients and the two moments
    parameters: 4 * transformerParameters(shape) * f32,
    // the held-out batch for the run, the step's inputs and targets (i32)
    data: 2 * (heldOut.batch * heldOut.length + step.batch * step.length) * f32,
    activations: stepActivations(shape, step) * f32,
  };
  return {
    total: parts.parameters + parts.data + parts.activations,
    parts,
    describe: `transformer with vocab ${count(shape.vocab)}, embed ${count(shape.embed)}, ${shape.heads} heads, ${shape.layers} layers, largest step ${step.batch} x ${count(step.length)} tokens`,
  };
}
