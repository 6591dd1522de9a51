/**
 * What train() takes and returns.
 * @module
 */
import type { Allocator, AllocatorStats } from '@gpumem/allocator-core';
import type { Aggregation } from '../models/gcn.js';
import type { AllGatherBench, CollectiveTimes } from '@gpumem/distributed';

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
  /**
   * mlp: activation checkpointing. Forward keeps the input of every `checkpoint`-th layer only
   * (layers 0, M, 2M, ...) and backward recomputes each segment's activations from its checkpoint
   * before going back through it. The last segment is never dropped (backward starts there, so
   * recomputing it would save nothing at the peak), as PyTorch's checkpoint_sequential does. 1 keeps
   * every layer's input; undefined or 0: off (forward keeps every activation backward needs).
   */
  checkpoint?: number;
  /**
   * mlp: nano-batching. Each batch runs as `nanoBatches` slices (of near-equal rows) whose gradients
   * are accumulated before one optimizer step, so activations are those of one slice at a time.
   * The result equals the whole batch's step up to summation order. Default 1 (off).
   */
  nanoBatches?: number;
  /**
   * Trainer-inserted prefetch (for strategies whose prefetch moves memory: uvm, tiered): each
   * layer's operands are prefetched to the device before the layer runs, and activations that
   * only backward needs are pushed to the host after forward and brought back before backward
   * reaches them. Default false (a strategy's own policy only, e.g. uvm's prefetch on allocate).
   */
  layerPrefetch?: boolean;
  /**
   * gcn: how the input features are stored: 'f32' (default) or 'bf16' (half the bytes; the
   * aggregation reads them as bf16 and accumulates in f32).
   */
  featureDtype?: 'f32' | 'bf16';
  /**
   * gcn: compute the first layer in `rowBlocks` blocks of rows, as (A·x)·W1ᵀ: each block
   * aggregates its rows of A·x into a buffer of one block and multiplies it by W1ᵀ, so neither
   * x·W1ᵀ nor A·x is ever whole; backward recomputes each block of A·x for W1's gradient, and
   * writes the hidden gradient over the hidden activation in place. Undefined: the plain plan
   * (x·W1ᵀ whole, then aggregated).
   */
  rowBlocks?: number;
  /**
   * Train on several devices, one process (rank) each, with trainDistributed(): a number of ranks
   * (on cuda:0 .. cuda:N-1, or on the host for strategies over host memory), or each rank's CUDA
   * ordinal (e.g. [0, 0]: two ranks on one GPU, with the 'host' communicator). The mlp is data
   * parallel (each rank takes its slice of every global batch; gradients are all-reduced), the gcn
   * is split by rows of the graph. train() itself takes 1 or undefined only.
   */
  devices?: number | readonly number[];
  /**
   * With devices: 'nccl' (default on GPUs) or 'host' (shared memory; the default for ranks on the
   * host, and the way to run several ranks on one GPU).
   */
  communicator?: 'nccl' | 'host';
  /** With devices: a rank silent this long fails the run (default 600,000 ms; 0: no limit). */
  timeoutMs?: number;
  /** Called after every step (mlp) or epoch (gcn), from the training loop. */
  onProgress?: (progress: Progress) => void;
  /**
   * Called with an index into `allocationTags` whenever the trainer moves to another phase (setup,
   * forward, loss, backward, optimizer, validation, and the roles features, graph, activations),
   * e.g. a tracker's setTag, so that recorded
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
  /** A rank's record (trainDistributed): its share of the run's loss and counts, summed by combineRanks. */
  share?: RankShare;
}

/**
 * A rank's part of an epoch: the run's step loss is the sum over ranks of lossWeights[s] x
 * losses[s], and the accuracies are the ranks' correct counts over their counts, summed.
 */
export interface RankShare {
  lossWeights: number[];
  trainCorrect: number;
  trainCount: number;
  evalCorrect: number;
  evalCount: number;
}

/** Memory samples of a rank, one after every step (mlp) or epoch (gcn), on the performance.now() clock of the launcher. */
export interface RankSamples {
  tMs: number[];
  allocatedBytes: number[];
  reservedBytes: number[];
}

/** One rank of a run over several devices. */
export interface RankRecord {
  rank: number;
  device: string;
  epochs: EpochRecord[];
  samples: RankSamples;
  /** This rank's peak allocated bytes before its first epoch (its data and part of the graph set up). */
  setupPeakAllocatedBytes?: number;
  /** gcn: rows of other ranks that this rank's edges read (forward: A, backward: Aᵀ), of `remote` rows owned elsewhere. */
  remoteRows?: { forward: number; backward: number; remote: number };
  /** gcn: the collectives of each epoch (training and validation), timed on the rank's stream. */
  exchange?: CollectiveTimes[];
  /** The communicator's own all-gather, measured by this rank before training (measureAllGather). */
  allGatherBench?: AllGatherBench[];
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
  /**
   * Runs over several devices: each rank's records and memory samples. The run's epochs then hold
   * the combined loss and accuracy, the slowest rank's time, and the largest per-device peaks.
   */
  ranks?: RankRecord[];
  /**
   * Peak allocated bytes before the first epoch: the data and graph being set up (each epoch's
   * peaks start afresh). Over several devices: the largest of any one device.
   */
  setupPeakAllocatedBytes?: number;
  /** gcn, one rank's run of several: the other ranks' rows its edges read (see RankRecord). */
  remoteRows?: RankRecord['remoteRows'];
  /** Runs over several devices: the communicator that carried the collectives. */
  communicator?: 'nccl' | 'host';
}
