import { describe, expect, it } from 'vitest';
import '@gpumem/allocator-caching';
import '@gpumem/allocator-pool';
import type { TrackingEvent } from '@gpumem/allocator-core';
import { bestOf, compareAllocators, defaultRepeat, runOne, type RunRequest } from './compare.js';
import { buildTimeline, peakBreakdown } from './timeline.js';
import { parseAllocatorList, parseAllocatorSpec } from './spec.js';
import type { CompareRun } from './types.js';

function event(timeNs: number, action: TrackingEvent['action'], bytes: number, reservedBytes: number): TrackingEvent {
  return { timeNs, action, bytes, reservedBytes, ptr: 0, stream: 0, tag: 0 };
}

describe('buildTimeline', () => {
  it('turns events into allocated and reserved bytes over time', () => {
    const t = buildTimeline(
      [event(1e6, 'alloc', 100, 512), event(2e6, 'alloc', 50, 512), event(3e6, 'oom', 1e9, 512), event(4e6, 'free', 100, 512)],
      50,
      100,
    );
    expect(t.tMs).toEqual([1, 2, 3, 4]);
    expect(t.allocatedBytes).toEqual([100, 150, 150, 50]);
    expect(t.reservedBytes).toEqual([512, 512, 512, 512]);
  });

  it('anchors allocated bytes to the final value when the ring dropped the oldest events', () => {
    // 1000 bytes were live before the first retained event
    const t = buildTimeline([event(1, 'alloc', 10, 0), event(2, 'free', 10, 0)], 1000, 100);
    expect(t.allocatedBytes).toEqual([1010, 1000]);
  });

  it('thins long series but keeps the peak and the trough', () => {
    const events: TrackingEvent[] = [];
    for (let i = 0; i < 100_000; i++) events.push(event(i * 1000, i % 2 ? 'free' : 'alloc', i === 77_776 ? 5e6 : 64, 1e7));
    events.push(event(100_000 * 1000, 'free', 5e6 - 64, 1e7)); // balance the big one
    const t = buildTimeline(events, 0, 900);
    expect(t.tMs.length).toBeLessThanOrEqual(900);
    expect(Math.max(...t.allocatedBytes)).toBe(5e6);
    expect(Math.min(...t.allocatedBytes)).toBe(0);
    for (let i = 1; i < t.tMs.length; i++) expect(t.tMs[i]!).toBeGreaterThanOrEqual(t.tMs[i - 1]!);
  });
});

describe('bestOf', () => {
  const run = (allocator: string, medianEpochMs: number | null, accuracy: number | null, status: CompareRun['status'] = 'ok') =>
    ({
      allocator,
      status,
      medianEpochMs,
      // six epochs measured after one warm-up, all at the median: enough to rank the times
      warmupEpochs: 1,
      epochSpread: medianEpochMs
        ? { n: 6, min: medianEpochMs, q1: medianEpochMs, median: medianEpochMs, q3: medianEpochMs, max: medianEpochMs }
        : null,
      throughput: medianEpochMs ? 1000 / medianEpochMs : null,
      peakAllocatedBytes: 100,
      peakReservedBytes: 200,
      overhead: 2,
      upstreamAllocCalls: 1,
      upstreamFreeCalls: 0,
      oomCount: 0,
      finalLoss: 0.5,
      accuracy,
    }) as CompareRun;

  it('marks the lowest time, the highest accuracy and throughput, ties included, failed runs excluded', () => {
    const best = bestOf([run('a', 10, 0.9), run('b', 5, 0.9), run('c', 1, 0.99, 'oom')]);
    expect(best.medianEpochMs).toEqual(['b']);
    expect(best.throughput).toEqual(['b']);
    expect(best.accuracy).toEqual(['a', 'b']);
    expect(best.finalLoss).toEqual(['a', 'b']);
  });
});

describe('allocator specs', () => {
  it('parses names, options with units, booleans and strings', () => {
    expect(parseAllocatorSpec('pool')).toEqual({ label: 'pool', name: 'pool', options: {} });
    // a strategy that reproduces another allocator is labelled by it too
    expect(parseAllocatorSpec('caching').label).toBe("caching (PyTorch's allocator)");
    expect(parseAllocatorSpec('caching:expandableSegments=true').label).toBe("caching:expandableSegments=true (PyTorch's allocator)");
    expect(parseAllocatorSpec('pool:maxReservedBytes=64MiB:upstream=host').options).toEqual({
      maxReservedBytes: 64 * 2 ** 20,
      upstream: 'host',
    });
    // Sizes take the core's one set of forms (parseSize): units other than KiB/MiB/GiB/TiB are errors.
    expect(parseAllocatorSpec('pool:maxReservedBytes=2gib').options).toEqual({ maxReservedBytes: 2 * 2 ** 30 });
    expect(() => parseAllocatorSpec('pool:maxReservedBytes=4GB')).toThrow(/Expected a size \(.*\) for maxReservedBytes but received '4GB'/);
    expect(() => parseAllocatorSpec('pool:maxReservedBytes=1.5.5GiB')).toThrow(RangeError);
    expect(parseAllocatorSpec('pool:maxReservedBytes=1.5GiB').options).toEqual({ maxReservedBytes: 1.5 * 2 ** 30 });
    expect(parseAllocatorSpec('uvm:prefetchOnAllocate=false').options).toEqual({ prefetchOnAllocate: false });
    expect(parseAllocatorSpec('pool:faultInjection.failEvery=3:faultInjection.failAfterBytes=1KiB').options).toEqual({
      faultInjection: { failEvery: 3, failAfterBytes: 1024 },
    });
    expect(parseAllocatorList('pool, async:releaseThreshold=0').map((s) => s.label)).toEqual(['pool', 'async:releaseThreshold=0']);
  });

  it("passes paths through as strings: a plug-in library for 'plugin'", () => {
    expect(parseAllocatorSpec('plugin:library=./libslab.so')).toEqual({
      label: 'slab', // the library's name, not the whole spec
      name: 'plugin',
      options: { library: './libslab.so' },
    });
    // 'native', the deprecated name of 'plugin': labelled the same way
    expect(parseAllocatorSpec('native:library=./libslab.so:options=a=1')).toEqual({
      label: 'slab:options=a=1',
      name: 'native',
      options: { library: './libslab.so', options: 'a=1' },
    });
    expect(parseAllocatorSpec('plugin:library=/opt/gpumem-1.2/lib/libslab.so:options.slab_bytes=2MiB:device=host').options).toEqual({
      library: '/opt/gpumem-1.2/lib/libslab.so',
      options: { slab_bytes: 2 * 2 ** 20 },
      device: 'host',
    });
    expect(parseAllocatorSpec('plugin:library=2.0/libslab.so:options=slab_bytes=1MiB;max_class=4096').options).toEqual({
      library: '2.0/libslab.so',
      options: 'slab_bytes=1MiB;max_class=4096',
    });
  });

  it.each([['Pool'], ['pool:'], ['pool:x'], ['pool:=1'], ['pool:a=1:a=2'], ['pool:a=1:a.b=2'], ['pool:a..b=1'], [''], ['pool,pool']])(
    'rejects %j with a RangeError',
    (spec) => {
      expect(() => parseAllocatorList(spec)).toThrow(RangeError);
    },
  );
});

describe('runOne (CPU)', () => {
  const request = (label: string, options: Record<string, unknown> = {}): RunRequest => ({
    spec: { label, name: label.split(':')[0]!, options },
    train: { model: 'mlp', epochs: 2, trainSubset: 256, testSubset: 128, hidden: [32] },
    record: true,
    trackingCapacity: 1 << 16,
    timelinePoints: 1000,
    plugins: [],
  });

  it('reports epochs, peaks, a timeline that reaches the peak, and epoch phases', () => {
    const run = runOne(request('host'));
    expect(run.status).toBe('ok');
    expect(run.epochs).toHaveLength(2);
    expect(run.timeline).not.toBeNull();
    expect(Math.max(...run.timeline!.allocatedBytes)).toBe(run.peakAllocatedBytes);
    expect(run.timeline!.allocatedBytes.at(-1)).toBe(0);
    expect(run.phases.map((p) => p.name)).toEqual(['epoch 1', 'epoch 2']);
    expect(run.phases[1]!.startMs).toBeGreaterThanOrEqual(run.phases[0]!.endMs);
    expect(run.eventsDropped).toBe(0);
    expect(run.throughput).toBeCloseTo(256 / (run.medianEpochMs! / 1000), 6);
  });

  it('reports an out-of-memory run as OOM with the stats at the failure', () => {
    const run = runOne(request('pool:maxReservedBytes=4096', { upstream: 'host', maxReservedBytes: 4096 }));
    expect(run.status).toBe('oom');
    expect(run.error).toMatch(/out of memory/);
    expect(run.oomCount).toBeGreaterThanOrEqual(1);
    expect(run.stats).not.toBeNull();
    expect(run.epochs).toEqual([]);
  });

  it('reports a bad option as an error row instead of throwing', () => {
    const run = runOne(request('pool:bogus=1', { bogus: 1 }));
    expect(run.status).toBe('error');
    expect(run.error).toMatch(/bogus/);
  });
});

const tinyRequest = (label: string): RunRequest => ({
  spec: { label, name: label, options: {} },
  train: { model: 'mlp', epochs: 1, trainSubset: 256, testSubset: 128, hidden: [32] },
  record: true,
  trackingCapacity: 1 << 16,
  timelinePoints: 1000,
  plugins: [],
});

describe('where the memory goes', () => {
  const ev = (timeNs: number, action: TrackingEvent['action'], ptr: number, bytes: number, tag: number): TrackingEvent => ({
    timeNs,
    action,
    ptr,
    bytes,
    tag,
    stream: 0,
    reservedBytes: 4096,
  });

  it('splits allocated bytes by the phase that allocated them, charging a free to its allocation', () => {
    // 100 bytes live before recording; setup (tag 1) 1000, forward (2) 300 freed in backward (4)
    const events = [ev(1, 'alloc', 1, 1000, 1), ev(2, 'alloc', 2, 300, 2), ev(3, 'alloc', 3, 50, 4), ev(4, 'free', 2, 300, 4)];
    const t = buildTimeline(events, 1150, 100, 0, ['other', 'setup', 'forward', 'loss', 'backward']);
    expect(t.tags).toEqual(['before', 'other', 'setup', 'forward', 'loss', 'backward']);
    expect(t.allocatedBytes).toEqual([1100, 1400, 1450, 1150]);
    expect(t.byTag!.map((values) => values[2])).toEqual([100, 0, 1000, 300, 0, 50]);
    expect(t.byTag!.map((values) => values[3])).toEqual([100, 0, 1000, 0, 0, 50]);
    for (let i = 0; i < 4; i++) expect(t.byTag!.reduce((sum, values) => sum + values[i]!, 0)).toBe(t.allocatedBytes[i]);
    expect(peakBreakdown(t)).toEqual([
      { tag: 'setup', bytes: 1000 },
      { tag: 'forward', bytes: 300 },
      { tag: 'before', bytes: 100 },
      { tag: 'backward', bytes: 50 },
    ]);
  });

  it('keeps the split through thinning, and a run of the trainer reports it', () => {
    const events: TrackingEvent[] = [];
    for (let i = 0; i < 20_000; i++) events.push(ev(i, i % 2 ? 'free' : 'alloc', i >> 1, 64, 2));
    const t = buildTimeline(events, 0, 600, 0, ['other', 'setup', 'forward']);
    expect(t.tMs.length).toBeLessThanOrEqual(600);
    expect(t.byTag!.every((values) => values.length === t.tMs.length)).toBe(true);
    const run = runOne(tinyRequest('host'));
    expect(run.status).toBe('ok');
    const tags = run.peakBreakdown!.map((p) => p.tag);
    expect(tags).toContain('setup');
    expect(run.peakBreakdown!.reduce((sum, p) => sum + p.bytes, 0)).toBe(Math.max(...run.timeline!.allocatedBytes));
  });
});

describe('compareAllocators', () => {
  it('interleaves the allocators by default, round-robin over the repeats (a1 b1 a2 b2 ...), and recommends from the marks', async () => {
    const order: string[] = [];
    const result = await compareAllocators({
      train: { model: 'gcn', dataset: 'sbm', nodes: 200, epochs: 2 },
      allocators: [
        { label: 'host', name: 'host', options: {} },
        { label: 'pool:upstream=host', name: 'pool', options: { upstream: 'host' } },
      ],
      isolate: false,
      record: false,
      device: 'host',
      title: 'gcn',
      onRunStart: (spec, index, total) => order.push(`${spec.label} ${index + 1}/${total}`),
    });
    const rounds = Array.from({ length: defaultRepeat }, (_, k) => [
      `host ${2 * k + 1}/${2 * defaultRepeat}`,
      `pool:upstream=host ${2 * k + 2}/${2 * defaultRepeat}`,
    ]);
    expect(order).toEqual(rounds.flat());
    for (const run of result.runs) expect(run.repeats).toBe(defaultRepeat);
    // 2 epochs a run leave one measured each: too few to name the faster, whichever it is
    expect(result.timesNotRanked?.measuredEpochs).toBe(defaultRepeat);
    expect(result.best.medianEpochMs).toBeUndefined();
    expect(result.picks?.fastest?.verdict).toBe('not-enough-samples');
    expect(result.picks?.leastMemory?.allocators).toEqual(result.best.peakReservedBytes);
    expect(result.recommendation?.some((l) => l.startsWith('Fastest: not ranked: not enough samples'))).toBe(true);
  });
});
