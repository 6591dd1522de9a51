import { describe, expect, it } from 'vitest';
import { HostAllocator, OutOfMemoryError, Stream, hostDevice } from './index.js';
import { benchmarkPairs, benchmarkTrace } from './tools.js';

describe('native layers over any strategy', () => {
  it('limitBytes caps what the strategy takes and reports OutOfMemoryError past it', () => {
    const a = new HostAllocator({ limitBytes: 10_000 });
    try {
      const p = a.malloc(6000);
      expect(() => a.malloc(5000)).toThrow(OutOfMemoryError);
      const q = a.malloc(4000);
      expect(a.stats().oomCount).toBe(1);
      a.free(p, 6000);
      a.free(q, 4000);
      const r = a.malloc(10_000);
      a.free(r, 10_000);
    } finally {
      a.dispose();
    }
  });

  it('tracking records every alloc, free and OOM with size, stream, pointer and tag', () => {
    const a = new HostAllocator({ trackingCapacity: 100, limitBytes: 1 << 20 });
    const s = Stream.create(hostDevice);
    try {
      const p = a.malloc(1000, s);
      a.setTrackingTag(7);
      a.free(p, 1000, s);
      expect(() => a.malloc(2 << 20)).toThrow(OutOfMemoryError);
      expect(() => a.free(p, 1000)).toThrow(TypeError); // a failed free is not recorded
      const { events, dropped } = a.trackingEvents();
      expect(dropped).toBe(0);
      expect(events.map((e) => [e.action, e.bytes, e.tag])).toEqual([
        ['alloc', 1000, 0],
        ['free', 1000, 7],
        ['oom', 2 << 20, 7],
      ]);
      expect(events[0]!.ptr).toBe(p);
      expect(events[0]!.stream).toBe(s.handle);
      expect(events[1]!.timeNs).toBeGreaterThanOrEqual(events[0]!.timeNs);
    } finally {
      a.dispose();
    }
  });

  it('tracking keeps the newest events in a bounded ring and counts the dropped ones', () => {
    const a = new HostAllocator({ trackingCapacity: 4 });
    try {
      for (let i = 1; i <= 5; i++) a.free(a.malloc(i * 100), i * 100);
      const { events, dropped } = a.trackingEvents(true);
      expect(events.map((e) => e.bytes)).toEqual([400, 400, 500, 500]);
      expect(dropped).toBe(6);
      expect(a.trackingEvents().events).toHaveLength(0);
    } finally {
      a.dispose();
    }
  });

  it('trackingEvents without a tracking layer says how to get one', () => {
    const a = new HostAllocator();
    try {
      expect(() => a.trackingEvents()).toThrow(/tracking/);
    } finally {
      a.dispose();
    }
  });

  it('native benchmark loops return timings', () => {
    const a = new HostAllocator();
    try {
      const t = benchmarkPairs(a, 256, 100, 3);
      expect(t.medianNsPerPair).toBeGreaterThan(0);
      expect(t.minNsPerPair).toBeLessThanOrEqual(t.medianNsPerPair);
      expect(t.batchNsPerPair).toHaveLength(3);
      expect(Math.min(...t.batchNsPerPair)).toBe(t.minNsPerPair);
      expect([...t.batchNsPerPair].sort((x, y) => x - y)[1]).toBe(t.medianNsPerPair);
      const trace = benchmarkTrace(a, new Float64Array([100, 2000, 30000, 5]), 2, 3);
      expect(trace.medianNsPerPair).toBeGreaterThan(0);
      expect(trace.batchNsPerPair).toHaveLength(3);
      expect(a.stats().allocatedBytes).toBe(0);
      expect(() => benchmarkTrace(a, new Float64Array([0]), 2)).toThrow(/sizes/);
    } finally {
      a.dispose();
    }
  });
});
