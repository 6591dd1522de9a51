/**
 * @gpumem/gnn: the shared trainer (device tensors, ops, and its workloads: an MLP on MNIST, a GCN
 * on generated graphs and a GPT-style transformer on sequences of varying length, each registered
 * by name) that runs on any allocator. It depends on the
 * core only: register the strategies you train on by importing their packages (e.g.
 * `import '@gpumem/allocator-pool'`).
 * @packageDocumentation
 */
export { Runtime, allocationTags, type AllocationTag } from './framework/runtime.js';
export { Tensor, type DType } from './framework/tensor.js';
export { Linear, ReLU, Dropout, SGD, Adam, ParameterSet, softmaxCrossEntropy, type Parameter, type Optimizer } from './framework/nn.js';
export { Mlp, type MlpStepPlan } from './models/mlp.js';
export { Gcn, GcnConv, type Aggregation, type InputAggregation } from './models/gcn.js';
export {
  loadMnist,
  mnistAvailable,
  mnistInstallHint,
  parseIdx,
  normalisedPixels,
  DatasetError,
  type Mnist,
  type MnistSplit,
} from './datasets/mnist.js';
export {
  randomGraph,
  sbmGraph,
  graphFromEdges,
  checkEdgeListGraph,
  type Graph,
  type Csr,
  type RandomGraphOptions,
  type SbmOptions,
  type Normalisation,
  type EdgeListGraph,
  type FeatureDtype,
} from './datasets/graphs.js';
export {
  checkTrainingFits,
  estimateTrainingMemory,
  trainingShape,
  InsufficientMemoryError,
  type MemoryEstimate,
  type TrainingShape,
  type ShapeOptions,
} from './training/memory-estimate.js';
export {
  train,
  trainOn,
  type TrainOptions,
  type CommonTrainOptions,
  type HiddenLayerOptions,
  type TrainOptionsBag,
  type WorkloadTrainOptions,
  type DistributiveOmit,
  type UnionToIntersection,
  type TrainResult,
  type EpochRecord,
  type Progress,
  type ModelName,
  type DatasetName,
  type RankShare,
  type RankRecord,
  type RankSamples,
} from './training/train.js';
export {
  trainDistributed,
  trainAsJobRank,
  combineRanks,
  planRanks,
  type DistributedTrainOptions,
  type JobTrainOptions,
  type DistributedRunOptions,
} from './training/train-distributed.js';
/** What trainAsJobRank() is given: this process's place in a job started by torchrun, srun or mpirun. */
export { readEnvRendezvous, RendezvousEnvError, type EnvRendezvous } from '@gpumem/distributed';
export { throttledProgress } from './training/train-common.js';
export { PartitionedGcn } from './models/gcn-partitioned.js';
export { partitionGraph, rowBlock, type GraphPart, type RowBlock, type RemoteRows } from './datasets/graph-part.js';
export type { NativeOps, WorkspaceBytes } from './framework/native-ops.js';
export { commonDefaults } from './training/defaults.js';
export {
  registerWorkload,
  getWorkload,
  hasWorkload,
  listWorkloads,
  asTrainOptions,
  OptionNotTakenError,
  optionNotTakenProblem,
  type TakenOptions,
  type Workload,
  type WorkloadData,
  type WorkloadRun,
  type WorkloadFlag,
  type RunContext,
  type OptionNames,
  type WorkloadTypeMap,
  type AnyWorkload,
} from './workloads/index.js';
export { mlpDefaults, mlpHiddenWidths } from './workloads/mlp/defaults.js';
export type { MlpTrainOptions, MlpTrainingShape } from './workloads/mlp/options.js';
export { gcnDefaults, gcnHiddenWidth, graphDefaults, type GcnDataset } from './workloads/gcn/defaults.js';
export type { DeprecatedGcnDataset, GcnTrainOptions, GcnTrainingShape } from './workloads/gcn/options.js';
export { transformerDefaults } from './workloads/transformer/defaults.js';
export type { TransformerTrainOptions, TransformerTrainingShape } from './workloads/transformer/options.js';
export type { StepShape } from './workloads/transformer/schedule.js';
