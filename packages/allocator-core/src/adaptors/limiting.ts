/**
 * A byte limit over any allocator: the TypeScript counterpart of the native limiting layer (and of
 * RMM's `limiting_resource_adaptor`), for strategies written in TypeScript. It counts the bytes it
 * passed upstream and still holds, refuses a request that would take the count past the limit with
 * an {@link OutOfMemoryError}, and rolls its count back when the upstream throws.
 * @module
 */
import { OutOfMemoryError } from '../errors.js';
import type { Stream } from '../stream.js';
import type { Allocator, AllocatorStats, DevicePtr } from '../types.js';
import { checkNonNegative } from '../validate.js';
import { AllocatorAdaptor, type AdaptorOptions } from './adaptor.js';

/**
 * A byte budget that several {@link LimitingAdaptor}s can share, so that together they behave as
 * one device of `limitBytes` (a strategy that takes memory from two upstreams still has one GPU).
 */
export class ByteBudget {
  #used = 0;

  constructor(
    /** The most bytes the adaptors sharing this budget may hold at once. */
    readonly limitBytes: number,
  ) {
    checkNonNegative(limitBytes, 'limitBytes');
  }

  /** Bytes held through the adaptors sharing this budget. */
  get usedBytes(): number {
    return this.#used;
  }

  /** Takes `bytes` when they fit; false (and nothing taken) otherwise. */
  tryTake(bytes: number): boolean {
    if (bytes > this.limitBytes - this.#used) return false;
    this.#used += bytes;
    return true;
  }

  /** Gives `bytes` back. */
  give(bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes);
  }
}

/**
 * Wraps an allocator and caps the bytes held through it at a limit (or a shared {@link ByteBudget}).
 * Statistics are the upstream's, with the adaptor's own refusals added to `oomCount`. Like every
 * adaptor it does not own the upstream unless told to (`{ ownsUpstream: true }`).
 */
export class LimitingAdaptor extends AllocatorAdaptor {
  readonly #budget: ByteBudget;
  #ooms = 0;

  /** @param limit the most bytes held through this adaptor, or a budget shared with other adaptors. */
  constructor(upstream: Allocator, limit: number | ByteBudget, options: AdaptorOptions = {}) {
    const budget = limit instanceof ByteBudget ? limit : new ByteBudget(limit);
    super(upstream, options);
    this.#budget = budget;
  }

  /** The limit, bytes. */
  get limitBytes(): number {
    return this.#budget.limitBytes;
  }

  /** Bytes held through this adaptor (and any other sharing its budget). */
  get usedBytes(): number {
    return this.#budget.usedBytes;
  }

  protected override doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    if (!this.#budget.tryTake(bytes)) {
      this.#ooms++;
      const used = this.#budget.usedBytes;
      throw new OutOfMemoryError(
        `${this.name}: limiting adaptor: ${bytes} bytes requested with ${used} of the ${this.#budget.limitBytes}-byte limit in use`,
        bytes,
        this.doStats(),
        this.name,
      );
    }
    try {
      return super.doMalloc(bytes, stream);
    } catch (e) {
      this.#budget.give(bytes); // the upstream kept nothing
      throw e;
    }
  }

  protected override doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    super.doFree(ptr, bytes, stream); // the upstream validates first; a bad free changes no count
    this.#budget.give(bytes);
  }

  protected override doStats(): AllocatorStats {
    const s = super.doStats();
    return { ...s, oomCount: s.oomCount + this.#ooms };
  }
}
