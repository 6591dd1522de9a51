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
  /**
   * Strategies that sleep (registry flag `sleep`): the device bytes the sleeps of the tags now asleep
   * released, their cached memory included (the sum of their `TagStats.sleptBytes`; a wake maps
   * again what their live blocks need). Absent where the strategy cannot sleep.
   */
  sleptBytes?: number;
}

/**
 * What {@link Allocator.sleep} puts to sleep: `tags` (default: every tag the allocator has
 * allocated in), and which of them keep their content: all (`keep: true`, the default), none
 * (`false`: their blocks read as undefined after wake), or those listed (the others discard, as
 * vLLM's `offload_tags`).
 */
export interface SleepRequest {
  tags?: readonly string[];
  keep?: boolean | readonly string[];
}

/** What one {@link Allocator.sleep} or {@link Allocator.wake} did. */
export interface SleepReport {
  /** The tags put to sleep (woken). */
  changed: string[];
  /** Tags named that were asleep (awake) already: nothing was done to them. */
  unchanged: string[];
  /** Physical device bytes released (sleep) or mapped again (wake). */
  deviceBytes: number;
  /** Bytes copied to host memory (sleep) or back to the device (wake). */
  copiedBytes: number;
  /** Wall time of the call. */
  seconds: number;
}

/** One tag of an allocator that sleeps ({@link Allocator.tagStats}). */
export interface TagStats {
  tag: string;
  asleep: boolean;
  /** How the tag sleeps: its content copied to host memory, or dropped (meaningful while asleep). */
  mode: 'keep' | 'discard';
  /** Bytes callers asked for in this tag and still hold, asleep or awake. */
  allocatedBytes: number;
  /** Physical device memory the tag holds now, live and cached (0 while asleep). */
  deviceBytes: number;
  /** While asleep: the device bytes its sleep released, live and cached. */
  sleptBytes: number;
  /** Host bytes holding its kept content. */
  backupBytes: number;
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
  /**
   * Sleep and wake by tag, present exactly where the registry's `sleep` flag is set (strategies
   * whose memory is mapped through virtual memory management). Every allocation carries the tag
   * current when it was made (`withTag`). `sleep` waits for the work queued on the device,
   * copies the live bytes of the tags that keep to host memory and releases the tags' physical
   * memory, live and cached, keeping every address; tags asleep already are reported `unchanged`.
   * While a tag sleeps its blocks may be freed but not read or written, and an allocation in it
   * throws InvalidStateError. An unknown tag is a RangeError listing the known ones; when host memory
   * for the copies cannot be had, OutOfMemoryError before anything is released.
   */
  sleep?(request?: SleepRequest): SleepReport;
  /**
   * Maps physical memory again at the same addresses and copies kept content back (done when it
   * returns); `tags` default to every sleeping one, awake ones are reported `unchanged`. When the
   * device has no room: OutOfMemoryError, and the tags stay asleep with their content whole.
   */
  wake?(tags?: readonly string[]): SleepReport;
  /** Every tag the allocator knows, in the order first allocated in. */
  tagStats?(): TagStats[];
  /** Gives back the host memory kept after wake for the next sleep's copies. */
  trimBackup?(): void;
  /**
   * Starts pinning `bytes` of host memory for later sleeps' copies on background threads and
   * returns at once, so that a first sleep copies at the host link's speed; a sleep before it is
   * done takes what is ready and waits for, or adds to, the rest. OutOfMemoryError past
   * `backupLimitBytes`. Native sleeping strategies have it.
   */
  reserveBackup?(bytes: number): void;
}

/**
 * An allocator of a strategy with the registry's `sleep` flag: sleep, wake, tagStats and trimBackup
 * are present (createAllocator returns it for such strategies: {@link AllocatorFlagsMap}).
 */
export type SleepingAllocator = Allocator & Required<Pick<Allocator, 'sleep' | 'wake' | 'tagStats' | 'trimBackup'>>;
