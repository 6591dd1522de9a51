import { afterEach, describe, expect, it } from 'vitest';
import { createAllocator, createTrackedAllocator, OutOfMemoryError, strategyInfo, TrackingAllocator, type Allocator } from './index.js';

describe('allocation tracking', () => {
  const owned: Allocator[] = [];
  afterEach(() => {
    for (const a of owned.splice(0)) a.dispose();
  });

  it('the TypeScript adaptor records alloc, free and OOM with sizes, tags and reserved bytes', () => {
    const t = new TrackingAllocator(createAllocator('host', { limitBytes: 1 << 20 }), 16, { ownsUpstream: true });
    owned.push(t);
    const p = t.malloc(1000);
    t.setTrackingTag(7);
    const q = t.malloc(3000);
    t.free(p, 1000);
    expect(() => t.malloc(2 << 20)).toThrow(OutOfMemoryError);
    t.free(q, 3000);
    const { events, dropped } = t.trackingEvents();
    expect(dropped).toBe(0);
    expect(events.map((e) => [e.action, e.bytes, e.tag])).toEqual([
      ['alloc', 1000, 0],
      ['alloc', 3000, 7],
      ['free', 1000, 7],
      ['oom', 2 << 20, 7],
      ['free', 3000, 7],
    ]);
    expect(events[0]!.ptr).toBe(p);
    expect(events[1]!.reservedBytes).toBeGreaterThanOrEqual(4000);
    expect(events.at(-1)!.reservedBytes).toBe(t.stats().reservedBytes);
    for (let i = 1; i < events.length; i++) expect(events[i]!.timeNs).toBeGreaterThanOrEqual(events[i - 1]!.timeNs);
    expect(t.name).toBe('host');
    expect(t.stats().allocatedBytes).toBe(0);
  });

  it('the ring keeps the newest events and counts the dropped ones', () => {
    const t = new TrackingAllocator(createAllocator('host'), 4, { ownsUpstream: true });
    owned.push(t);
    for (let i = 1; i <= 5; i++) t.free(t.malloc(i * 256), i * 256);
    const { events, dropped } = t.trackingEvents(true);
    expect(dropped).toBe(6);
    expect(events.map((e) => `${e.action}${e.bytes}`)).toEqual(['alloc1024', 'free1024', 'alloc1280', 'free1280']);
    expect(t.trackingEvents().events).toHaveLength(0);
  });

  it('createTrackedAllocator uses the native layer for native strategies, with reserved bytes', () => {
    expect(strategyInfo('host').nativeLayers).toBe(true);
    const tracked = createTrackedAllocator('host', {}, 32);
    owned.push(tracked.allocator);
    expect(tracked.allocator).not.toBeInstanceOf(TrackingAllocator);
    const p = tracked.allocator.malloc(4096);
    tracked.setTag(3);
    tracked.allocator.free(p, 4096);
    tracked.setTrackingEnabled(false);
    tracked.allocator.free(tracked.allocator.malloc(256), 256); // not recorded
    tracked.setTrackingEnabled(true);
    const { events } = tracked.events();
    expect(events.map((e) => [e.action, e.bytes, e.tag, e.reservedBytes])).toEqual([
      ['alloc', 4096, 0, 4096],
      ['free', 4096, 3, 0],
    ]);
  });

  it('does not own its upstream unless told to, and exposes it', () => {
    const upstream = createAllocator('host');
    owned.push(upstream);
    const t = new TrackingAllocator(upstream, 8);
    expect(t.upstream).toBe(upstream);
    expect(t.ownsUpstream).toBe(false);
    const p = t.malloc(512);
    t.free(p, 512);
    t.dispose();
    expect(upstream.disposed).toBe(false);
    upstream.free(upstream.malloc(256), 256); // still usable
    const owning = new TrackingAllocator(createAllocator('host'), 8, { ownsUpstream: true });
    const inner = owning.upstream;
    owning.dispose();
    expect(inner.disposed).toBe(true);
    expect(() => new TrackingAllocator(upstream, 8, { ownsUpstream: 'yes' as never })).toThrow(TypeError);
  });

  it('rejects a bad capacity and an unknown strategy with typed errors', () => {
    expect(() => createTrackedAllocator('host', {}, 0)).toThrow(RangeError);
    expect(() => createTrackedAllocator('no-such', {}, 8)).toThrow(/registered/);
    expect(() => strategyInfo('no-such')).toThrow(RangeError);
  });
});
