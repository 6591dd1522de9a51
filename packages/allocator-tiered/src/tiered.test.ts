import * as vitest from 'vitest';
import { describe, expect, it } from 'vitest';
import {
  createAllocator,
  deviceStatus,
  hasCudaDevice,
  InvalidStateError,
  memoryInfo,
  OutOfMemoryError,
  Stream,
  strategyInfo,
  type Allocator,
} from '@gpumem/allocator-core';
import { describeConformance } from '@gpumem/allocator-core/testing';
import { fillU32, sumU32 } from '@gpumem/allocator-core/tools';
import { TieredAllocator, type TieredAllocatorOptions } from './index.js';

const MiB = 2 ** 20;
const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);
const gpuTitle = (title: string) => (gpu ? title : `${title} [skipped: ${noGpuReason}]`);

// The shared conformance suite: on the host twin everywhere (CI), on CUDA VMM with a GPU; and with
// a device budget of 4 MiB, so that its larger requests spill to the host tier.
describeConformance(vitest, {
  label: 'tiered(host)',
  name: 'tiered',
  create: () => createAllocator('tiered', { upstream: 'host' }),
});
describeConformance(vitest, {
  label: 'tiered(host, 4 MiB device budget)',
  name: 'tiered',
  create: () => createAllocator('tiered', { upstream: 'host', deviceBudgetBytes: 4 * MiB }),
});
describeConformance(vitest, {
  label: 'tiered(cuda)',
  name: 'tiered',
  create: () => createAllocator('tiered', { upstream: 'cuda' }),
  // Past both budgets (the device's free memory, the host's available memory): refused before any driver call.
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

function pattern(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) out[i] = (seed + i * 31) & 0xff;
  return out;
}

function readBack(a: Allocator, ptr: number, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  a.read(ptr, out);
  return out;
}

/**
 * The behaviour of the host path, the same on the host twin and on a GPU: an 8 MiB device budget
 * (four 2 MiB granules) and a 32 MiB host budget, 'graph' placed on the host.
 */
function behaviour(upstream: 'host' | 'cuda'): void {
  const options: TieredAllocatorOptions = {
    upstream,
    deviceBudgetBytes: 8 * MiB,
    hostBudgetBytes: 32 * MiB,
    placement: { graph: 'host', setup: 'device' },
  };
  let a: TieredAllocator;
  vitest.beforeEach(() => {
    a = createAllocator('tiered', options) as TieredAllocator;
  });
  vitest.afterEach(() => {
    a.dispose();
  });

  it('places by tag: graph on the host with the device budget free, other tags on the device', () => {
    a.setPlacementTag('graph');
    expect(a.currentPlacement).toBe('host');
    const g = a.malloc(3 * MiB);
    a.setPlacementTag('forward'); // not listed: auto
    expect(a.currentPlacement).toBe('auto');
    const f = a.malloc(MiB);
    const s = a.stats();
    expect(s).toMatchObject({
      allocatedBytes: 4 * MiB,
      hostAllocatedBytes: 3 * MiB,
      hostReservedBytes: 4 * MiB, // 3 MiB rounded up to two granules
      reservedBytes: 6 * MiB,
      bytesMovedToHost: 0,
      bytesMovedToDevice: 0,
    });
    a.free(g, 3 * MiB);
    a.free(f, MiB);
    expect(a.stats()).toMatchObject({ allocatedBytes: 0, hostAllocatedBytes: 0, peakHostAllocatedBytes: 3 * MiB });
  });

  it('spills to the host when the device budget is spent, and keeps the data', () => {
    const d = a.malloc(6 * MiB); // three granules on the device
    const spill = a.malloc(4 * MiB); // 6 + 4 > 8: the host
    a.write(spill, pattern(4 * MiB, 3));
    expect(a.stats()).toMatchObject({ hostAllocatedBytes: 4 * MiB, hostReservedBytes: 4 * MiB, reservedBytes: 10 * MiB });
    expect(Buffer.compare(readBack(a, spill, 4 * MiB), pattern(4 * MiB, 3))).toBe(0);
    const fits = a.malloc(2 * MiB); // the last device granule
    expect(a.stats().hostAllocatedBytes).toBe(4 * MiB);
    a.free(fits, 2 * MiB);
    a.free(spill, 4 * MiB);
    a.free(d, 6 * MiB);
  });

  it('prefetch moves a block to the host and back: the pointer and the contents stay', () => {
    const bytes = 3 * MiB + 5;
    const p = a.malloc(bytes);
    a.write(p, pattern(bytes, 7));
    expect(a.stats().hostAllocatedBytes).toBe(0);
    expect(a.prefetch(p, bytes, 'device')).toBe(true); // already there
    expect(a.prefetch(p, bytes, 'host')).toBe(true);
    expect(a.stats()).toMatchObject({ hostAllocatedBytes: bytes, bytesMovedToHost: bytes, hostReservedBytes: 4 * MiB });
    expect(Buffer.compare(readBack(a, p, bytes), pattern(bytes, 7))).toBe(0);
    a.write(p, new Float32Array([1.5, 2.5]), 1000); // written while on the host tier
    expect(a.prefetch(p + 4096, 16, 'device')).toBe(true); // any range inside the block moves it
    expect(a.stats()).toMatchObject({ hostAllocatedBytes: 0, hostReservedBytes: 0, bytesMovedToDevice: bytes });
    const back = new Float32Array(2);
    a.read(p, back, 1000);
    expect([...back]).toEqual([1.5, 2.5]);
    a.free(p, bytes); // the same pointer frees it
    expect(a.stats().allocatedBytes).toBe(0);
  });

  it('prefetch answers false and changes nothing when the target tier has no room', () => {
    const d = a.malloc(8 * MiB); // the whole device budget
    a.setPlacementTag('graph');
    const h = a.malloc(MiB);
    a.write(h, pattern(MiB, 5));
    const before = a.stats();
    expect(a.prefetch(h, MiB, 'device')).toBe(false);
    expect(a.stats()).toMatchObject({ hostAllocatedBytes: before.hostAllocatedBytes, reservedBytes: before.reservedBytes });
    expect(Buffer.compare(readBack(a, h, MiB), pattern(MiB, 5))).toBe(0);
    expect(() => a.prefetch(65_536, 1, 'device')).toThrow(TypeError); // in no block
    a.free(h, MiB);
    a.free(d, 8 * MiB);
  });

  it('budgets refuse with OutOfMemoryError, and the allocator stays usable', () => {
    a.setPlacementTag('setup'); // device only
    const d = a.malloc(8 * MiB);
    const e = oomOf(() => a.malloc(1));
    expect(e.message).toMatch(/placement 'device'/);
    expect(e.requestedBytes).toBe(1);
    expect(e.stats.allocatedBytes).toBe(8 * MiB);
    a.setPlacementTag('other'); // auto: spills
    const h = a.malloc(30 * MiB);
    expect(a.stats().hostAllocatedBytes).toBe(30 * MiB);
    const both = oomOf(() => a.malloc(4 * MiB)); // 8 MiB device, 30 of 32 MiB host
    expect(both.message).toMatch(/device budget.*host budget/);
    expect(both.stats.hostAllocatedBytes).toBe(30 * MiB);
    expect(a.stats().oomCount).toBe(2);
    a.free(h, 30 * MiB);
    const again = a.malloc(4 * MiB); // usable: the cached host block makes room
    a.write(again, pattern(1000, 1));
    expect(Buffer.compare(readBack(a, again, 1000), pattern(1000, 1))).toBe(0);
    a.free(again, 4 * MiB);
    a.free(d, 8 * MiB);
  });

  it('reuses cached blocks in steady state with no new driver call, and trim gives them back', () => {
    const sizes = [MiB, 3 * MiB, 5 * MiB];
    const epoch = () => {
      const ps = sizes.map((n) => a.malloc(n));
      ps.forEach((p, i) => {
        a.free(p, sizes[i]!);
      });
    };
    epoch();
    const warm = a.stats();
    for (let i = 0; i < 5; i++) epoch();
    const s = a.stats();
    expect(s.upstreamAllocCount).toBe(warm.upstreamAllocCount);
    expect(s.reservedBytes).toBe(warm.reservedBytes);
    expect(s.hostReservedBytes).toBe(warm.hostReservedBytes);
    a.trim();
    expect(a.stats()).toMatchObject({ reservedBytes: 0, hostReservedBytes: 0, segmentCount: 0 });
  });

  it('rejects a bad tag or tier with a typed error, and everything after dispose', () => {
    expect(() => a.setPlacementTag(3 as unknown as string)).toThrow(TypeError);
    expect(() => a.setPlacement('gpu' as 'device')).toThrow(/Expected one of 'device', 'host', 'auto' for tier/);
    a.dispose();
    expect(() => a.setPlacementTag('graph')).toThrow(InvalidStateError);
  });
}

describe('tiered', () => {
  it('registers with native layers, spilling to the host, not capturable', () => {
    const info = strategyInfo('tiered');
    expect(info).toMatchObject({ nativeLayers: true, capturable: false, requiresCuda: false, hostMemory: false, spillsToHost: true });
  });

  it("resolves 'auto' to the host twin where there is no GPU", () => {
    const a = new TieredAllocator({ deviceBudgetBytes: 8 * MiB });
    try {
      expect(a.upstream).toBe(gpu ? 'cuda' : 'host');
      expect(a.device.kind).toBe(gpu ? 'cuda' : 'host');
    } finally {
      a.dispose();
    }
  });

  it('validates its options, naming them, creating nothing', () => {
    expect(() => createAllocator('tiered', { upstream: 'host', placement: { graph: 'gpu' as 'host' } })).toThrow(TypeError);
    expect(() => createAllocator('tiered', { upstream: 'host', placement: { graph: 'gpu' as 'host' } })).toThrow(/placement\.graph/);
    expect(() => createAllocator('tiered', { upstream: 'host', placement: 'graph' as never })).toThrow(/for placement/);
    expect(() => createAllocator('tiered', { upstream: 'host', deviceBudgetBytes: -1 })).toThrow(RangeError);
    expect(() => createAllocator('tiered', { upstream: 'host', hostBudgetBytes: 1.5 })).toThrow(/hostBudgetBytes/);
    expect(() => createAllocator('tiered', { upstream: 'gpu' as never })).toThrow(/upstream/);
    expect(() => createAllocator('tiered', { budget: 1 } as never)).toThrow(/Unknown option 'budget'.*deviceBudgetBytes/);
  });

  it('takes the placement the CLI spec syntax gives (tiered:placement.graph=host)', () => {
    // What parseAllocatorSpec makes of 'tiered:upstream=host:placement.graph=host:placement.activations=host'.
    const a = createAllocator('tiered', { upstream: 'host', placement: { graph: 'host', activations: 'host' } }) as TieredAllocator;
    try {
      expect(a.placement).toEqual({ graph: 'host', activations: 'host' });
      a.setPlacementTag('activations');
      const p = a.malloc(1000);
      expect(a.stats().hostAllocatedBytes).toBe(1000);
      a.free(p, 1000);
    } finally {
      a.dispose();
    }
  });

  it('limitBytes caps what callers hold over both tiers', () => {
    const a = createAllocator('tiered', { upstream: 'host', deviceBudgetBytes: 4 * MiB, limitBytes: 8 * MiB });
    try {
      const p = a.malloc(6 * MiB);
      expect(() => a.malloc(4 * MiB)).toThrow(OutOfMemoryError);
      a.free(p, 6 * MiB);
      expect(a.stats().oomCount).toBe(1);
    } finally {
      a.dispose();
    }
  });

  describe('host path on the host twin', () => behaviour('host'));

  describe.skipIf(!gpu)(gpuTitle('host path on a GPU (CUDA VMM, pinned host memory)'), () => {
    behaviour('cuda');

    it('kernels read and write host-tier memory in place, before and after a move', () => {
      const free = memoryInfo(0).freeBytes;
      expect(free).toBeGreaterThan(64 * MiB);
      const a = createAllocator('tiered', {
        upstream: 'cuda',
        deviceBudgetBytes: 16 * MiB,
        hostBudgetBytes: 64 * MiB,
        placement: { graph: 'host' },
      }) as TieredAllocator;
      const stream = Stream.create(a.device);
      try {
        const count = (4 * MiB) / 4;
        a.setPlacementTag('graph');
        const p = a.malloc(count * 4, stream);
        a.setPlacementTag('other');
        const out = a.malloc(8, stream);
        expect(a.stats().hostAllocatedBytes).toBe(count * 4);
        const sum = new BigUint64Array(1);
        fillU32(a, p, count, 3, stream); // a kernel writes pinned host memory
        a.write(out, sum, 0, stream); // sumU32 adds into the u64 at out
        sumU32(a, p, count, out, stream);
        a.read(out, sum, 0, stream);
        expect(Number(sum[0])).toBe(3 * count);
        const words = new Uint32Array(4);
        a.read(p, words, 0, stream);
        expect([...words]).toEqual([3, 3, 3, 3]);
        expect(a.prefetch(p, count * 4, 'device', stream)).toBe(true);
        fillU32(a, p, count, 5, stream);
        expect(a.prefetch(p, count * 4, 'host', stream)).toBe(true);
        a.write(out, new BigUint64Array(1), 0, stream);
        sumU32(a, p, count, out, stream);
        a.read(out, sum, 0, stream);
        expect(Number(sum[0])).toBe(5 * count);
        a.free(out, 8, stream);
        a.free(p, count * 4, stream);
        expect(a.stats().bytesMovedToDevice).toBe(count * 4);
        expect(a.stats().bytesMovedToHost).toBe(count * 4);
      } finally {
        stream.synchronize();
        stream.destroy();
        a.dispose();
      }
    });
  });
});
