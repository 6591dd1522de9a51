/**
 * What a training configuration needs in memory, worked out from the models' memory plans before
 * anything is allocated, so that a configuration that cannot fit (`--nodes 2e9`, `--hidden 65536`)
 * is refused at once with the figures, instead of failing deep into graph generation, or worse.
 *
 * Each workload works out its own estimate (Workload.shape and .estimate, e.g.
 * workloads/gcn/memory-estimate.ts); this module checks it against the memory there. The estimate
 * is a lower bound of the peak: the tensors the plan keeps live at its peak, in f32 or i32, without
 * the allocator's rounding or caching. A configuration is refused only when this estimate exceeds
 * the total memory of the device (or host) the allocator uses.
 * @module
 */
import { freemem, totalmem } from 'node:os';
import { formatBytes, hasAllocator, memoryInfo, strategyInfo, type Allocator } from '@gpumem/allocator-core';
import { getWorkload } from '../workloads/registry.js';
import type { WorkloadTypeMap } from '../workloads/workload.js';
import type { TrainOptionsBag } from './train-types.js';

/** A workload's configuration as its memory estimate sees it (train()'s defaults filled in), by model. */
export type TrainingShape = {
  [M in keyof WorkloadTypeMap]: WorkloadTypeMap[M] extends { shape: infer S } ? S : never;
}[keyof WorkloadTypeMap];

/** Bytes by what holds them; `total` is the estimated peak. */
export interface MemoryEstimate {
  total: number;
  parts: Record<string, number>;
  /** One line describing the configuration, for messages. */
  describe: string;
}

/** Thrown when a configuration's memory estimate exceeds what the device (or host) has. */
export class InsufficientMemoryError extends RangeError {
  override readonly name = 'InsufficientMemoryError';
  readonly code = 'GPUMEM_INSUFFICIENT_MEMORY';
  constructor(
    message: string,
    readonly estimate: MemoryEstimate,
    /** Bytes the device (or host) has in all. */
    readonly availableBytes: number,
    /** Where the memory would come from, e.g. 'cuda:0' or 'host'. */
    readonly where: string,
  ) {
    super(message);
  }
}

/** Bytes of an f32 (or i32). */
export const f32 = 4;

/** A count for messages: 2,000,000. */
export function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** Parameters of dense layers of these widths (weights and biases). */
export function denseParameters(widths: readonly number[]): number {
  let p = 0;
  for (let i = 0; i + 1 < widths.length; i++) p += widths[i]! * widths[i + 1]! + widths[i + 1]!;
  return p;
}

/** The estimated peak of a configuration (its workload's estimate). */
export function estimateTrainingMemory(shape: TrainingShape): MemoryEstimate {
  return getWorkload(shape.model).estimate(shape);
}

/** The options train() takes that decide the memory it needs (any others are ignored). */
export type ShapeOptions = Omit<TrainOptionsBag, 'allocator'>;

/** A positive integer, or a RangeError naming `name`. */
export function positiveInt(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`Expected positive integer for ${name} but received ${String(value)}`);
  return value;
}

/** train()'s defaults filled in, and the sizes checked against the kernels' limits (the workload's shape). */
export function trainingShape(o: ShapeOptions): TrainingShape {
  return getWorkload(o.model).shape(o);
}

/**
 * Host memory that may be pinned: what the kernel says is available less a tenth of the total, so
 * that pinning never starves the machine (the same rule as the pinned and tiered strategies').
 */
function pinnableHostBytes(): number {
  return Math.max(0, freemem() - Math.floor(totalmem() / 10));
}

/**
 * The memory the device `allocator` allocates from offers a plan, and what to call it: the
 * device's total; for managed memory only what the device has free (oversubscribing managed
 * memory can hang a shared GPU); for a strategy that spills to the host (registry flag
 * spillsToHost), the device's total and the host memory that may be pinned.
 */
function memoryOf(allocator: Allocator): { bytes: number; where: string } {
  if (allocator.device.kind === 'host') return { bytes: totalmem(), where: 'the host' };
  const device = memoryInfo(allocator.device.index);
  const info = hasAllocator(allocator.name) ? strategyInfo(allocator.name) : undefined;
  if (info?.managedMemory) {
    return {
      bytes: device.freeBytes,
      where: `${allocator.device.id}'s free memory (managed memory beyond it would oversubscribe the device)`,
    };
  }
  if (info?.spillsToHost) {
    const host = pinnableHostBytes();
    return {
      bytes: device.totalBytes + host,
      where: `${allocator.device.id} (${formatBytes(device.totalBytes)}) with the host memory that may be pinned (${formatBytes(host)})`,
    };
  }
  return { bytes: device.totalBytes, where: allocator.device.id };
}

/**
 * Refuses, before anything is allocated, a configuration whose estimated memory exceeds the total
 * memory of the allocator's device (or of the host): RangeError for sizes past the kernels' 32-bit
 * indices, {@link InsufficientMemoryError} with the estimate and the memory for the rest.
 */
export function checkTrainingFits(options: ShapeOptions, allocator: Allocator): MemoryEstimate {
  const workload = getWorkload(options.model);
  const estimate: MemoryEstimate = workload.estimate(workload.shape(options));
  const memory = memoryOf(allocator);
  if (estimate.total > memory.bytes) {
    const parts = Object.entries(estimate.parts)
      .filter(([, bytes]) => bytes > 0)
      .map(([name, bytes]) => `${name} ${formatBytes(bytes)}`)
      .join(', ');
    throw new InsufficientMemoryError(
      `${estimate.describe} needs at least ${formatBytes(estimate.total)} (${parts}) but ${memory.where} has ${formatBytes(memory.bytes)} in all: ` +
        `use fewer nodes, features or hidden units${workload.memoryAdvice}`,
      estimate,
      memory.bytes,
      allocator.device.id,
    );
  }
  return estimate;
}
