/**
 * BaseAllocator: the shared front of every strategy, native or TypeScript. Public methods check
 * their arguments and the allocator's state, then call one protected `do*` method (the same
 * non-virtual-interface shape as the C++ memory_resource), so a strategy implements only what it
 * does differently and every strategy rejects bad input the same way.
 * @module
 */
import type { Device } from './device.js';
import { InvalidStateError } from './errors.js';
import { Stream } from './stream.js';
import type { Allocator, AllocatorStats, DevicePtr, PrefetchTarget } from './types.js';
import { checkBytes, checkNonNegative, checkOneOf, checkPointer } from './validate.js';

const prefetchTargets = ['device', 'host'] as const;

export abstract class BaseAllocator implements Allocator {
  #disposed = false;

  protected constructor(
    readonly name: string,
    readonly device: Device,
  ) {}

  get disposed(): boolean {
    return this.#disposed;
  }

  malloc(bytes: number, stream?: Stream): DevicePtr {
    this.checkLive();
    checkBytes(bytes);
    return this.doMalloc(bytes, this.checkStream(stream));
  }

  free(ptr: DevicePtr, bytes: number, stream?: Stream): void {
    this.checkLive();
    checkPointer(ptr);
    checkBytes(bytes);
    this.doFree(ptr, bytes, this.checkStream(stream));
  }

  prefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream?: Stream): boolean {
    this.checkLive();
    checkPointer(ptr);
    checkBytes(bytes);
    checkOneOf(to, prefetchTargets, 'to');
    return this.doPrefetch(ptr, bytes, to, this.checkStream(stream));
  }

  recordStream(ptr: DevicePtr, stream: Stream): void {
    this.checkLive();
    checkPointer(ptr);
    if (stream === undefined) throw new TypeError('Expected a Stream for stream but received undefined');
    this.doRecordStream(ptr, this.checkStream(stream) as Stream);
  }

  write(ptr: DevicePtr, data: ArrayBufferView, offset = 0, stream?: Stream): void {
    this.doWrite(ptr, data, offset, this.#checkCopy(ptr, data, 'data', offset, stream));
  }

  read(ptr: DevicePtr, target: ArrayBufferView, offset = 0, stream?: Stream): void {
    this.doRead(ptr, target, offset, this.#checkCopy(ptr, target, 'target', offset, stream));
  }

  /** The checks of a copy between host memory and an allocation (write, read); returns the stream it runs on. */
  #checkCopy(ptr: DevicePtr, view: ArrayBufferView, viewName: string, offset: number, stream: Stream | undefined): Stream | undefined {
    this.checkLive();
    checkPointer(ptr);
    checkView(view, viewName);
    checkNonNegative(offset, 'offset');
    return this.checkStream(stream);
  }

  stats(): AllocatorStats {
    this.checkLive();
    return this.doStats();
  }

  resetPeak(): void {
    this.checkLive();
    this.doResetPeak();
  }

  trim(bytesToKeep = 0): void {
    this.checkLive();
    checkNonNegative(bytesToKeep, 'bytesToKeep');
    this.doTrim(bytesToKeep);
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.doDispose();
  }

  /** Throws InvalidStateError after dispose(). */
  protected checkLive(): void {
    if (this.#disposed) throw new InvalidStateError(`the '${this.name}' allocator has been disposed`);
  }

  /**
   * Checks that `stream` is a live Stream this allocator can use: a CUDA allocator takes streams of
   * its own device; a host allocator takes any (it only uses them as keys). A Stream made by another
   * copy of the core passes (`instanceof` is shared), and devices compare by id, as each copy of the
   * core has its own Device objects.
   */
  protected checkStream(stream: Stream | undefined): Stream | undefined {
    if (stream === undefined) return undefined;
    if (!(stream instanceof Stream)) {
      throw new TypeError(`Expected a Stream (or undefined) for stream but received ${typeof stream}`);
    }
    if (stream.destroyed) throw new TypeError('Expected a live Stream for stream but received a destroyed one');
    if (this.device.kind === 'cuda' && stream.device.id !== this.device.id && stream.handle !== 0) {
      throw new TypeError(`Expected a stream of ${this.device.id} for stream but received one of ${stream.device.id}`);
    }
    return stream;
  }

  protected abstract doMalloc(bytes: number, stream: Stream | undefined): DevicePtr;
  protected abstract doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void;
  protected abstract doWrite(ptr: DevicePtr, data: ArrayBufferView, offset: number, stream: Stream | undefined): void;
  protected abstract doRead(ptr: DevicePtr, target: ArrayBufferView, offset: number, stream: Stream | undefined): void;
  protected abstract doStats(): AllocatorStats;
  protected abstract doResetPeak(): void;
  protected abstract doDispose(): void;
  /** Default: nothing to move. */
  protected doPrefetch(_ptr: DevicePtr, _bytes: number, _to: PrefetchTarget, _stream: Stream | undefined): boolean {
    return false;
  }
  /** Default: nothing to record (strategies whose free synchronises, or with a single stream). */
  protected doRecordStream(_ptr: DevicePtr, _stream: Stream): void {}
  /** Default: nothing cached. */
  protected doTrim(_bytesToKeep: number): void {}
}

function checkView(value: unknown, name: string): asserts value is ArrayBufferView {
  if (!ArrayBuffer.isView(value)) {
    throw new TypeError(`Expected a TypedArray, Buffer or DataView for ${name} but received ${typeof value}`);
  }
}
