/**
 * The mlp's memory plan: data, SGD's parameters and a step's activations (see
 * training/memory-estimate.ts for what an estimate is).
 * @module
 */
import { count, denseParameters, f32, positiveInt, type MemoryEstimate } from '../../training/memory-estimate.js';
import { mlpDefaults, mlpHiddenWidths } from './defaults.js';
import type { MlpTrainOptions, MlpTrainingShape } from './options.js';

/** What of the mlp's options decides its memory. */
export type MlpShapeOptions = Pick<Partial<MlpTrainOptions>, 'hidden' | 'hiddenLayers' | 'trainSubset' | 'testSubset' | 'batchSize'>;

/** train()'s defaults filled in, and the sizes checked. */
export function mlpShape(o: MlpShapeOptions): MlpTrainingShape {
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

/** The estimated peak of the mlp's shape. */
export function estimateMlp(shape: MlpTrainingShape): MemoryEstimate {
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
