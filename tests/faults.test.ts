/**
 * Fault injection (`faultInjection: { failEvery, failAfterBytes }`, a layer right over each native
 * strategy's leaf): every injected failure reaches the caller as an OutOfMemoryError carrying
 * stats, nothing leaks, the allocator keeps working; the pool's release-and-retry absorbs a failure
 * when it has cached segments to give back; and the trainer, run out of memory, throws, frees
 * everything it took, and a new run in the same process trains as if nothing had happened.
 * GPU strategies are skipped, with the reason in the title, where there is no device.
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, OutOfMemoryError, type Allocator, type DevicePtr } from '@gpumem/allocator-core';
import type { PoolAllocatorOptions } from '@gpumem/allocator-pool';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-async';
import '@gpumem/allocator-uvm';
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-tiered';
import '@gpumem/allocator-pinned';
import { train, type WorkloadTrainOptions } from '../packages/gnn/src/training/train.js';
import { gpuAvailable, gpuTitle } from './gpu.js';

const MiB = 2 ** 20;

interface FaultCase {
  label: string;
  name: string;
  options: Record<string, unknown>;
  /** A request that reaches the leaf each time while earlier ones are held (a new segment for the pool). */
  bytes: number;
}

const cpuCases: FaultCase[] = [
  { label: 'host', name: 'host', options: {}, bytes: 1 * MiB },
  { label: 'pool(host)', name: 'pool', options: { upstream: 'host' }, bytes: 3 * MiB },
  { label: 'pinned(host)', name: 'pinned', options: { upstream: 'host' }, bytes: 3 * MiB },
  // One 2 MiB granule (one run) mapped per allocation: the fault layer fails run maps.
  { label: 'expandable(host)', name: 'expandable', options: { upstream: 'host', reserveBytes: 2 ** 30 }, bytes: 2 * MiB },
  // The fault layer sits over the tiered leaf: it fails mallocs (and budgets the bytes held), both tiers alike.
  { label: 'tiered(host)', name: 'tiered', options: { upstream: 'host', deviceBudgetBytes: 8 * MiB }, bytes: 2 * MiB },
];

// Small sizes: a few MiB of device memory, and of managed memory at most 6 MiB.
const gpuCases: FaultCase[] = [
  { label: 'cuda', name: 'cuda', options: {}, bytes: 1 * MiB },
  { label: 'uvm', name: 'uvm', options: { logThresholdBytes: false }, bytes: 1 * MiB },
  { label: 'async', name: 'async', options: {}, bytes: 1 * MiB },
  { label: 'pool(cuda)', name: 'pool', options: { upstream: 'cuda' }, bytes: 3 * MiB },
  { label: 'pinned(pinned)', name: 'pinned', options: { upstream: 'pinned' }, bytes: 3 * MiB },
  { label: 'tiered(cuda)', name: 'tiered', options: { upstream: 'cuda', deviceBudgetBytes: 8 * MiB }, bytes: 2 * MiB },
];

function pattern(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) out[i] = (i * 31 + seed * 7) & 0xff;
  return out;
}

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

/** Every third allocation asked of the leaf fails; checks each failure, the data, and the cleanup. */
function everyThirdFails(c: FaultCase): void {
  const a = createAllocator(c.name, { ...c.options, faultInjection: { failEvery: 3 } });
  try {
    const baseline = a.stats().allocatedBytes;
    const live: Array<[DevicePtr, number]> = [];
    for (let i = 1; i <= 9; i++) {
      if (i % 3 === 0) {
        const before = a.stats();
        const e = oomOf(() => a.malloc(c.bytes));
        expect(e.requestedBytes).toBe(c.bytes);
        expect(e.allocator).toBe(c.name);
        expect(e.message).toMatch(/injected/);
        expect(e.stats.oomCount).toBe(i / 3);
        expect(e.stats.allocatedBytes).toBe(before.allocatedBytes);
        expect(a.stats().allocatedBytes).toBe(before.allocatedBytes);
        expect(a.stats().allocCount).toBe(before.allocCount);
      } else {
        const p = a.malloc(c.bytes);
        a.write(p, pattern(4096, i));
        live.push([p, i]);
      }
    }
    const s = a.stats();
    expect(s.oomCount).toBe(3);
    expect(s.allocCount).toBe(6);
    expect(s.allocatedBytes).toBe(baseline + 6 * c.bytes);
    for (const [p, seed] of live) {
      const back = new Uint8Array(4096);
      a.read(p, back);
      expect(back).toEqual(pattern(4096, seed));
      a.free(p, c.bytes);
    }
    expect(a.stats().allocatedBytes).toBe(baseline);
    // Still works.
    const p = a.malloc(c.bytes);
    a.write(p, pattern(64, 99));
    a.free(p, c.bytes);
    expect(a.stats().allocatedBytes).toBe(baseline);
  } finally {
    a.dispose();
  }
}

/** A byte budget: what would pass it fails, what fits again after a free succeeds. */
function budgetRefuses(c: FaultCase): void {
  const a = createAllocator(c.name, { ...c.options, faultInjection: { failAfterBytes: 4 * c.bytes } });
  try {
    const first = a.malloc(c.bytes);
    const e = oomOf(() => a.malloc(4 * c.bytes));
    expect(e.requestedBytes).toBe(4 * c.bytes);
    expect(e.stats.allocatedBytes).toBe(c.bytes);
    expect(a.stats().allocatedBytes).toBe(c.bytes);
    a.free(first, c.bytes);
    expect(a.stats().allocatedBytes).toBe(0);
    a.trim(); // the pool's cached segment counts against the budget until it goes back
    const whole = a.malloc(c.bytes * 2);
    a.free(whole, c.bytes * 2);
    expect(a.stats().allocatedBytes).toBe(0);
  } finally {
    a.dispose();
  }
}

/**
 * The pool caches four 2 MiB small segments (the whole 8 MiB budget); a 4 MiB request needs a new
 * large segment, which the budget refuses, so the pool releases its cache and retries: the caller
 * sees a success.
 */
function poolReleasesAndRetries(upstream: 'host' | 'cuda'): void {
  const pool = createAllocator('pool', { upstream, faultInjection: { failAfterBytes: 8 * MiB } });
  try {
    const blocks = Array.from({ length: 8 }, () => pool.malloc(MiB));
    for (const p of blocks) pool.free(p, MiB);
    let s = pool.stats();
    expect(s.reservedBytes).toBe(8 * MiB);
    expect(s.upstreamFreeCount).toBe(0);

    const large = pool.malloc(4 * MiB);
    pool.write(large, pattern(4096, 5), 4 * MiB - 4096);
    s = pool.stats();
    expect(s.upstreamFreeCount).toBe(4);
    expect(s.upstreamAllocCount).toBe(5);
    expect(s.reservedBytes).toBe(4 * MiB);
    expect(s.allocatedBytes).toBe(4 * MiB);
    expect(s.oomCount).toBe(0);
    const back = new Uint8Array(4096);
    pool.read(large, back, 4 * MiB - 4096);
    expect(back).toEqual(pattern(4096, 5));

    // With a live 4 MiB segment and nothing cached, a second one passes the budget: no retry helps.
    const e = oomOf(() => pool.malloc(4 * MiB + 1));
    expect(e.stats.allocatedBytes).toBe(4 * MiB);
    expect(e.stats.oomCount).toBe(1);
    pool.free(large, 4 * MiB);
    expect(pool.stats().allocatedBytes).toBe(0);
  } finally {
    pool.dispose();
  }
}

describe('fault injection on the CPU strategies', () => {
  for (const c of cpuCases) {
    it(`${c.label}: every 3rd allocation of the leaf is an OutOfMemoryError with stats; no leak; still works`, () => {
      everyThirdFails(c);
    });
    it(`${c.label}: a byte budget refuses what would pass it`, () => {
      budgetRefuses(c);
    });
  }

  it('pool(host): release-and-retry turns a refused segment into a success', () => {
    poolReleasesAndRetries('host');
  });

  it('faultInjection is checked: typed errors naming the option, and nothing created', () => {
    const bad: Array<[unknown, RegExp, ErrorConstructor]> = [
      [{}, /failEvery and\/or failAfterBytes/, TypeError],
      [{ failEvery: 0 }, /faultInjection\.failEvery/, RangeError],
      [{ failEvery: 1.5 }, /faultInjection\.failEvery/, RangeError],
      [{ failEvery: '2' }, /faultInjection\.failEvery/, TypeError],
      [{ failAfterBytes: -1 }, /faultInjection\.failAfterBytes/, RangeError],
      [{ failAfterBytes: 2 ** 53 }, /faultInjection\.failAfterBytes/, RangeError],
      [{ failevery: 2 }, /Unknown option 'failevery' in faultInjection/, TypeError],
      [5, /Expected an object .* for faultInjection but received 5 of type number/, TypeError],
      [null, /for faultInjection but received null/, TypeError],
    ];
    for (const [faultInjection, message, type] of bad) {
      expect(() => createAllocator('host', { faultInjection } as never)).toThrow(type);
      expect(() => createAllocator('pool', { upstream: 'host', faultInjection } as never)).toThrow(message);
    }
  });

  it('a budget of 0 fails every allocation; failEvery 1 as well', () => {
    for (const faultInjection of [{ failAfterBytes: 0 }, { failEvery: 1 }]) {
      const a = createAllocator('host', { faultInjection });
      expect(() => a.malloc(256)).toThrow(OutOfMemoryError);
      expect(a.stats().oomCount).toBe(1);
      a.dispose();
    }
  });

  it('limitBytes sits over the fault layer: both refuse, each with its own message', () => {
    const a = createAllocator('host', { limitBytes: 10_000, faultInjection: { failEvery: 2 } });
    const p = a.malloc(6000);
    expect(oomOf(() => a.malloc(1000)).message).toMatch(/injected/);
    expect(oomOf(() => a.malloc(5000)).message).toMatch(/limit/);
    expect(a.stats().oomCount).toBe(2);
    a.free(p, 6000);
    expect(a.stats().allocatedBytes).toBe(0);
    a.dispose();
  });
});

describe.skipIf(!gpuAvailable)(gpuTitle('fault injection on the GPU strategies'), () => {
  for (const c of gpuCases) {
    it(`${c.label}: every 3rd allocation of the leaf is an OutOfMemoryError with stats; no leak; still works`, () => {
      everyThirdFails(c);
    });
    it(`${c.label}: a byte budget refuses what would pass it`, () => {
      budgetRefuses(c);
    });
  }

  it('pool(cuda): release-and-retry turns a refused segment into a success', () => {
    poolReleasesAndRetries('cuda');
  });
});

describe('the trainer out of memory', () => {
  const tiny: WorkloadTrainOptions = { model: 'mlp', trainSubset: 256, testSubset: 128, hidden: [32], epochs: 1, seed: 3 };
  const run = (allocator: Allocator) => train({ ...tiny, allocator });

  // Small segments, so that a run takes many of them and a budget can stop it part-way.
  const poolOptions: PoolAllocatorOptions = {
    upstream: 'host',
    smallSegmentBytes: 64 * 1024,
    smallRequestLimit: 32 * 1024,
    largeSegmentRounding: 64 * 1024,
  };

  it('throws OutOfMemoryError, gives back everything, and a fresh run in the same process trains normally', () => {
    // What a run holds at its peak and how many segments it takes, on a pool with no faults.
    const reference = createAllocator('pool', poolOptions);
    const expected = run(reference);
    const { peakAllocatedBytes, upstreamAllocCount, allocatedBytes } = reference.stats();
    expect(allocatedBytes).toBe(0);
    reference.dispose();

    const starvedRuns = [
      // One byte under the peak: the run cannot fit; it fails while building the model.
      { failAfterBytes: peakAllocatedBytes - 1 },
      // The last segment the run takes is refused: it fails inside its first training step.
      { failEvery: upstreamAllocCount },
    ];
    for (const faultInjection of starvedRuns) {
      const starved = createAllocator('pool', { ...poolOptions, faultInjection });
      let error: unknown;
      try {
        run(starved);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(faultInjection)).toBeInstanceOf(OutOfMemoryError);
      const oom = error as OutOfMemoryError;
      expect(oom.allocator).toBe('pool');
      expect(oom.message).toMatch(/injected/);
      expect(oom.stats.oomCount).toBe(1);
      expect(oom.stats.allocatedBytes).toBeGreaterThan(0); // it failed part-way, not at the first call
      const after = starved.stats();
      expect(after.allocatedBytes).toBe(0);
      expect(after.freeCount).toBe(after.allocCount);
      // The allocator itself still works.
      const p = starved.malloc(1024);
      starved.free(p, 1024);
      starved.dispose();
    }

    const fresh = createAllocator('pool', poolOptions);
    const again = run(fresh);
    expect(again.epochs.map((e) => e.losses)).toEqual(expected.epochs.map((e) => e.losses));
    expect(again.epochs[0]!.accuracy).toBe(expected.epochs[0]!.accuracy);
    expect(fresh.stats().allocatedBytes).toBe(0);
    fresh.dispose();
  });
});
