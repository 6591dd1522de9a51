/**
 * Replaying an allocation trace through an allocator: the same mallocs and frees, in the same
 * order, on as many streams, with no kernels in between, timed call by call. Native strategies run
 * the trace in a native loop (`replayNative` of `@gpumem/allocator-core/tools`); strategies written
 * in TypeScript run the same loop here, over the Allocator interface.
 * @module
 */
import { NativeAllocator, isOutOfMemory, median, Stream, type Allocator, type NativeReplayPass } from '@gpumem/allocator-core';
import { replayNative } from '@gpumem/allocator-core/tools';
import type { AllocationTrace } from './format.js';

/**
 * A trace compiled for replay. Trace pointers become slots (an allocation fills one, its free empties
 * it; freed slots are reused), so the replay needs no map at run time and never frees a pointer it
 * did not get.
 */
export interface CompiledTrace {
  /** Per operation: 0 allocate, 1 free. */
  action: Uint8Array;
  /** Per operation: the slot filled or emptied. */
  slot: Uint32Array;
  /** Per operation: bytes (a free carries the size its allocation had). */
  bytes: Float64Array;
  /** Per operation: an index into `streamIds`. */
  streamIndex: Uint32Array;
  /** Per operation: the trace's time of the event, ns (the x axis of replay timelines). */
  timeNs: Float64Array;
  /** Per operation: the allocation's tag (a free carries its allocation's), an index into `tagNames`. */
  tag: Uint32Array;
  /**
   * What each tag means, from the trace's header (the trainer's phases, a snapshot's allocation
   * frames); absent when the trace names none.
   */
  tagNames?: string[];
  /** The trace's stream ids, in order of first use. */
  streamIds: number[];
  /** Slots needed: the most allocations the trace holds at once. */
  slots: number;
  /** Allocations and frees to replay. */
  allocs: number;
  frees: number;
  /** Frees of pointers the trace never allocated (a trace from a ring buffer starts mid-run): skipped. */
  unmatchedFrees: number;
  /** Out-of-memory events of the recording: not replayed (the replay counts its own). */
  traceOoms: number;
  /** Events of 0 bytes (RMM logs can hold them): skipped. */
  zeroByteEvents: number;
  /** Frees whose size differs from their allocation's: replayed with the allocation's size. */
  sizeMismatches: number;
  /** Allocations still live at the end of the trace (the replay frees them after each pass). */
  liveAtEnd: number;
  /**
   * The highest sum of live allocation sizes along the trace: what its peak allocated was, and the
   * least memory any strategy needs to replay it without running out.
   */
  peakAllocatedBytes: number;
  /** The largest single allocation: a capacity below it cannot replay the trace at all. */
  largestRequestBytes: number;
  /** The highest reserved bytes the recording saw, where its events carry them. */
  peakReservedBytes?: number;
}

/**
 * Compiles a trace for replay. Events are replayed in the order given, never re-sorted: the readers
 * emit them in time order (a PyTorch snapshot's free at its completion time, when the memory was
 * really given back), and ties keep the file's order. Pointers are matched first in, first out: if
 * a pointer is allocated again before its free was logged (threads logging out of order), its next
 * free goes to the older allocation.
 */
export function compileTrace(trace: AllocationTrace): CompiledTrace {
  const events = trace.events;
  const n = events.length;
  const action = new Uint8Array(n);
  const slot = new Uint32Array(n);
  const bytes = new Float64Array(n);
  const streamIndex = new Uint32Array(n);
  const timeNs = new Float64Array(n);
  const tag = new Uint32Array(n);
  const slotTag: number[] = [];
  const streamIds: number[] = [];
  const streamOf = new Map<number, number>();
  const live = new Map<number, number[]>(); // trace pointer -> slots, oldest first
  const slotBytes: number[] = [];
  const freeSlots: number[] = [];
  const c = { allocs: 0, frees: 0, unmatchedFrees: 0, traceOoms: 0, zeroByteEvents: 0, sizeMismatches: 0 };
  let ops = 0;
  let liveBytes = 0;
  let liveCount = 0;
  let peak = 0;
  let largest = 0;
  let peakReserved: number | undefined;
  for (const e of events) {
    if (e.reservedBytes !== undefined) peakReserved = Math.max(peakReserved ?? 0, e.reservedBytes);
    if (e.action === 'oom') {
      c.traceOoms++;
      continue;
    }
    if (e.bytes === 0) {
      c.zeroByteEvents++;
      continue;
    }
    let s: number;
    if (e.action === 'alloc') {
      s = freeSlots.pop() ?? slotBytes.length;
      slotBytes[s] = e.bytes;
      slotTag[s] = Number.isSafeInteger(e.tag) && e.tag >= 0 ? e.tag : 0;
      const queue = live.get(e.ptr);
      if (queue) queue.push(s);
      else live.set(e.ptr, [s]);
      liveBytes += e.bytes;
      liveCount++;
      peak = Math.max(peak, liveBytes);
      largest = Math.max(largest, e.bytes);
      c.allocs++;
    } else {
      const queue = live.get(e.ptr);
      if (!queue) {
        c.unmatchedFrees++;
        continue;
      }
      s = queue.shift()!;
      if (queue.length === 0) live.delete(e.ptr);
      if (slotBytes[s] !== e.bytes) c.sizeMismatches++;
      liveBytes -= slotBytes[s]!;
      liveCount--;
      freeSlots.push(s);
      c.frees++;
    }
    let si = streamOf.get(e.stream);
    if (si === undefined) {
      si = streamIds.length;
      streamIds.push(e.stream);
      streamOf.set(e.stream, si);
    }
    action[ops] = e.action === 'alloc' ? 0 : 1;
    slot[ops] = s;
    bytes[ops] = slotBytes[s]!;
    streamIndex[ops] = si;
    timeNs[ops] = e.timeNs;
    tag[ops] = slotTag[s]!;
    ops++;
  }
  const compiled: CompiledTrace = {
    action: action.subarray(0, ops),
    slot: slot.subarray(0, ops),
    bytes: bytes.subarray(0, ops),
    streamIndex: streamIndex.subarray(0, ops),
    timeNs: timeNs.subarray(0, ops),
    tag: tag.subarray(0, ops),
    streamIds,
    slots: slotBytes.length,
    ...c,
    liveAtEnd: liveCount,
    peakAllocatedBytes: peak,
    largestRequestBytes: largest,
  };
  if (peakReserved !== undefined) compiled.peakReservedBytes = peakReserved;
  if (trace.header.tags && trace.header.tags.length > 0) compiled.tagNames = [...trace.header.tags];
  return compiled;
}

/** Where the replay loop runs: in native code (native strategies only) or in TypeScript. */
export type ReplayLoop = 'native' | 'typescript';

export interface ReplayOptions {
  /** Passes over the trace (default 5); times are the median over them. */
  repeats?: number;
  /** Default: 'native' for a NativeAllocator, 'typescript' otherwise. */
  loop?: ReplayLoop;
  /**
   * End each pass at its first out-of-memory (`ooms` is then 0 or 1): for a replay that only asks
   * whether the trace fits, whatever the number of requests that would fail after the first
   * (default false: every failure is counted). The figures after the failure are then not the trace's.
   */
  stopAtFirstOom?: boolean;
}

/** What a replay measured. */
export interface ReplayResult {
  allocator: string;
  loop: ReplayLoop;
  repeats: number;
  /** Calls made per pass: allocations that succeeded, plus frees. */
  calls: number;
  allocs: number;
  frees: number;
  /** Median over passes of the mean time of one successful allocation, ns (the clock's cost removed). */
  nsPerAlloc: number;
  /** Median over passes of the mean time of one free, ns. */
  nsPerFree: number;
  /** The fastest and slowest pass's mean ns per allocation and per free: the spread behind the medians. */
  nsPerAllocRange: [number, number];
  nsPerFreeRange: [number, number];
  /** The allocator's peak allocated bytes over a pass (the highest over passes). */
  peakAllocatedBytes: number;
  /** The allocator's peak reserved bytes over a pass (the highest over passes). */
  peakReservedBytes: number;
  /**
   * The lowest and highest peak reserved bytes of a pass: one value on the host, where a replay is
   * deterministic; on a GPU, stream-ordered strategies may reuse memory across streams only once
   * the work before it has completed, which real timing decides, so passes can differ.
   */
  peakReservedRange: [number, number];
  /**
   * 1 − peakAllocatedBytes / peakReservedBytes: the share of the most memory the strategy held
   * that was not holding requested bytes at the busiest point, i.e. rounding (internal) and caching
   * and split-block (external) overhead together. 0 when nothing was reserved.
   */
  fragmentation: number;
  /** Pool strategies: the largest cached free block at the end of the trace (first pass), before cleanup. */
  largestFreeBlock?: number;
  /** Reserved bytes at the end of the trace (first pass), before cleanup. */
  endReservedBytes: number;
  /** Allocations that ran out of memory in the replay (the most in one pass; 0 or 1 with `stopAtFirstOom`). */
  ooms: number;
  /** True when a pass ended at its first out-of-memory (`stopAtFirstOom`): the other figures cover the trace up to there. */
  stoppedAtFirstOom: boolean;
  /** Frees skipped because their allocation ran out of memory (the most in one pass). */
  skippedFrees: number;
  /** Frees of pointers the trace never allocated: skipped, counted. */
  unmatchedFrees: number;
  /** Out-of-memory events in the trace itself (not replayed). */
  traceOoms: number;
  /** Streams the trace used, replayed on as many streams (CUDA streams on a GPU, stream keys on the host). */
  streams: number;
  /** The cost of one clock read, removed from every call's time. */
  clockOverheadNs: number;
}

/** One pass, as the native loop reports it (the TypeScript loop fills the same fields). */
type Pass = Omit<NativeReplayPass, 'end'> & {
  end: Pick<NativeReplayPass['end'], 'peakAllocatedBytes' | 'peakReservedBytes' | 'reservedBytes' | 'largestFreeBlock'>;
};

/** The most distinct streams a replay creates. */
export const maxReplayStreams = 1024;

/** The cost of one performance.now() read, ns (median of a few runs). */
function jsClockOverheadNs(): number {
  const samples: number[] = [];
  for (let r = 0; r < 5; r++) {
    const reads = 20_000;
    const start = performance.now();
    let last = start;
    for (let i = 0; i < reads; i++) last = performance.now();
    samples.push(((last - start) * 1e6) / reads);
  }
  return median(samples);
}

/**
 * The end of a replay: frees the block each slot still holds (ptr 0: none) with its size and
 * stream. A free that fails is left: the allocator's dispose() frees what a failed cleanup leaves.
 */
export function freeHeldSlots(allocator: Allocator, ptr: Float64Array, size: Float64Array, slotStream: Array<Stream | undefined>): void {
  for (let s = 0; s < ptr.length; s++) {
    if (ptr[s] === 0) continue;
    try {
      allocator.free(ptr[s]!, size[s]!, slotStream[s]);
    } catch {
      // dispose() frees it
    }
  }
}

/** One pass of the TypeScript loop; mirrors the native loop (native/src/tools/replay.cpp). */
function typescriptPass(
  allocator: Allocator,
  c: CompiledTrace,
  streams: Array<Stream | undefined>,
  overhead: number,
  stopAtFirstOom: boolean,
): Pass {
  allocator.trim();
  allocator.resetPeak();
  const ptr = new Float64Array(c.slots);
  const size = new Float64Array(c.slots);
  const slotStream: Array<Stream | undefined> = new Array(c.slots);
  const p: Pass = {
    allocNs: 0,
    freeNs: 0,
    allocs: 0,
    frees: 0,
    ooms: 0,
    skippedFrees: 0,
    stopped: false,
    end: { peakAllocatedBytes: 0, peakReservedBytes: 0, reservedBytes: 0 },
  };
  const { action, slot, bytes, streamIndex } = c;
  try {
    let last = performance.now();
    for (let i = 0; i < action.length; i++) {
      const s = slot[i]!;
      const stream = streams[streamIndex[i]!];
      if (action[i] === 0) {
        try {
          ptr[s] = allocator.malloc(bytes[i]!, stream);
        } catch (e) {
          if (!isOutOfMemory(e)) throw e;
          p.ooms++;
          if (stopAtFirstOom) {
            p.stopped = true;
            break;
          }
          last = performance.now();
          continue;
        }
        size[s] = bytes[i]!;
        slotStream[s] = stream;
        const now = performance.now();
        p.allocNs += now - last;
        p.allocs++;
        last = now;
      } else {
        if (ptr[s] === 0) {
          p.skippedFrees++;
          continue;
        }
        allocator.free(ptr[s]!, bytes[i]!, stream);
        ptr[s] = 0;
        const now = performance.now();
        p.freeNs += now - last;
        p.frees++;
        last = now;
      }
    }
    p.end = allocator.stats();
  } finally {
    freeHeldSlots(allocator, ptr, size, slotStream);
  }
  p.allocNs = Math.max(0, p.allocNs * 1e6 - overhead * p.allocs);
  p.freeNs = Math.max(0, p.freeNs * 1e6 - overhead * p.frees);
  return p;
}

/**
 * Streams for the trace's stream ids, one each (0 is the default stream), on the allocator's
 * device. On the host a stream is a key with nothing to wait for, so stream-aware strategies (the
 * pool's per-stream free lists) see the trace's stream pattern there too.
 */
export function replayStreams(allocator: Allocator, ids: readonly number[]): { streams: Array<Stream | undefined>; destroy(): void } {
  if (ids.length > maxReplayStreams) {
    throw new RangeError(`Expected a trace with at most ${maxReplayStreams} streams but received one with ${ids.length}`);
  }
  const created: Stream[] = [];
  const streams = ids.map((id) => {
    if (id === 0) return allocator.device.kind === 'cuda' ? Stream.default(allocator.device) : undefined;
    const s = Stream.create(allocator.device);
    created.push(s);
    return s;
  });
  return {
    streams,
    destroy() {
      for (const s of created) {
        s.synchronize();
        s.destroy();
      }
    },
  };
}

/**
 * Replays `trace` through `allocator`, `repeats` times. Every pass starts with the allocator trimmed
 * (cached memory given back) and its peaks reset, and ends by freeing what the trace left live, so
 * passes are alike and the allocator ends as it began. The allocator must hold nothing when the
 * replay starts. An allocation that runs out of memory is counted and its free skipped; any other
 * error stops the replay and is thrown, after the memory of the pass is freed.
 */
export function replayTrace(trace: AllocationTrace | CompiledTrace, allocator: Allocator, options: ReplayOptions = {}): ReplayResult {
  const repeats = options.repeats ?? 5;
  if (!Number.isSafeInteger(repeats) || repeats < 1)
    throw new RangeError(`Expected positive integer for repeats but received ${String(repeats)}`);
  const stopAtFirstOom = options.stopAtFirstOom ?? false;
  if (typeof stopAtFirstOom !== 'boolean')
    throw new TypeError(`Expected a boolean for stopAtFirstOom but received ${String(stopAtFirstOom)} of type ${typeof stopAtFirstOom}`);
  const native = allocator instanceof NativeAllocator;
  const loop = options.loop ?? (native ? 'native' : 'typescript');
  if (loop !== 'native' && loop !== 'typescript')
    throw new TypeError(`Expected one of 'native', 'typescript' for loop but received ${String(loop)}`);
  if (loop === 'native' && !native) {
    throw new TypeError(`Expected a native strategy for loop 'native' but the '${allocator.name}' allocator is written in TypeScript`);
  }
  const held = allocator.stats().allocatedBytes;
  if (held > 0)
    throw new RangeError(
      `Expected an allocator that holds nothing for allocator but the '${allocator.name}' allocator holds ${held} bytes`,
    );
  const c = 'events' in trace ? compileTrace(trace) : trace;
  const { streams, destroy } = replayStreams(allocator, c.streamIds);
  let passes: Pass[];
  let clockOverheadNs: number;
  try {
    if (loop === 'native') {
      const handles = streams.map((s) => (s === undefined ? 0 : s.handle));
      const stream = new Float64Array(c.action.length);
      for (let i = 0; i < stream.length; i++) stream[i] = handles[c.streamIndex[i]!]!;
      const r = replayNative(
        allocator as NativeAllocator,
        { action: c.action, slot: c.slot, bytes: c.bytes, stream, slots: c.slots },
        repeats,
        { stopAtFirstOom },
      );
      passes = r.passes;
      clockOverheadNs = r.clockOverheadNs;
    } else {
      clockOverheadNs = jsClockOverheadNs();
      passes = [];
      for (let r = 0; r < repeats; r++) passes.push(typescriptPass(allocator, c, streams, clockOverheadNs, stopAtFirstOom));
    }
  } finally {
    destroy();
  }
  const first = passes[0]!;
  const perAlloc = passes.map((p) => (p.allocs > 0 ? p.allocNs / p.allocs : 0));
  const perFree = passes.map((p) => (p.frees > 0 ? p.freeNs / p.frees : 0));
  const peakAllocatedBytes = Math.max(...passes.map((p) => p.end.peakAllocatedBytes));
  const peaksReserved = passes.map((p) => p.end.peakReservedBytes);
  const peakReservedBytes = Math.max(...peaksReserved);
  const result: ReplayResult = {
    allocator: allocator.name,
    loop,
    repeats,
    calls: first.allocs + first.frees,
    allocs: first.allocs,
    frees: first.frees,
    nsPerAlloc: median(perAlloc),
    nsPerFree: median(perFree),
    nsPerAllocRange: [Math.min(...perAlloc), Math.max(...perAlloc)],
    nsPerFreeRange: [Math.min(...perFree), Math.max(...perFree)],
    peakAllocatedBytes,
    peakReservedBytes,
    peakReservedRange: [Math.min(...peaksReserved), peakReservedBytes],
    fragmentation: peakReservedBytes > 0 ? Math.max(0, 1 - peakAllocatedBytes / peakReservedBytes) : 0,
    endReservedBytes: first.end.reservedBytes,
    ooms: Math.max(...passes.map((p) => p.ooms)),
    stoppedAtFirstOom: passes.some((p) => p.stopped),
    skippedFrees: Math.max(...passes.map((p) => p.skippedFrees)),
    unmatchedFrees: c.unmatchedFrees,
    traceOoms: c.traceOoms,
    streams: c.streamIds.length,
    clockOverheadNs,
  };
  if (first.end.largestFreeBlock !== undefined && first.end.largestFreeBlock >= 0) result.largestFreeBlock = first.end.largestFreeBlock;
  return result;
}

/**
 * The bytes live at the trace's peak (its first moment of peak allocated) by the tag of their
 * allocation, largest first, named by the trace's tag names (a snapshot's allocation frames):
 * which frames hold the memory at the peak, the same for every strategy. Empty without tag names.
 */
export function peakByTag(c: CompiledTrace): { tag: string; bytes: number }[] {
  const names = c.tagNames;
  if (!names || names.length === 0) return [];
  const now = new Float64Array(names.length);
  let live = 0;
  let peak = -1;
  let atPeak = new Float64Array(names.length);
  for (let i = 0; i < c.action.length; i++) {
    const t = Math.min(c.tag[i]!, names.length - 1);
    const delta = c.action[i] === 0 ? c.bytes[i]! : -c.bytes[i]!;
    now[t]! += delta;
    live += delta;
    if (live > peak) {
      peak = live;
      atPeak = now.slice();
    }
  }
  return names
    .map((tag, k) => ({ tag, bytes: atPeak[k]! }))
    .filter((p) => p.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes);
}
