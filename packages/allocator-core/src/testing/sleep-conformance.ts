/**
 * The conformance cases of sleep and wake by tag (`Allocator.sleep`), part of the suite
 * (describeConformance): they run for an allocator whose registry flag `sleep` is set, are left out
 * for one known not to sleep (the suite checks it has none of the methods), and are listed as
 * skipped, with the reason in their title, where the flag cannot be read. Those that need a small device
 * or little host memory make their own allocator through the suite's `createWith`.
 * @module
 */
import { InvalidStateError, isOutOfMemory } from '../errors.js';
import { loadNative } from '../native.js';
import { Stream } from '../stream.js';
import { withTag } from '../tags.js';
import type { Allocator, DevicePtr, TagStats } from '../types.js';
import type { ConformanceTestApi } from './conformance.js';

/** What the sleep cases need of the suite. */
export interface SleepCasesOptions {
  /** The allocator of the running test (made fresh by the suite for each). */
  allocator: () => Allocator;
  /** Makes an allocator with these options added, or undefined where the suite was given no way to. */
  createWith: ((extra: Record<string, unknown>) => Allocator) | undefined;
  /** The options that leave it a device of 16 MiB. */
  smallDevice: Record<string, unknown>;
  /** Why the cases are skipped (the sleep flag cannot be read), or false to run them. */
  skip: string | false;
  /** The bytes of `pattern(bytes, seed)`, the suite's data. */
  pattern: (bytes: number, seed: number) => Uint8Array;
}

const MiB = 2 ** 20;

/** The sleep methods of `a`, which the cases only call where the flag says they exist. */
function sleeper(a: Allocator): Required<Pick<Allocator, 'sleep' | 'wake' | 'tagStats' | 'trimBackup'>> {
  const { sleep, wake, tagStats, trimBackup } = a;
  if (sleep === undefined || wake === undefined || tagStats === undefined || trimBackup === undefined) {
    throw new Error(`'${a.name}' has the sleep flag but lacks sleep, wake, tagStats or trimBackup`);
  }
  return { sleep: sleep.bind(a), wake: wake.bind(a), tagStats: tagStats.bind(a), trimBackup: trimBackup.bind(a) };
}

function tagOf(a: Allocator, tag: string): TagStats | undefined {
  return sleeper(a)
    .tagStats()
    .find((t) => t.tag === tag);
}

/** The error `fn` throws (undefined when it returns). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
}

/** Declares the sleep cases inside the suite's describe. */
export function describeSleepCases(t: ConformanceTestApi, options: SleepCasesOptions): void {
  const { describe, it, expect } = t;
  const { pattern, skip } = options;
  const title = skip ? `sleep and wake by tag [skipped: ${skip}]` : 'sleep and wake by tag';

  /** Allocates `bytes` in `tag` and fills it with pattern(bytes, seed). */
  function filled(a: Allocator, tag: string, bytes: number, seed: number): DevicePtr {
    const p = withTag(tag, () => a.malloc(bytes));
    a.write(p, pattern(bytes, seed));
    return p;
  }
  function expectContent(a: Allocator, p: DevicePtr, bytes: number, seed: number): void {
    const back = new Uint8Array(bytes);
    a.read(p, back);
    expect(Buffer.compare(back, pattern(bytes, seed))).toBe(0);
  }

  describe.skipIf(Boolean(skip))(title, () => {
    it('keeps content and addresses across sleep and wake', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const sizes = [4096, MiB, 3 * MiB + 7];
      const hostBefore = a.stats().hostAllocatedBytes ?? 0;
      const weights = sizes.map((n, i) => filled(a, 'weights', n, 40 + i));
      // A strategy with a host tier may have put some of them in host memory, which stays.
      const onDevice = 4096 + MiB + 3 * MiB + 7 - ((a.stats().hostAllocatedBytes ?? 0) - hostBefore);
      const kv = filled(a, 'kv', 65_536, 50);
      const slept = s.sleep({ tags: ['weights'] });
      expect(slept.changed).toEqual(['weights']);
      expect(slept.unchanged).toEqual([]);
      expect(slept.copiedBytes).toBeGreaterThanOrEqual(onDevice);
      const asleep = tagOf(a, 'weights');
      expect({ asleep: asleep?.asleep, mode: asleep?.mode, deviceBytes: asleep?.deviceBytes }).toEqual({
        asleep: true,
        mode: 'keep',
        deviceBytes: 0,
      });
      const sleptBytes = asleep?.sleptBytes ?? 0;
      expect(sleptBytes).toBeGreaterThanOrEqual(onDevice);
      expect(slept.deviceBytes).toBeGreaterThanOrEqual(sleptBytes);
      expect(asleep?.allocatedBytes).toBe(4096 + MiB + 3 * MiB + 7);
      expect(asleep?.backupBytes).toBeGreaterThanOrEqual(slept.copiedBytes);
      expect(a.stats().sleptBytes).toBe(sleptBytes);
      expect(tagOf(a, 'kv')?.asleep).toBe(false);
      expectContent(a, kv, 65_536, 50); // the other tag works meanwhile
      const woken = s.wake(['weights']);
      expect(woken.changed).toEqual(['weights']);
      expect(woken.deviceBytes).toBe(sleptBytes);
      expect(woken.copiedBytes).toBe(slept.copiedBytes);
      expect(a.stats().sleptBytes).toBe(0);
      expect(tagOf(a, 'weights')?.asleep).toBe(false);
      // The same addresses hold the same bytes, and new blocks go elsewhere.
      weights.forEach((p, i) => {
        expectContent(a, p, sizes[i]!, 40 + i);
      });
      const fresh = withTag('weights', () => a.malloc(MiB));
      weights.forEach((p, i) => {
        expect(fresh + MiB <= p || p + sizes[i]! <= fresh).toBe(true);
      });
      // A second cycle (the host memory kept from the first), then that memory given back.
      s.sleep({ tags: ['weights'] });
      s.wake();
      s.trimBackup();
      weights.forEach((p, i) => {
        expectContent(a, p, sizes[i]!, 40 + i);
      });
      a.free(fresh, MiB);
      weights.forEach((p, i) => {
        a.free(p, sizes[i]!);
      });
      a.free(kv, 65_536);
      expect(a.stats().allocatedBytes).toBe(0);
    });

    it('discards where told to and keeps the addresses (keep: false, keep: [tags])', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = [filled(a, 'kv', MiB, 60), filled(a, 'kv', 8192, 61)];
      const weights = filled(a, 'weights', MiB, 62);
      const slept = s.sleep({ tags: ['kv'], keep: false });
      expect(slept.copiedBytes).toBe(0);
      const discarded = tagOf(a, 'kv');
      expect([discarded?.asleep, discarded?.mode, discarded?.deviceBytes, discarded?.backupBytes]).toEqual([true, 'discard', 0, 0]);
      const woken = s.wake(['kv']);
      expect(woken.copiedBytes).toBe(0);
      // Undefined content, but the blocks are the caller's still: written, read and freed as before.
      a.write(kv[0]!, pattern(MiB, 63));
      expectContent(a, kv[0]!, MiB, 63);
      // keep: a list keeps those and discards the rest.
      const mixed = s.sleep({ keep: ['weights'] });
      expect([...mixed.changed].sort()).toEqual(['kv', 'weights']);
      expect(tagOf(a, 'weights')?.mode).toBe('keep');
      expect(tagOf(a, 'kv')?.mode).toBe('discard');
      s.wake();
      expectContent(a, weights, MiB, 62);
      a.free(kv[0]!, MiB);
      a.free(kv[1]!, 8192);
      a.free(weights, MiB);
      expect(a.stats().allocatedBytes).toBe(0);
    });

    it('sleeping every tag leaves no device memory held by any, cached memory included', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const plain = a.malloc(MiB); // outside withTag: the tag 'default'
      a.write(plain, pattern(MiB, 70));
      const weights = filled(a, 'weights', 2 * MiB + 3, 71);
      const kv = filled(a, 'kv', MiB, 72);
      const cached = withTag('kv', () => a.malloc(4 * MiB));
      a.free(cached, 4 * MiB); // idle memory the tag holds
      const report = s.sleep();
      expect([...report.changed].sort()).toEqual(['default', 'kv', 'weights']);
      for (const tag of s.tagStats()) {
        expect({ tag: tag.tag, asleep: tag.asleep, deviceBytes: tag.deviceBytes }).toEqual({ tag: tag.tag, asleep: true, deviceBytes: 0 });
      }
      // Each tag's sleptBytes is what its sleep released, its cached memory included: together, the
      // report's. A wake maps again what the live blocks need, no more.
      const slept = s.tagStats().reduce((sum, x) => sum + x.sleptBytes, 0);
      expect(report.deviceBytes).toBe(slept);
      expect(a.stats().sleptBytes).toBe(slept);
      const liveOnDevice = a.stats().allocatedBytes - (a.stats().hostAllocatedBytes ?? 0);
      const woken = s.wake();
      expect(woken.deviceBytes).toBeGreaterThanOrEqual(liveOnDevice);
      expect(slept).toBeGreaterThanOrEqual(woken.deviceBytes);
      expect([...woken.changed].sort()).toEqual(['default', 'kv', 'weights']);
      expectContent(a, plain, MiB, 70);
      expectContent(a, weights, 2 * MiB + 3, 71);
      expectContent(a, kv, MiB, 72);
      a.free(plain, MiB);
      a.free(weights, 2 * MiB + 3);
      a.free(kv, MiB);
    });

    it('takes a free of a block whose tag sleeps, and forgets its content', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const gone = filled(a, 'kv', MiB, 80);
      const kept = filled(a, 'kv', 65_536, 81);
      s.sleep({ tags: ['kv'] });
      a.free(gone, MiB);
      expect(a.stats().allocatedBytes).toBe(65_536);
      expect(tagOf(a, 'kv')?.allocatedBytes).toBe(65_536);
      s.wake(['kv']);
      expectContent(a, kept, 65_536, 81);
      a.free(kept, 65_536);
      expect(a.stats().allocatedBytes).toBe(0);
    });

    it('refuses an allocation in a sleeping tag with InvalidStateError, changing nothing', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = filled(a, 'kv', MiB, 90);
      s.sleep({ tags: ['kv'] });
      const before = a.stats();
      const tagsBefore = s.tagStats();
      const error = thrown(() => withTag('kv', () => a.malloc(4096)));
      expect(error instanceof InvalidStateError).toBe(true);
      expect((error as Error).message).toMatch(/'kv' is asleep/);
      expect(a.stats()).toEqual(before);
      expect(s.tagStats()).toEqual(tagsBefore);
      const other = withTag('weights', () => a.malloc(4096)); // other tags allocate as usual
      a.free(other, 4096);
      s.wake(['kv']);
      expectContent(a, kv, MiB, 90);
      a.free(kv, MiB);
    });

    it('refuses read and write of a sleeping block with InvalidStateError, never a fault', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = filled(a, 'kv', 2 * MiB, 95);
      const weights = filled(a, 'weights', 4096, 96);
      s.sleep({ tags: ['kv'] });
      const read = thrown(() => a.read(kv, new Uint8Array(16), MiB));
      expect(read instanceof InvalidStateError).toBe(true);
      expect((read as Error).message).toMatch(/'kv', which is asleep/);
      expect(thrown(() => a.write(kv, new Uint8Array(16))) instanceof InvalidStateError).toBe(true);
      expectContent(a, weights, 4096, 96); // an awake tag's blocks read as usual
      s.wake(['kv']);
      expectContent(a, kv, 2 * MiB, 95); // the refused write changed nothing
      a.free(kv, 2 * MiB);
      a.free(weights, 4096);
    });

    it('sleeps nothing for an empty list of tags', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = filled(a, 'kv', MiB, 97);
      const report = s.sleep({ tags: [] });
      expect([report.changed, report.unchanged, report.deviceBytes, report.copiedBytes]).toEqual([[], [], 0, 0]);
      expect(s.tagStats().every((x) => !x.asleep)).toBe(true);
      expectContent(a, kv, MiB, 97);
      a.free(kv, MiB);
    });

    it('names the tags it knows when asked for one it does not (RangeError), and checks its arguments', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = filled(a, 'kv', 4096, 100);
      for (const call of [() => s.sleep({ tags: ['no-such-tag'] }), () => s.wake(['no-such-tag'])]) {
        const error = thrown(call);
        expect(error instanceof RangeError).toBe(true);
        expect((error as Error).message).toMatch(/no-such-tag/);
        expect((error as Error).message).toMatch(/kv/);
      }
      expect(() => s.sleep({ tags: 'kv' } as never)).toThrow(TypeError);
      expect(() => s.sleep({ tags: ['kv'], keep: 'kv' } as never)).toThrow(TypeError);
      expect(() => s.sleep({ tag: ['kv'] } as never)).toThrow(/tag/);
      expect(() => s.wake('kv' as never)).toThrow(TypeError);
      expect(() => s.wake([''])).toThrow(RangeError);
      expect(s.tagStats().every((x) => !x.asleep)).toBe(true);
      expectContent(a, kv, 4096, 100);
      a.free(kv, 4096);
    });

    it('reports tags already in the state asked for as unchanged, doing nothing', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const kv = filled(a, 'kv', MiB, 110);
      const awake = s.wake(['kv']);
      expect({
        changed: awake.changed,
        unchanged: awake.unchanged,
        deviceBytes: awake.deviceBytes,
        copiedBytes: awake.copiedBytes,
      }).toEqual({
        changed: [],
        unchanged: ['kv'],
        deviceBytes: 0,
        copiedBytes: 0,
      });
      s.sleep({ tags: ['kv'] });
      const again = s.sleep({ tags: ['kv'], keep: false });
      expect({ changed: again.changed, unchanged: again.unchanged, deviceBytes: again.deviceBytes }).toEqual({
        changed: [],
        unchanged: ['kv'],
        deviceBytes: 0,
      });
      expect(tagOf(a, 'kv')?.mode).toBe('keep'); // the second sleep changed nothing
      s.wake(['kv']);
      expectContent(a, kv, MiB, 110);
      a.free(kv, MiB);
    });

    it('waits for work queued on a stream before it copies and releases', () => {
      const a = options.allocator();
      const s = sleeper(a);
      const stream = Stream.create(a.device);
      try {
        const bytes = 2 * MiB;
        const p = withTag('kv', () => a.malloc(bytes, stream));
        // Queued on the stream, not waited for: on the host, a write that runs only when the stream
        // is reached (a kernel still running), which sleep must reach before it copies.
        if (a.device.kind === 'host') loadNative().tools.deferHostWrite(stream.handle, p, pattern(bytes, 120));
        else a.write(p, pattern(bytes, 120), 0, stream);
        s.sleep({ tags: ['kv'] });
        s.wake(['kv']);
        expectContent(a, p, bytes, 120);
        a.free(p, bytes, stream);
        stream.synchronize();
      } finally {
        stream.destroy();
      }
    });

    describe.skipIf(options.createWith === undefined)(
      options.createWith === undefined ? 'with options of its own [skipped: the suite was given no createWith]' : 'with options of its own',
      () => {
        it('fails a wake the device has no room for with OutOfMemoryError, losing nothing', () => {
          const a = options.createWith!(options.smallDevice);
          try {
            const s = sleeper(a);
            const weights = filled(a, 'weights', 4 * MiB, 130);
            s.sleep({ tags: ['weights'] });
            const backup = tagOf(a, 'weights')?.backupBytes;
            // Another tag takes the room the sleeping one gave back.
            const kv: DevicePtr[] = [];
            for (let i = 0; i < 64; i++) {
              const error = thrown(() => kv.push(filled(a, 'kv', MiB, 131 + i)));
              if (error !== undefined) {
                expect(isOutOfMemory(error)).toBe(true);
                break;
              }
            }
            expect(kv.length < 64).toBe(true);
            const error = thrown(() => s.wake(['weights']));
            expect(isOutOfMemory(error)).toBe(true);
            const still = tagOf(a, 'weights');
            expect([still?.asleep, still?.deviceBytes, still?.backupBytes]).toEqual([true, 0, backup]);
            kv.forEach((p, i) => {
              expectContent(a, p, MiB, 131 + i);
            });
            for (const p of kv) a.free(p, MiB);
            a.trim();
            s.wake(['weights']);
            expectContent(a, weights, 4 * MiB, 130);
            a.free(weights, 4 * MiB);
          } finally {
            a.dispose();
          }
        });

        it('fails a sleep that host memory cannot hold with OutOfMemoryError before releasing anything', () => {
          const a = options.createWith!({ backupLimitBytes: 1 });
          try {
            const s = sleeper(a);
            const kv = filled(a, 'kv', 2 * MiB, 140);
            const before = tagOf(a, 'kv');
            const error = thrown(() => s.sleep({ tags: ['kv'] }));
            expect(isOutOfMemory(error)).toBe(true);
            expect(tagOf(a, 'kv')).toEqual(before);
            expectContent(a, kv, 2 * MiB, 140);
            // Discarding needs no host memory.
            expect(s.sleep({ tags: ['kv'], keep: false }).copiedBytes).toBe(0);
            s.wake(['kv']);
            a.free(kv, 2 * MiB);
          } finally {
            a.dispose();
          }
        });
      },
    );

    it('gives an async function its tag across awaits, and a nested withTag restores the outer one', async () => {
      const a = options.allocator();
      const s = sleeper(a);
      const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));
      const live: Array<[DevicePtr, number]> = [];
      const take = (bytes: number) => live.push([a.malloc(bytes), bytes]);
      await withTag('outer', async () => {
        await tick();
        take(1000);
        withTag('inner', () => take(2000));
        await tick();
        take(3000);
      });
      take(4000); // outside: 'default'
      // Two async functions interleaved, each with its own tag.
      await Promise.all([
        withTag('left', async () => {
          await tick();
          take(100);
          await tick();
          take(100);
        }),
        withTag('right', async () => {
          take(300);
          await tick();
          take(300);
        }),
      ]);
      const bytes = Object.fromEntries(s.tagStats().map((x) => [x.tag, x.allocatedBytes]));
      expect(bytes).toEqual({ outer: 4000, inner: 2000, default: 4000, left: 200, right: 600 });
      for (const [p, n] of live) a.free(p, n);
    });
  });
}
