/**
 * One tracked pass of a trace through a strategy: its memory over the trace's time, the
 * fragmentation at its peak, its driver calls, and what memory looked like at each out-of-memory.
 *
 * Fragmentation at the peak is measured from the tracking layer's events (the native one for
 * native strategies, TrackingAllocator otherwise): each event carries the strategy's reserved bytes
 * right after the call, and the allocated bytes are the running sum of the calls, so the moment of
 * peak reserved and the bytes allocated then come out of the one pass that also draws the
 * timeline. The native replay loop reports end-of-pass statistics only, hence this extra pass.
 * @module
 */
import { isOutOfMemory, type AllocatorStats, type Stream, type TrackingEvents } from '@gpumem/allocator-core';
import { createReplayAllocator, type CapacityLimit, type StrategySpec } from './capacity.js';
import { LiveBytesByTag } from './live-bytes-by-tag.js';
import { freeHeldSlots, replayStreams, type CompiledTrace } from './replay.js';

/** Memory at one out-of-memory failure, from the strategy's statistics right after it. */
export interface OomSnapshot {
  /** The operation of the compiled trace, and its time in the trace (ns). */
  op: number;
  timeNs: number;
  requestedBytes: number;
  allocatedBytes: number;
  reservedBytes: number;
  /** Reserved but not allocated: cached or split memory the request could not use. */
  unallocatedReservedBytes: number;
  /** The largest cached free block, where the strategy reports one (pools). */
  largestFreeBlock?: number;
}

/** What a tracked pass saw. */
export interface ReplayProfile {
  /**
   * Allocated and reserved bytes after each call, on the trace's clock (ns since its first event);
   * for a trace with tag names, allocated bytes split by the tag of their allocation too
   * (`byTag[k][i]`: the bytes of `tags[k]` live after call i).
   */
  timeline: { timeNs: number[]; allocatedBytes: number[]; reservedBytes: number[]; tags?: string[]; byTag?: number[][] };
  peakAllocatedBytes: number;
  /** The highest reserved bytes (the strategy's own peak, which also sees peaks inside a call). */
  peakReservedBytes: number;
  /** Reserved bytes at the moment of the highest reserved after a call, and the bytes allocated then. */
  reservedAtPeakBytes: number;
  allocatedAtPeakBytes: number;
  /** reservedAtPeakBytes − allocatedAtPeakBytes: what the strategy held beyond the requests at its peak. */
  fragmentationAtPeakBytes: number;
  /**
   * Strategies with a host tier (e.g. 'tiered'): the most bytes the host tier held in the pass (its
   * peak host reserved), i.e. what spilled past the device. Absent for other strategies.
   */
  peakHostReservedBytes?: number;
  /** Driver (upstream) allocations and frees made in the pass. */
  driverAllocs: number;
  driverFrees: number;
  /** Out-of-memory failures in the pass, and the first `maxOomSnapshots` of them in detail. */
  ooms: number;
  oomSnapshots: OomSnapshot[];
  /** Why the first out-of-memory failure happened, as the strategy said it (without the figures). */
  firstOomReason?: string;
  /** How a capacity was enforced, when one was given. */
  limit?: CapacityLimit;
}

export interface ProfileOptions {
  capacityBytes?: number;
  /** Out-of-memory failures described in detail (default 100); all are counted. */
  maxOomSnapshots?: number;
}

function withoutPrefix(text: string, prefix: string): string {
  return text.startsWith(prefix) ? text.slice(prefix.length) : text;
}

function oomSnapshot(op: number, timeNs: number, requestedBytes: number, s: AllocatorStats): OomSnapshot {
  const snapshot: OomSnapshot = {
    op,
    timeNs,
    requestedBytes,
    allocatedBytes: s.allocatedBytes,
    reservedBytes: s.reservedBytes,
    unallocatedReservedBytes: Math.max(0, s.reservedBytes - s.allocatedBytes),
  };
  if (s.largestFreeBlock !== undefined && s.largestFreeBlock >= 0) snapshot.largestFreeBlock = s.largestFreeBlock;
  return snapshot;
}

/**
 * Replays `trace` once through a fresh, tracked `spec` (at `capacityBytes` when given), in the
 * TypeScript loop so that each out-of-memory failure can be looked at, on as many streams as the
 * trace has.
 */
export function profileReplay(trace: CompiledTrace, spec: StrategySpec, o: ProfileOptions = {}): ReplayProfile {
  const maxOomSnapshots = o.maxOomSnapshots ?? 100;
  const n = trace.action.length;
  const made = createReplayAllocator(spec, {
    ...(o.capacityBytes !== undefined && { capacityBytes: o.capacityBytes }),
    trackingCapacity: n + trace.slots + 1,
  });
  const { allocator } = made;
  const ptr = new Float64Array(trace.slots);
  const size = new Float64Array(trace.slots);
  const slotStream: Array<Stream | undefined> = new Array(trace.slots);
  const callOp = new Uint32Array(n); // the operation behind each tracking event
  let calls = 0;
  let ooms = 0;
  const oomSnapshots: OomSnapshot[] = [];
  let firstOomReason: string | undefined;
  let end: AllocatorStats;
  let streams: ReturnType<typeof replayStreams> | undefined;
  try {
    streams = replayStreams(allocator, trace.streamIds);
    const before = allocator.stats();
    for (let i = 0; i < n; i++) {
      const s = trace.slot[i]!;
      const stream = streams.streams[trace.streamIndex[i]!];
      const bytes = trace.bytes[i]!;
      if (trace.action[i] === 0) {
        callOp[calls++] = i;
        try {
          ptr[s] = allocator.malloc(bytes, stream);
          size[s] = bytes;
          slotStream[s] = stream;
        } catch (e) {
          if (!isOutOfMemory(e)) throw e;
          if (ooms++ === 0) firstOomReason = withoutPrefix(e.reason ?? e.message, `${allocator.name}: `);
          if (oomSnapshots.length < maxOomSnapshots) oomSnapshots.push(oomSnapshot(i, trace.timeNs[i]!, bytes, allocator.stats()));
        }
      } else if (ptr[s] !== 0) {
        callOp[calls++] = i;
        allocator.free(ptr[s]!, bytes, stream);
        ptr[s] = 0;
      }
    }
    end = allocator.stats();
    end = {
      ...end,
      upstreamAllocCount: end.upstreamAllocCount - before.upstreamAllocCount,
      upstreamFreeCount: end.upstreamFreeCount - before.upstreamFreeCount,
    };
  } finally {
    freeHeldSlots(allocator, ptr, size, slotStream);
    try {
      // The strategy's cache goes back before the events are read (the ring records no trim): a
      // pass that ran the host's memory or address space (RLIMIT_AS) to its limit leaves no room
      // to build them in otherwise.
      allocator.trim();
    } catch {
      // the events are read all the same
    }
    streams?.destroy();
  }
  let events: TrackingEvents['events'];
  try {
    events = made.events!().events;
  } finally {
    allocator.dispose();
  }
  // Every call made one event (alloc, free or oom), in order, and the ring holds them all (the
  // trace's n operations, the cleanup's frees of what it left live, one spare), so event k < calls
  // is operation callOp[k] and the cleanup's frees come after, at the trace's end; should a
  // strategy record otherwise, its own clock is used.
  const onTraceClock = events.length >= calls && events.length <= calls + trace.slots;
  const endNs = n > 0 ? trace.timeNs[n - 1]! : 0;
  const count = events.length;
  const timeline: ReplayProfile['timeline'] = {
    timeNs: new Array<number>(count),
    allocatedBytes: new Array<number>(count),
    reservedBytes: new Array<number>(count),
  };
  const tagNames = onTraceClock ? trace.tagNames : undefined;
  const byTag = tagNames && new LiveBytesByTag(tagNames.length, count);
  let allocated = 0;
  let reservedAtPeak = 0;
  let allocatedAtPeak = 0;
  for (let k = 0; k < count; k++) {
    const e = events[k]!;
    if (e.action === 'alloc') allocated += e.bytes;
    else if (e.action === 'free') allocated -= e.bytes;
    timeline.timeNs[k] = !onTraceClock ? e.timeNs : k < calls ? trace.timeNs[callOp[k]!]! : endNs;
    timeline.allocatedBytes[k] = allocated;
    timeline.reservedBytes[k] = e.reservedBytes;
    if (byTag) {
      if (e.action === 'alloc' && k < calls) byTag.alloc(e.ptr, e.bytes, Math.min(trace.tag[callOp[k]!]!, byTag.series.length - 1));
      else if (e.action === 'free') byTag.free(e.ptr, e.bytes);
      byTag.record(k);
    }
    if (e.reservedBytes > reservedAtPeak) {
      reservedAtPeak = e.reservedBytes;
      allocatedAtPeak = allocated;
    }
  }
  if (tagNames && byTag) {
    timeline.tags = [...tagNames];
    timeline.byTag = byTag.series;
  }
  const profile: ReplayProfile = {
    timeline,
    peakAllocatedBytes: end.peakAllocatedBytes,
    peakReservedBytes: Math.max(end.peakReservedBytes, reservedAtPeak),
    reservedAtPeakBytes: reservedAtPeak,
    allocatedAtPeakBytes: allocatedAtPeak,
    fragmentationAtPeakBytes: Math.max(0, reservedAtPeak - allocatedAtPeak),
    driverAllocs: end.upstreamAllocCount,
    driverFrees: end.upstreamFreeCount,
    ooms,
    oomSnapshots,
  };
  if (made.limit !== undefined) profile.limit = made.limit;
  if (firstOomReason !== undefined) profile.firstOomReason = firstOomReason;
  if (end.peakHostReservedBytes !== undefined) profile.peakHostReservedBytes = end.peakHostReservedBytes;
  return profile;
}
