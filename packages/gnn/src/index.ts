/**
 * @gpumem/gnn: the shared trainer (device tensors, ops, an MLP on MNIST and a GCN on generated
 * graphs) that runs on any allocator, and the `gpumem` command line.
 * @packageDocumentation
 */
export { allocatorPlugins, loadAllocatorPlugins } from './plugins.js';
export { Runtime, allocationTags, type AllocationTag } from './runtime.js';
export { Tensor, type DType } from './tensor.js';
export { Linear, ReLU, Dropout, SGD, Adam, ParameterSet, softmaxCrossEntropy, type Parameter, type Optimizer } from './nn.js';
export { Mlp } from './models/mlp.js';
export { Gcn, GcnConv, type Aggregation } from './models/gcn.js';
export { loadMnist, parseIdx, normalisedPixels, DatasetError, type Mnist, type MnistSplit } from './datasets/mnist.js';
export {
  seedGraph,
  sbmGraph,
  graphFromEdges,
  checkEdgeListGraph,
  type Graph,
  type Csr,
  type SeedGraphOptions,
  type SbmOptions,
  type Normalisation,
  type EdgeListGraph,
} from './datasets/graphs.js';
export {
  checkTrainingFits,
  estimateTrainingMemory,
  trainingShape,
  InsufficientMemoryError,
  type MemoryEstimate,
  type TrainingShape,
  type ShapeOptions,
} from './memory-estimate.js';
export { train, type TrainOptions, type TrainResult, type EpochRecord, type Progress, type ModelName, type DatasetName } from './train.js';
export type { NativeOps } from './native-ops.js';
export { compareAllocators, runOne, buildTimeline, bestOf, type CompareOptions, type CompareTrainOptions, type RunRequest } from './compare/compare.js';
export { parseAllocatorSpec, parseAllocatorList, type AllocatorSpec } from './compare/spec.js';
export type { CompareResult, CompareRun, CompareColumn, TimelineSeries, RunStatus } from './compare/types.js';
export { renderHtmlReport } from './compare/report-html.js';
export { toChromeTrace, type ChromeTrace, type TraceEvent } from './compare/trace-json.js';
export {
  readTrace,
  parseTrace,
  writeTrace,
  serializeTrace,
  traceLines,
  formatFromPath,
  TraceFormatError,
  type AllocationTrace,
  type TraceHeader,
  type TraceEvent as AllocationTraceEvent,
  type TraceAction,
  type TraceFileFormat,
  type ReadTrace,
} from './trace/format.js';
export { compileTrace, replayTrace, type CompiledTrace, type ReplayOptions, type ReplayResult, type ReplayLoop } from './trace/replay.js';
