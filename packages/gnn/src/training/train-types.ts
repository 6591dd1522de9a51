/**
 * What train() takes and returns.
 * @module
 */
import type { Allocator, AllocatorStats } from '@gpumem/allocator-core';
import type { AllGatherBench, CollectiveTimes } from '@gpumem/distributed';
import type { ModelName, WorkloadTypeMap } from '../workloads/workload.js';

export type { ModelName } from '../workloads/workload.js';

/** The options of every workload, by its name (train()'s `model`): a union of each workload's. */
export type TrainOptions = { [M in ModelName]: WorkloadTypeMap[M] extends { options: infer O } ? O : never }[ModelName];

/** A dataset of a registered workload. */
export type DatasetName = NonNullable<TrainOptions['dataset']>;

/**
 * What train() takes for every workload; each workload's options add their own (see TrainOptions),
 * and train() refuses, set, any option its workload does not declare (Workload.options).
 */
export interface CommonTrainOptions {
  /** The workload (a registered name, e.g. 'mlp' or 'gcn'). */
  model: string;
  /** The workload's dataset (default: its first, e.g. 'mnist' for the mlp, 'random' for the gcn). */
  dataset?: string;
  /** An allocator, or the registered name of one (created and disposed by train). */
  allocator: Allocator | string;
  allocatorOptions?: Record<string, unknown>;
  epochs?: number; // default 1
  /** The learning rate (the workload's default: 0.1 for the mlp's SGD, 0.01 for the gcn's Adam). */
  lr?: number;
  seed?: number; // default 0
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

/**
 * Options of the models built of hidden layers (the mlp and the gcn; the transformer takes neither):
 * each workload that takes them extends this and declares them (Workload.options).
 */
export interface HiddenLayerOptions {
  /**
   * The width of each hidden layer (mlp: default 784, `hiddenLayers` of them; gcn: default 256, one
   * layer). For the mlp an array gives each layer's width instead.
   */
  hidden?: number[] | number;
  /**
   * Trainer-inserted prefetch (for strategies whose prefetch moves memory: uvm, tiered): each
   * layer's operands are prefetched to the device before the layer runs, and activations that
   * only backward needs are pushed to the host after forward and brought back before backward
   * reaches them. Default false (a strategy's own policy only, e.g. uvm's prefetch on allocate).
   */
  layerPrefetch?: boolean;
}

/** `Omit<T, K>` applied to each member of a union `T` (plain `Omit` would flatten the union first). */
export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * train()'s options without the allocator: what a command line or a comparison settles before it
 * has one. A union by model, as TrainOptions is: `train({ ...options, allocator })` takes it.
 */
export type WorkloadTrainOptions = DistributiveOmit<TrainOptions, 'allocator'>;
/** The intersection of a union's members: `A | B` becomes `A & B`. */
export type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/**
 * Every workload's options in one flat object, each optional but the model: what a command line
 * gathers from its flags before it knows which apply. asTrainOptions() makes it train()'s options;
 * train() then refuses, set, what its workload does not take: leave the others undefined.
 */
export type TrainOptionsBag = { model: ModelName; dataset?: DatasetName } & Partial<
  UnionToIntersection<DistributiveOmit<TrainOptions, 'model' | 'dataset'>>
>;

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
  /** mlp: test-set accuracy. gcn: accuracy on the nodes outside the training mask. transformer: next-token accuracy on the held-out batch. */
  accuracy: number;
  /** The evaluation's mean loss, where the workload has one (transformer: on the held-out batch). */
  evaluationLoss?: number;
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
