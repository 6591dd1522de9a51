/**
 * The 'caching' strategy from TypeScript, on host memory: PyTorch's segment sizes seen through the
 * allocator's statistics, the registry's label, and bad options refused with the option named.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, OutOfMemoryError, strategyInfo, strategyLabel } from '@gpumem/allocator-core';
import { CachingAllocator } from './index.js';

const MiB = 2 ** 20;

describe('caching (host memory)', () => {
  it("reserves PyTorch's segments: 2 MiB for small requests, 20 MiB under 10 MiB, else the request in 2 MiB", () => {
    const a = createAllocator('caching', { upstream: 'host' });
    try {
      expect(a).toBeInstanceOf(CachingAllocator);
      const small = a.malloc(MiB);
      expect(a.stats().reservedBytes).toBe(2 * MiB);
      const mid = a.malloc(8 * MiB);
      expect(a.stats().reservedBytes).toBe(22 * MiB);
      const big = a.malloc(13 * MiB); // the 12 MiB rest of the 20 MiB segment does not fit: 14 MiB of its own
      expect(a.stats().reservedBytes).toBe(36 * MiB);
      for (const [p, n] of [
        [small, MiB],
        [mid, 8 * MiB],
        [big, 13 * MiB],
      ] as const)
        a.free(p, n);
      a.trim();
      expect(a.stats().reservedBytes).toBe(0);
    } finally {
      a.dispose();
    }
  });

  it('frees its cache and retries under a limit, with expandable segments too', () => {
    for (const expandableSegments of [false, true]) {
      const a = createAllocator('caching', {
        upstream: 'host',
        limitBytes: 50 * MiB,
        expandableSegments,
        ...(expandableSegments && { expandableAddressSpaceBytes: 1024 * MiB }),
      });
      try {
        const p = a.malloc(24 * MiB);
        a.free(p, 24 * MiB);
        const q = a.malloc(30 * MiB);
        expect(a.stats().oomCount).toBe(0);
        expect(a.stats().reservedBytes).toBeLessThanOrEqual(50 * MiB);
        expect(() => a.malloc(40 * MiB)).toThrow(OutOfMemoryError);
        a.free(q, 30 * MiB);
      } finally {
        a.dispose();
      }
    }
  });

  it("is labelled as PyTorch's allocator", () => {
    expect(strategyLabel(strategyInfo('caching'))).toBe("caching (PyTorch's allocator)");
    expect(strategyInfo('caching').hostTwinOptions).toEqual({ upstream: 'host' });
  });

  it('refuses bad options, naming them', () => {
    expect(() => createAllocator('caching', { upstream: 'host', roundupPower2Divisions: '3' })).toThrow(/roundupPower2Divisions/);
    expect(() => createAllocator('caching', { upstream: 'host', roundupPower2Divisions: '[256:2' })).toThrow(/roundupPower2Divisions/);
    expect(() => createAllocator('caching', { upstream: 'host', maxSplitSizeBytes: 10 * MiB })).toThrow(/maxSplitSizeBytes/);
    expect(() => createAllocator('caching', { upstream: 'host', garbageCollectionThreshold: 1.5 })).toThrow(/garbageCollectionThreshold/);
    expect(() => createAllocator('caching', { upstream: 'host', expandableSegments: 'yes' as never })).toThrow(TypeError);
  });
});
