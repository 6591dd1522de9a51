/**
 * The base of every TypeScript adaptor: an allocator over another (its upstream) that forwards
 * every call, so a subclass overrides only what it changes. It mirrors the native adaptors (and
 * RMM's): the upstream is exposed, and it is not owned unless the adaptor is told so, so disposing
 * the adaptor leaves the upstream to whoever made it.
 * @module
 */
import { BaseAllocator } from '../base.js';
import type { Stream } from '../stream.js';
import type { Allocator, AllocatorStats, DevicePtr, PrefetchTarget, SleepReport, SleepRequest, TagStats } from '../types.js';
import { checkBoolean } from '../validate.js';

/** How an adaptor holds its upstream. */
export interface AdaptorOptions {
  /** Dispose the upstream when the adaptor is disposed (default false: the caller owns it). */
  ownsUpstream?: boolean;
}

export abstract class AllocatorAdaptor extends BaseAllocator {
  readonly #upstream: Allocator;
  readonly #ownsUpstream: boolean;
  /** Sleep and wake by tag: the upstream's, where it has them (see `Allocator.sleep`). */
  declare readonly sleep?: (request?: SleepRequest) => SleepReport;
  declare readonly wake?: (tags?: readonly string[]) => SleepReport;
  declare readonly tagStats?: () => TagStats[];
  declare readonly trimBackup?: () => void;
  declare readonly reserveBackup?: (bytes: number) => void;

  /** Keeps the upstream's name and device unless `name` is given. */
  protected constructor(upstream: Allocator, options: AdaptorOptions = {}, name: string = upstream.name) {
    super(name, upstream.device);
    const owns = options.ownsUpstream ?? false;
    checkBoolean(owns, 'ownsUpstream');
    this.#upstream = upstream;
    this.#ownsUpstream = owns;
    if (typeof upstream.sleep === 'function') {
      const { sleep, wake, tagStats, trimBackup } = upstream as Required<Allocator>;
      const forwarded: Pick<Required<Allocator>, 'sleep' | 'wake' | 'tagStats' | 'trimBackup'> = {
        sleep: (request) => {
          this.checkLive();
          return sleep.call(upstream, request);
        },
        wake: (tags) => {
          this.checkLive();
          return wake.call(upstream, tags);
        },
        tagStats: () => {
          this.checkLive();
          return tagStats.call(upstream);
        },
        trimBackup: () => {
          this.checkLive();
          trimBackup.call(upstream);
        },
      };
      const { reserveBackup } = upstream;
      const optional: Pick<Allocator, 'reserveBackup'> =
        reserveBackup === undefined
          ? {}
          : {
              reserveBackup: (bytes) => {
                this.checkLive();
                reserveBackup.call(upstream, bytes);
              },
            };
      for (const [key, value] of Object.entries({ ...forwarded, ...optional })) {
        Object.defineProperty(this, key, { value, enumerable: false, writable: false, configurable: false });
      }
    }
  }

  /** The allocator underneath. */
  get upstream(): Allocator {
    return this.#upstream;
  }

  /** True when disposing this adaptor disposes the upstream too. */
  get ownsUpstream(): boolean {
    return this.#ownsUpstream;
  }

  /** Passes the placement tag on to the upstream, where it places memory by tag. */
  setPlacementTag(tag: string): void {
    this.#upstream.setPlacementTag?.(tag);
  }

  protected doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    return this.#upstream.malloc(bytes, stream);
  }

  protected doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    this.#upstream.free(ptr, bytes, stream);
  }

  protected override doPrefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream: Stream | undefined): boolean {
    return this.#upstream.prefetch(ptr, bytes, to, stream);
  }

  protected override doRecordStream(ptr: DevicePtr, stream: Stream): void {
    this.#upstream.recordStream(ptr, stream);
  }

  protected doWrite(ptr: DevicePtr, data: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    this.#upstream.write(ptr, data, offset, stream);
  }

  protected doRead(ptr: DevicePtr, target: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    this.#upstream.read(ptr, target, offset, stream);
  }

  protected doStats(): AllocatorStats {
    return this.#upstream.stats();
  }

  protected doResetPeak(): void {
    this.#upstream.resetPeak();
  }

  protected override doTrim(bytesToKeep: number): void {
    this.#upstream.trim(bytesToKeep);
  }

  protected doDispose(): void {
    if (this.#ownsUpstream) this.#upstream.dispose();
  }
}
