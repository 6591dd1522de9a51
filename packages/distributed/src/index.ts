/**
 * @gpumem/distributed: gpumem across devices. A launcher runs one process per rank and stops them all
 * when one fails; each rank gets a {@link Communicator}: NCCL (loaded at run time) on GPUs, or a
 * host communicator over shared memory.
 * @module
 */
export { CommAbortedError, type CommBackend, type Communicator } from './communicator.js';
export { NcclError } from './comm-errors.js';
export { launchRanks, builtModule, RankFailedError, type LaunchOptions } from './launcher.js';
export { runAsRank, connect, type RankContext } from './rank.js';
export { readRankEnv, rankEnv, type RankPlace } from './protocol.js';
export { ncclLibrary, ncclUniqueId, createNcclCommunicator, type NcclCommunicatorOptions } from './nccl.js';
export {
  createHostCommRegion,
  attachHostCommunicator,
  type HostCommRegion,
  type HostCommRegionOptions,
  type HostCommunicatorOptions,
} from './host-comm.js';
export {
  TimedCommunicator,
  measureAllGather,
  busBandwidth,
  type AllGatherBench,
  type CollectiveKind,
  type CollectiveTime,
  type CollectiveTimes,
} from './timed.js';
