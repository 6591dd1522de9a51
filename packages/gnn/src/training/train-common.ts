/**
 * What the workloads' training loops share: argument checks, epoch bookkeeping and the trainer's streams.
 * @module
 */
import { Stream, hasAllocator, strategyInfo, type Allocator, type AllocatorStats, type Device } from '@gpumem/allocator-core';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import type { CommonTrainOptions, EpochRecord, Progress } from './train-types.js';

export function checkPositiveInt(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new RangeError(`Expected positive integer for ${name} but received ${String(value)}`);
  }
}

export function mean(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i]!;
  return values.length ? s / values.length : 0;
}

export function sum(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i]!;
  return s;
}
/**
 * `send` for progress sent to another process: at most one message per `ms` milliseconds, but
 * always the step that ends an epoch.
 */
export function throttledProgress(send: (progress: Progress) => void, ms = 100): (progress: Progress) => void {
  let last = 0;
  return (progress) => {
    const now = performance.now();
    if (progress.step < progress.steps && now - last < ms) return;
    last = now;
    send(progress);
  };
}

/** Waits for earlier work, resets the allocator's peaks (noting setup's, the first time), and starts the epoch's clock. */
export function beginEpoch(rt: Runtime): { before: AllocatorStats; t0: number } {
  rt.tag('setup');
  rt.synchronize();
  rt.setupPeakBytes ??= rt.allocator.stats().peakAllocatedBytes; // the first epoch: what setup took
  rt.allocator.resetPeak();
  return { before: rt.allocator.stats(), t0: performance.now() };
}

/**
 * The end of a full-batch epoch's step (the gcn's): waits for it, takes the epoch's time and stats,
 * calls onStep, and reads the [loss as f32 bits, correct count] the step wrote to `scalars` (freed).
 */
export function endFullBatchStep(
  rt: Runtime,
  o: Pick<CommonTrainOptions, 'onStep'>,
  epoch: number,
  begun: { before: AllocatorStats; t0: number },
  scalars: Tensor,
): { epochMs: number; stats: ReturnType<typeof epochStats>; loss: number; correct: number } {
  rt.synchronize();
  const epochMs = performance.now() - begun.t0;
  const stats = epochStats(rt.allocator, begun.before);
  o.onStep?.(epoch, rt.allocator.stats());
  const raw = scalars.toArray() as Int32Array;
  scalars.dispose();
  return { epochMs, stats, loss: new Float32Array(raw.buffer, 0, 1)[0]!, correct: raw[1]! };
}

export function epochStats(
  allocator: Allocator,
  before: AllocatorStats,
): Pick<EpochRecord, 'peakAllocatedBytes' | 'peakReservedBytes' | 'upstreamAllocCalls' | 'upstreamFreeCalls' | 'stats'> {
  const stats = allocator.stats();
  return {
    peakAllocatedBytes: stats.peakAllocatedBytes,
    peakReservedBytes: stats.peakReservedBytes,
    upstreamAllocCalls: stats.upstreamAllocCount - before.upstreamAllocCount,
    upstreamFreeCalls: stats.upstreamFreeCount - before.upstreamFreeCount,
    stats,
  };
}
const trainerStreams = new Map<string, Stream>();

/**
 * The trainer's streams on a device ('main': the runtime's; 'side': the second stream of graph
 * mode), made once and kept for the process's life (each run binds a workspace from its own
 * allocator to the streams it uses, and gives it back when it ends). A caching allocator keeps its free blocks
 * per stream, so an allocator that outlives a run (one passed to train() and used again) must never
 * be left holding blocks of a stream that has been destroyed: with one stream per device, later
 * runs find those blocks on their own stream.
 */
export function trainerStream(device: Device, role: 'main' | 'side'): Stream {
  const key = `${device.id}/${role}`;
  let stream = trainerStreams.get(key);
  if (!stream) {
    stream = Stream.create(device);
    trainerStreams.set(key, stream);
  }
  return stream;
}

/** True when the registry says strategy `name` can allocate inside a CUDA-graph capture. */
export function isCapturable(name: string): boolean {
  return hasAllocator(name) && strategyInfo(name).capturable;
}
