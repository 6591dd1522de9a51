/**
 * Simulated capacity, the minimum-capacity search and the tracked pass, on 'host' and 'pool' over
 * host memory and on the examples' 'arena' (a TypeScript strategy), with a trace whose answers are
 * known: the pool rounds large requests to 2 MiB segments and puts small ones in 2 MiB segments.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LimitingAdaptor, TrackingAllocator } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';
import '@gpumem/examples/arena';
import { createReplayAllocator } from './capacity.js';
import { readTrace, type AllocationTrace, type TraceEvent } from './format.js';
import { findMinCapacity, searchMinCapacity } from './min-capacity.js';
import { profileReplay } from './profile.js';
import { compileTrace, replayTrace } from './replay.js';

const KiB = 1024;
const MiB = 1024 * KiB;
let clock = 0;
const ev = (action: TraceEvent['action'], ptr: number, bytes: number, stream = 0): TraceEvent => {
  clock += 1000;
  return { timeNs: clock, action, ptr, bytes, stream, tag: 0 };
};

// Peak live: A + C + D = 3 MiB + 1.5 MiB + 200 KiB. The pool takes a 4 MiB segment for A, a 2 MiB
// small segment for B (and D, which reuses it) and a 2 MiB segment for C: 8 MiB.
const trace: AllocationTrace = {
  header: { source: 'test' },
  events: [
    ev('alloc', 0xa, 3 * MiB),
    ev('alloc', 0xb, 100 * KiB),
    ev('alloc', 0xc, 1.5 * MiB, 7),
    ev('free', 0xb, 100 * KiB),
    ev('alloc', 0xd, 200 * KiB),
    ev('free', 0xa, 3 * MiB),
    ev('free', 0xc, 1.5 * MiB, 7),
    ev('free', 0xd, 200 * KiB),
  ],
};
const compiled = compileTrace(trace);
const peakLive = 3 * MiB + 1.5 * MiB + 200 * KiB;
const pool = { name: 'pool', options: { upstream: 'host' } };
const host = { name: 'host' };

describe('compileTrace for capacity', () => {
  it("knows the peak live bytes, the largest request and each operation's time", () => {
    expect(compiled.peakAllocatedBytes).toBe(peakLive);
    expect(compiled.largestRequestBytes).toBe(3 * MiB);
    expect(Array.from(compiled.timeNs)).toEqual(trace.events.map((e) => e.timeNs));
  });
});

describe('createReplayAllocator', () => {
  it('puts the native limit under a native strategy', () => {
    const made = createReplayAllocator(pool, { capacityBytes: 6 * MiB });
    try {
      expect(made.limit).toBe('native-limit');
      const r = replayTrace(compiled, made.allocator, { repeats: 1 });
      expect(r.ooms).toBe(1); // C's 2 MiB segment does not fit next to 4 + 2 MiB
      expect(r.peakReservedBytes).toBeLessThanOrEqual(6 * MiB);
    } finally {
      made.allocator.dispose();
    }
  });

  it('puts a LimitingAdaptor under a TypeScript strategy, between it and its upstream', () => {
    const made = createReplayAllocator(
      { name: 'arena', options: { upstream: 'host', chunkBytes: MiB } },
      { capacityBytes: 2 * MiB, trackingCapacity: 16 },
    );
    try {
      expect(made.limit).toBe('upstream-limit');
      expect(made.allocator).toBeInstanceOf(TrackingAllocator);
      const a = made.allocator;
      const p = a.malloc(MiB);
      const q = a.malloc(MiB);
      expect(() => a.malloc(1)).toThrow(/out of memory|limit/i); // a third chunk is past 2 MiB
      a.free(p, MiB);
      a.free(q, MiB);
      expect(made.events!().events.map((e) => e.action)).toEqual(['alloc', 'alloc', 'oom', 'free', 'free']);
    } finally {
      made.allocator.dispose();
    }
  });

  it('runs a strategy with the addressOnly flag over addresses alone: 64 GiB requests take no memory', () => {
    const GiB = 1024 * 1024 * 1024;
    const made = createReplayAllocator({ name: 'pool', options: { upstream: 'host' } }, { capacityBytes: 128 * GiB, addressOnly: true });
    try {
      expect(made.addressOnly).toBe(true);
      const a = made.allocator.malloc(64 * GiB);
      const b = made.allocator.malloc(60 * GiB);
      expect(() => made.allocator.malloc(8 * GiB)).toThrow(/out of memory/i); // the capacity, not the host
      made.allocator.free(a, 64 * GiB);
      made.allocator.free(b, 60 * GiB);
    } finally {
      made.allocator.dispose();
    }
    // a strategy without the flag is made as usual, and says so
    const tiered = createReplayAllocator({ name: 'tiered', options: { deviceBudgetBytes: 0 } }, { capacityBytes: GiB, addressOnly: true });
    expect(tiered.addressOnly).toBeUndefined();
    tiered.allocator.dispose();
    // asked of the native layers directly, a strategy without the flag refuses, naming those that have it
    expect(() => createReplayAllocator({ name: 'host', options: { addressOnly: true } })).toThrow(
      /addressOnly only for a strategy .*'pool', 'expandable'/,
    );
  });

  it('refuses a spec that already sets limitBytes, and a bad capacity', () => {
    expect(() => createReplayAllocator({ name: 'host', options: { limitBytes: MiB } }, { capacityBytes: MiB })).toThrow(
      /either a capacity or the option limitBytes/,
    );
    expect(() => createReplayAllocator(host, { capacityBytes: -1 })).toThrow(RangeError);
    expect(LimitingAdaptor).toBeDefined();
  });
});

describe('searchMinCapacity', () => {
  it('finds the threshold to within the resolution, doubling then halving', () => {
    const tried: number[] = [];
    const r = searchMinCapacity(
      (c) => {
        tried.push(c);
        return c >= 1000;
      },
      { lowerBytes: 100, capBytes: 1 << 20, resolutionBytes: 1 },
    );
    expect(r).toMatchObject({ bytes: 1000, failedBytes: 999, atLowerBound: false, probes: tried.length });
    expect(tried.slice(0, 5)).toEqual([100, 200, 400, 800, 1600]);
    expect(tried.length).toBeLessThanOrEqual(5 + 10);
    const coarse = searchMinCapacity((c) => c >= 1000, { lowerBytes: 100, capBytes: 1 << 20, resolutionBytes: 128 });
    expect(coarse.bytes! - 1000).toBeGreaterThanOrEqual(0);
    expect(coarse.bytes! - coarse.failedBytes!).toBeLessThanOrEqual(128);
  });

  it('tries a hint before doubling, and never answers above a hint that fits', () => {
    const tried: number[] = [];
    const r = searchMinCapacity(
      (c) => {
        tried.push(c);
        return c >= 1000;
      },
      { lowerBytes: 100, capBytes: 1 << 20, resolutionBytes: 64, hintBytes: 1010 },
    );
    expect(tried.slice(0, 2)).toEqual([100, 1010]);
    expect(r.bytes).toBeGreaterThanOrEqual(1000);
    expect(r.bytes).toBeLessThanOrEqual(1010);
    const wrong = searchMinCapacity((c) => c >= 5000, { lowerBytes: 100, capBytes: 1 << 20, resolutionBytes: 1, hintBytes: 1010 });
    expect(wrong).toMatchObject({ bytes: 5000, failedBytes: 4999 }); // a hint that fails is just a failure
  });

  it('stops at the lower bound when it fits, and at the cap when nothing does', () => {
    expect(searchMinCapacity(() => true, { lowerBytes: 100, capBytes: 1000 })).toMatchObject({ bytes: 100, atLowerBound: true, probes: 1 });
    const never = searchMinCapacity(() => false, { lowerBytes: 100, capBytes: 1000, resolutionBytes: 1 });
    expect(never).toMatchObject({ failedBytes: 1000, capBytes: 1000, probes: 5 }); // 100 200 400 800 1000
    expect(never.bytes).toBeUndefined();
    const above = searchMinCapacity(() => true, { lowerBytes: 2000, capBytes: 1000 });
    expect(above).toMatchObject({ probes: 0 });
    expect(above.bytes).toBeUndefined();
    expect(searchMinCapacity(() => false, { lowerBytes: 0, capBytes: 1000 })).toMatchObject({ bytes: 0, probes: 0 });
    expect(() => searchMinCapacity(() => true, { lowerBytes: 1, capBytes: 10, resolutionBytes: 0 })).toThrow(RangeError);
    expect(() => searchMinCapacity(() => true, { lowerBytes: -1, capBytes: 10 })).toThrow(/lowerBytes/);
  });
});

describe('findMinCapacity', () => {
  it("host needs the trace's peak live bytes; the pool needs its 8 MiB of segments", () => {
    const h = findMinCapacity(compiled, host, { capBytes: 64 * MiB });
    expect(h).toMatchObject({ bytes: peakLive, atLowerBound: true, probes: 1 });
    const exact = findMinCapacity(compiled, pool, { capBytes: 64 * MiB, resolutionBytes: 1 });
    expect(exact).toMatchObject({ bytes: 8 * MiB, failedBytes: 8 * MiB - 1, atLowerBound: false });
    expect(exact.bytes! - h.bytes!).toBe(8 * MiB - peakLive);
    const coarse = findMinCapacity(compiled, pool, { capBytes: 64 * MiB }); // 2 MiB resolution
    expect(coarse.bytes).toBeGreaterThanOrEqual(8 * MiB);
    expect(coarse.bytes! - coarse.failedBytes!).toBeLessThanOrEqual(2 * MiB);
    expect(coarse.failedBytes).toBeLessThan(8 * MiB);
    expect(coarse.probes).toBeLessThan(exact.probes);
  });

  it('searches once on the host, where a replay is deterministic, whatever repeats says', () => {
    const once = findMinCapacity(compiled, pool, { capBytes: 64 * MiB, resolutionBytes: 1 });
    const repeated = findMinCapacity(compiled, pool, { capBytes: 64 * MiB, resolutionBytes: 1, repeats: 5 });
    expect(repeated).toEqual(once);
    expect(repeated.searches).toBe(1);
    expect(repeated.bytesRange).toBeUndefined();
    expect(() => findMinCapacity(compiled, pool, { capBytes: 64 * MiB, repeats: 0 })).toThrow(/positive integer for repeats/);
  });

  it('reports when the trace never fits under the cap', () => {
    const r = findMinCapacity(compiled, pool, { capBytes: 6 * MiB });
    expect(r).toMatchObject({ failedBytes: 6 * MiB, capBytes: 6 * MiB });
    expect(r.bytes).toBeUndefined();
  });

  it('works for a TypeScript strategy through the limit under it', () => {
    const r = findMinCapacity(
      compiled,
      { name: 'arena', options: { upstream: 'host', chunkBytes: MiB } },
      { capBytes: 64 * MiB, resolutionBytes: 1 },
    );
    // A, C and D each exceed or straddle a 1 MiB chunk: more than the live bytes.
    expect(r.bytes).toBeGreaterThan(peakLive);
  });
});

describe('profileReplay', () => {
  it('measures fragmentation at the moment of peak reserved, driver calls, and the timeline on the trace clock', () => {
    const p = profileReplay(compiled, pool);
    expect(p.peakReservedBytes).toBe(8 * MiB);
    expect(p.reservedAtPeakBytes).toBe(8 * MiB);
    expect(p.allocatedAtPeakBytes).toBe(3 * MiB + 100 * KiB + 1.5 * MiB); // when C's segment was taken
    expect(p.fragmentationAtPeakBytes).toBe(8 * MiB - p.allocatedAtPeakBytes);
    expect(p).toMatchObject({ driverAllocs: 3, driverFrees: 0, ooms: 0, oomSnapshots: [], peakAllocatedBytes: peakLive });
    expect(p.timeline.timeNs).toEqual(trace.events.map((e) => e.timeNs));
    expect(p.timeline.allocatedBytes.at(-1)).toBe(0);
    expect(Math.max(...p.timeline.allocatedBytes)).toBe(peakLive);
    const h = profileReplay(compiled, host);
    expect(h.fragmentationAtPeakBytes).toBe(0); // 'host' rounds to 256 B; these sizes are multiples
  });

  it('keeps every event of a trace that ends with allocations live (the cleanup frees are tracked too)', () => {
    // four allocations, none freed: the cleanup adds four frees to the tracked events
    const live: AllocationTrace = {
      header: { source: 'test' },
      events: [ev('alloc', 1, 4 * MiB), ev('alloc', 2, MiB), ev('alloc', 3, 512), ev('alloc', 4, 256)],
    };
    const h = profileReplay(compileTrace(live), host);
    // the cleanup's frees sit at the trace's end, on the trace's clock
    expect(h.timeline.timeNs).toEqual([...live.events.map((e) => e.timeNs), ...live.events.map(() => live.events.at(-1)!.timeNs)]);
    expect(h.reservedAtPeakBytes).toBe(5 * MiB + 768);
    expect(h.allocatedAtPeakBytes).toBe(5 * MiB + 768);
    expect(h.fragmentationAtPeakBytes).toBe(0);
  });

  it('gives what a strategy with a host tier spilled to it (its peak host reserved), and nothing for others', () => {
    const tiered = profileReplay(compiled, { name: 'tiered', options: { deviceBudgetBytes: 2 * MiB } });
    expect(tiered.peakHostReservedBytes).toBeGreaterThan(0);
    expect(tiered.peakHostReservedBytes).toBeLessThanOrEqual(tiered.peakReservedBytes);
    expect(profileReplay(compiled, pool).peakHostReservedBytes).toBeUndefined();
  });

  it("splits allocated bytes by the allocation's tag, where the trace names its tags (a snapshot's frames)", async () => {
    const snapshot = compileTrace(await readTrace(fileURLToPath(new URL('./snapshot/fixtures/two-streams.pickle.gz', import.meta.url))));
    expect(snapshot.tagNames![0]).toBe('other');
    const p = profileReplay(snapshot, pool);
    const { tags, byTag, allocatedBytes, timeNs } = p.timeline;
    expect(tags).toEqual(snapshot.tagNames);
    expect(byTag).toHaveLength(tags!.length);
    for (let i = 0; i < allocatedBytes.length; i++) expect(byTag!.reduce((sum, t) => sum + t[i]!, 0)).toBe(allocatedBytes[i]);
    expect(byTag!.every((t) => t.at(-1) === 0)).toBe(true);
    expect(timeNs.every((t, i) => i === 0 || t >= timeNs[i - 1]!)).toBe(true);
    expect(profileReplay(compiled, pool).timeline.tags).toBeUndefined(); // a trace without tag names
  });

  it('describes memory at each out-of-memory failure', () => {
    const p = profileReplay(compiled, pool, { capacityBytes: 6 * MiB });
    expect(p.limit).toBe('native-limit');
    expect(p.ooms).toBe(1);
    const [oom] = p.oomSnapshots;
    expect(oom).toMatchObject({
      op: 2,
      timeNs: trace.events[2]!.timeNs,
      requestedBytes: 1.5 * MiB,
      reservedBytes: 6 * MiB,
      allocatedBytes: 3 * MiB + 100 * KiB,
    });
    expect(oom!.unallocatedReservedBytes).toBe(6 * MiB - 3 * MiB - 100 * KiB);
    expect(oom!.largestFreeBlock).toBe(2 * MiB - 100 * KiB); // the rest of the small segment
  });
});
