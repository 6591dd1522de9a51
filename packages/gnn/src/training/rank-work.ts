/**
 * The work of one rank of a distributed training run, whoever started the rank: it imports the
 * run's strategy packages and plug-ins, creates its allocator on its device, optionally measures
 * the communicator's own all-gather, trains its part with the group's communicator (the gcn's
 * collectives timed per epoch), and returns its records with a memory sample after every step the
 * workload reports (mlp: each step; gcn: each epoch). rank-main.ts runs it in a rank the launcher
 * forked; trainAsJobRank() in a rank of a job started by torchrun, srun or mpirun.
 * @module
 */
import { createAllocator, Stream, type Device } from '@gpumem/allocator-core';
import { measureAllGather, TimedCommunicator, type Communicator } from '@gpumem/distributed';
import { trainOn } from './train.js';
import { asTrainOptions, getWorkload } from '../workloads/index.js';
import { throttledProgress } from './train-common.js';
import type { RankOutcome, RankPayload } from './train-distributed.js';

/** What a rank's work is given. */
export interface RankWorkContext {
  payload: RankPayload;
  /** A CUDA ordinal, or -1 for the host. */
  device: number;
  deviceHandle: Device;
  comm: Communicator;
  /** Sends progress to whoever shows it. */
  report(message: unknown): void;
}

/** Trains this rank's part of the run and returns its records. */
export async function rankWork(ctx: RankWorkContext): Promise<RankOutcome> {
  for (const m of ctx.payload.imports) await import(m);
  const { options } = ctx.payload;
  const allocatorOptions = ctx.device >= 0 ? { ...options.allocatorOptions, device: ctx.device } : (options.allocatorOptions ?? {});
  const outcome: Omit<RankOutcome, 'result'> = { samples: { tMs: [], allocatedBytes: [], reservedBytes: [] } };
  if (ctx.payload.measureAllGather.length > 0) {
    const allocator = createAllocator(options.allocator, allocatorOptions);
    const stream = Stream.create(ctx.deviceHandle);
    try {
      const malloc = (bytes: number) => {
        const ptr = allocator.malloc(bytes, stream);
        return { ptr, free: () => allocator.free(ptr, bytes, stream) };
      };
      outcome.allGatherBench = ctx.payload.measureAllGather.map((bytes) => measureAllGather(ctx.comm, stream, malloc, bytes));
    } finally {
      stream.synchronize();
      allocator.dispose();
      stream.destroy();
    }
  }
  // collectives are timed per epoch where the workload says so (the mlp's may be captured into graphs: not timed)
  const timed = getWorkload(options.model).timesCollectives ? new TimedCommunicator(ctx.comm, ctx.deviceHandle) : undefined;
  const comm: Communicator = timed ?? ctx.comm;
  if (timed) outcome.exchange = [];
  const { samples } = outcome;
  const clock = () => performance.timeOrigin + performance.now() - ctx.payload.clockOrigin;
  const report = throttledProgress((progress) => ctx.report(progress));
  const result = trainOn(
    asTrainOptions({
      ...options,
      devices: 1,
      allocatorOptions,
      onStep: (_step, stats) => {
        samples.tMs.push(clock());
        samples.allocatedBytes.push(stats.allocatedBytes);
        samples.reservedBytes.push(stats.reservedBytes);
      },
      onProgress: (progress) => {
        if (timed) outcome.exchange!.push(timed.drain()); // the gcn reports once an epoch, synchronised
        report(progress);
      },
    }),
    comm,
  );
  return { result, ...outcome };
}
