/**
 * NativeAllocator: a strategy whose memory comes from a chain of native resources. Subclasses
 * only build the chain's spec; everything else is here.
 * @module
 */
import { BaseAllocator } from './base.js';
import type { Device } from './device.js';
import { InvalidStateError, translateNativeError } from './errors.js';
import { loadNative, type NativeResource, type NativeTiming, type ResourceSpec } from './native.js';
import type { Stream } from './stream.js';
import type { AllocatorStats, DevicePtr, PrefetchTarget } from './types.js';
import { checkBytes, checkNonNegative } from './validate.js';

/** Options every native strategy takes. */
export interface NativeLayerOptions {
  /** Caps the bytes taken from the driver (a limiting layer under the strategy), e.g. to pretend a GPU has 8 GiB. */
  limitBytes?: number;
  /** Records every malloc/free in a ring buffer of this many events (see trackingEvents()). Off by default. */
  trackingCapacity?: number;
}

/** One recorded allocation event. */
export interface TrackingEvent {
  /** Nanoseconds since the allocator was created. */
  timeNs: number;
  action: 'alloc' | 'free' | 'oom';
  ptr: DevicePtr;
  bytes: number;
  /** The stream's native handle. */
  stream: number;
  /** The tag set with setTrackingTag() when the event happened. */
  tag: number;
  /** The strategy's reserved bytes right after the event. */
  reservedBytes: number;
}

const actions = ['alloc', 'free', 'oom'] as const;
const resources = new WeakMap<NativeAllocator, NativeResource>();

/** The native handle of an allocator, for package-internal helpers (benchmarks, test kernels). */
export function nativeResourceOf(allocator: NativeAllocator): NativeResource {
  const r = resources.get(allocator);
  if (!r || allocator.disposed) throw new InvalidStateError(`the '${allocator.name}' allocator has been disposed`);
  return r;
}

function handleOf(stream: Stream | undefined): number {
  return stream === undefined ? 0 : stream.handle;
}

export abstract class NativeAllocator extends BaseAllocator {
  readonly #native: NativeResource;
  readonly #args = new Float64Array(3); // [bytes, stream, pointer], shared with the addon
  readonly #allocate: () => void;
  readonly #deallocate: () => void;

  /**
   * @param leaf the resource that takes memory from the driver (or the host).
   * @param layers a limiting layer goes right over the leaf, a tracking layer on top of everything.
   * @param wrapUpstream strategies built over the leaf (the pool, prefetch-on-allocate) put their
   *   own layer over the limited leaf here.
   */
  protected constructor(
    name: string,
    device: Device,
    leaf: ResourceSpec,
    layers: NativeLayerOptions = {},
    wrapUpstream?: (upstream: ResourceSpec) => ResourceSpec,
  ) {
    super(name, device);
    if (layers.limitBytes !== undefined) checkBytes(layers.limitBytes, 'limitBytes');
    if (layers.trackingCapacity !== undefined) checkBytes(layers.trackingCapacity, 'trackingCapacity');
    let spec: ResourceSpec = layers.limitBytes !== undefined ? { type: 'limit', upstream: leaf, limitBytes: layers.limitBytes } : leaf;
    if (wrapUpstream) spec = wrapUpstream(spec);
    if (layers.trackingCapacity !== undefined) spec = { type: 'track', upstream: spec, capacity: layers.trackingCapacity };
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
  }

  protected doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
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

  /** The size of the live allocation at `ptr`, or 0 if there is none. */
  allocationSize(ptr: DevicePtr): number {
    this.checkLive();
    return this.#native.allocationSize(ptr);
  }

  /** The recorded events, oldest first (needs `trackingCapacity`); `clear` empties the ring. */
  trackingEvents(clear = false): { events: TrackingEvent[]; dropped: number } {
    this.checkLive();
    let raw;
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

  /** Tags the events recorded from now on (e.g. with an op or phase id). */
  setTrackingTag(tag: number): void {
    this.checkLive();
    checkNonNegative(tag, 'tag');
    this.#native.setTrackingTag(tag);
  }

  /** Times malloc+free pairs of `bytes` in a native loop (no JavaScript per call). */
  benchmarkPairs(bytes: number, iterations: number, repeats = 5, stream?: Stream): NativeTiming {
    this.checkLive();
    checkBytes(bytes);
    checkBytes(iterations, 'iterations');
    checkBytes(repeats, 'repeats');
    try {
      return this.#native.benchPairs(bytes, iterations, repeats, handleOf(this.checkStream(stream)));
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }

  /**
   * Replays a mixed-size trace in a native loop: allocate sizes[i] in order, keeping at most
   * `window` allocations live (oldest freed first). Returns ns per malloc+free pair.
   */
  benchmarkTrace(sizes: Float64Array, window: number, repeats = 5, stream?: Stream): NativeTiming {
    this.checkLive();
    checkBytes(window, 'window');
    checkBytes(repeats, 'repeats');
    for (const s of sizes) checkBytes(s, 'sizes[i]');
    try {
      return this.#native.benchTrace(sizes, window, repeats, handleOf(this.checkStream(stream)));
    } catch (e) {
      throw translateNativeError(e, this.name);
    }
  }
}
