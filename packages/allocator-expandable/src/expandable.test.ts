import { describe, expect, it } from 'vitest';
import { createAllocator, hasCudaDevice, OutOfMemoryError, strategyInfo, TrackingAllocator, withTag } from '@gpumem/allocator-core';
import { ExpandableAllocator } from './index.js';

const MiB = 2 ** 20;

describe('expandable', () => {
  it('registers with native layers, not capturable', () => {
    const info = strategyInfo('expandable');
    expect(info.nativeLayers).toBe(true);
    expect(info.capturable).toBe(false);
    expect(info.requiresCuda).toBe(false);
  });

  it("resolves 'auto' to the host twin where there is no GPU", () => {
    const a = new ExpandableAllocator({ reserveBytes: 256 * MiB });
    try {
      expect(a.upstream).toBe(hasCudaDevice() ? 'cuda' : 'host');
    } finally {
      a.dispose();
    }
  });

  it('maps granules in runs as it grows and unmaps idle runs on trim', () => {
    const a = createAllocator('expandable', { upstream: 'host', granuleBytes: MiB, reserveBytes: 256 * MiB });
    try {
      const p = a.malloc(MiB);
      const q = a.malloc(2 * MiB + 1); // 3 granules into empty space: one run
      expect(a.stats()).toMatchObject({ reservedBytes: 4 * MiB, upstreamAllocCount: 2, segmentCount: 2 });
      a.free(q, 2 * MiB + 1);
      a.free(p, MiB);
      expect(a.stats().reservedBytes).toBe(4 * MiB); // kept mapped by default
      a.trim(MiB);
      expect(a.stats()).toMatchObject({ reservedBytes: MiB, upstreamFreeCount: 1, segmentCount: 1 }); // q's run, whole
    } finally {
      a.dispose();
    }
  });

  it('unmaps the idle granules of a hole it does not fit before mapping past the peak', () => {
    const reserved = (unmapIdleBeforeGrowth?: boolean) => {
      const options = unmapIdleBeforeGrowth === undefined ? {} : { unmapIdleBeforeGrowth };
      const a = createAllocator('expandable', { upstream: 'host', granuleBytes: MiB, reserveBytes: 256 * MiB, ...options });
      try {
        const hole = a.malloc(8 * MiB);
        const kept = a.malloc(MiB); // mapped: 9 MiB
        a.free(hole, 8 * MiB);
        const big = a.malloc(12 * MiB); // fits only past `kept`
        const s = a.stats();
        a.free(big, 12 * MiB);
        a.free(kept, MiB);
        return { reservedBytes: s.reservedBytes, upstreamFreeCount: s.upstreamFreeCount };
      } finally {
        a.dispose();
      }
    };
    expect(reserved()).toEqual({ reservedBytes: 21 * MiB, upstreamFreeCount: 0 }); // off by default: the hole stays mapped
    expect(reserved(true)).toEqual({ reservedBytes: 13 * MiB, upstreamFreeCount: 1 }); // the hole's run went first
    expect(reserved(false)).toEqual({ reservedBytes: 21 * MiB, upstreamFreeCount: 0 });
    expect(() => createAllocator('expandable', { upstream: 'host', unmapIdleBeforeGrowth: 1 as never })).toThrow(/unmapIdleBeforeGrowth/);
  });

  it('limitBytes caps the bytes mapped', () => {
    const a = createAllocator('expandable', { upstream: 'host', limitBytes: 8 * MiB, reserveBytes: 256 * MiB });
    try {
      const p = a.malloc(6 * MiB);
      expect(() => a.malloc(4 * MiB)).toThrow(OutOfMemoryError);
      a.free(p, 6 * MiB);
      const q = a.malloc(8 * MiB); // the idle granules are mapped again, within the limit
      a.free(q, 8 * MiB);
      expect(a.stats().oomCount).toBe(1);
    } finally {
      a.dispose();
    }
  });

  it('rejects bad options with errors naming them, creating nothing', () => {
    // A fraction in (0, 1], or 0 (off, the default): checked natively, still typed and named.
    expect(() => createAllocator('expandable', { upstream: 'host', gcThreshold: 1.5 })).toThrow(RangeError);
    expect(() => createAllocator('expandable', { upstream: 'host', gcThreshold: -0.5 })).toThrow(
      /Expected a fraction in \(0, 1\] \(0: off\) for gcThreshold but received -0.5/,
    );
    expect(() => createAllocator('expandable', { upstream: 'host', gcThreshold: Number.NaN })).toThrow(RangeError);
    expect(() => createAllocator('expandable', { upstream: 'host', gcThreshold: '0.5' as never })).toThrow(TypeError);
    expect(() => createAllocator('expandable', { upstream: 'gpu' as never })).toThrow(/upstream/);
    expect(() => createAllocator('expandable', { granule: 4096 } as never)).toThrow(/Unknown option 'granule'.*granuleBytes/);
    expect(() => createAllocator('expandable', { upstream: 'host', releaseThreshold: -1 })).toThrow(/releaseThreshold/);
    // Checked natively, where the granule is known: still typed, still named.
    expect(() => createAllocator('expandable', { upstream: 'host', granuleBytes: 3 * MiB })).toThrow(RangeError);
    expect(() => createAllocator('expandable', { upstream: 'host', granuleBytes: 3 * MiB })).toThrow(/granuleBytes/);
    expect(() => createAllocator('expandable', { upstream: 'host', reserveBytes: 3 * MiB })).toThrow(
      /reserveBytes to be a positive multiple of the granule/,
    );
  });

  it('takes sleep requests { tags?, keep? } as given, the addon naming what is wrong once', () => {
    const a = createAllocator('expandable', { upstream: 'host', granuleBytes: MiB, reserveBytes: 16 * MiB });
    try {
      const p = withTag('kv', () => a.malloc(MiB));
      const bad = (request: unknown) => () => a.sleep(request as never);
      expect(bad('kv')).toThrow(TypeError);
      expect(bad('kv')).toThrow(/Expected an object \{ tags\?, keep\? \} for request but received 'kv' of type string/);
      expect(bad({ tag: ['kv'] })).toThrow(/Unknown option 'tag' in request; expected one of: tags, keep/);
      expect(bad({ tags: 'kv' })).toThrow(/array of tag names for request.tags/);
      expect(bad({ tags: ['kv', 3] })).toThrow(/Expected a tag name \(string\) for request.tags\[1\] but received 3 of type number/);
      expect(bad({ keep: 'kv' })).toThrow(/boolean or an array of tag names for request.keep/);
      expect(bad({ keep: [''] })).toThrow(RangeError);
      expect(bad({ keep: [''] })).toThrow("Expected a non-empty tag name for request.keep[0] but received ''");
      expect(() => a.wake(['ok', null] as never)).toThrow(/tags\[1\]/);
      // a list of no tag names none: nothing sleeps
      expect(a.sleep({ tags: [] })).toEqual({ changed: [], unchanged: [], deviceBytes: 0, copiedBytes: 0, seconds: 0 });
      expect(a.sleep({ tags: ['kv'], keep: false }).changed).toEqual(['kv']);
      expect(a.wake(undefined).changed).toEqual(['kv']);
      a.free(p, MiB);
    } finally {
      a.dispose();
    }
  });

  it('reserves backup memory ahead of a sleep (reserveBackup, backupReserveBytes), checking the byte count', () => {
    const a = createAllocator('expandable', { upstream: 'host', granuleBytes: MiB, reserveBytes: 64 * MiB, backupReserveBytes: MiB });
    try {
      expect(() => a.reserveBackup?.(-1)).toThrow(RangeError);
      expect(() => a.reserveBackup?.('1 GiB' as never)).toThrow(TypeError);
      a.reserveBackup?.(8 * MiB); // returns at once; the pinning goes on in the background
      const p = withTag('weights', () => a.malloc(3 * MiB));
      const data = new Uint8Array(3 * MiB).map((_, i) => (i * 7) & 0xff);
      a.write(p, data);
      expect(a.sleep({ tags: ['weights'] }).copiedBytes).toBe(3 * MiB); // sleep typed as present: no '?.'
      a.wake(['weights']);
      const back = new Uint8Array(3 * MiB);
      a.read(p, back);
      expect(Buffer.compare(back, data)).toBe(0);
      a.free(p, 3 * MiB);
    } finally {
      a.dispose();
    }
  });

  it('passes reserveBackup through an adaptor, and refuses it past backupLimitBytes', () => {
    const a = new TrackingAllocator(
      createAllocator('expandable', { upstream: 'host', reserveBytes: 64 * MiB, backupLimitBytes: MiB }),
      1024,
      {
        ownsUpstream: true,
      },
    );
    try {
      expect(a.reserveBackup).toBeTypeOf('function');
      expect(() => a.reserveBackup?.(1024 * MiB)).toThrow(OutOfMemoryError);
    } finally {
      a.dispose();
    }
  });
});
