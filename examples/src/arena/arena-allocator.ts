/**
 * The 'arena' strategy, written in TypeScript over any other allocator: a per-step arena. It takes
 * large chunks from an upstream allocator and bump-allocates 256-byte aligned blocks inside them.
 * Freeing a block only marks it freed; once every block is freed (or on {@link ArenaAllocator.reset})
 * the arena rewinds and reuses its chunks without asking the upstream again. Made for the
 * temporaries of one training step: allocate them all, then reset.
 *
 * Side-effect free; index.ts registers it.
 * @module
 */
import {
  BaseAllocator,
  checkBytes,
  checkOptionKeys,
  createAllocator,
  hasAllocator,
  hasCudaDevice,
  InvalidStateError,
  OutOfMemoryError,
  isOutOfMemory,
  Stream,
  synchronizeDevice,
  type Allocator,
  type AllocatorStats,
  type DevicePtr,
  type PrefetchTarget,
} from '@gpumem/allocator-core';

/** Alignment of every block the arena hands out, as for every gpumem strategy. */
export const ARENA_ALIGNMENT = 256;

/** Default size of the chunks taken from the upstream: 4 MiB. */
export const DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024;

/** An arena that creates (and owns) its upstream allocator by registered name. */
export interface ArenaOverNamedUpstream {
  /**
   * Registered name of the allocator chunks come from (default: 'cuda' when a CUDA device is
   * present, else 'host'). The arena creates it and disposes it with itself.
   */
  upstream?: string;
  /** Options for the upstream allocator, as `createAllocator(upstream, upstreamOptions)` takes them. */
  upstreamOptions?: Record<string, unknown>;
  /** Size of the chunks taken from the upstream, rounded up to 256 bytes (default 4 MiB). */
  chunkBytes?: number;
  upstreamAllocator?: never;
}

/** An arena over an allocator the caller made; the arena does not dispose it. */
export interface ArenaOverAllocator {
  /** The allocator chunks come from. It must hand out 256-byte aligned memory and outlive the arena. */
  upstreamAllocator: Allocator;
  /** Size of the chunks taken from the upstream, rounded up to 256 bytes (default 4 MiB). */
  chunkBytes?: number;
  upstream?: never;
  upstreamOptions?: never;
}

/** Options of the 'arena' strategy: either an upstream by name, or an existing allocator. */
export type ArenaAllocatorOptions = ArenaOverNamedUpstream | ArenaOverAllocator;

/** One allocation taken from the upstream. */
interface Chunk {
  readonly ptr: DevicePtr;
  /** The size asked of the upstream (what it must be freed with). */
  readonly bytes: number;
  /** The stream the chunk was allocated on upstream, and is freed on. */
  readonly stream: Stream | undefined;
  /** True for a chunk made for one request larger than chunkBytes. */
  readonly dedicated: boolean;
  /** Bump offset: bytes of the chunk handed out since the last rewind (regular chunks). */
  used: number;
  /** Live blocks in the chunk. */
  live: number;
}

/** A live block: the requested size and the chunk it lies in. */
interface Block {
  readonly bytes: number;
  readonly chunk: Chunk;
}

const optionKeys = ['upstream', 'upstreamOptions', 'upstreamAllocator', 'chunkBytes'];

function hex(ptr: number): string {
  return `0x${ptr.toString(16)}`;
}

function isAllocator(value: unknown): value is Allocator {
  if (value === null || typeof value !== 'object') return false;
  const a = value as Record<string, unknown>;
  return ['malloc', 'free', 'write', 'read', 'stats', 'dispose'].every((m) => typeof a[m] === 'function');
}

/**
 * A per-step arena over any allocator.
 *
 * - `malloc` bump-allocates 256-byte aligned blocks in chunks of `chunkBytes` taken from the
 *   upstream; a request larger than `chunkBytes` gets a dedicated chunk of its own size, which is
 *   kept for later oversized requests once freed.
 * - `free` checks the pointer and size and marks the block freed. When no block is left the arena
 *   rewinds: every chunk is reusable, with no upstream call. {@link ArenaAllocator.reset} frees
 *   every block at once.
 * - `trim` gives chunks without live blocks back to the upstream; `dispose` gives back everything.
 * - Stream order: memory that may be reused (after a rewind, reset, or the free of a dedicated
 *   chunk) is handed out again at once on the streams that used it, and on any other stream only
 *   after those streams are synchronised.
 *
 * Statistics: `allocatedBytes` counts requested bytes of live blocks; `reservedBytes` the bytes of
 * the chunks held; `upstreamAllocCount`/`upstreamFreeCount` count chunk allocations/frees;
 * `segmentCount` is the number of chunks held.
 */
export class ArenaAllocator extends BaseAllocator {
  /** The allocator chunks come from. */
  readonly upstream: Allocator;
  /** True when the arena created the upstream and disposes it with itself. */
  readonly ownsUpstream: boolean;
  /** Size of the regular chunks taken from the upstream. */
  readonly chunkBytes: number;

  /** Regular chunks, in bump order; `#cursor` is the one allocations come from. */
  readonly #chunks: Chunk[] = [];
  #cursor = 0;
  /** Chunks made for oversized requests. */
  readonly #dedicated: Chunk[] = [];
  readonly #live = new Map<DevicePtr, Block>();
  /** Streams that used blocks since the last rewind, by native handle. */
  readonly #inUse = new Map<number, Stream>();
  /** Streams whose queued work may still use memory that is free to be handed out again. */
  readonly #pending = new Map<number, Stream>();
  readonly #defaultStream: Stream;

  #allocated = 0;
  #peakAllocated = 0;
  #reserved = 0;
  #peakReserved = 0;
  #allocCount = 0;
  #freeCount = 0;
  #upstreamAllocCount = 0;
  #upstreamFreeCount = 0;
  #oomCount = 0;

  /** Creates an arena; see {@link ArenaAllocatorOptions}. */
  constructor(options: ArenaAllocatorOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`Expected an options object for options but received ${typeof options}`);
    }
    checkOptionKeys(options, optionKeys, 'arena');
    const chunkBytes = ArenaAllocator.#chunkSize(options.chunkBytes);
    let upstream: Allocator;
    let owns: boolean;
    if (options.upstreamAllocator !== undefined) {
      if (options.upstream !== undefined || options.upstreamOptions !== undefined) {
        throw new TypeError('Expected either upstreamAllocator or upstream/upstreamOptions for the arena, not both');
      }
      if (!isAllocator(options.upstreamAllocator)) {
        throw new TypeError('Expected an Allocator for upstreamAllocator');
      }
      if (options.upstreamAllocator.disposed) {
        throw new InvalidStateError(`the '${options.upstreamAllocator.name}' allocator given as upstreamAllocator has been disposed`);
      }
      upstream = options.upstreamAllocator;
      owns = false;
    } else {
      const name = options.upstream ?? (hasCudaDevice() ? 'cuda' : 'host');
      if (typeof name !== 'string') throw new TypeError(`Expected a registered allocator name for upstream but received ${typeof name}`);
      if (!hasAllocator(name)) throw new RangeError(`Expected a registered allocator name for upstream but received '${name}'`);
      const upstreamOptions = options.upstreamOptions ?? {};
      if (upstreamOptions === null || typeof upstreamOptions !== 'object') {
        throw new TypeError(`Expected an options object for upstreamOptions but received ${typeof upstreamOptions}`);
      }
      upstream = createAllocator(name, upstreamOptions);
      owns = true;
    }
    super('arena', upstream.device);
    this.upstream = upstream;
    this.ownsUpstream = owns;
    this.chunkBytes = chunkBytes;
    this.#defaultStream = Stream.default(upstream.device);
  }

  static #chunkSize(value: unknown): number {
    if (value === undefined) return DEFAULT_CHUNK_BYTES;
    checkBytes(value, 'chunkBytes');
    const rounded = Math.ceil(value / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
    if (!Number.isSafeInteger(rounded)) throw new RangeError(`Expected chunkBytes below 2^53 - 256 but received ${value}`);
    return rounded;
  }

  /** Live blocks. */
  get liveBlocks(): number {
    this.checkLive();
    return this.#live.size;
  }

  /**
   * Frees every live block at once (each counts in `freeCount`) and rewinds the arena. Pointers
   * handed out before are invalid afterwards. The chunks stay reserved; `trim()` gives them back.
   */
  reset(): void {
    this.checkLive();
    this.#freeCount += this.#live.size;
    this.#allocated = 0;
    this.#live.clear();
    for (const c of this.#chunks) c.live = 0;
    for (const c of this.#dedicated) c.live = 0;
    this.#rewind();
  }

  // ----- allocation -----------------------------------------------------------------------------

  protected doMalloc(bytes: number, stream: Stream | undefined): DevicePtr {
    this.#orderAfterPending(stream);
    const block = bytes > this.chunkBytes ? this.#takeDedicated(bytes, stream) : this.#bump(bytes, stream);
    this.#live.set(block.ptr, { bytes, chunk: block.chunk });
    block.chunk.live++;
    this.#allocated += bytes;
    this.#peakAllocated = Math.max(this.#peakAllocated, this.#allocated);
    this.#allocCount++;
    this.#use(stream);
    return block.ptr;
  }

  /** A block of `bytes` from the regular chunks: the first with room, from the cursor on. */
  #bump(bytes: number, stream: Stream | undefined): { ptr: DevicePtr; chunk: Chunk } {
    const rounded = Math.ceil(bytes / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
    let index = this.#cursor;
    while (index < this.#chunks.length && this.#chunks[index]!.bytes - this.#chunks[index]!.used < rounded) index++;
    let chunk = this.#chunks[index];
    if (chunk === undefined) {
      chunk = this.#newChunk(this.chunkBytes, false, bytes, stream); // throws, changing nothing, on OOM
      this.#chunks.push(chunk);
      index = this.#chunks.length - 1;
    }
    this.#cursor = index;
    const ptr = chunk.ptr + chunk.used;
    chunk.used += rounded;
    return { ptr, chunk };
  }

  /** A dedicated chunk for an oversized request: the smallest free one that fits, or a new one. */
  #takeDedicated(bytes: number, stream: Stream | undefined): { ptr: DevicePtr; chunk: Chunk } {
    let best: Chunk | undefined;
    for (const c of this.#dedicated) {
      if (c.live === 0 && c.bytes >= bytes && (best === undefined || c.bytes < best.bytes)) best = c;
    }
    if (best === undefined) {
      best = this.#newChunk(bytes, true, bytes, stream);
      this.#dedicated.push(best);
    }
    return { ptr: best.ptr, chunk: best };
  }

  /** Takes a chunk from the upstream. An upstream OutOfMemoryError becomes the arena's own. */
  #newChunk(size: number, dedicated: boolean, requested: number, stream: Stream | undefined): Chunk {
    let ptr: DevicePtr;
    try {
      ptr = this.upstream.malloc(size, stream);
    } catch (e) {
      if (!isOutOfMemory(e)) throw e;
      this.#oomCount++;
      // The upstream's reason without its figures: this error adds the arena's own.
      const reason = typeof e.reason === 'string' ? e.reason : e instanceof Error ? e.message : String(e);
      throw new OutOfMemoryError(
        `arena: could not allocate ${requested} bytes: the upstream '${this.upstream.name}' could not supply a chunk of ${size} bytes (${reason})`,
        requested,
        this.doStats(),
        this.name,
      );
    }
    if (ptr % ARENA_ALIGNMENT !== 0) {
      this.upstream.free(ptr, size, stream);
      throw new Error(`arena: the upstream '${this.upstream.name}' returned ${hex(ptr)}, which is not ${ARENA_ALIGNMENT}-byte aligned`);
    }
    this.#reserved += size;
    this.#peakReserved = Math.max(this.#peakReserved, this.#reserved);
    this.#upstreamAllocCount++;
    return { ptr, bytes: size, stream, dedicated, used: 0, live: 0 };
  }

  // ----- free, rewind, reset --------------------------------------------------------------------

  protected doFree(ptr: DevicePtr, bytes: number, stream: Stream | undefined): void {
    const block = this.#block(ptr); // TypeError naming ptr when it is not live
    if (block.bytes !== bytes) {
      throw new RangeError(`Expected bytes to be ${block.bytes}, the size allocated at ${hex(ptr)}, but received ${bytes}`);
    }
    this.#live.delete(ptr);
    block.chunk.live--;
    this.#allocated -= bytes;
    this.#freeCount++;
    this.#use(stream);
    if (this.#live.size === 0) {
      this.#rewind();
    } else if (block.chunk.dedicated) {
      this.#markReusable(); // the dedicated chunk may be handed out again before the next rewind
    }
  }

  /** Every chunk becomes reusable from its start. */
  #rewind(): void {
    for (const c of this.#chunks) c.used = 0;
    this.#cursor = 0;
    this.#markReusable();
    this.#inUse.clear();
  }

  // ----- stream order ---------------------------------------------------------------------------

  #use(stream: Stream | undefined): void {
    const s = stream ?? this.#defaultStream;
    this.#inUse.set(s.handle, s);
  }

  /** Memory used since the last rewind may be handed out again: its streams' work must come first. */
  #markReusable(): void {
    for (const [handle, s] of this.#inUse) this.#pending.set(handle, s);
  }

  /** Before handing out memory on `stream`: waits for the work of the other streams that used it. */
  #orderAfterPending(stream: Stream | undefined): void {
    if (this.#pending.size === 0) return;
    const mine = (stream ?? this.#defaultStream).handle;
    for (const [handle, s] of this.#pending) {
      if (handle === mine) continue;
      if (s.destroyed) synchronizeDevice(this.device);
      else s.synchronize();
      this.#pending.delete(handle);
    }
  }

  // ----- data and streams of live blocks ----------------------------------------------------------

  /** The live block at `ptr`, or a TypeError naming `ptr`. */
  #block(ptr: DevicePtr): Block {
    const block = this.#live.get(ptr);
    if (block === undefined) {
      throw new TypeError(
        `Expected ptr to be a live allocation of this allocator but received ${hex(ptr)} (never allocated here, or already freed)`,
      );
    }
    return block;
  }

  /** The chunk offset of [ptr + offset, + length), checked to lie inside the live block at `ptr`. */
  #range(ptr: DevicePtr, offset: number, length: number): { chunk: Chunk; offset: number } {
    const block = this.#block(ptr);
    if (offset > block.bytes || length > block.bytes - offset) {
      throw new RangeError(
        `Expected offset + length <= ${block.bytes} (the allocation's size) but received offset ${offset} and length ${length}`,
      );
    }
    return { chunk: block.chunk, offset: ptr - block.chunk.ptr + offset };
  }

  protected doWrite(ptr: DevicePtr, data: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    const r = this.#range(ptr, offset, data.byteLength); // TypeError for ptr, RangeError for offset
    this.upstream.write(r.chunk.ptr, data, r.offset, stream);
  }

  protected doRead(ptr: DevicePtr, target: ArrayBufferView, offset: number, stream: Stream | undefined): void {
    const r = this.#range(ptr, offset, target.byteLength);
    this.upstream.read(r.chunk.ptr, target, r.offset, stream);
  }

  /** Prefetches the chunk from its start to the end of the block's first `bytes`. */
  protected override doPrefetch(ptr: DevicePtr, bytes: number, to: PrefetchTarget, stream: Stream | undefined): boolean {
    const block = this.#block(ptr);
    if (bytes > block.bytes) {
      throw new RangeError(`Expected bytes to be at most ${block.bytes}, the size allocated at ${hex(ptr)}, but received ${bytes}`);
    }
    return this.upstream.prefetch(block.chunk.ptr, ptr - block.chunk.ptr + bytes, to, stream);
  }

  protected override doRecordStream(ptr: DevicePtr, stream: Stream): void {
    const block = this.#block(ptr);
    this.upstream.recordStream(block.chunk.ptr, stream);
    this.#use(stream);
  }

  // ----- statistics, trim, dispose ----------------------------------------------------------------

  protected doStats(): AllocatorStats {
    return {
      allocatedBytes: this.#allocated,
      peakAllocatedBytes: this.#peakAllocated,
      reservedBytes: this.#reserved,
      peakReservedBytes: this.#peakReserved,
      allocCount: this.#allocCount,
      freeCount: this.#freeCount,
      upstreamAllocCount: this.#upstreamAllocCount,
      upstreamFreeCount: this.#upstreamFreeCount,
      oomCount: this.#oomCount,
      segmentCount: this.#chunks.length + this.#dedicated.length,
    };
  }

  protected doResetPeak(): void {
    this.#peakAllocated = this.#allocated;
    this.#peakReserved = this.#reserved;
  }

  /**
   * Gives chunks without live blocks back to the upstream until at most `bytesToKeep` bytes stay
   * reserved: free dedicated chunks first (largest first), then regular chunks from the last.
   */
  protected override doTrim(bytesToKeep: number): void {
    const dedicated = this.#dedicated.filter((c) => c.live === 0).sort((x, y) => y.bytes - x.bytes);
    for (const c of dedicated) {
      if (this.#reserved <= bytesToKeep) return;
      this.#release(c);
      this.#dedicated.splice(this.#dedicated.indexOf(c), 1);
    }
    for (let i = this.#chunks.length - 1; i >= 0 && this.#reserved > bytesToKeep; i--) {
      const c = this.#chunks[i]!;
      if (c.live !== 0) continue;
      this.#release(c);
      this.#chunks.splice(i, 1);
      if (i < this.#cursor) this.#cursor--; // chunks after the cursor are unused, so it stays valid
    }
  }

  /**
   * Gives one chunk back to the upstream, on the stream it came from, after marking it used on
   * every other stream that may still have work queued on it.
   */
  #release(c: Chunk): void {
    const own = (c.stream ?? this.#defaultStream).handle;
    let destroyed = false;
    for (const streams of [this.#inUse, this.#pending]) {
      for (const [handle, s] of streams) {
        if (handle === own) continue;
        if (s.destroyed) destroyed = true;
        else this.upstream.recordStream(c.ptr, s);
      }
    }
    if (destroyed) synchronizeDevice(this.device);
    this.upstream.free(c.ptr, c.bytes, c.stream);
    this.#reserved -= c.bytes;
    this.#upstreamFreeCount++;
  }

  /** Returns every chunk to the upstream, and disposes the upstream if the arena created it. */
  protected doDispose(): void {
    const all = [...this.#chunks, ...this.#dedicated];
    this.#chunks.length = 0;
    this.#dedicated.length = 0;
    this.#live.clear();
    this.#allocated = 0;
    for (const c of all) {
      try {
        this.#release(c);
      } catch {
        // dispose never throws: an upstream that is already gone has freed its memory itself
      }
    }
    this.#inUse.clear();
    this.#pending.clear();
    if (this.ownsUpstream) this.upstream.dispose();
  }
}
