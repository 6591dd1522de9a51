/**
 * Allocation tracking over any allocator: the TypeScript counterpart of the native tracking layer,
 * for strategies written in TypeScript (plug-ins). Events go into a bounded ring buffer of typed
 * arrays, so recording costs a few stores per call and no garbage.
 * @module
 */
import { isOutOfMemory } from '../errors.js';
import { NativeAllocator } from '../native-allocator.js';
import { createAllocator, strategyInfo } from '../registry.js';
import type { Stream } from '../stream.js';
import type { Allocator, DevicePtr, TrackingEvent } from '../types.js';
import { checkBoolean, checkBytes, checkNonNegative } from '../validate.js';
import { AllocatorAdaptor, type AdaptorOptions } from './adaptor.js';

const actions = ['alloc', 'free', 'oom'] as const;

/** Events recorded so far, oldest first, and how many the ring's bound overwrote. */
export interface TrackingEvents {
  events: TrackingEvent[];
  dropped: number;
}

/**
 * Wraps an allocator and records each malloc, free and out-of-memory failure with its time, size,
 * stream, tag and the wrapped allocator's reserved bytes after the call. Everything else passes
 * through; the wrapper keeps the wrapped allocator's name and device. Like every adaptor it does not
 * own the wrapped allocator unless told to (`{ ownsUpstream: true }`).
 */
export class TrackingAllocator extends AllocatorAdaptor {
  readonly #t0 = performance.now();
  readonly #time: Float64Array;
  readonly #ptr: Float64Array;
  readonly #bytes: Float64Array;
  readonly #stream: Float64Array;
  readonly #reserved: Float64Array;
  readonly #tag: Uint32Array;
  readonly #action: Uint8Array;
  #next = 0;
  #count = 0;
  #dropped = 0;
  #currentTag = 0;
  #enabled = true;

  /** @param capacity the ring's size in events (the oldest are overwritten past it). */
  constructor(upstream: Allocator, capacity: number, options: AdaptorOptions = {}) {
    checkBytes(capacity, 'capacity');
    super(upstream, options);
    this.#time = new Float64Array(capacity);
    this.#ptr = new Float64Array(capacity);
    this.#bytes = new Float64Array(capacity);
    this.#stream = new Float64Array(capacity);
    this.#reserved = new Float64Array(capacity);
    this.#tag = new Uint32Array(capacity);
    this.#action = new Uint8Array(capacity);
  }

  /** Pauses (false) or resumes (true) recording, keeping what the ring holds (it starts on). */
  setTrackingEnabled(on: boolean): void {
    checkBoolean(on, 'on');
    this.#enabled = on;
  }

  /** Tags the events recorded from now on (e.g. with an op or phase id). */
  setTrackingTag(tag: number): void {
    this.checkLive();
    checkNonNegative(tag, 'tag');
    this.#currentTag = tag >>> 0;
  }

  /** The recorded events, oldest first; `clear` empties the ring. */
  trackingEvents(clear = false): TrackingEvents {
    this.checkLive();
    const capacity = this.#time.length;
    const first = (this.#next - this.#count + capacity) % capacity;
    const events: TrackingEvent[] = [];
    for (let k = 0; k < this.#count; k++) {
      const i = (first + k) % capacity;
      events.push({
        timeNs: this.#time[i]!,
        action: actions[this.#action[i]!]!,
        ptr: this.#ptr[i]!,
        bytes: this.#bytes[i]!,
        stream: this.#stream[i]!,
        tag: this.#tag[i]!,
        reservedBytes: this.#reserved[i]!,
      });
    }
    const dropped = this.#dropped;
    if (clear) {
      this.#next = 0;
      this.#count = 0;
    }
    return { events, dropped };
  }

  #push(action: number, ptr: number, bytes: number, stream: Stream | undefined): void {
    const capacity = this.#time.length;
    const i = this.#next;
    this.#time[i] = Math.round((performance.now() - this.#t0) * 1e6);
    this.#action[i] = action;
    this.#ptr[i] = ptr;
    this.#bytes[i] = bytes;
    this.#stream[i] = stream === undefined ? 0 : stream.handle;
    this.#tag[i] = this.#currentTag;
    this.#reserved[i] = this.upstream.stats().reservedBytes;
    this.#next = (i + 1) % capacity;
    if (this.#count < capacity) this.#count++;
    else this.#dropped++;
  }

  protected override doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    let ptr: DevicePtr;
    try {
      ptr = super.doMalloc(bytes, stream);
    } catch (e) {
      if (this.#enabled && isOutOfMemory(e)) this.#push(2, 0, bytes, stream);
      throw e;
    }
    if (this.#enabled) this.#push(0, ptr, bytes, stream);
    return ptr;
  }

  protected override doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    super.doFree(ptr, bytes, stream);
    if (this.#enabled) this.#push(1, ptr, bytes, stream);
  }
}

/** An allocator with allocation tracking on, and the way to read its events. */
export interface TrackedAllocator {
  allocator: Allocator;
  /** The recorded events, oldest first; `clear` empties the ring. */
  events(clear?: boolean): TrackingEvents;
  /** Tags the events recorded from now on. */
  setTag(tag: number): void;
  /** Pauses (false) or resumes (true) recording. */
  setTrackingEnabled(on: boolean): void;
}

/**
 * Creates the registered strategy `name` with allocation tracking: native strategies get the
 * native tracking layer (`trackingCapacity`), others are wrapped in a {@link TrackingAllocator}.
 * @param capacity the ring buffer's size in events.
 */
export function createTrackedAllocator(name: string, options: Record<string, unknown>, capacity: number): TrackedAllocator {
  checkBytes(capacity, 'capacity');
  if (strategyInfo(name).nativeLayers) {
    const allocator = createAllocator(name, { ...options, trackingCapacity: capacity });
    if (allocator instanceof NativeAllocator) {
      return {
        allocator,
        events: (clear) => allocator.trackingEvents(clear),
        setTag: (tag) => allocator.setTrackingTag(tag),
        setTrackingEnabled: (on) => allocator.setTrackingEnabled(on),
      };
    }
    allocator.dispose();
    throw new TypeError(`The '${name}' strategy is registered with native layers but did not create a NativeAllocator`);
  }
  // The tracker made the strategy, so disposing the tracked allocator disposes it too.
  const allocator = new TrackingAllocator(createAllocator(name, options), capacity, { ownsUpstream: true });
  return {
    allocator,
    events: (clear) => allocator.trackingEvents(clear),
    setTag: (tag) => allocator.setTrackingTag(tag),
    setTrackingEnabled: (on) => allocator.setTrackingEnabled(on),
  };
}
