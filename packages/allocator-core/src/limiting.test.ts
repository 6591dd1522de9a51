import { afterEach, describe, expect, it } from 'vitest';
import {
  AllocatorAdaptor,
  ByteBudget,
  createAllocator,
  createAllocatorWrappingLeaves,
  LimitingAdaptor,
  OutOfMemoryError,
  registerAllocator,
  type Allocator,
} from './index.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** A TypeScript strategy that takes its memory from a 'host' allocator it creates by name. */
class OverHost extends AllocatorAdaptor {
  constructor() {
    super(createAllocator('host'), { ownsUpstream: true }, 'test-over-host');
  }
}
registerAllocator('test-over-host', () => new OverHost(), { description: 'test: a TS strategy over host', requiresCuda: false });

describe('LimitingAdaptor', () => {
  const owned: Allocator[] = [];
  afterEach(() => {
    for (const a of owned.splice(0)) a.dispose();
  });
  const limited = (limit: number | ByteBudget, upstream: Allocator = createAllocator('host')) => {
    const a = new LimitingAdaptor(upstream, limit, { ownsUpstream: true });
    owned.push(a);
    return a;
  };

  it('passes requests through up to the limit and refuses past it with OutOfMemoryError, staying usable', () => {
    const a = limited(MiB);
    const p = a.malloc(624 * KiB);
    const q = a.malloc(400 * KiB);
    expect(a.usedBytes).toBe(MiB);
    let error: unknown;
    try {
      a.malloc(KiB);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OutOfMemoryError);
    expect(error).toMatchObject({ requestedBytes: KiB, allocator: 'host' });
    expect((error as OutOfMemoryError).message).toMatch(/1024 bytes requested with 1048576 of the 1048576-byte limit in use/);
    expect((error as OutOfMemoryError).stats.allocatedBytes).toBe(MiB);
    expect(a.usedBytes).toBe(MiB); // the refusal took nothing
    expect(a.stats()).toMatchObject({ allocatedBytes: MiB, oomCount: 1 });
    a.free(q, 400 * KiB);
    expect(a.usedBytes).toBe(624 * KiB);
    const r = a.malloc(400 * KiB); // fits again
    a.free(r, 400 * KiB);
    a.free(p, 624 * KiB);
    expect(a.usedBytes).toBe(0);
  });

  it('rolls its count back when the upstream throws', () => {
    const a = limited(MiB, createAllocator('host', { limitBytes: 64 * KiB }));
    expect(() => a.malloc(128 * KiB)).toThrow(OutOfMemoryError); // within the adaptor's limit, past the upstream's
    expect(a.usedBytes).toBe(0);
    expect(a.stats().oomCount).toBe(1); // the upstream's refusal, not the adaptor's
    const p = a.malloc(64 * KiB);
    expect(a.usedBytes).toBe(64 * KiB);
    a.free(p, 64 * KiB);
  });

  it('a bad free throws and changes no count', () => {
    const a = limited(MiB);
    const p = a.malloc(KiB);
    expect(() => a.free(p + 4096, KiB)).toThrow();
    expect(() => a.free(p, 0)).toThrow(RangeError);
    expect(a.usedBytes).toBe(KiB);
    a.free(p, KiB);
    expect(a.usedBytes).toBe(0);
  });

  it('rejects a bad limit', () => {
    expect(() => new LimitingAdaptor(createAllocator('host'), -1)).toThrow(RangeError);
    expect(() => new ByteBudget(Number.NaN)).toThrow(RangeError);
  });

  it('adaptors sharing a ByteBudget behave as one device', () => {
    const budget = new ByteBudget(MiB);
    const a = limited(budget);
    const b = limited(budget);
    const p = a.malloc(700 * KiB);
    expect(() => b.malloc(400 * KiB)).toThrow(OutOfMemoryError);
    const q = b.malloc(300 * KiB);
    expect(budget.usedBytes).toBe(1000 * KiB);
    a.free(p, 700 * KiB);
    b.free(q, 300 * KiB);
    expect(budget.usedBytes).toBe(0);
  });
});

describe('createAllocatorWrappingLeaves', () => {
  it('puts a limit under a TypeScript strategy, between it and the allocator it creates', () => {
    const { allocator, wrappedLeaves } = createAllocatorWrappingLeaves(
      'test-over-host',
      {},
      (leaf) => new LimitingAdaptor(leaf, MiB, { ownsUpstream: true }),
    );
    try {
      expect(wrappedLeaves).toBe(1);
      expect(allocator.name).toBe('test-over-host');
      const p = allocator.malloc(MiB);
      expect(() => allocator.malloc(1)).toThrow(OutOfMemoryError);
      allocator.free(p, MiB);
    } finally {
      allocator.dispose();
    }
  });

  it('wraps nothing for a strategy that creates no allocator through the registry, and creation is normal after', () => {
    const { allocator, wrappedLeaves } = createAllocatorWrappingLeaves('host', {}, () => {
      throw new Error('not called');
    });
    allocator.dispose();
    expect(wrappedLeaves).toBe(0);
    const plain = createAllocator('test-over-host');
    expect((plain as OverHost).upstream).not.toBeInstanceOf(LimitingAdaptor);
    plain.dispose();
  });

  it('a wrapper that throws leaves nothing behind', () => {
    expect(() =>
      createAllocatorWrappingLeaves('test-over-host', {}, () => {
        throw new RangeError('bad wrap');
      }),
    ).toThrow('bad wrap');
    const again = createAllocatorWrappingLeaves('test-over-host', {}, (leaf) => leaf);
    expect(again.wrappedLeaves).toBe(1);
    again.allocator.dispose();
  });
});
