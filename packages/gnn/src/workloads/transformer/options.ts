/**
 * The transformer's train() options and memory shape.
 * @module
 */
import type { CommonTrainOptions } from '../../training/train-types.js';
import type { StepShape } from './schedule.js';

/**
 * train()'s options for the transformer: a GPT-style decoder trained with Adam on sequences whose
 * length and batch vary per step, from a seeded schedule (see schedule.ts).
 */
export interface TransformerTrainOptions extends CommonTrainOptions {
  model: 'transformer';
  /** 'markov' (the default and only one): tokens from a seeded order-2 Markov chain over the vocabulary. */
  dataset?: 'markov';
  /** Tokens of the vocabulary (default 256). */
  vocab?: number;
  /** The model's width (default 256); a multiple of heads. */
  embed?: number;
  /** Attention heads (default 4). */
  heads?: number;
  /** Transformer blocks (default 4). */
  layers?: number;
  /** The longest sequence the model takes: rows of its position embedding (default 1024); at least maxLen. */
  context?: number;
  /** Each step's sequence length is drawn from [minLen, maxLen] (default 64 to 1024). */
  minLen?: number;
  maxLen?: number;
  /** Each step's batch is drawn from [minBatch, maxBatch] (default 4 to 12). */
  minBatch?: number;
  maxBatch?: number;
  /** Training steps in an epoch (default 20); every epoch runs the same shapes in its own order. */
  stepsPerEpoch?: number;
}

/** The transformer's configuration as the memory estimate sees it, with train()'s defaults filled in. */
export interface TransformerTrainingShape {
  model: 'transformer';
  vocab: number;
  embed: number;
  heads: number;
  layers: number;
  context: number;
  /** The schedule's step with the most activations. */
  largestStep: StepShape;
  /** The held-out batch, kept on the device for the run. */
  heldOut: StepShape;
  stepsPerEpoch: number;
}

declare module '../workload.js' {
  interface WorkloadTypeMap {
    transformer: { options: TransformerTrainOptions; shape: TransformerTrainingShape };
  }
}
