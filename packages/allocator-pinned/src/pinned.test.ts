import * as vitest from 'vitest';
import { describe, expect, it } from 'vitest';
import {
  createAllocator,
  deviceStatus,
  hasCudaDevice,
  NativeAllocator,
  OutOfMemoryError,
  strategyInfo,
  type Allocator,
} from '@gpumem/allocator-core';
import { describeConformance } from '@gpumem/allocator-core/testing';
import { fillU32 } from '@gpumem/allocator-core/tools';
import { PinnedAllocator } from './index.js';

const MiB = 2 ** 20;
const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
const gpuTitle = (title: string) => (gpu ? title : `${title} [skipped: ${noGpuReason}]`);

// The shared conformance suite: on the host twin everywhere (CI), on mapped pinned memory with a GPU.
describeConformance(vitest, {
  label: 'pinned(host)',
  name: 'pinned',
  create: () => createAllocator('pinned', { upstream: 'host' }),
});
describeConformance(vitest, {
  label: 'pinned(pinned)',
  name: 'pinned',
  create: () => createAllocator('pinned', { upstream: 'pinned' }),
  // Past the cap on pinned bytes: refused before anything is pinned.
  oversizeBytes: 2 ** 50,
  skip: gpu ? false : noGpuReason,
});

/** The error `fn` throws, which must be an OutOfMemoryError. */
function oomOf(fn: () => unknown): OutOfMemoryError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(OutOfMemoryError);
    return e as OutOfMemoryError;
  }
  throw new Error('expected an OutOfMemoryError, but the call succeeded');
}

/** maxReservedBytes 8 MiB: 4 MiB fits, 6 MiB more does not; the allocator is unchanged and usable. */
function capIsAnOutOfMemoryAndTheAllocatorStaysUsable(a: Allocator): OutOfMemoryError {
  const p = a.malloc(4 * MiB);
  const before = a.stats();
  const e = oomOf(() => a.malloc(6 * MiB));
  expect(e.requestedBytes).toBe(6 * MiB);
  expect(e.allocator).toBe('pinned');
  const after = a.stats();
  expect(after.allocatedBytes).toBe(before.allocatedBytes);
  expect(after.allocCount).toBe(before.allocCount);
  expect(after.oomCount).toBe(before.oomCount + 1);
  a.write(p, new Uint8Array([1, 2, 3]));
  const back = new Uint8Array(3);
  a.read(p, back);
  expect([...back]).toEqual([1, 2, 3]);
  a.free(p, 4 * MiB);
  const q = a.malloc(8 * MiB); // the cached segment is released to make room
  a.free(q, 8 * MiB);
  expect(a.stats().reservedBytes).toBeLessThanOrEqual(8 * MiB);
  return e;
}

describe('pinned', () => {
  it('registers as a capturable native strategy over host memory that needs no GPU', () => {
    expect(strategyInfo('pinned')).toMatchObject({
      requiresCuda: false,
      nativeLayers: true,
      capturable: true,
      hostMemory: true,
      requiresOptions: false,
    });
  });

  it("resolves 'auto' to pinned memory with a GPU and to the host twin without one", () => {
    const a = new PinnedAllocator();
    try {
      expect(a.upstream).toBe(gpu ? 'pinned' : 'host');
      expect(a.device.kind).toBe(gpu ? 'cuda' : 'host');
      expect(a).toBeInstanceOf(NativeAllocator);
    } finally {
      a.dispose();
    }
  });

  // PyTorch's pinned allocator rounds every request up to a power of two: 300 MiB + 1 B would take
  // 512 MiB of pinned memory there (and 10 GiB + 1 B would take 16 GiB). The pool's rounding takes
  // one 302 MiB segment (512 B rounding, large segments rounded up to 2 MiB). The host twin runs the
  // same pool code; the pages are never touched, so this costs no real memory.
  it('rounds a 300 MiB + 1 B request to 302 MiB, not to a power of two', () => {
    const a = createAllocator('pinned', { upstream: 'host' });
    try {
      const bytes = 300 * MiB + 1;
      const p = a.malloc(bytes);
      const s = a.stats();
      expect(s.allocatedBytes).toBe(bytes);
      expect(s.reservedBytes).toBeLessThanOrEqual(302 * MiB);
      expect(s.reservedBytes).toBeLessThan(512 * MiB);
      a.free(p, bytes);
      const q = a.malloc(200 * MiB); // reuses the cached segment
      expect(a.stats().upstreamAllocCount).toBe(1);
      a.free(q, 200 * MiB);
    } finally {
      a.dispose();
    }
  });

  it('a request past maxReservedBytes is an OutOfMemoryError and the allocator stays usable (host twin)', () => {
    const a = createAllocator('pinned', { upstream: 'host', maxReservedBytes: 8 * MiB });
    try {
      capIsAnOutOfMemoryAndTheAllocatorStaysUsable(a);
    } finally {
      a.dispose();
    }
  });

  it('rejects bad options with errors naming them, creating nothing', () => {
    expect(() => createAllocator('pinned', { upstream: 'cuda' as never })).toThrow(/Expected one of 'pinned', 'host', 'auto' for upstream/);
    expect(() => createAllocator('pinned', { upstream: 'host', maxReservedBytes: 0 })).toThrow(RangeError);
    expect(() => createAllocator('pinned', { upstream: 'host', maxReservedBytes: '1' as never })).toThrow(/maxReservedBytes/);
    expect(() => createAllocator('pinned', { upstream: 'host', largeSegmentRounding: -1 })).toThrow(/largeSegmentRounding/);
    expect(() => createAllocator('pinned', { pinnedBytes: 1 } as never)).toThrow(/Unknown option 'pinnedBytes'.*maxReservedBytes/);
    expect(() => createAllocator('pinned', { upstream: 'host', device: -1 })).toThrow(/device/);
  });

  it.skipIf(gpu)('asking for pinned memory where there is no GPU says why', () => {
    expect(() => createAllocator('pinned', { upstream: 'pinned' })).toThrow(/not available/);
  });
});

describe.skipIf(!gpu)(gpuTitle('pinned on a GPU'), () => {
  it('a request past the cap says it would pin more than the host has available, and the allocator stays usable', () => {
    const a = createAllocator('pinned', { upstream: 'pinned', maxReservedBytes: 8 * MiB });
    try {
      const e = capIsAnOutOfMemoryAndTheAllocatorStaysUsable(a);
      expect(e.message).toMatch(/would pin more than the host has available/);
      expect(e.message).toMatch(/maxReservedBytes/);
    } finally {
      a.dispose();
    }
  });

  it('the default cap refuses more than the host has available, pinning nothing', () => {
    const a = createAllocator('pinned', { upstream: 'pinned' });
    try {
      const e = oomOf(() => a.malloc(2 ** 50));
      expect(e.message).toMatch(/would pin more than the host has available/);
      expect(e.message).toMatch(/MemAvailable/);
      expect(a.stats().reservedBytes).toBe(0);
    } finally {
      a.dispose();
    }
  });

  // A kernel writes the memory in place (fillU32); the host reads what it wrote. (Kernels reading it
  // in place are measured by linkBenchmark's zero-copy read.)
  it('kernels write the memory in place', () => {
    const a = createAllocator('pinned', { upstream: 'pinned' }) as PinnedAllocator;
    try {
      const count = 4096;
      const p = a.malloc(count * 4);
      a.write(p, new Uint32Array(count));
      fillU32(a, p, count, 3);
      const back = new Uint32Array(count);
      a.read(p, back);
      expect(back.every((v) => v === 3)).toBe(true);
      a.free(p, count * 4);
    } finally {
      a.dispose();
    }
  });

  it('rounds a 300 MiB + 1 B request to 302 MiB of pinned memory', () => {
    const a = createAllocator('pinned', { upstream: 'pinned' });
    try {
      const p = a.malloc(300 * MiB + 1);
      expect(a.stats().reservedBytes).toBeLessThanOrEqual(302 * MiB);
      a.free(p, 300 * MiB + 1);
    } finally {
      a.dispose();
    }
  });
});
