/**
 * The conformance suite every strategy must pass: the malloc/free/stats/prefetch contract, data
 * integrity, stream order (within a stream, and across streams while the freeing stream is still
 * busy), bad input (typed errors naming the argument, nothing changed), out of
 * memory and recovery, trim and dispose; and, for a strategy with the registry's `sleep` flag, sleep
 * and wake by tag (sleep-conformance.ts). gpumem runs it over every registered strategy; a plug-in
 * author runs it over theirs, with their options, from their own test file:
 *
 * ```ts
 * import * as vitest from 'vitest';
 * import { createAllocator } from '@gpumem/allocator-core';
 * import { describeConformance } from '@gpumem/allocator-core/testing';
 * import 'my-strategy';
 *
 * describeConformance(vitest, { create: () => createAllocator('my-strategy', { chunkBytes: 1 << 20 }) });
 * ```
 *
 * The test functions are passed in (vitest's, or any runner with the same describe / it / expect /
 * beforeEach / afterEach), so this module imports no test runner and works with the runner the
 * plug-in's project has installed.
 * @module
 */
import { isOutOfMemory, InvalidStateError, type OutOfMemoryError } from '../errors.js';
import { xorshift32 } from '../random.js';
import { loadNative } from '../native.js';
import { hasAllocator, strategyInfo } from '../registry.js';
import { Stream } from '../stream.js';
import type { Allocator, AllocatorStats, DevicePtr } from '../types.js';
import { describeSleepCases } from './sleep-conformance.js';

/** The matchers the suite uses (vitest's and Jest's expect have them all). */
export interface ConformanceMatchers {
  toBe(expected: unknown): void;
  toEqual(expected: unknown): void;
  toContain(item: unknown): void;
  toThrow(expected?: unknown): void;
  toMatch(expected: RegExp | string): void;
  toBeGreaterThanOrEqual(n: number): void;
}

/** What the suite needs of a test runner: pass `import * as vitest from 'vitest'`. */
export interface ConformanceTestApi {
  describe: ((name: string, fn: () => void) => void) & { skipIf: (condition: boolean) => (name: string, fn: () => void) => void };
  it: (name: string, fn: () => void | Promise<void>) => void;
  expect: (actual: unknown) => ConformanceMatchers;
  beforeEach: (fn: () => void) => void;
  afterEach: (fn: () => void) => void;
}

export interface ConformanceOptions {
  /** Makes a fresh allocator for each test (the suite disposes it). */
  create: () => Allocator;
  /** Shown in test names (default: the allocator's name). */
  label?: string;
  /** The name the allocator must report (default: what the first one made reports). */
  name?: string;
  /** A request it cannot meet, to check OutOfMemoryError (default 2^52 bytes: more than any device or host). */
  oversizeBytes?: number;
  /** Skip the suite, saying why (e.g. 'no CUDA device'): the reason goes into the suite's title. */
  skip?: string | false;
  /**
   * Makes an allocator as `create` does with these options added: the sleep cases that need a small
   * device (`smallDevice`) or little host memory for their copies (`{ backupLimitBytes: 1 }`). The
   * suite disposes it. Without it those cases are skipped, saying so.
   */
  createWith?: (extra: Record<string, unknown>) => Allocator;
  /**
   * The options that leave the allocator a device of 16 MiB, for the sleep case of a wake the device
   * has no room for (default `{ limitBytes: 16 MiB }`, the bytes a native strategy's leaf may map).
   * A strategy that makes room on the device by moving memory elsewhere caps that too.
   */
  smallDevice?: Record<string, unknown>;
  /**
   * Whether the allocator sleeps and wakes by tag, which runs the sleep cases (default: the registry's
   * `sleep` flag of `name`, or of the name an allocator made by `create` reports; false where that
   * name is not registered).
   */
  sleep?: boolean;
}

/** Why the sleep cases do not run for these options, or false when they do. */
/**
 * Whether the sleep cases run (false), are left out because the allocator is known not to sleep
 * ('absent': the suite's methods case checks it has none of the methods), or are listed as skipped
 * with the reason (its sleep flag cannot be read).
 */
function sleepSkipReason(options: ConformanceOptions): string | false {
  if (options.sleep !== undefined) return options.sleep ? false : 'absent';
  const name = options.name ?? probedName(options);
  if (name === undefined) return 'no registered name (options.name) to read the sleep flag of';
  if (!hasAllocator(name)) return `'${name}' is not registered, so it has no sleep flag`;
  return strategyInfo(name).sleep ? false : 'absent';
}

/** The name an allocator of the suite reports (one made and disposed now), or undefined where none can be made. */
function probedName(options: ConformanceOptions): string | undefined {
  if (options.skip) return undefined;
  try {
    const probe = options.create();
    const name = probe.name;
    probe.dispose();
    return name;
  } catch {
    return undefined;
  }
}

const sizes = [1, 255, 256, 257, 511, 4096, 65_536, 1 << 20, (3 << 20) + 7];

function pattern(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  const next = xorshift32((seed * 2654435761) >>> 0 || 1);
  for (let i = 0; i < bytes; i++) out[i] = next() & 0xff;
  return out;
}

/** How long the GPU variant of the cross-stream check keeps the freeing stream busy. */
const busyStreamNs = 300_000_000;

/**
 * Makes `stream` busy with work that will write into the block at `ptr` later, as a kernel still
 * running when the block is freed: on a GPU a kernel that spins for 300 ms and then adds into the
 * block's first 8 bytes; on the host a copy of `later` into the block, queued on the host stream,
 * which runs when the stream is reached (Stream#synchronize, or an event recorded behind it being
 * waited on, which is how stream-ordered strategies order reuse). `ptr` is used as an address, as
 * the communicators and kernels use allocations.
 */
function keepBusyWriting(allocator: Allocator, stream: Stream, ptr: DevicePtr, later: Uint8Array): void {
  const tools = loadNative().tools;
  if (allocator.device.kind === 'host') tools.deferHostWrite(stream.handle, ptr, later);
  else tools.delayedAddU32(ptr, 2, ptr, stream.handle, busyStreamNs);
}

/** The stats fields every call must keep exact. */
function core(s: AllocatorStats) {
  return {
    allocatedBytes: s.allocatedBytes,
    peakAllocatedBytes: s.peakAllocatedBytes,
    allocCount: s.allocCount,
    freeCount: s.freeCount,
    oomCount: s.oomCount,
  };
}

/** Declares the whole conformance suite for one allocator configuration. */
export function describeConformance(t: ConformanceTestApi, options: ConformanceOptions): void {
  const { describe, it, expect, beforeEach, afterEach } = t;
  const oversizeBytes = options.oversizeBytes ?? 2 ** 52;
  const label = `allocator conformance: ${options.label ?? options.name ?? 'allocator'}`;
  // A skipped suite keeps every test, listed as skipped, with the reason in its title.
  const title = options.skip ? `${label} [skipped: ${options.skip}]` : label;
  describe.skipIf(Boolean(options.skip))(title, () => {
    let a: Allocator;
    let expectedName: string;
    const live: Array<[DevicePtr, number]> = [];

    beforeEach(() => {
      a = options.create();
      expectedName = options.name ?? a.name;
      live.length = 0;
    });
    afterEach(() => {
      a.dispose();
    });

    it('reports its name and device', () => {
      expect(a.name).toBe(expectedName);
      expect(['cuda', 'host']).toContain(a.device.kind);
      expect(a.disposed).toBe(false);
    });

    it('has sleep, wake, tagStats and trimBackup exactly where its registry flag sleep is set', () => {
      const sleeps = hasAllocator(a.name) && strategyInfo(a.name).sleep;
      const methods = [a.sleep, a.wake, a.tagStats, a.trimBackup].map((m) => typeof m);
      expect(methods).toEqual(Array(4).fill(sleeps ? 'function' : 'undefined'));
    });

    const sleepSkip = sleepSkipReason(options);
    if (sleepSkip !== 'absent') {
      describeSleepCases(t, {
        allocator: () => a,
        createWith: options.createWith,
        smallDevice: options.smallDevice ?? { limitBytes: 16 * 2 ** 20 },
        skip: sleepSkip,
        pattern,
      });
    }

    it('hands out distinct, non-overlapping, 256-byte aligned allocations', () => {
      for (const n of sizes) live.push([a.malloc(n), n]);
      const sorted = [...live].sort((x, y) => x[0] - y[0]);
      for (const [p] of live) expect(p % 256).toBe(0);
      for (let i = 1; i < sorted.length; i++) {
        const [prev, prevBytes] = sorted[i - 1]!;
        expect(sorted[i]![0]).toBeGreaterThanOrEqual(prev + prevBytes);
      }
      for (const [p, n] of live) a.free(p, n);
    });

    it('keeps data written and read back intact, at any offset', () => {
      live.push(...sizes.map((n): [DevicePtr, number] => [a.malloc(n), n]));
      live.forEach(([p, n], i) => {
        a.write(p, pattern(n, i + 1));
      });
      live.forEach(([p, n], i) => {
        const back = new Uint8Array(n);
        a.read(p, back);
        expect(Buffer.compare(back, pattern(n, i + 1))).toBe(0);
      });
      const [p, n] = live[live.length - 1]!;
      const middle = new Float32Array([1.5, -2.25, 3e9]);
      a.write(p, middle, 1000);
      const back = new Float32Array(3);
      a.read(p, back, 1000);
      expect([...back]).toEqual([...middle]);
      const whole = new Uint8Array(n);
      a.read(p, whole);
      expect(Buffer.compare(whole.subarray(0, 1000), pattern(n, live.length).subarray(0, 1000))).toBe(0);
      for (const [q, m] of live) a.free(q, m);
    });

    it('keeps exact statistics after every call', () => {
      let allocated = 0;
      let peak = 0;
      let allocs = 0;
      let frees = 0;
      const check = () =>
        expect(core(a.stats())).toEqual({
          allocatedBytes: allocated,
          peakAllocatedBytes: peak,
          allocCount: allocs,
          freeCount: frees,
          oomCount: 0,
        });
      check();
      for (const n of sizes) {
        live.push([a.malloc(n), n]);
        allocated += n;
        peak = Math.max(peak, allocated);
        allocs++;
        check();
        expect(a.stats().reservedBytes).toBeGreaterThanOrEqual(0);
      }
      while (live.length > 0) {
        const [p, n] = live.splice(live.length >> 1, 1)[0]!;
        a.free(p, n);
        allocated -= n;
        frees++;
        check();
      }
      expect(a.stats().allocatedBytes).toBe(0);
    });

    it('resets the peak to the current value', () => {
      const p = a.malloc(10_000);
      const q = a.malloc(20_000);
      a.free(q, 20_000);
      expect(a.stats().peakAllocatedBytes).toBe(30_000);
      a.resetPeak();
      expect(a.stats().peakAllocatedBytes).toBe(10_000);
      expect(a.stats().peakReservedBytes).toBeGreaterThanOrEqual(a.stats().reservedBytes);
      a.free(p, 10_000);
      expect(a.stats().peakAllocatedBytes).toBe(10_000);
    });

    it('accepts streams, and frees on the stream it allocated on', () => {
      const s = Stream.create(a.device);
      try {
        const p = a.malloc(4096, s);
        a.write(p, pattern(4096, 7), 0, s);
        const back = new Uint8Array(4096);
        a.read(p, back, 0, s);
        expect(Buffer.compare(back, pattern(4096, 7))).toBe(0);
        a.recordStream(p, Stream.create(a.device));
        a.free(p, 4096, s);
        expect(a.stats().allocatedBytes).toBe(0);
        s.synchronize();
      } finally {
        s.destroy();
      }
    });

    it('trims without touching live memory', () => {
      const p = a.malloc(1 << 20);
      a.write(p, pattern(1 << 20, 3));
      const q = a.malloc(5 << 20);
      a.free(q, 5 << 20);
      a.trim();
      const back = new Uint8Array(1 << 20);
      a.read(p, back);
      expect(Buffer.compare(back, pattern(1 << 20, 3))).toBe(0);
      expect(a.stats().allocatedBytes).toBe(1 << 20);
      a.free(p, 1 << 20);
    });

    it('prefetch answers with a boolean and never corrupts data', () => {
      const p = a.malloc(65_536);
      a.write(p, pattern(65_536, 9));
      expect(typeof a.prefetch(p, 65_536, 'device')).toBe('boolean');
      expect(typeof a.prefetch(p, 65_536, 'host')).toBe('boolean');
      const back = new Uint8Array(65_536);
      a.read(p, back);
      expect(Buffer.compare(back, pattern(65_536, 9))).toBe(0);
      a.free(p, 65_536);
    });

    it('frees everything it holds on dispose, then every call throws InvalidStateError', () => {
      a.malloc(1000);
      a.malloc(1 << 20);
      a.dispose();
      expect(a.disposed).toBe(true);
      a.dispose(); // idempotent
      expect(() => a.malloc(10)).toThrow(InvalidStateError);
      expect(() => a.free(4096, 10)).toThrow(InvalidStateError);
      expect(() => a.stats()).toThrow(InvalidStateError);
      expect(() => a.resetPeak()).toThrow(InvalidStateError);
      expect(() => a.trim()).toThrow(InvalidStateError);
      expect(() => a.write(4096, new Uint8Array(1))).toThrow(/disposed/);
    });

    it('reuses memory freed on a stream for the next allocation on that stream, in stream order', () => {
      const s = Stream.create(a.device);
      try {
        const p = a.malloc(8192, s);
        a.write(p, pattern(8192, 11), 0, s);
        a.free(p, 8192, s);
        const q = a.malloc(8192, s); // may be p again: work on s runs in order
        a.write(q, pattern(8192, 12), 0, s);
        const back = new Uint8Array(8192);
        a.read(q, back, 0, s);
        expect(Buffer.compare(back, pattern(8192, 12))).toBe(0);
        a.free(q, 8192, s);
        s.synchronize();
        const r = a.malloc(8192); // and on another stream once s's work is done
        a.free(r, 8192);
        expect(a.stats().allocatedBytes).toBe(0);
      } finally {
        s.destroy();
      }
    });

    // The contract: free(p, n, A) lets work already queued on A still use p, so p may go to another
    // stream only after that work (an event recorded on A has completed, or the other stream waits
    // on it). A strategy that shares its free memory across streams without that hands B a block
    // that A's work then overwrites. On the host the freeing stream is made busy by a queued copy
    // (host streams otherwise run everything at once, and such reuse would go unseen).
    it('never hands memory that work queued on one stream still uses to another stream before that work', () => {
      const A = Stream.create(a.device);
      const B = Stream.create(a.device);
      const bytes = 8192;
      try {
        const p = a.malloc(bytes, A);
        a.write(p, pattern(bytes, 21), 0, A);
        keepBusyWriting(a, A, p, pattern(bytes, 22));
        a.free(p, bytes, A); // correct use: A's queued work may still use p
        const q = a.malloc(bytes, B);
        a.write(q, pattern(bytes, 23), 0, B);
        A.synchronize(); // A's work has run now, whether or not the allocator made B wait for it
        B.synchronize();
        const back = new Uint8Array(bytes);
        a.read(q, back, 0, B);
        // 'reused while A busy': B got memory freed on A, and A's queued work then overwrote B's data
        const overlaps = q < p + bytes && p < q + bytes;
        const verdict = Buffer.compare(back, pattern(bytes, 23)) === 0 ? 'intact' : overlaps ? 'reused while A busy' : 'corrupted';
        expect(verdict).toBe('intact');
        a.free(q, bytes, B);
      } finally {
        A.synchronize();
        B.synchronize();
        A.destroy();
        B.destroy();
      }
    });

    it('recovers from an out-of-memory failure: later requests succeed and stats stay exact', () => {
      const p = a.malloc(4096);
      expect(() => a.malloc(oversizeBytes)).toThrow();
      expect(a.stats().oomCount).toBe(1);
      const q = a.malloc(4096);
      expect(a.stats().allocatedBytes).toBe(8192);
      a.free(p, 4096);
      a.free(q, 4096);
      expect(core(a.stats())).toEqual({ allocatedBytes: 0, peakAllocatedBytes: 8192, allocCount: 2, freeCount: 2, oomCount: 1 });
    });

    describe('bad input gets a typed error naming the argument, and changes nothing', () => {
      let keep: DevicePtr;
      let before: AllocatorStats;
      beforeEach(() => {
        keep = a.malloc(1000);
        a.write(keep, pattern(1000, 5));
        before = a.stats();
      });
      afterEach(() => {
        // the allocator is unchanged and still works
        expect(core(a.stats())).toEqual(core(before));
        const back = new Uint8Array(1000);
        a.read(keep, back);
        expect(Buffer.compare(back, pattern(1000, 5))).toBe(0);
        const p = a.malloc(300);
        a.free(p, 300);
        a.free(keep, 1000);
        expect(a.stats().allocatedBytes).toBe(0);
      });

      const badSizes: [string, unknown, ErrorConstructor][] = [
        ['0', 0, RangeError],
        ['negative', -1, RangeError],
        ['fractional', 1.5, RangeError],
        ['NaN', Number.NaN, RangeError],
        ['Infinity', Number.POSITIVE_INFINITY, RangeError],
        ['> 2^53', 2 ** 53 + 2, RangeError],
        ['a string', '1024', TypeError],
        ['a bigint', 1024n, TypeError],
        ['undefined', undefined, TypeError],
      ];
      for (const [label, bytes, type] of badSizes) {
        it(`malloc(${label})`, () => {
          expect(() => a.malloc(bytes as number)).toThrow(type);
          expect(() => a.malloc(bytes as number)).toThrow(/bytes/);
        });
      }

      it('free of a pointer never handed out', () => {
        expect(() => a.free(keep + 1_000_000_000, 1000)).toThrow(TypeError);
        expect(() => a.free(keep + 1_000_000_000, 1000)).toThrow(/ptr/);
        expect(() => a.free(-5, 1000)).toThrow(/ptr/);
      });

      it('double free', () => {
        const p = a.malloc(700);
        a.free(p, 700);
        before = a.stats();
        expect(() => a.free(p, 700)).toThrow(TypeError);
        expect(() => a.free(p, 700)).toThrow(/ptr/);
      });

      it('free with a wrong size', () => {
        expect(() => a.free(keep, 999)).toThrow(RangeError);
        expect(() => a.free(keep, 1001)).toThrow(/bytes/);
      });

      it('reads and writes outside the allocation', () => {
        expect(() => a.write(keep, new Uint8Array(10), 995)).toThrow(RangeError);
        expect(() => a.read(keep, new Uint8Array(1001))).toThrow(RangeError);
        expect(() => a.write(keep, [1, 2, 3] as unknown as Uint8Array)).toThrow(TypeError);
        expect(() => a.read(keep + 1_000_000_000, new Uint8Array(1))).toThrow(/ptr/);
      });

      it('a bad stream or prefetch target', () => {
        expect(() => a.malloc(10, {} as Stream)).toThrow(TypeError);
        expect(() => a.prefetch(keep, 1000, 'gpu' as 'device')).toThrow(/to/);
      });

      it('a request larger than the device gets OutOfMemoryError with the size and stats', () => {
        let error: unknown;
        try {
          a.malloc(oversizeBytes);
        } catch (e) {
          error = e;
        }
        // isOutOfMemory: an OutOfMemoryError of any copy of the core
        expect(isOutOfMemory(error)).toBe(true);
        const oom = error as OutOfMemoryError;
        expect(oom.requestedBytes).toBe(oversizeBytes);
        expect(oom.stats.allocatedBytes).toBe(1000);
        expect(oom.allocator).toBe(expectedName);
        // Every message ends with the figures that tell fragmentation from exhaustion.
        expect(oom.message).toMatch(
          /\(reserved [\d.]+ [KMGTP]?i?B, allocated [\d.]+ [KMGTP]?i?B: [\d.]+ [KMGTP]?i?B reserved but unallocated, largest free block [\d.]+ [KMGTP]?i?B\)$/,
        );
        expect(a.stats().oomCount).toBe(before.oomCount + 1);
        before = { ...before, oomCount: before.oomCount + 1 };
      });
    });
  });
}
