/**
 * Training over ranks on GPUs: NCCL (one rank per GPU) and the host communicator (several ranks on
 * one GPU) against the single-device run, the all-reduce captured into the mlp's CUDA graphs, a
 * rank out of memory, and plans NCCL cannot run. With two or more GPUs, the 2-rank NCCL runs too
 * (the mlp's both eager and captured, so that a failure tells the devices from the graphs).
 * Skipped, with the reason, without a device (and, for the NCCL cases, without libnccl.so.2).
 */
import { describe, expect, it } from 'vitest';
import { deviceCount } from '@gpumem/allocator-core';
import { ncclLibrary, RankFailedError } from '@gpumem/distributed';
import { train, trainDistributed, type TrainResult } from '@gpumem/gnn';
import { builtInStrategyPackages } from '@gpumem/compare';
import '@gpumem/allocator-pool';
import { gpuAvailable, gpuTitle } from './gpu.js';

const nccl = gpuAvailable ? ncclLibrary() : { available: false, reason: '' };
const ncclTitle = (title: string) => (!gpuAvailable ? gpuTitle(title) : nccl.available ? title : `${title} [skipped: ${nccl.reason}]`);
const twoGpus = gpuAvailable && nccl.available && deviceCount() >= 2;
const twoTitle = (title: string) =>
  !gpuAvailable || !nccl.available
    ? ncclTitle(title)
    : twoGpus
      ? title
      : `${title} [skipped: ${deviceCount()} CUDA device(s) here, 2 needed]`;

const imports = [...builtInStrategyPackages];
const gcn = { model: 'gcn', dataset: 'random', nodes: 200_000, epochs: 3, allocator: 'pool', imports } as const;
const mlp = { model: 'mlp', allocator: 'pool', epochs: 1, trainSubset: 12_800, testSubset: 2000, imports } as const;
/** train()'s options of a run: without the ranks' imports (train() refuses an option its workload does not take). */
const oneDevice = <T extends { imports: unknown }>({ imports: _imports, ...options }: T) => options;

function expectClose(many: TrainResult, one: TrainResult, tol: number): void {
  expect(many.epochs.length).toBe(one.epochs.length);
  for (const [i, e] of many.epochs.entries()) {
    const ref = one.epochs[i]!;
    expect(e.losses.length).toBe(ref.losses.length);
    e.losses.forEach((l, s) => {
      expect(Math.abs(l - ref.losses[s]!) / Math.abs(ref.losses[s]!)).toBeLessThan(tol);
    });
    expect(Math.abs(e.accuracy - ref.accuracy)).toBeLessThan(0.01);
  }
}

/**
 * Data parallel over several ranks: the first steps equal the single-device run's up to reduction
 * order (each rank's slice, then the sum of the slices' gradients), and SGD then carries that
 * difference along: measured on an H100 over 200 steps, 1e-7 relative at the first steps, up to
 * 3e-2 on single steps near step 100, 9e-5 on the epoch's mean loss (both runs deterministic).
 */
function expectDataParallelClose(many: TrainResult, one: TrainResult): void {
  const [e, ref] = [many.epochs[0]!, one.epochs[0]!];
  expect(e.losses.length).toBe(ref.losses.length);
  e.losses.slice(0, 5).forEach((l, s) => {
    expect(Math.abs(l - ref.losses[s]!) / ref.losses[s]!).toBeLessThan(1e-5);
  });
  expect(Math.abs(e.loss - ref.loss) / ref.loss).toBeLessThan(1e-3);
  expect(Math.abs(e.accuracy - ref.accuracy)).toBeLessThan(0.01);
}

describe.skipIf(!gpuAvailable || !nccl.available)(ncclTitle('training over ranks with NCCL'), () => {
  it('the gcn split over one NCCL rank matches train()', async () => {
    const one = train(oneDevice(gcn));
    const ranked = await trainDistributed({ ...gcn, devices: 1 });
    expect(ranked.communicator).toBe('nccl');
    expect(ranked.ranks!.map((r) => r.device)).toEqual(['cuda:0']);
    expectClose(ranked, one, 1e-4);
    // the rank's collectives were timed every epoch: two gathers of N x classes in training, one in validation
    const last = ranked.ranks![0]!.exchange!.at(-1)!;
    expect(last.allGather!.calls).toBe(3);
    expect(last.allReduce!.calls).toBe(1);
  });

  it('the mlp on one NCCL rank, all-reduce captured into the CUDA graphs, matches train() with graphs', async () => {
    const one = train({ ...oneDevice(mlp), cudaGraph: true });
    const ranked = await trainDistributed({ ...mlp, cudaGraph: true, devices: 1 });
    expectClose(ranked, one, 1e-4);
  });

  it('refuses two NCCL ranks on one GPU, and more ranks than GPUs', async () => {
    await expect(trainDistributed({ ...gcn, devices: [0, 0] })).rejects.toThrow(/different CUDA device for each rank/);
    await expect(trainDistributed({ ...gcn, devices: deviceCount() + 1 })).rejects.toThrow(/at most \d+ devices/);
  });

  it('a rank out of memory stops the run with a RankFailedError once its process is gone', async () => {
    const err = await trainDistributed({ ...gcn, allocatorOptions: { limitBytes: 16 * 2 ** 20 }, devices: 1, timeoutMs: 120_000 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RankFailedError);
    expect((err as Error).message).toMatch(/rank 0 of 1 failed: OutOfMemoryError/);
    // raised after the process exited: its CUDA context and memory went with it (free memory is not
    // compared: test files on other workers use the same GPU meanwhile)
    expect((err as RankFailedError).exits).toEqual([{ code: 1, signal: null }]);
  });
});

describe.skipIf(!gpuAvailable)(gpuTitle('several ranks on one GPU with the host communicator'), () => {
  it('the gcn over 2 ranks on cuda:0 matches train()', async () => {
    const one = train(oneDevice(gcn));
    const two = await trainDistributed({ ...gcn, devices: [0, 0], communicator: 'host' });
    expect(two.ranks!.map((r) => r.device)).toEqual(['cuda:0', 'cuda:0']);
    expectClose(two, one, 1e-4);
  });

  it('the mlp data parallel over 2 ranks on cuda:0 matches train()', async () => {
    const one = train(oneDevice(mlp));
    const two = await trainDistributed({ ...mlp, devices: [0, 0], communicator: 'host' });
    expectDataParallelClose(two, one);
  });

  it('both ranks out of memory: the run stops with the first error once both processes are gone', async () => {
    const err = await trainDistributed({
      ...gcn,
      allocatorOptions: { limitBytes: 64 * 2 ** 20 },
      devices: [0, 0],
      communicator: 'host',
      timeoutMs: 120_000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RankFailedError);
    expect((err as Error).message).toMatch(/rank [01] of 2 failed: OutOfMemoryError.*every other rank was stopped/);
    expect((err as RankFailedError).exits).toHaveLength(2);
    for (const exit of (err as RankFailedError).exits) expect(exit.code !== null || exit.signal !== null).toBe(true);
  });

  it('refuses CUDA graphs with the host communicator, in the rank, with a clear error', async () => {
    await expect(trainDistributed({ ...mlp, cudaGraph: true, devices: [0, 0], communicator: 'host' })).rejects.toThrow(
      /collectives can be captured \(nccl\)/,
    );
  });
});

describe.skipIf(!twoGpus)(twoTitle('training over two GPUs with NCCL'), () => {
  it('the gcn split over cuda:0 and cuda:1 matches train()', async () => {
    const one = train(oneDevice(gcn));
    const two = await trainDistributed({ ...gcn, devices: 2 });
    expect(two.ranks!.map((r) => r.device)).toEqual(['cuda:0', 'cuda:1']);
    expectClose(two, one, 1e-4);
  });

  it('the mlp data parallel over cuda:0 and cuda:1, not captured, matches train()', async () => {
    // beside the captured case: a failure in both is the devices', in the captured one only the graphs'
    const one = train(oneDevice(mlp));
    const two = await trainDistributed({ ...mlp, devices: 2 });
    expect(two.ranks!.map((r) => r.device)).toEqual(['cuda:0', 'cuda:1']);
    expectDataParallelClose(two, one);
  });

  it('the mlp data parallel over cuda:0 and cuda:1, captured, matches train()', async () => {
    const one = train({ ...oneDevice(mlp), cudaGraph: true });
    const two = await trainDistributed({ ...mlp, cudaGraph: true, devices: 2 });
    expect(two.ranks!.map((r) => r.device)).toEqual(['cuda:0', 'cuda:1']);
    expectDataParallelClose(two, one);
    // each rank's step losses are its share of the step's (one slot a step, by the step counter): none is 0
    for (const r of two.ranks!) expect(r.epochs[0]!.losses.slice(0, -1).every((l) => l > 0)).toBe(true);
    expect(Math.abs(two.epochs[0]!.trainAccuracy - one.epochs[0]!.trainAccuracy)).toBeLessThan(0.01);
  });
});
