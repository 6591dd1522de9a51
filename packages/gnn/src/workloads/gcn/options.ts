/**
 * The gcn's train() options and memory shape.
 * @module
 */
import type { Aggregation, InputAggregation } from '../../models/gcn.js';
import type { CommonTrainOptions, HiddenLayerOptions } from '../../training/train-types.js';
import type { GcnDataset } from './defaults.js';

/** @deprecated 'seed' is the old name of the 'random' dataset; accepted for one release, use 'random'. */
export type DeprecatedGcnDataset = 'seed';

/** train()'s options for the GCN on a generated graph: full batch, Adam. */
export interface GcnTrainOptions extends CommonTrainOptions, HiddenLayerOptions {
  model: 'gcn';
  /**
   * 'random' (N nodes and 10·N random directed edges, the default) or 'sbm' (a stochastic block
   * model, learnable). 'seed', the old name of 'random', is accepted for one release
   * ({@link DeprecatedGcnDataset}).
   */
  dataset?: GcnDataset | DeprecatedGcnDataset;
  /** Graph size (default 100,000 nodes), edges per node (10), features (128), classes (10). */
  nodes?: number;
  edgesPerNode?: number;
  features?: number;
  classes?: number;
  aggregation?: Aggregation; // default 'spmm'
  /**
   * When the first layer aggregates (the plain plan, see InputAggregation): 'once', A·x taken at
   * setup and (A·x)·W1ᵀ per epoch (the default with 'spmm'), or 'every-epoch', A·(x·W1ᵀ) per epoch:
   * the seed's plan and the allocation pattern of its benchmarks (the default with 'scatter', the
   * only plan it takes: its E x hidden messages are what it is for).
   */
  inputAggregation?: InputAggregation;
  dropout?: number; // default 0.5
  /**
   * How the input features are stored: 'f32' (default) or 'bf16' (half the bytes; the
   * aggregation reads them as bf16 and accumulates in f32).
   */
  featureDtype?: 'f32' | 'bf16';
  /**
   * Compute the first layer in `rowBlocks` blocks of rows, as (A·x)·W1ᵀ: each block
   * aggregates its rows of A·x into a buffer of one block and multiplies it by W1ᵀ, so neither
   * x·W1ᵀ nor A·x is ever whole; backward recomputes each block of A·x for W1's gradient, and
   * writes the hidden gradient over the hidden activation in place. Undefined: the plain plan
   * (x·W1ᵀ whole, then aggregated).
   */
  rowBlocks?: number;
}

/** The gcn's configuration as the memory estimate sees it, with train()'s defaults filled in. */
export interface GcnTrainingShape {
  model: 'gcn';
  dataset: GcnDataset;
  nodes: number;
  edges: number;
  features: number;
  hidden: number;
  classes: number;
  aggregation: 'spmm' | 'scatter';
  /** The plain plan's first-layer aggregation (undefined with rowBlocks: the row-block plan has its own). */
  inputAggregation?: InputAggregation;
  /** The row-block plan's blocks (undefined: the plain plan). */
  rowBlocks?: number;
  featureDtype: 'f32' | 'bf16';
}

declare module '../workload.js' {
  interface WorkloadTypeMap {
    gcn: { options: GcnTrainOptions; shape: GcnTrainingShape };
  }
}
