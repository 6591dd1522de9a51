/**
 * @gpumem/gnn: the shared trainer (device tensors, ops, an MLP on MNIST and a GCN on generated
 * graphs) that runs on any allocator, and the `gpumem` command line.
 * @packageDocumentation
 */
export { allocatorPlugins, loadAllocatorPlugins } from './plugins.js';
export { Runtime } from './runtime.js';
export { Tensor, type DType } from './tensor.js';
export { Linear, ReLU, Dropout, SGD, Adam, ParameterSet, softmaxCrossEntropy, type Parameter, type Optimizer } from './nn.js';
export { Mlp } from './models/mlp.js';
export { Gcn, GcnConv, type Aggregation } from './models/gcn.js';
export { loadMnist, parseIdx, normalisedPixels, DatasetError, type Mnist, type MnistSplit } from './datasets/mnist.js';
export { seedGraph, sbmGraph, type Graph, type Csr, type SeedGraphOptions, type SbmOptions, type Normalisation } from './datasets/graphs.js';
export { train, type TrainOptions, type TrainResult, type EpochRecord, type Progress, type ModelName, type DatasetName } from './train.js';
export type { NativeOps } from './native-ops.js';
