/**
 * What the arena does beyond the shared conformance suite: rewinding, reset, dedicated chunks for
 * oversized requests, trim, wrapping an allocator it does not own, and upstream out-of-memory.
 * Runs over host memory, so it needs no GPU.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, InvalidStateError, OutOfMemoryError, Stream } from '@gpumem/allocator-core';
import { ArenaAllocator } from './index.js';

const MiB = 1 << 20;

function arena(chunkBytes = MiB): ArenaAllocator {
  const a = createAllocator('arena', { upstream: 'host', chunkBytes });
  expect(a).toBeInstanceOf(ArenaAllocator);
  return a as ArenaAllocator;
}

describe('arena', () => {
  it('is registered, over host memory here, with a 4 MiB default chunk', () => {
    const a = createAllocator('arena', { upstream: 'host' }) as ArenaAllocator;
    try {
      expect(a.name).toBe('arena');
      expect(a.device.kind).toBe('host');
      expect(a.chunkBytes).toBe(4 * MiB);
      expect(a.ownsUpstream).toBe(true);
      expect(a.upstream.name).toBe('host');
    } finally {
      a.dispose();
    }
  });

  it('bump-allocates 256-byte aligned blocks inside one chunk', () => {
    const a = arena();
    try {
      const p = a.malloc(1);
      const q = a.malloc(300);
      const r = a.malloc(256);
      expect(q - p).toBe(256);
      expect(r - q).toBe(512);
      expect(a.stats()).toMatchObject({ allocatedBytes: 557, reservedBytes: MiB, upstreamAllocCount: 1, segmentCount: 1 });
    } finally {
      a.dispose();
    }
  });

  it('rewinds once every block is freed, with no new upstream allocation', () => {
    const a = arena();
    try {
      const first: Array<[number, number]> = [];
      for (let i = 0; i < 40; i++) first.push([a.malloc(100_000), 100_000]); // ~4 chunks
      const upstreamAllocs = a.stats().upstreamAllocCount;
      expect(upstreamAllocs).toBeGreaterThan(1);
      for (const [p, n] of first) a.free(p, n);
      expect(a.stats()).toMatchObject({ allocatedBytes: 0, reservedBytes: upstreamAllocs * MiB });
      for (let step = 0; step < 3; step++) {
        const again = first.map(([, n]) => a.malloc(n));
        expect(again).toEqual(first.map(([p]) => p)); // the same memory, from the start
        for (const p of again) a.free(p, 100_000);
      }
      expect(a.stats()).toMatchObject({ upstreamAllocCount: upstreamAllocs, upstreamFreeCount: 0 });
    } finally {
      a.dispose();
    }
  });

  it('does not rewind while a block is live', () => {
    const a = arena();
    try {
      const keep = a.malloc(1000);
      const p = a.malloc(1000);
      a.free(p, 1000);
      const q = a.malloc(1000);
      expect(q).not.toBe(p);
      expect(q).toBeGreaterThan(keep);
      a.free(q, 1000);
      a.free(keep, 1000);
    } finally {
      a.dispose();
    }
  });

  it('reset() frees every block at once and invalidates their pointers', () => {
    const a = arena();
    try {
      const ptrs = [a.malloc(1000), a.malloc(2000), a.malloc(3 * MiB)];
      const before = a.stats();
      a.reset();
      expect(a.liveBlocks).toBe(0);
      expect(a.stats()).toMatchObject({
        allocatedBytes: 0,
        peakAllocatedBytes: before.peakAllocatedBytes,
        allocCount: 3,
        freeCount: 3,
        reservedBytes: before.reservedBytes,
        upstreamFreeCount: 0,
      });
      expect(() => a.free(ptrs[0]!, 1000)).toThrow(TypeError);
      expect(() => a.read(ptrs[1]!, new Uint8Array(1))).toThrow(/ptr/);
      expect(a.malloc(1000)).toBe(ptrs[0]); // rewound
      expect(a.stats().upstreamAllocCount).toBe(before.upstreamAllocCount);
    } finally {
      a.dispose();
    }
  });

  it('gives a request larger than chunkBytes a dedicated chunk of its own size, kept for reuse', () => {
    const a = arena();
    try {
      const small = a.malloc(1000);
      const big = 3 * MiB + 5;
      const p = a.malloc(big);
      expect(p % 256).toBe(0);
      expect(a.stats()).toMatchObject({ reservedBytes: MiB + big, upstreamAllocCount: 2, segmentCount: 2 });
      a.write(p, new Uint8Array([7, 8, 9]), big - 3);
      const back = new Uint8Array(3);
      a.read(p, back, big - 3);
      expect([...back]).toEqual([7, 8, 9]);
      a.free(p, big);
      // a smaller oversized request reuses the free dedicated chunk
      const q = a.malloc(2 * MiB);
      expect(q).toBe(p);
      expect(a.stats().upstreamAllocCount).toBe(2);
      // the small chunk still has room for small requests
      const r = a.malloc(1000);
      expect(r - small).toBe(1024);
      a.free(q, 2 * MiB);
      a.free(r, 1000);
      a.free(small, 1000);
    } finally {
      a.dispose();
    }
  });

  it('trim() gives unused chunks back, keeping at most bytesToKeep', () => {
    const a = arena();
    try {
      const ptrs = Array.from({ length: 3 }, () => a.malloc(MiB)); // three full chunks
      const big = a.malloc(2 * MiB);
      a.free(big, 2 * MiB);
      a.free(ptrs[2]!, MiB);
      expect(a.stats().reservedBytes).toBe(5 * MiB);
      a.trim(4 * MiB);
      expect(a.stats()).toMatchObject({ reservedBytes: 3 * MiB, upstreamFreeCount: 1, segmentCount: 3 });
      a.trim();
      expect(a.stats()).toMatchObject({ reservedBytes: 2 * MiB, upstreamFreeCount: 2, segmentCount: 2 });
      // live blocks are untouched and the arena keeps working
      a.write(ptrs[0]!, new Uint8Array([1]), MiB - 1);
      const p = a.malloc(1000);
      expect(a.stats().upstreamAllocCount).toBe(5);
      a.free(p, 1000);
      a.free(ptrs[0]!, MiB);
      a.free(ptrs[1]!, MiB);
      a.trim();
      expect(a.stats()).toMatchObject({ reservedBytes: 0, segmentCount: 0, upstreamFreeCount: 5 });
    } finally {
      a.dispose();
    }
  });

  it('wraps an existing allocator without owning it', () => {
    const host = createAllocator('host');
    try {
      const a = createAllocator('arena', { upstreamAllocator: host, chunkBytes: MiB }) as ArenaAllocator;
      expect(a.ownsUpstream).toBe(false);
      expect(a.device).toBe(host.device);
      const p = a.malloc(4096);
      a.write(p, new Uint8Array([42]));
      expect(host.stats()).toMatchObject({ allocCount: 1, allocatedBytes: MiB });
      a.dispose();
      expect(host.disposed).toBe(false);
      expect(host.stats()).toMatchObject({ allocatedBytes: 0, freeCount: 1 });
      const q = host.malloc(10);
      host.free(q, 10);
    } finally {
      host.dispose();
    }
  });

  it('disposes an upstream it created', () => {
    const a = arena();
    a.malloc(10);
    const upstream = a.upstream;
    a.dispose();
    expect(upstream.disposed).toBe(true);
    expect(() => a.malloc(10)).toThrow(InvalidStateError);
    expect(() => a.reset()).toThrow(InvalidStateError);
  });

  it('turns an upstream out-of-memory into its own OutOfMemoryError and stays usable', () => {
    const a = createAllocator('arena', { upstream: 'host', upstreamOptions: { limitBytes: MiB }, chunkBytes: MiB });
    try {
      const p = a.malloc(1000);
      const before = a.stats();
      let error: unknown;
      try {
        a.malloc(MiB); // does not fit the first chunk; a second would pass the limit
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(OutOfMemoryError);
      const oom = error as OutOfMemoryError;
      expect(oom.allocator).toBe('arena');
      expect(oom.requestedBytes).toBe(MiB);
      expect(oom.stats).toMatchObject({ allocatedBytes: 1000, reservedBytes: MiB, oomCount: 1 });
      expect(a.stats()).toEqual({ ...before, oomCount: 1 });
      expect(() => a.malloc(2 * MiB)).toThrow(OutOfMemoryError); // a dedicated chunk fails the same way
      expect(a.stats().oomCount).toBe(2);
      // still usable: the first chunk has room
      const q = a.malloc(4096);
      expect(q - p).toBe(1024);
      a.free(q, 4096);
      a.free(p, 1000);
      expect(a.stats()).toMatchObject({ allocatedBytes: 0, upstreamAllocCount: 1 });
    } finally {
      a.dispose();
    }
  });

  it('forwards recordStream and reads/writes at the right chunk offset', () => {
    const a = arena();
    const s = Stream.create(a.device);
    try {
      const p = a.malloc(512);
      const q = a.malloc(512, s);
      a.write(q, new Uint32Array([0xdeadbeef]), 508, s);
      a.recordStream(q, s);
      const back = new Uint32Array(1);
      a.read(q, back, 508, s);
      expect(back[0]).toBe(0xdeadbeef);
      const head = new Uint8Array(512);
      a.read(p, head);
      a.free(q, 512, s);
      a.free(p, 512);
      expect(a.malloc(512, s)).toBe(p); // rewound: reused on another stream after ordering
    } finally {
      a.dispose();
      s.destroy();
    }
  });

  it('rejects bad options', () => {
    expect(() => createAllocator('arena', { upstream: 'no-such-allocator' })).toThrow(/upstream/);
    expect(() => createAllocator('arena', { upstream: 'host', chunkBytes: 0 })).toThrow(RangeError);
    expect(() => createAllocator('arena', { upstream: 'host', chunkBytes: 0 })).toThrow(/chunkBytes/);
    expect(() => createAllocator('arena', { upstream: 'host', chunkSize: 10 } as never)).toThrow(/chunkSize/);
    const host = createAllocator('host');
    try {
      expect(() => createAllocator('arena', { upstreamAllocator: host, upstream: 'host' } as never)).toThrow(TypeError);
      expect(() => createAllocator('arena', { upstreamAllocator: {} as never })).toThrow(/upstreamAllocator/);
    } finally {
      host.dispose();
    }
    expect(() => createAllocator('arena', { upstreamAllocator: host })).toThrow(InvalidStateError);
  });
});
