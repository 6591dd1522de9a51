/**
 * Typed errors. Every failure an allocator reports is one of these or a built-in `RangeError` /
 * `TypeError` for a bad argument (whose message names the argument). `instanceof` works across
 * copies of the core (a plug-in's own copy throws, the application catches), and each carries a
 * `code` ('GPUMEM_OOM', 'GPUMEM_CUDA', 'GPUMEM_INVALID_STATE') for code that checks without the class.
 * @module
 */
import { formatBytes } from './format.js';
import { shareClass } from './process-shared.js';
import type { AllocatorStats } from './types.js';

/**
 * The figures every out-of-memory message ends with, the same as the native core's:
 * `(reserved 4.00 GiB, allocated 3.10 GiB: 0.90 GiB reserved but unallocated, largest free block
 * 256.00 MiB)`. Much reserved but unallocated with no free block large enough is fragmentation; little
 * of either is plain exhaustion. A strategy that caches nothing has no free block: 0 B.
 */
export function describeMemory(stats: AllocatorStats | undefined): string {
  const reserved = stats?.reservedBytes ?? 0;
  const allocated = stats?.allocatedBytes ?? 0;
  return (
    `(reserved ${formatBytes(reserved)}, allocated ${formatBytes(allocated)}: ` +
    `${formatBytes(Math.max(0, reserved - allocated))} reserved but unallocated, ` +
    `largest free block ${formatBytes(stats?.largestFreeBlock ?? 0)})`
  );
}

/**
 * The request could not be met. The allocator is still usable. The message is the reason followed
 * by {@link describeMemory} of the statistics at the failure.
 */
export class OutOfMemoryError extends Error {
  override readonly name = 'OutOfMemoryError';
  readonly code = 'GPUMEM_OOM';
  /** Bytes reserved but not allocated when the request failed. */
  readonly reservedUnallocatedBytes: number;
  /** The largest cached free block when the request failed (0 for a strategy that caches nothing). */
  readonly largestFreeBlock: number;
  constructor(
    /** Why the request failed, without the figures (a layer that wraps this error adds its own). */
    readonly reason: string,
    /** Bytes asked for. */
    readonly requestedBytes: number,
    /** The allocator's statistics when the request failed. */
    readonly stats: AllocatorStats,
    /** The allocator's name. */
    readonly allocator: string,
  ) {
    super(`${reason} ${describeMemory(stats)}`);
    this.reservedUnallocatedBytes = Math.max(0, (stats?.reservedBytes ?? 0) - (stats?.allocatedBytes ?? 0));
    this.largestFreeBlock = stats?.largestFreeBlock ?? 0;
  }
}

/**
 * True when `e` is an out-of-memory failure: an {@link OutOfMemoryError} of any copy of the core, or
 * any error whose `code` is `'GPUMEM_OOM'` (e.g. one a copy of another major version threw).
 */
export function isOutOfMemory(e: unknown): e is OutOfMemoryError {
  return e instanceof OutOfMemoryError || (e instanceof Error && (e as { code?: unknown }).code === 'GPUMEM_OOM');
}

/**
 * A CUDA call failed: a driver call of the allocators (their status is a `CUresult`, named like
 * `CUDA_ERROR_INVALID_VALUE`) or a runtime call of the kernels and copies (a `cudaError_t`, named
 * like `cudaErrorInvalidValue`).
 */
export class CudaError extends Error {
  override readonly name = 'CudaError';
  readonly code = 'GPUMEM_CUDA';
  constructor(
    message: string,
    /** The status value: a `CUresult` from the allocators, a `cudaError_t` from the kernels. */
    readonly cudaError: number,
    /** Its name, e.g. `CUDA_ERROR_OUT_OF_MEMORY` or `cudaErrorInvalidValue`. */
    readonly cudaErrorName: string,
  ) {
    super(message);
  }
}

/** A call on an allocator after `dispose()`, or a feature this build or machine lacks. */
export class InvalidStateError extends Error {
  override readonly name = 'InvalidStateError';
  readonly code = 'GPUMEM_INVALID_STATE';
}

/** The shape of these errors' fields: raised when one changes, so copies that disagree stop matching. */
const errorsVersion = 1;
shareClass(OutOfMemoryError, 'OutOfMemoryError', errorsVersion);
shareClass(CudaError, 'CudaError', errorsVersion);
shareClass(InvalidStateError, 'InvalidStateError', errorsVersion);

interface NativeErrorShape {
  code?: string;
  message: string;
  reason?: string;
  requestedBytes?: number;
  stats?: AllocatorStats;
  cudaError?: number;
  cudaErrorName?: string;
}

/**
 * Turns an error thrown by the addon into its typed form, keeping the caller's stack; `allocator`
 * (an allocator's name, or the call for others) prefixes the message. RangeError/TypeError from the
 * addon already have the right class and pass through. Exported for the packages that call the
 * addon themselves (the communicators), so an error means the same whichever package met it.
 */
export function translateNativeError(e: unknown, allocator: string): Error {
  if (!(e instanceof Error)) return new Error(String(e));
  const n = e as Error & NativeErrorShape;
  switch (n.code) {
    case 'GPUMEM_OOM':
      // The native message carries the failing layer's figures; the reason without them gets the
      // figures of the statistics sent along.
      return new OutOfMemoryError(`${allocator}: ${n.reason ?? n.message}`, n.requestedBytes ?? 0, n.stats as AllocatorStats, allocator);
    case 'GPUMEM_CUDA':
      return new CudaError(`${allocator}: ${n.message}`, n.cudaError ?? -1, n.cudaErrorName ?? 'unknown');
    case 'GPUMEM_INVALID_STATE':
      return new InvalidStateError(`${allocator}: ${n.message}`);
    default:
      return e;
  }
}

/**
 * Runs a call into the addon that is not an allocator's (streams, events, graphs, devices) and
 * turns what it throws into the typed errors, so a failed CUDA call is always a {@link CudaError}.
 */
export function nativeCall<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw translateNativeError(e, what);
  }
}
