/**
 * The workloads, by name: each folder holds one (its options, defaults, memory estimate and
 * trainer) and registers it; importing it here is its one registration. To add a workload, add its
 * folder and a line below (see the package README, "Adding a workload").
 * @module
 */
import './mlp/index.js';
import './gcn/index.js';
import './transformer/index.js';

export { registerWorkload, getWorkload, hasWorkload, listWorkloads, asTrainOptions, type AnyWorkload } from './registry.js';
export { OptionNotTakenError, checkOptionsTaken, optionNotTakenProblem } from './taken-options.js';
export type {
  Workload,
  WorkloadData,
  WorkloadRun,
  WorkloadFlag,
  RunContext,
  OptionNames,
  WorkloadTypeMap,
  TakenOptions,
} from './workload.js';
