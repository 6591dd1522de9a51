/**
 * The mlp's train() options and memory shape.
 * @module
 */
import type { CommonTrainOptions, HiddenLayerOptions } from '../../training/train-types.js';

/** train()'s options for the mlp on MNIST: mini-batch SGD. */
export interface MlpTrainOptions extends CommonTrainOptions, HiddenLayerOptions {
  model: 'mlp';
  /** 'mnist' (the default and only one). */
  dataset?: 'mnist';
  /** Default 64. */
  batchSize?: number;
  /** How many hidden layers of width `hidden` (default 4). */
  hiddenLayers?: number;
  /**
   * On a GPU: replay the full batches' training steps as CUDA Graphs, `graphSteps` steps per
   * graph launch. Needs a capturable allocator (the registry's `capturable` flag, e.g. 'pool'): a graph
   * keeps one step's memory at fixed addresses for the whole run.
   */
  cudaGraph?: boolean;
  /** With cudaGraph: training steps captured into one graph, so one launch runs them all (default 4). */
  graphSteps?: number;
  /** Train on the first N training images / validate on the first M test images (default all). */
  trainSubset?: number;
  testSubset?: number;
  /**
   * Activation checkpointing. Forward keeps the input of every `checkpoint`-th layer only
   * (layers 0, M, 2M, ...) and backward recomputes each segment's activations from its checkpoint
   * before going back through it. The last segment is never dropped (backward starts there, so
   * recomputing it would save nothing at the peak), as PyTorch's checkpoint_sequential does. 1 keeps
   * every layer's input; undefined or 0: off (forward keeps every activation backward needs).
   */
  checkpoint?: number;
  /**
   * Nano-batching. Each batch runs as `nanoBatches` slices (of near-equal rows) whose gradients
   * are accumulated before one optimizer step, so activations are those of one slice at a time.
   * The result equals the whole batch's step up to summation order. Default 1 (off).
   */
  nanoBatches?: number;
}

/** The mlp's configuration as the memory estimate sees it, with train()'s defaults filled in. */
export interface MlpTrainingShape {
  model: 'mlp';
  trainRows: number;
  testRows: number;
  features: number;
  hidden: number[];
  classes: number;
  batch: number;
}

declare module '../workload.js' {
  interface WorkloadTypeMap {
    mlp: { options: MlpTrainOptions; shape: MlpTrainingShape };
  }
}
