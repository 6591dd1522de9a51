import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createAllocator, createTrackedAllocator, NativeAllocator, type Allocator, type TrackingEvents } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import { replayNative } from '@gpumem/allocator-core/tools';
import '@gpumem/examples/arena';
import { train, type TrainResult } from '@gpumem/gnn';
import { traceFromEvents } from './from-events.js';
import { readTrace, writeTrace, type AllocationTrace, type TraceEvent } from './format.js';
import { compileTrace, peakByTag, replayTrace } from './replay.js';

const rmmSample = fileURLToPath(new URL('./fixtures/rmm-sample.csv', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-replay-'));

function using<T>(allocator: Allocator, f: (a: Allocator) => T): T {
  try {
    return f(allocator);
  } finally {
    allocator.dispose();
  }
}

const ev = (action: TraceEvent['action'], ptr: number, bytes: number, stream = 0): TraceEvent => ({
  timeNs: 0,
  action,
  ptr,
  bytes,
  stream,
  tag: 0,
});
const traceOf = (...events: TraceEvent[]): AllocationTrace => ({ header: { source: 'test' }, events });

describe('peakByTag', () => {
  it("gives the bytes live at the trace's peak by the tag of their allocation, largest first", () => {
    const tagged = (e: TraceEvent, tag: number): TraceEvent => ({ ...e, tag });
    const c = compileTrace({
      header: { source: 'test', tags: ['other', 'a.py:1:f', 'b.py:2:g'] },
      events: [
        tagged(ev('alloc', 1, 100), 1),
        tagged(ev('alloc', 2, 300), 2),
        tagged(ev('alloc', 3, 50), 0),
        tagged(ev('free', 2, 300), 2),
        tagged(ev('alloc', 4, 200), 1),
      ],
    });
    expect(c.tagNames).toEqual(['other', 'a.py:1:f', 'b.py:2:g']);
    expect(Array.from(c.tag)).toEqual([1, 2, 0, 2, 1]);
    expect(peakByTag(c)).toEqual([
      { tag: 'b.py:2:g', bytes: 300 },
      { tag: 'a.py:1:f', bytes: 100 },
      { tag: 'other', bytes: 50 },
    ]);
    expect(peakByTag(compileTrace(traceOf(ev('alloc', 1, 100))))).toEqual([]);
  });
});

describe('compileTrace', () => {
  it('maps pointers to reusable slots, first in first out, and counts what it skips', () => {
    const c = compileTrace(
      traceOf(
        ev('free', 0x900, 64), // freed before the trace began: unmatched
        ev('alloc', 0x100, 1000),
        ev('alloc', 0x200, 3000, 7),
        ev('oom', 0, 1 << 30),
        ev('alloc', 0x100, 500), // 0x100 again before its free was logged
        ev('free', 0x100, 1000), // -> the older allocation
        ev('alloc', 0x300, 0), // zero bytes: skipped
        ev('free', 0x200, 2999, 7), // size mismatch: replayed with 3000
        ev('alloc', 0x400, 8),
      ),
    );
    expect(Array.from(c.action)).toEqual([0, 0, 0, 1, 1, 0]);
    expect(Array.from(c.slot)).toEqual([0, 1, 2, 0, 1, 1]);
    expect(Array.from(c.bytes)).toEqual([1000, 3000, 500, 1000, 3000, 8]);
    expect(c.streamIds).toEqual([0, 7]);
    expect(Array.from(c.streamIndex)).toEqual([0, 1, 0, 0, 1, 0]);
    expect(c).toMatchObject({
      slots: 3,
      allocs: 4,
      frees: 2,
      unmatchedFrees: 1,
      traceOoms: 1,
      zeroByteEvents: 1,
      sizeMismatches: 1,
      liveAtEnd: 2,
    });
    expect(c.peakAllocatedBytes).toBe(4500);
  });
});

describe('replayTrace', () => {
  it("replays RMM's sample log through 'host' in the native loop: peak allocated as logged, everything freed", async () => {
    const trace = await readTrace(rmmSample);
    const c = compileTrace(trace);
    using(createAllocator('host'), (host) => {
      const r = replayTrace(trace, host, { repeats: 3 });
      expect(r).toMatchObject({
        allocator: 'host',
        loop: 'native',
        repeats: 3,
        allocs: c.allocs,
        frees: c.frees,
        calls: c.allocs + c.frees,
      });
      expect(r).toMatchObject({ ooms: 0, skippedFrees: 0, unmatchedFrees: 0, traceOoms: 1, streams: 2 });
      expect(r.peakAllocatedBytes).toBe(c.peakAllocatedBytes);
      expect(r.peakReservedBytes).toBeGreaterThanOrEqual(r.peakAllocatedBytes); // 256-byte rounding
      expect(r.fragmentation).toBeCloseTo(1 - r.peakAllocatedBytes / r.peakReservedBytes, 12);
      expect(r.nsPerAlloc).toBeGreaterThan(0);
      expect(r.nsPerFree).toBeGreaterThan(0);
      // the spread of the passes brackets the median
      expect(r.nsPerAllocRange[0]).toBeLessThanOrEqual(r.nsPerAlloc);
      expect(r.nsPerAllocRange[1]).toBeGreaterThanOrEqual(r.nsPerAlloc);
      expect(r.nsPerFreeRange[0]).toBeLessThanOrEqual(r.nsPerFree);
      expect(r.nsPerFreeRange[1]).toBeGreaterThanOrEqual(r.nsPerFree);
      expect(host.stats()).toMatchObject({ allocatedBytes: 0, reservedBytes: 0 });
      expect(host.stats().allocCount).toBe(3 * c.allocs);
    });
  });

  it('replays it through the pool over host memory: reserved in segments, a largest free block, nothing cached after trim', async () => {
    const trace = await readTrace(rmmSample);
    const c = compileTrace(trace);
    using(createAllocator('pool', { upstream: 'host' }), (pool) => {
      const r = replayTrace(trace, pool, { repeats: 2 });
      expect(r.loop).toBe('native');
      expect(r.peakAllocatedBytes).toBe(c.peakAllocatedBytes);
      expect(r.peakReservedBytes).toBeGreaterThan(r.peakAllocatedBytes);
      expect(r.fragmentation).toBeGreaterThan(0);
      expect(r.fragmentation).toBeLessThan(1);
      expect(r.largestFreeBlock).toBeGreaterThan(0);
      expect(r.endReservedBytes).toBeGreaterThan(0);
      expect(pool.stats().allocatedBytes).toBe(0);
    });
  });

  it('the TypeScript loop and the native loop agree on every count and peak', async () => {
    const trace = await readTrace(rmmSample);
    const native = using(createAllocator('pool', { upstream: 'host' }), (a) => replayTrace(trace, a, { repeats: 1, loop: 'native' }));
    const ts = using(createAllocator('pool', { upstream: 'host' }), (a) => replayTrace(trace, a, { repeats: 1, loop: 'typescript' }));
    const pick = ({
      calls,
      allocs,
      frees,
      peakAllocatedBytes,
      peakReservedBytes,
      largestFreeBlock,
      endReservedBytes,
      ooms,
    }: typeof native) => ({
      calls,
      allocs,
      frees,
      peakAllocatedBytes,
      peakReservedBytes,
      largestFreeBlock,
      endReservedBytes,
      ooms,
    });
    expect(ts.loop).toBe('typescript');
    expect(pick(ts)).toEqual(pick(native));
  });

  it("replays through a TypeScript plug-in (the examples' arena), in the TypeScript loop", async () => {
    const trace = await readTrace(rmmSample);
    using(createAllocator('arena', { upstream: 'host', chunkBytes: 1 << 20 }), (arena) => {
      expect(arena).not.toBeInstanceOf(NativeAllocator);
      const r = replayTrace(trace, arena, { repeats: 2 });
      expect(r.loop).toBe('typescript');
      expect(r.peakAllocatedBytes).toBe(compileTrace(trace).peakAllocatedBytes);
      expect(r.peakReservedBytes).toBeGreaterThanOrEqual(r.peakAllocatedBytes);
      expect(arena.stats().allocatedBytes).toBe(0);
      expect(() => replayTrace(trace, arena, { loop: 'native' })).toThrow(/Expected a native strategy for loop 'native'/);
    });
  });

  it('counts out-of-memory failures, skips their frees, and leaves the allocator usable', () => {
    const trace = traceOf(
      ev('alloc', 0x100, 600),
      ev('alloc', 0x200, 600),
      ev('free', 0x200, 600),
      ev('free', 0x100, 600),
      ev('alloc', 0x300, 100),
    );
    for (const loop of ['native', 'typescript'] as const) {
      using(createAllocator('host', { limitBytes: 1024 }), (host) => {
        const r = replayTrace(trace, host, { repeats: 2, loop });
        expect(r).toMatchObject({ ooms: 1, skippedFrees: 1, allocs: 2, frees: 1, peakAllocatedBytes: 600 });
        expect(host.stats().allocatedBytes).toBe(0);
        host.free(host.malloc(512), 512);
      });
    }
  });

  it('stops each pass at its first out-of-memory where asked, in both loops, and leaves the allocator empty', () => {
    const events = [ev('alloc', 0x100, 600)];
    for (let i = 0; i < 1000; i++) events.push(ev('alloc', 0x1000 + i, 600), ev('free', 0x1000 + i, 600));
    const trace = traceOf(...events);
    for (const loop of ['native', 'typescript'] as const) {
      using(createAllocator('host', { limitBytes: 1024 }), (host) => {
        expect(replayTrace(trace, host, { repeats: 1, loop })).toMatchObject({ ooms: 1000, stoppedAtFirstOom: false });
        const r = replayTrace(trace, host, { repeats: 2, loop, stopAtFirstOom: true });
        expect(r).toMatchObject({ ooms: 1, stoppedAtFirstOom: true, allocs: 1, frees: 0 });
        expect(host.stats().allocatedBytes).toBe(0);
        expect(() => replayTrace(trace, host, { stopAtFirstOom: 'yes' as unknown as boolean })).toThrow(TypeError);
      });
    }
  });

  it('rejects an allocator that holds memory, and bad repeats, before replaying anything', () => {
    using(createAllocator('host'), (host) => {
      const p = host.malloc(100);
      const before = host.stats();
      expect(() => replayTrace(traceOf(ev('alloc', 1, 8)), host)).toThrow(/holds 100 bytes/);
      host.free(p, 100);
      expect(() => replayTrace(traceOf(), host, { repeats: 0 })).toThrow(RangeError);
      expect(host.stats().allocCount).toBe(before.allocCount);
    });
  });

  it('checks a native program before it allocates anything', () => {
    using(createAllocator('host'), (host) => {
      const native = host as NativeAllocator;
      const ops = (action: number[], slot: number[], bytes: number[]) => ({
        action: Uint8Array.from(action),
        slot: Uint32Array.from(slot),
        bytes: Float64Array.from(bytes),
        stream: new Float64Array(action.length),
        slots: Math.max(0, ...slot) + 1,
      });
      expect(() => replayNative(native, ops([1], [0], [8]))).toThrow(/operation 0 frees slot 0, which holds no allocation/);
      expect(() => replayNative(native, ops([0, 0], [0, 0], [8, 8]))).toThrow(/operation 1 allocates into slot 0, which is still live/);
      expect(() => replayNative(native, ops([0], [0], [0]))).toThrow(/positive integer for bytes\[0\]/);
      expect(() => replayNative(native, { ...ops([0], [0], [8]), slot: new Uint32Array(2) })).toThrow(/slot to have 1 elements/);
      expect(host.stats().allocCount).toBe(0);
    });
  });

  it('a recorded training run replayed through the same allocator reproduces its peak allocated exactly', async () => {
    for (const name of ['host', 'pool']) {
      const tracked = createTrackedAllocator(name, name === 'pool' ? { upstream: 'host' } : {}, 1 << 20);
      let result: TrainResult;
      let recorded: TrackingEvents;
      try {
        result = train({
          model: 'mlp',
          allocator: tracked.allocator,
          trainSubset: 256,
          testSubset: 128,
          hidden: [32, 32, 32, 32],
          epochs: 1,
        });
        recorded = tracked.events();
      } finally {
        tracked.allocator.dispose();
      }
      expect(recorded.dropped).toBe(0);
      const file = join(dir, `${name}.jsonl`);
      await writeTrace(file, traceFromEvents(recorded.events, { source: 'test', allocator: name }), 'jsonl');
      const trace = await readTrace(file);
      const c = compileTrace(trace);
      expect(c).toMatchObject({ unmatchedFrees: 0, liveAtEnd: 0, sizeMismatches: 0 });
      // the run's own peak (train() resets peaks each epoch, after the model is built)
      expect(c.peakAllocatedBytes).toBeGreaterThanOrEqual(result.epochs[0]!.peakAllocatedBytes);
      expect(c.peakReservedBytes).toBeGreaterThanOrEqual(result.epochs[0]!.peakReservedBytes);
      const replayed = using(createAllocator(name, name === 'pool' ? { upstream: 'host' } : {}), (a) =>
        replayTrace(trace, a, { repeats: 2 }),
      );
      expect(replayed.peakAllocatedBytes).toBe(c.peakAllocatedBytes);
      expect(replayed.peakReservedBytes).toBe(c.peakReservedBytes);
      expect(replayed.calls).toBe(recorded.events.length);
    }
  });
});
