/**
 * The contract every strategy implements, native or written in TypeScript.
 * @module
 */
import type { Device } from './device.js';
import type { Stream } from './stream.js';

/**
 * An address handed out by an allocator: device memory, managed memory or host memory,
 * depending on the allocator's device. A plain number (addresses fit in 2^53).
 */
export type DevicePtr = number;

/** What an allocation event records: an allocation, a free, or an allocation that failed (out of memory). */
export type AllocationAction = 'alloc' | 'free' | 'oom';

/**
 * One allocation event: what the tracking layers record and what trace files hold (the one event
 * type of the project; `@gpumem/trace` reads and writes it).
 */
export interface AllocationEvent {
  /** Nanoseconds since the start of the recording. */
  timeNs: number;
  action: AllocationAction;
  /** The pointer allocated or freed (0 for an out-of-memory event). */
  ptr: DevicePtr;
  /** Bytes asked for (alloc, oom) or given back (free). */
  bytes: number;
  /** The stream's id in the recording process (its native handle; 0 is the default stream). */
  stream: number;
  /** A tag set by the recording program (an op or phase id); 0 when none. */
  tag: number;
  /** The strategy's reserved bytes right after the event, where the recorder knew them. */
  reservedBytes?: number;
  /** The recording thread's id, where the recorder knew it (RMM logs have one). */
  thread?: number;
}

/** An event recorded by a tracking layer, which always knows the reserved bytes. */
export type TrackingEvent = AllocationEvent & { reservedBytes: number };

/** Where {@link Allocator.prefetch} moves pages. */
export type PrefetchTarget = 'device' | 'host';

/** A snapshot of an allocator's statistics; a plain object. */
export interface AllocatorStats {
  /** Bytes callers asked for and still hold. */
  allocatedBytes: number;
  /** Highest allocatedBytes since creation or the last resetPeak(). */
  peakAllocatedBytes: number;
  /** Bytes the strategy took from its upstream (the driver, or another allocator) and still holds. */
  reservedBytes: number;
  /** Highest reservedBytes since creation or the last resetPeak(). */
  peakReservedBytes: number;
  /** malloc calls served. */
  allocCount: number;
  /** free calls served. */
  freeCount: number;
  /** Calls made upstream (cudaMalloc*, the driver, or the upstream allocator) to get memory. */
  upstreamAllocCount: number;
  /** Calls made upstream to give memory back. */
  upstreamFreeCount: number;
  /** malloc calls that ended in OutOfMemoryError. */
  oomCount: number;
  /** Pool strategies: the largest cached free block, a view of fragmentation. */
  largestFreeBlock?: number;
  /** Upstream allocations (segments) currently held, where the strategy knows. */
  segmentCount?: number;
  /**
   * Strategies with a host tier beside the device (e.g. 'tiered'): the part of allocatedBytes that
   * lives in host memory. The device part is allocatedBytes less this. Absent where the strategy
   * has no host tier.
   */
  hostAllocatedBytes?: number;
  /** Highest hostAllocatedBytes since creation or the last resetPeak(). */
  peakHostAllocatedBytes?: number;
  /** The part of reservedBytes that lives in host memory (with hostAllocatedBytes). */
  hostReservedBytes?: number;
  /** Highest hostReservedBytes since creation or the last resetPeak(). */
  peakHostReservedBytes?: number;
  /** Bytes prefetch moved from the device tier to the host tier (with hostAllocatedBytes). */
  bytesMovedToHost?: number;
  /** Bytes prefetch moved from the host tier to the device tier (with hostAllocatedBytes). */
  bytesMovedToDevice?: number;
}

/**
 * A memory allocation strategy. All sizes are in bytes.
 *
 * Stream-ordered, as in RMM and CUDA's own allocator: `free(p, n, s)` means work already queued on
 * `s` may still use `p`; the memory may be handed out again at once on `s`, and on another stream
 * only once that stream is ordered after the work on `s`. {@link Allocator.recordStream} marks a
 * block used on another stream too.
 *
 * Bad arguments throw `RangeError` or `TypeError` whose message names the argument, and change
 * nothing. A request that cannot be met throws {@link OutOfMemoryError}; the allocator stays usable.
 */
export interface Allocator {
  /** The registered name: 'cuda' | 'uvm' | 'pool' | 'async' | 'host' | a plug-in's. */
  readonly name: string;
  /** Which GPU (or the host) the memory lives on. */
  readonly device: Device;
  /** True after dispose(). */
  readonly disposed: boolean;
  /** Allocates `bytes` (a positive integer), usable in stream order on `stream`. */
  malloc(bytes: number, stream?: Stream): DevicePtr;
  /** Frees `ptr`, which must be a live allocation of exactly `bytes`. */
  free(ptr: DevicePtr, bytes: number, stream?: Stream): void;
  /** Moves the pages of `ptr` towards `to`; false where the strategy has nothing to move. */
  prefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream?: Stream): boolean;
  /** Marks `ptr` as used on `stream` as well, so its memory is not reused before that work is done. */
  recordStream(ptr: DevicePtr, stream: Stream): void;
  /** Copies `data` into the allocation `ptr` at `offset`, after the work queued on `stream`. */
  write(ptr: DevicePtr, data: ArrayBufferView, offset?: number, stream?: Stream): void;
  /** Copies from the allocation `ptr` at `offset` into `target`, after the work queued on `stream`. */
  read(ptr: DevicePtr, target: ArrayBufferView, offset?: number, stream?: Stream): void;
  /** A snapshot of the statistics. */
  stats(): AllocatorStats;
  /** Sets the peaks to the current values. */
  resetPeak(): void;
  /** Gives cached memory back to the driver (emptyCache), keeping at most `bytesToKeep` where the strategy can. */
  trim(bytesToKeep?: number): void;
  /** Frees everything the allocator still holds; later calls throw InvalidStateError. Idempotent. */
  dispose(): void;
  /**
   * Says what the allocations from now on are for: a trainer phase or role such as 'setup',
   * 'forward', 'features', 'graph' or 'activations' (the trainer's allocation tags). A strategy
   * that places memory by tag (e.g. 'tiered', which may keep some tags in host memory) acts on it;
   * strategies that do not leave it out, and callers call it only where present.
   */
  setPlacementTag?(tag: string): void;
}
