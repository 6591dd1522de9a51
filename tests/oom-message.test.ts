/**
 * Out-of-memory errors say whether memory ran out or was fragmented: every strategy's
 * OutOfMemoryError carries the bytes reserved but unallocated and the largest free block at the
 * failure, and ends its message with them, in the same words for native strategies (figures from the
 * core) and TypeScript ones (figures from the error's stats).
 */
import { describe, expect, it } from 'vitest';
import { createAllocator, formatBytes, isOutOfMemory, LimitingAdaptor, OutOfMemoryError } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-expandable';
import { allocatorCases, make } from './allocators.js';
import { noGpuReason } from './gpu.js';

const MiB = 2 ** 20;

function oomOf(fn: () => unknown): OutOfMemoryError {
  try {
    fn();
  } catch (e) {
    if (e instanceof OutOfMemoryError) return e;
    throw e;
  }
  throw new Error('expected an OutOfMemoryError');
}

describe('every strategy: the figures at the failure', () => {
  for (const c of allocatorCases()) {
    it.skipIf(!c.runnable)(`${c.label}${c.runnable ? '' : ` [skipped: ${noGpuReason}]`}`, () => {
      const a = make(c);
      try {
        const p = a.malloc(MiB);
        let error: unknown;
        try {
          a.malloc(c.oversizeBytes);
        } catch (e) {
          error = e;
        }
        expect(isOutOfMemory(error)).toBe(true);
        const oom = error as OutOfMemoryError;
        const reserved = oom.stats.reservedBytes;
        const unallocated = Math.max(0, reserved - oom.stats.allocatedBytes);
        expect(oom.reservedUnallocatedBytes).toBe(unallocated);
        expect(oom.largestFreeBlock).toBe(oom.stats.largestFreeBlock ?? 0);
        expect(
          oom.message.endsWith(
            `(reserved ${formatBytes(reserved)}, allocated ${formatBytes(oom.stats.allocatedBytes)}: ` +
              `${formatBytes(unallocated)} reserved but unallocated, largest free block ${formatBytes(oom.largestFreeBlock)})`,
          ),
        ).toBe(true);
        a.free(p, MiB);
      } finally {
        a.dispose();
      }
    });
  }
});

describe('the figures tell fragmentation apart', () => {
  it('pool: memory reserved in segments too small for the request', () => {
    const pool = createAllocator('pool', { upstream: 'host', limitBytes: 8 * MiB });
    const a = pool.malloc(3 * MiB); // a 4 MiB segment each
    const b = pool.malloc(3 * MiB);
    const oom = oomOf(() => pool.malloc(6 * MiB)); // no free segment to give back: 6 MiB cannot fit
    expect(oom.reservedUnallocatedBytes).toBe(2 * MiB);
    expect(oom.largestFreeBlock).toBe(MiB);
    expect(oom.message).toMatch(
      /^pool: .*\(reserved 8\.00 MiB, allocated 6\.00 MiB: 2\.00 MiB reserved but unallocated, largest free block 1\.00 MiB\)$/,
    );
    pool.free(a, 3 * MiB);
    pool.free(b, 3 * MiB);
    pool.dispose();
  });

  it('expandable: the figures of the failing strategy, not of the limit under it', () => {
    const e = createAllocator('expandable', { upstream: 'host', limitBytes: 8 * MiB, reserveBytes: 64 * MiB });
    const a = e.malloc(5 * MiB); // 3 granules of 2 MiB
    const oom = oomOf(() => e.malloc(4 * MiB)); // 1 MiB left in a's last granule, then 2 more granules: past 8 MiB
    expect(oom.stats.reservedBytes).toBe(6 * MiB);
    expect(oom.reservedUnallocatedBytes).toBe(MiB);
    expect(oom.largestFreeBlock).toBe(MiB);
    expect(oom.message).toMatch(
      /^expandable: expandable_resource: out of memory allocating 4\.00 MiB .*limit: .*\(reserved 6\.00 MiB, allocated 5\.00 MiB: 1\.00 MiB reserved but unallocated, largest free block 1\.00 MiB\)$/,
    );
    expect(oom.message.match(/reserved but unallocated/g)).toHaveLength(1); // the limit's own figures are not repeated
    e.free(a, 5 * MiB);
    e.dispose();
  });

  it('a TypeScript adaptor adds the same figures', () => {
    const limited = new LimitingAdaptor(createAllocator('host'), MiB, { ownsUpstream: true });
    const p = limited.malloc(MiB / 2);
    const oom = oomOf(() => limited.malloc(MiB));
    expect(oom.message).toMatch(/\(reserved 512\.00 KiB, allocated 512\.00 KiB: 0 B reserved but unallocated, largest free block 0 B\)$/);
    limited.free(p, MiB / 2);
    limited.dispose();
  });
});
