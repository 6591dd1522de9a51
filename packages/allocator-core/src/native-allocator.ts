/**
 * NativeAllocator: a strategy whose memory comes from a chain of native resources. Subclasses
 * only build the chain's spec; everything else is here.
 * @module
 */
import { BaseAllocator } from './base.js';
import type { Device } from './device.js';
import { InvalidStateError, translateNativeError } from './errors.js';
import { loadNative, type ChainSpec, type NativeResource, type NativeTrackingEvents, type ResourceSpec } from './native.js';
import type { Stream } from './stream.js';
import type { Allocator, AllocatorStats, DevicePtr, PrefetchTarget, SleepReport, SleepRequest, TagStats, TrackingEvent } from './types.js';
import { option, type OptionValues } from './options.js';
import { syncNativeTag } from './tags.js';
import { checkBoolean, checkBytes, checkNonNegative } from './validate.js';

/** A strategy's part of the native chain spec: its name, device and own options. */
export type NativeStrategySpec = Omit<ChainSpec, 'limitBytes' | 'faultInjection' | 'trackingCapacity'>;

/** When the fault-injecting layer fails an allocation (at least one of the two). */
export interface FaultInjectionOptions {
  /** Fail every Nth allocation asked of the leaf (N >= 1; 1 fails them all). Failed attempts count. */
  failEvery?: number;
  /** Fail any allocation that would take the bytes held from the leaf past this budget (0 fails them all). */
  failAfterBytes?: number;
}

const faultKeys = ['failEvery', 'failAfterBytes'];

/** Checks `faultInjection` and returns it for the native spec. */
function checkFaultInjection(options: unknown): FaultInjectionOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    const got = options === null ? 'null' : Array.isArray(options) ? 'an array' : `${String(options)} of type ${typeof options}`;
    throw new TypeError(`Expected an object { failEvery?, failAfterBytes? } for faultInjection but received ${got}`);
  }
  for (const key of Object.keys(options)) {
    if (!faultKeys.includes(key)) {
      throw new TypeError(`Unknown option '${key}' in faultInjection; expected one of: ${faultKeys.join(', ')}`);
    }
  }
  const { failEvery, failAfterBytes } = options as FaultInjectionOptions;
  if (failEvery !== undefined) checkBytes(failEvery, 'faultInjection.failEvery');
  if (failAfterBytes !== undefined) checkNonNegative(failAfterBytes, 'faultInjection.failAfterBytes');
  if (failEvery === undefined && failAfterBytes === undefined) {
    throw new TypeError('Expected failEvery and/or failAfterBytes in faultInjection but received neither');
  }
  return { ...(failEvery !== undefined && { failEvery }), ...(failAfterBytes !== undefined && { failAfterBytes }) };
}

/**
 * The options every native strategy takes: its definition ends with these entries
 * (`defineOptions(name, { ...own, ...nativeLayerOptions })`), and NativeAllocator checks them.
 */
export const nativeLayerOptions = {
  /** Caps the bytes taken from the driver (a limiting layer under the strategy), e.g. to pretend a GPU has 8 GiB. */
  limitBytes: option.bytes(),
  /** Records every malloc/free in a ring buffer of this many events (see trackingEvents()). Off by default. */
  trackingCapacity: option.bytes(),
  /**
   * Makes allocations from the driver (or the host) fail on purpose, to test out-of-memory handling:
   * a fault-injecting layer right over the leaf (under `limitBytes` and the strategy). Each failure is
   * an `OutOfMemoryError` like a real one. Off by default.
   */
  faultInjection: option.custom(checkFaultInjection),
  /**
   * The leaf hands out addresses with nothing behind them (strategies with the registry's
   * `addressOnly` flag only, such as pool and expandable, whose logic never touches their memory):
   * the allocator takes no memory, and its pointers must never be read or written. For replays that
   * only ask whether a trace fits (`gpumem doctor`), so that the answer does not depend on the
   * machine. Off by default.
   */
  addressOnly: option.boolean(),
};

/** Options every native strategy takes. */
export interface NativeLayerOptions extends OptionValues<typeof nativeLayerOptions> {}

export type { TrackingEvent } from './types.js';

/**
 * What another thread needs to attach to a shared native allocator (see
 * {@link NativeAllocator.shareHandle}): plain data, so it can be posted to a worker.
 */
export interface SharedAllocatorHandle {
  /** The addon's process-wide id of the shared chain. */
  readonly token: number;
  /** The strategy's name ('pool', 'host', ...). */
  readonly name: string;
  /** Where the memory lives. */
  readonly device: { readonly kind: 'cuda' | 'host'; readonly index: number };
}

const actions = ['alloc', 'free', 'oom'] as const;
const resources = new WeakMap<NativeAllocator, NativeResource>();

/** The native handle of an allocator, for the package's tools (benchmarks, replay, test kernels). */
export function nativeResourceOf(allocator: NativeAllocator): NativeResource {
  const r = resources.get(allocator);
  if (!r || allocator.disposed) throw new InvalidStateError(`the '${allocator.name}' allocator has been disposed`);
  return r;
}

function handleOf(stream: Stream | undefined): number {
  return stream === undefined ? 0 : stream.handle;
}

/** Tells this thread's native core the tag of its allocations from now on (see tags.ts). */
function sendTag(tag: string | undefined): void {
  loadNative().Resource.setThreadTag(tag);
}

export abstract class NativeAllocator extends BaseAllocator {
  readonly #native: NativeResource;
  readonly #args = new Float64Array(3); // [bytes, stream, pointer], shared with the addon
  readonly #allocate: () => void;
  readonly #deallocate: () => void;
  /**
   * The CUDA devices (ordinals) that may read and write this allocator's memory besides its own:
   * the `peerAccess` option, checked. Empty when none were given, and for an allocator attached
   * from another thread (attachSharedAllocator), whose options this thread does not see.
   */
  readonly peerAccess: readonly number[];
  /**
   * Sleep and wake by tag (see {@link Allocator.sleep}): present exactly where the native chain's
   * leaf can sleep, the strategies with the registry's `sleep` flag.
   */
  declare readonly sleep?: (request?: SleepRequest) => SleepReport;
  declare readonly wake?: (tags?: readonly string[]) => SleepReport;
  declare readonly tagStats?: () => TagStats[];
  declare readonly trimBackup?: () => void;
  declare readonly reserveBackup?: (bytes: number) => void;

  /**
   * @param strategy the strategy, its device and its own options; the native chain builder puts
   *   the strategy's layers and the common ones (`layers`) in their one order. Or a chain that
   *   another thread shared (`{ type: 'shared', token }`), which has its layers already.
   * @param layers checked here, then sent with the strategy as one flat spec.
   */
  protected constructor(
    name: string,
    device: Device,
    strategy: NativeStrategySpec | { type: 'shared'; token: number },
    layers: NativeLayerOptions = {},
  ) {
    super(name, device);
    this.peerAccess = Object.freeze('type' in strategy ? [] : [...(strategy.peerAccess ?? [])]);
    const { limitBytes, trackingCapacity, faultInjection, addressOnly } = nativeLayerOptions;
    if (layers.addressOnly !== undefined) addressOnly.parse(layers.addressOnly, 'addressOnly');
    if (layers.limitBytes !== undefined) limitBytes.parse(layers.limitBytes, 'limitBytes');
    if (layers.trackingCapacity !== undefined) trackingCapacity.parse(layers.trackingCapacity, 'trackingCapacity');
    const faults = layers.faultInjection !== undefined ? faultInjection.parse(layers.faultInjection, 'faultInjection') : undefined;
    const spec: ResourceSpec =
      'type' in strategy
        ? strategy
        : ({
            ...strategy,
            ...(layers.limitBytes !== undefined && { limitBytes: layers.limitBytes }),
            ...(faults !== undefined && { faultInjection: faults }),
            ...(layers.trackingCapacity !== undefined && { trackingCapacity: layers.trackingCapacity }),
            ...(layers.addressOnly === true && { addressOnly: true }),
          } as ChainSpec);
    const Resource = loadNative().Resource;
    try {
      this.#native = new Resource(spec);
    } catch (e) {
      throw translateNativeError(e, name);
    }
    const fast = this.#native.fastPath(this.#args);
    this.#allocate = fast.allocate;
    this.#deallocate = fast.deallocate;
    resources.set(this, this.#native);
    if (this.#native.sleepable()) {
      const methods: Pick<Required<Allocator>, 'sleep' | 'wake' | 'tagStats' | 'trimBackup' | 'reserveBackup'> = {
        // The request and the tags go as given: the addon decodes them, once (its TypeError or
        // RangeError names the field: request.tags[1], ...), and a request of no tag sleeps none.
        sleep: (request) => this.callNative((r) => r.sleep(request)),
        wake: (tags) => this.callNative((r) => r.wake(tags)),
        tagStats: () => this.callNative((r) => r.tagStats()),
        trimBackup: () => this.callNative((r) => r.trimBackup()),
        reserveBackup: (bytes) => {
          checkNonNegative(bytes, 'bytes');
          this.callNative((r) => r.reserveBackup(bytes));
        },
      };
      for (const [key, value] of Object.entries(methods)) {
        Object.defineProperty(this, key, { value, enumerable: false, writable: false, configurable: false });
      }
    }
  }

  protected doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    syncNativeTag(sendTag);
    const args = this.#args;
    args[0] = bytes;
    args[1] = handleOf(stream);
    try {
      this.#allocate();
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
    return args[2]!;
  }

  protected doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    const args = this.#args;
    args[0] = bytes;
    args[1] = handleOf(stream);
    args[2] = ptr;
    try {
      this.#deallocate();
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected override doPrefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream: Stream | undefined): boolean {
    try {
      return this.#native.prefetch(ptr, bytes, to === 'device', handleOf(stream));
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected override doRecordStream(ptr: DevicePtr, stream: Stream): void {
    try {
      this.#native.recordStream(ptr, stream.handle);
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected doWrite(ptr: DevicePtr, data: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    try {
      this.#native.write(ptr, offset, data, handleOf(stream));
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected doRead(ptr: DevicePtr, target: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    try {
      this.#native.read(ptr, offset, target, handleOf(stream));
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected doStats(): AllocatorStats {
    try {
      return this.#native.stats();
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected doResetPeak(): void {
    try {
      this.#native.resetPeak();
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected override doTrim(bytesToKeep: number): void {
    try {
      this.#native.trim(bytesToKeep);
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  protected doDispose(): void {
    this.#native.dispose();
  }

  /**
   * Runs a strategy-specific call on the native resource (e.g. the tiered strategy's placement)
   * after the state check every call makes, with native errors typed as every call's are.
   */
  protected callNative<T>(call: (resource: NativeResource) => T): T {
    this.checkLive();
    try {
      return call(this.#native);
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  /**
   * Shares this allocator's native memory with other worker_threads: pass the returned handle to a
   * worker (postMessage, workerData) and call `attachSharedAllocator(handle)` there. Every
   * attached allocator works on the same memory, statistics and locks. Ownership is joint: this
   * allocator's dispose() only lets go of its share and revokes the handle (no new attachments);
   * the memory is freed when the last attached allocator is disposed too. A pointer may be freed
   * by any thread, but only once no thread uses it any more (as with any memory).
   */
  shareHandle(): SharedAllocatorHandle {
    this.checkLive();
    let token: number;
    try {
      token = this.#native.shareHandle();
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
    return { token, name: this.name, device: { kind: this.device.kind, index: this.device.index } };
  }

  /** The recorded events, oldest first (needs `trackingCapacity`); `clear` empties the ring. */
  trackingEvents(clear = false): { events: TrackingEvent[]; dropped: number } {
    this.checkLive();
    let raw: NativeTrackingEvents;
    try {
      raw = this.#native.trackingEvents(clear);
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
    const events: TrackingEvent[] = [];
    for (let i = 0; i < raw.timeNs.length; i++) {
      events.push({
        timeNs: raw.timeNs[i]!,
        action: actions[raw.action[i]!] ?? 'alloc',
        ptr: raw.pointer[i]!,
        bytes: raw.bytes[i]!,
        stream: raw.stream[i]!,
        tag: raw.tag[i]!,
        reservedBytes: raw.reservedBytes[i]!,
      });
    }
    return { events, dropped: raw.dropped };
  }

  /** Pauses (false) or resumes (true) recording, keeping what the ring holds (needs `trackingCapacity`). */
  setTrackingEnabled(on: boolean): void {
    this.checkLive();
    checkBoolean(on, 'on');
    try {
      this.#native.setTrackingEnabled(on);
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  /** Tags the events recorded from now on (e.g. with an op or phase id). */
  setTrackingTag(tag: number): void {
    this.checkLive();
    checkNonNegative(tag, 'tag');
    this.#native.setTrackingTag(tag);
  }
}
