/**
 * diagnoseOom: the three verdicts on traces whose answers are known, on the strategies' host twins
 * (on a GPU, the same strategies over the device), and the figures behind "what would reduce them".
 */
import { describe, expect, it } from 'vitest';
import { hasCudaDevice, strategyInfo } from '@gpumem/allocator-core';
import '@gpumem/allocator-caching';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-tiered';
import { type CaseRow, fragmentingRows, trainingRows, trainingTags } from './doctor-cases.testing.js';
import { diagnoseOom, recordedCapacity } from './doctor.js';
import type { AllocationTrace } from './format.js';
import { idleTagsAbove, offDevicePlan, transientAtPeak } from './peak-anatomy.js';
import { compileTrace } from './replay.js';

const MiB = 1024 * 1024;

function traceOf(rows: CaseRow[], tags?: string[]): AllocationTrace {
  return {
    header: { source: 'test', ...(tags && { tags }) },
    events: rows.map(([action, ptr, bytes, tag], i) => ({ timeNs: (i + 1) * 1000, action, ptr, bytes, stream: 0, tag: tag ?? 0 })),
  };
}

const fragmenting = traceOf(fragmentingRows);
const training = traceOf(trainingRows, trainingTags);

const strategies = [
  { label: 'host', name: 'host' },
  { label: 'pool', name: 'pool' },
  { label: 'expandable', name: 'expandable' },
  { label: 'tiered', name: 'tiered' },
];

describe('diagnoseOom', () => {
  it("says fragmentation when PyTorch's default needs more than the capacity and names the strategy that fits", () => {
    const v = diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies });
    expect(v.kind).toBe('fragmentation');
    expect(v.liveBytes).toBe(20 * MiB);
    // PyTorch's twin: the 8 MiB request takes a 20 MiB segment of its own
    expect(v.pytorch).toMatchObject({ label: "caching (PyTorch's allocator)", fits: false });
    expect(v.pytorch.needBytes!).toBeGreaterThan(26 * MiB);
    expect(v.pytorch.needBytes!).toBeLessThanOrEqual(40 * MiB + v.pytorch.minCapacity!.resolutionBytes);
    expect(v.lines[0]).toContain("but PyTorch's default allocator (replayed by its twin, the caching strategy) needs");
    expect(v.best).toMatchObject({ label: 'expandable', fits: true });
    expect(v.best!.needBytes).toBeLessThanOrEqual(26 * MiB);
    expect(v.best!.marginBytes).toBe(26 * MiB - v.best!.needBytes);
    expect(v.lines[0]).toMatch(/^Fragmentation: the live bytes peak at 20\.00 MiB, under the capacity of 26\.00 MiB/);
    expect(v.lines[1]).toMatch(/^expandable fits in /);
    expect(v.reductions).toEqual([]);
    // host memory and spilling strategies are listed, never ranked
    expect(v.strategies.filter((s) => !s.ranked).map((s) => s.label)).toEqual(expect.arrayContaining(['host', 'tiered']));
    expect(v.strategies.find((s) => s.label === 'tiered')!.notRankedReason).toMatch(/spills to host memory/);
  });

  it('says fits, naming the strategy needing the least and its margin, and whether PyTorch fits', () => {
    const v = diagnoseOom(fragmenting, { capacityBytes: 64 * MiB, strategies });
    expect(v.kind).toBe('fits');
    expect(v.pytorch.fits).toBe(true);
    expect(v.best!.label).toBe('expandable');
    expect(v.best!.marginBytes).toBe(64 * MiB - v.best!.needBytes);
    expect(v.best!.needBytes).toBeGreaterThanOrEqual(20 * MiB);
    expect(v.best!.needBytes).toBeLessThan(v.pytorch.needBytes!);
    expect(v.lines[0]).toContain(`Fits: under expandable, which needs`);
    expect(v.lines[1]).toMatch(
      /^PyTorch's default allocator \(replayed by its twin, the caching strategy\) fits: it needs (39\.\d\d|40\.00) MiB, 2\d\.\d\d MiB to spare\.$/,
    );
  });

  it('replays on the host twins where asked: on any machine the figures of a machine without a GPU, device strategies still ranked', () => {
    for (const name of ['pool', 'expandable', 'tiered']) expect(strategyInfo(name).hostTwinOptions).toEqual({ upstream: 'host' });
    const v = diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies, hostTwins: true });
    expect(v.kind).toBe('fragmentation');
    expect(v.best).toMatchObject({ label: 'expandable', fits: true });
    expect(v.strategies.find((s) => s.label === 'pool')).toMatchObject({ memory: 'device', ranked: true, fits: false });
    expect(v.pytorch.needBytes!).toBeGreaterThan(26 * MiB);
    expect(v.pytorch.needBytes!).toBeLessThanOrEqual(40 * MiB + v.pytorch.minCapacity!.resolutionBytes);
    // without a GPU the strategies run on their host twins anyway: the same figures
    if (!hasCudaDevice()) {
      const needs = (x: typeof v) => x.strategies.map((s) => [s.label, s.needBytes, s.fits]);
      expect(needs(v)).toEqual(needs(diagnoseOom(fragmenting, { capacityBytes: 26 * MiB, strategies })));
    }
  });

  it('says real when the live bytes exceed the capacity, with what would reduce them', () => {
    const v = diagnoseOom(training, { capacityBytes: 16 * MiB, strategies });
    expect(v.kind).toBe('real');
    expect(v.liveBytes).toBe(25 * MiB);
    expect(v.excessBytes).toBe(9 * MiB);
    expect(v.lines[0]).toBe(
      'Real: the live bytes peak at 25.00 MiB, 9.00 MiB more than the capacity of 16.00 MiB; no allocator can run this program in it as it is.',
    );
    const byKind = Object.fromEntries(v.reductions.map((r) => [r.kind, r]));
    // the weights on the host leave 4 + 9 MiB on the device
    expect(byKind['tiered-by-tag']).toMatchObject({
      groups: ['weights'],
      liveAfterBytes: 13 * MiB,
      savedBytes: 12 * MiB,
      reaches: true,
      exact: true,
    });
    // weights and optimizer state make no call while live bytes exceed 16 MiB: asleep then, 16 MiB at most remain
    expect(byKind['sleep-idle-tags']).toMatchObject({
      groups: ['weights', 'optimizer'],
      liveAfterBytes: 16 * MiB,
      reaches: true,
      exact: false,
    });
    // the step's activations, freed after the peak
    expect(byKind.checkpointing).toMatchObject({ savedBytes: 9 * MiB, liveAfterBytes: 16 * MiB, exact: false });
    expect(v.peak.byTag).toEqual([
      { name: 'weights', bytes: 12 * MiB },
      { name: 'activations', bytes: 9 * MiB },
      { name: 'optimizer', bytes: 4 * MiB },
    ]);
    expect(v.peak.bySizeClass).toEqual([{ name: '1 MiB to 16 MiB', bytes: 25 * MiB }]);
  });

  it('replays a failed request of the recording as an allocation, or leaves it out when asked', () => {
    // 10 MiB requests: PyTorch's segment for each is the request itself
    const failing = traceOf([
      ['alloc', 1, 10 * MiB],
      ['oom', 0, 10 * MiB],
    ]);
    expect(diagnoseOom(failing, { capacityBytes: 16 * MiB, strategies: [] })).toMatchObject({
      kind: 'real',
      liveBytes: 20 * MiB,
      failedRequests: { count: 1, handling: 'replay' },
    });
    const skipped = diagnoseOom(failing, { capacityBytes: 16 * MiB, strategies: [], failedRequests: 'skip' });
    expect(skipped).toMatchObject({ kind: 'fits', liveBytes: 10 * MiB });
    expect(skipped.notes.join('\n')).toContain('1 request failed in the recording and is left out');
  });

  it('refuses a capacity that is not a positive integer', () => {
    for (const capacityBytes of [0, -1, 1.5, Number.NaN])
      expect(() => diagnoseOom(fragmenting, { capacityBytes, strategies })).toThrow(RangeError);
  });

  it('reads no capacity from a trace without an out-of-memory entry of a snapshot', () => {
    expect(recordedCapacity(fragmenting)).toBeUndefined();
  });
});

describe('the peak, taken apart', () => {
  const c = compileTrace(training);

  it('takes tags off the device, largest first, until the live bytes fit', () => {
    expect(offDevicePlan(c, 'tag', 14 * MiB)).toEqual({
      groups: ['weights'],
      movedAtPeakBytes: 12 * MiB,
      peakBytes: 13 * MiB,
      reaches: true,
    });
    // every tag but the last is taken, and the optimizer state alone is still over
    expect(offDevicePlan(c, 'tag', 3 * MiB)).toMatchObject({ groups: ['weights', 'activations'], peakBytes: 4 * MiB, reaches: false });
    expect(offDevicePlan(c, 'stream', 3 * MiB)).toBeUndefined(); // one stream: nothing to move
  });

  it('finds the tags idle while the live bytes exceed a capacity', () => {
    expect(idleTagsAbove(c, 16 * MiB)).toEqual({ tags: ['weights', 'optimizer'], heldAtPeakBytes: 16 * MiB, peakBytes: 16 * MiB });
    expect(idleTagsAbove(c, 30 * MiB)).toBeUndefined();
  });

  it('splits the bytes at the peak into the step and the standing state', () => {
    expect(transientAtPeak(c)).toEqual({ bytes: 9 * MiB, standingBytes: 16 * MiB });
  });
});
