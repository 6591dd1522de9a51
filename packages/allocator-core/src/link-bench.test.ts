/**
 * linkBenchmark (./tools): the host-link benchmark of bench/link. Without a GPU it is a typed error
 * saying why (CI); with one, a small run gives positive, finite figures for every measurement.
 */
import { describe, expect, it } from 'vitest';
import { deviceStatus, hasCudaDevice, InvalidStateError } from './index.js';
import { linkBenchmark } from './tools.js';

const MiB = 2 ** 20;
const gpu = hasCudaDevice();
const noGpuReason = gpu ? '' : deviceStatus();
if (!gpu && process.env.GPUMEM_REQUIRE_GPU === '1') throw new Error(`GPUMEM_REQUIRE_GPU=1 but ${noGpuReason}`);

describe('linkBenchmark', () => {
  it.skipIf(gpu)('without a CUDA device: an InvalidStateError saying why', () => {
    let error: unknown;
    try {
      linkBenchmark({ bytes: MiB, repetitions: 1 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidStateError);
    expect((error as Error).message).toMatch(/^linkBenchmark needs a CUDA device: /);
    expect((error as Error).message).toContain(noGpuReason);
  });

  it('rejects bad options with errors naming them, before touching a device', () => {
    expect(() => linkBenchmark({ bytes: 0 })).toThrow(/Expected positive integer for bytes but received 0/);
    expect(() => linkBenchmark({ bytes: 100 })).toThrow(RangeError);
    expect(() => linkBenchmark({ repetitions: 0 })).toThrow(/repetitions/);
    expect(() => linkBenchmark({ repetitions: 1.5 })).toThrow(RangeError);
    expect(() => linkBenchmark({ blocksPerSm: [] })).toThrow(TypeError);
    expect(() => linkBenchmark({ blocksPerSm: [2, 0] })).toThrow(/blocksPerSm\[1\]/);
    expect(() => linkBenchmark({ threadsPerBlock: 500 })).toThrow(/multiple of 32 for threadsPerBlock/);
    expect(() => linkBenchmark({ device: -1 })).toThrow(/device/);
    expect(() => linkBenchmark({ size: MiB } as never)).toThrow(/Unknown option 'size'/);
    expect(() => linkBenchmark(null as never)).toThrow(TypeError);
  });
});

describe.skipIf(!gpu)(gpu ? 'linkBenchmark on a GPU' : `linkBenchmark on a GPU [skipped: ${noGpuReason}]`, () => {
  it('a small run gives positive, finite figures for every measurement', () => {
    const r = linkBenchmark({ bytes: 16 * MiB, repetitions: 2, blocksPerSm: [2, 4] });
    expect(r.deviceName.length).toBeGreaterThan(0);
    expect(r.multiprocessors).toBeGreaterThan(0);
    expect(r.requestedBytes).toBe(16 * MiB);
    expect(r.bytes).toBeGreaterThan(0);
    expect(r.bytes).toBeLessThanOrEqual(16 * MiB);
    const kinds = new Set(r.measurements.map((m) => m.kind));
    for (const k of ['zero-copy-read', 'zero-copy-write', 'h2d-copy', 'd2h-copy', 'device-read']) expect(kinds.has(k)).toBe(true);
    if (r.skipped.length === 0) {
      expect(kinds.has('managed-prefetch')).toBe(true);
      expect(kinds.has('managed-fault-read')).toBe(true);
    }
    expect(r.measurements.filter((m) => m.kind === 'zero-copy-read').map((m) => m.blocksPerSm)).toEqual([2, 4]);
    for (const m of r.measurements) {
      expect(m.gbps).toHaveLength(2);
      for (const v of [...m.gbps, m.medianGbps, m.minGbps, m.maxGbps]) {
        expect(Number.isFinite(v)).toBe(true);
        expect(v).toBeGreaterThan(0);
      }
      expect(m.minGbps).toBeLessThanOrEqual(m.medianGbps);
      expect(m.medianGbps).toBeLessThanOrEqual(m.maxGbps);
    }
  });
});
