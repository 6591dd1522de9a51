/**
 * @gpumem/distributed: gpumem across devices. A launcher runs one process per rank and stops them all
 * when one fails; each rank gets a {@link Communicator}: NCCL (loaded at run time) on GPUs, or a
 * host communicator over shared memory. Ranks that another launcher started (torchrun, srun, mpirun)
 * find each other from their environment ({@link readEnvRendezvous}) through a TCP store, and talk
 * through NCCL or a host communicator over TCP ({@link joinJob}).
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
export { readEnvRendezvous, RendezvousEnvError, type EnvRendezvous, type RendezvousSource } from './env-rendezvous.js';
export { TcpStore, RendezvousError, type TcpStoreOptions } from './tcp-store.js';
export { connectTcpCommunicator, type TcpCommunicatorOptions } from './tcp-communicator.js';
export { joinJob, exchangeNcclId, type JoinJobOptions, type JobRank } from './job.js';
