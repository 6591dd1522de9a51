/**
 * Training over several devices: one process per rank (launchRanks), the mlp data parallel and
 * the gcn split by rows, the collectives through NCCL on GPUs or the host communicator. The ranks'
 * records come back here and are combined into one run's (combineRanks), with each rank's kept.
 * A process that is a rank of a job started by torchrun, srun or mpirun runs its part with
 * trainAsJobRank() instead: the ranks meet at MASTER_ADDR:MASTER_PORT and rank 0 gathers the records.
 * @module
 */
import { deserialize, serialize } from 'node:v8';
import { cudaDevice, deviceCount, hasAllocator, hasCudaDevice, strategyInfo } from '@gpumem/allocator-core';
import { builtModule, joinJob, launchRanks, type CommBackend, type EnvRendezvous } from '@gpumem/distributed';
import { rankWork } from './rank-work.js';
import { checkOptionsTaken } from '../workloads/taken-options.js';
import type { EpochRecord, Progress, RankRecord, TrainOptionsBag, TrainResult } from './train-types.js';

/**
 * trainDistributed()'s options: a workload's train() options (any workload's, in one object; what
 * its model does not take is refused before any rank starts) and how the ranks run.
 */
export type DistributedTrainOptions = Omit<TrainOptionsBag, 'allocator' | 'tagAllocations' | 'onStep' | 'devices'> & DistributedRunOptions;

/** How trainDistributed() runs its ranks. */
export interface DistributedRunOptions {
  /** The registered name of the strategy each rank creates on its device (with allocatorOptions and `device`). */
  allocator: string;
  devices: number | readonly number[];
  /**
   * Modules each rank imports before it creates its allocator: the packages of strategies that are
   * not built in (e.g. '@gpumem/allocator-pool') and plug-ins.
   */
  imports?: readonly string[];
  /** After a rank fails, how long the others get before they are killed (default 3,000 ms). */
  graceMs?: number;
  /** Called with each rank's progress. */
  onRankProgress?: (rank: number, progress: Progress) => void;
  /**
   * Before training, each rank measures the communicator's own all-gather at these sizes (bytes
   * each rank ends with; a buffer from a second allocator of the same strategy), for the exchange's
   * bandwidth to be set against it (RankRecord.allGatherBench). Default: none.
   */
  measureAllGather?: readonly number[];
}

/** What a rank is sent. */
export interface RankPayload {
  options: Omit<DistributedTrainOptions, 'onProgress' | 'onRankProgress' | 'imports' | 'devices' | 'graceMs' | 'measureAllGather'>;
  measureAllGather: number[];
  imports: string[];
  /** When the launcher started the ranks (ms since the Unix epoch, performance.timeOrigin-based): the samples' zero. */
  clockOrigin: number;
}

/** What a rank sends back. */
export interface RankOutcome {
  result: TrainResult;
  samples: RankRecord['samples'];
  exchange?: RankRecord['exchange'];
  allGatherBench?: RankRecord['allGatherBench'];
}

/** The ranks' devices and communicator for `o`: host ranks for strategies over host memory or without a GPU. */
export function planRanks(o: Pick<DistributedTrainOptions, 'allocator' | 'devices' | 'communicator'>): {
  devices: number[];
  backend: CommBackend;
} {
  const { devices } = o;
  const onHost = (hasAllocator(o.allocator) && strategyInfo(o.allocator).hostMemory) || !hasCudaDevice();
  let list: number[];
  if (typeof devices === 'number') {
    if (!Number.isSafeInteger(devices) || devices < 1)
      throw new RangeError(`Expected a positive integer or a list of CUDA ordinals for devices but received ${String(devices)}`);
    if (!onHost && devices > deviceCount()) {
      throw new RangeError(
        `Expected at most ${deviceCount()} devices (the CUDA devices here) but received ${devices}; list ordinals (e.g. [0, 0]) with the 'host' communicator to run several ranks on one GPU`,
      );
    }
    list = Array.from({ length: devices }, (_, r) => (onHost ? -1 : r));
  } else if (Array.isArray(devices) && devices.length > 0) {
    if (onHost)
      throw new RangeError(
        `Expected a number of ranks for devices with '${o.allocator}' (its memory is on the host) but received a list of CUDA ordinals`,
      );
    for (const d of devices) cudaDevice(d); // RangeError for an ordinal that does not exist
    list = [...devices];
  } else {
    throw new RangeError(
      `Expected a positive integer or a non-empty list of CUDA ordinals for devices but received ${JSON.stringify(devices)}`,
    );
  }
  const backend = o.communicator ?? (onHost ? 'host' : 'nccl');
  if (backend !== 'nccl' && backend !== 'host')
    throw new RangeError(`Expected 'nccl' or 'host' for communicator but received '${String(backend)}'`);
  if (backend === 'nccl' && onHost)
    throw new RangeError(`Expected the 'host' communicator with '${o.allocator}' on the host: NCCL runs on GPUs only`);
  return { devices: list, backend };
}

/** Trains over `devices` ranks and resolves with the combined run (each rank's in `ranks`). */
export async function trainDistributed(o: DistributedTrainOptions): Promise<TrainResult> {
  const { onProgress, onRankProgress, imports = [], devices: _devices, graceMs, timeoutMs, measureAllGather = [], ...options } = o;
  checkOptionsTaken(options); // here, before any rank starts: each rank's train() would refuse it
  const { devices, backend } = planRanks(o);
  const start = performance.now();
  const payload: RankPayload = {
    options: { ...options, ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
    imports: [...imports],
    measureAllGather: [...measureAllGather],
    clockOrigin: performance.timeOrigin + start,
  };
  const outcomes = await launchRanks<RankPayload, RankOutcome>({
    entry: builtModule('./training/rank-main.js', new URL('../', import.meta.url)), // the package's src/ or dist/: builtModule looks in ../dist from there
    ranks: devices.length,
    backend,
    devices,
    payload,
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(graceMs !== undefined ? { graceMs } : {}),
    onReport: (rank, m) => {
      const progress = m as Progress;
      onRankProgress?.(rank, progress);
      if (rank === 0) onProgress?.(progress);
    },
  });
  return combineOutcomes(outcomes, backend);
}

/** The run from its ranks' outcomes, each rank's exchange times and all-gather measurement kept. */
function combineOutcomes(outcomes: readonly RankOutcome[], backend: CommBackend): TrainResult {
  const run = combineRanks(
    outcomes.map((x) => x.result),
    outcomes.map((x) => x.samples),
  );
  for (const [r, x] of outcomes.entries()) {
    const rank = run.ranks![r]!;
    if (x.exchange) rank.exchange = x.exchange;
    if (x.allGatherBench) rank.allGatherBench = x.allGatherBench;
  }
  return { ...run, communicator: backend };
}

/** trainAsJobRank()'s options: trainDistributed()'s, less what the external launcher decides. */
export type JobTrainOptions = Omit<DistributedTrainOptions, 'devices' | 'graceMs'> & {
  /** How long the ranks may take to join (default 60,000 ms). */
  joinTimeoutMs?: number;
};

const defaultJobTimeoutMs = 600_000;

/**
 * Trains this process's part of a run as rank `job.rank` of a job that torchrun, srun or mpirun
 * started (every rank calls it with the same options): the ranks meet at the job's
 * MASTER_ADDR:MASTER_PORT, rank r runs on cuda:LOCAL_RANK (or on the host, for strategies over host
 * memory or without a GPU), and the collectives go through NCCL, or the host communicator over TCP.
 * Rank 0 resolves with the combined run; the others with undefined. A rank that fails stops the
 * others (host communicator: at their next collective; NCCL: the external launcher stops them).
 */
export async function trainAsJobRank(o: JobTrainOptions, job: EnvRendezvous): Promise<TrainResult | undefined> {
  const { onProgress, onRankProgress, imports = [], timeoutMs = defaultJobTimeoutMs, measureAllGather = [], joinTimeoutMs, ...options } = o;
  checkOptionsTaken(options);
  for (const m of imports) await import(m); // the strategy's package says whether its memory is on the host
  const onHost = (hasAllocator(o.allocator) && strategyInfo(o.allocator).hostMemory) || !hasCudaDevice();
  const backend = o.communicator ?? (onHost ? 'host' : 'nccl');
  if (backend !== 'nccl' && backend !== 'host')
    throw new RangeError(`Expected 'nccl' or 'host' for communicator but received '${String(backend)}'`);
  if (backend === 'nccl' && onHost)
    throw new RangeError(`Expected the 'host' communicator with '${o.allocator}' on the host: NCCL runs on GPUs only`);
  const member = await joinJob(job, { backend, onGpu: !onHost, timeoutMs, ...(joinTimeoutMs !== undefined ? { joinTimeoutMs } : {}) });
  const payload: RankPayload = {
    options: { ...options, timeoutMs },
    imports: [...imports],
    measureAllGather: [...measureAllGather],
    clockOrigin: performance.timeOrigin + performance.now(),
  };
  let outcome: RankOutcome;
  try {
    outcome = await rankWork({
      payload,
      device: member.place.device,
      deviceHandle: member.deviceHandle,
      comm: member.comm,
      report: (m) => {
        onRankProgress?.(job.rank, m as Progress);
        if (job.rank === 0) onProgress?.(m as Progress);
      },
    });
  } catch (e) {
    const reason = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    try {
      member.comm.abort(reason);
    } catch {
      // the group may be stopped already
    }
    await member.store.abort(reason);
    throw e;
  }
  const gathered = await member.store.gather("the ranks' records", serialize(outcome), timeoutMs);
  await member.leave();
  return gathered
    ? combineOutcomes(
        gathered.map((bytes) => deserialize(bytes) as RankOutcome),
        backend,
      )
    : undefined;
}

/**
 * One run's result from its ranks': per epoch, step losses summed over the ranks' weighted shares,
 * accuracies from the summed counts, the slowest rank's time and the largest per-device peaks and
 * counts (each rank's stats stay in `ranks`).
 */
export function combineRanks(results: readonly TrainResult[], samples: readonly RankRecord['samples'][]): TrainResult {
  const first = results[0];
  if (!first) throw new RangeError('Expected at least one rank result to combine');
  const epochs: EpochRecord[] = first.epochs.map((e0, i) => {
    const per = results.map((r, rank) => {
      const e = r.epochs[i];
      if (!e?.share) throw new Error(`rank ${rank} has no share for epoch ${i}: not a rank's result`);
      return { e, share: e.share };
    });
    const losses = e0.losses.map((_, s) => per.reduce((acc, { e, share }) => acc + share.lossWeights[s]! * e.losses[s]!, 0));
    const total = (key: 'trainCorrect' | 'trainCount' | 'evalCorrect' | 'evalCount') => per.reduce((acc, { share }) => acc + share[key], 0);
    const peak = (key: 'peakAllocatedBytes' | 'peakReservedBytes' | 'upstreamAllocCalls' | 'upstreamFreeCalls') =>
      Math.max(...per.map(({ e }) => e[key]));
    const largest = per.reduce((a, b) => (b.e.stats.peakAllocatedBytes > a.e.stats.peakAllocatedBytes ? b : a));
    const { share: _share, ...rest } = e0;
    return {
      ...rest,
      startMs: Math.min(...per.map(({ e }) => e.startMs)),
      epochMs: Math.max(...per.map(({ e }) => e.epochMs)),
      loss: losses.reduce((a, b) => a + b, 0) / Math.max(losses.length, 1),
      losses,
      trainAccuracy: total('trainCount') > 0 ? total('trainCorrect') / total('trainCount') : 0,
      accuracy: total('evalCount') > 0 ? total('evalCorrect') / total('evalCount') : 0,
      peakAllocatedBytes: peak('peakAllocatedBytes'),
      peakReservedBytes: peak('peakReservedBytes'),
      upstreamAllocCalls: peak('upstreamAllocCalls'),
      upstreamFreeCalls: peak('upstreamFreeCalls'),
      stats: largest.e.stats,
    };
  });
  const { remoteRows: _remote, setupPeakAllocatedBytes: _setup, ...base } = first;
  const setupPeaks = results.map((r) => r.setupPeakAllocatedBytes).filter((x): x is number => x !== undefined);
  return {
    ...base,
    ...(setupPeaks.length > 0 ? { setupPeakAllocatedBytes: Math.max(...setupPeaks) } : {}),
    device: results.map((r) => r.device).join(','),
    epochs,
    ranks: results.map((r, rank) => ({
      rank,
      device: r.device,
      epochs: r.epochs,
      samples: samples[rank] ?? { tMs: [], allocatedBytes: [], reservedBytes: [] },
      ...(r.setupPeakAllocatedBytes !== undefined ? { setupPeakAllocatedBytes: r.setupPeakAllocatedBytes } : {}),
      ...(r.remoteRows ? { remoteRows: r.remoteRows } : {}),
    })),
  };
}
