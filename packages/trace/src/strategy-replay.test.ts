/**
 * replayStrategy and recommendStrategy: one strategy's whole replay (timed passes, tracked pass,
 * minimum capacity) as a row, failures as rows, and the recommendation made from the rows; on
 * 'host' and 'pool' over host memory, with a trace whose answers are known (the pool takes a 4 MiB
 * segment for A, a 2 MiB small segment for B and D, and a 2 MiB segment for C: 8 MiB).
 */
import { describe, expect, it } from 'vitest';
import { hasCudaDevice } from '@gpumem/allocator-core';
import '@gpumem/allocator-pool';
import type { RecordedBaseline } from './baseline.js';
import type { TraceEvent } from './format.js';
import { recommendStrategy } from './recommend.js';
import { compileTrace } from './replay.js';
import { replayStrategy, type StrategyReplay } from './strategy-replay.js';

const KiB = 1024;
const MiB = 1024 * KiB;
let clock = 0;
const ev = (action: TraceEvent['action'], ptr: number, bytes: number): TraceEvent => {
  clock += 1000;
  return { timeNs: clock, action, ptr, bytes, stream: 0, tag: 0 };
};
const compiled = compileTrace({
  header: { source: 'test' },
  events: [
    ev('alloc', 0xa, 3 * MiB),
    ev('alloc', 0xb, 100 * KiB),
    ev('alloc', 0xc, 1.5 * MiB),
    ev('free', 0xb, 100 * KiB),
    ev('alloc', 0xd, 200 * KiB),
    ev('free', 0xa, 3 * MiB),
    ev('free', 0xc, 1.5 * MiB),
    ev('free', 0xd, 200 * KiB),
  ],
});
const peakLive = 3 * MiB + 1.5 * MiB + 200 * KiB;
const host = { label: 'host', name: 'host' };
const pool = { label: 'pool:upstream=host', name: 'pool', options: { upstream: 'host' } };
const gpu = hasCudaDevice();

describe('replayStrategy', () => {
  it('times the replay, profiles a tracked pass and says where the memory lives', () => {
    const row = replayStrategy(compiled, pool, { repeats: 2 });
    expect(row.error).toBeUndefined();
    expect(row.label).toBe('pool:upstream=host');
    // a device strategy made over host memory keeps host memory on a GPU; without one it stands in for the device
    expect(row.memory).toBe(gpu ? 'host' : 'device');
    expect(row.result).toMatchObject({
      repeats: 2,
      allocs: 4,
      frees: 4,
      ooms: 0,
      peakAllocatedBytes: peakLive,
      peakReservedBytes: 8 * MiB,
    });
    expect(row.profile).toMatchObject({ driverAllocs: 3, ooms: 0, peakReservedBytes: 8 * MiB });
    expect(row.limit).toBeUndefined();
    expect(row.minCapacity).toBeUndefined();
    expect(row.wallMs).toBeGreaterThan(0);
    expect(replayStrategy(compiled, host, { repeats: 1 }).memory).toBe('host');
  });

  it('replays at a capacity (the native limit under the strategy) and counts the out-of-memory failures', () => {
    const row = replayStrategy(compiled, pool, { repeats: 1, capacityBytes: 6 * MiB });
    expect(row.limit).toBe('native-limit');
    expect(row.result!.ooms).toBe(1); // C's 2 MiB segment does not fit next to 4 + 2 MiB
    expect(row.profile!.ooms).toBe(1);
    expect(row.profile!.oomSnapshots[0]).toMatchObject({ requestedBytes: 1.5 * MiB });
  });

  it('searches the minimum capacity when asked, to the resolution, under the capacity as its cap', () => {
    const row = replayStrategy(compiled, pool, { repeats: 1, minCapacity: true, resolutionBytes: 1 });
    expect(row.minCapacity).toMatchObject({ bytes: 8 * MiB, failedBytes: 8 * MiB - 1, resolutionBytes: 1 });
    const fits = replayStrategy(compiled, host, { repeats: 1, minCapacity: true });
    expect(fits.minCapacity).toMatchObject({ bytes: peakLive, atLowerBound: true, probes: 1 });
    const capped = replayStrategy(compiled, pool, { repeats: 1, minCapacity: true, capacityBytes: 6 * MiB });
    expect(capped.minCapacity).toMatchObject({ capBytes: 6 * MiB });
    expect(capped.minCapacity!.bytes).toBeUndefined();
  });

  it('turns a failure into the row error, with nothing measured', () => {
    const both = replayStrategy(
      compiled,
      { label: 'host:limitBytes=8MiB', name: 'host', options: { limitBytes: 8 * MiB } },
      {
        repeats: 1,
        capacityBytes: 8 * MiB,
      },
    );
    expect(both.error).toMatch(/^RangeError: Expected either a capacity or the option limitBytes for 'host'/);
    expect(both.result).toBeUndefined();
    expect(both.wallMs).toBeGreaterThanOrEqual(0);
    const unknown = replayStrategy(compiled, { label: 'nope', name: 'nope' }, { repeats: 1 });
    expect(unknown.label).toBe('nope');
    expect(unknown.error).toMatch(/nope/);
  });
});

describe('recommendStrategy', () => {
  const rows: StrategyReplay[] = [
    replayStrategy(compiled, pool, { repeats: 1, minCapacity: true, resolutionBytes: 1 }),
    replayStrategy(compiled, host, { repeats: 1, minCapacity: true, resolutionBytes: 1 }),
    { label: 'broken', error: 'OutOfMemoryError: out of memory\n  at the second line' },
  ];

  it('ranks the replays that finished and names the failed ones with the first line of their error', () => {
    const advice = recommendStrategy(rows, { minCapacity: true, skipped: [{ label: 'cuda', reason: 'no CUDA device' }], gpu });
    expect(advice.skipped).toEqual([
      { label: 'cuda', reason: 'no CUDA device' },
      { label: 'broken', reason: 'failed: OutOfMemoryError: out of memory' },
    ]);
    expect(advice.lines).toContain(
      'Caveat: not replayed, so not compared: cuda (no CUDA device); broken (failed: OutOfMemoryError: out of memory).',
    );
    // host keeps its memory on the host: never ranked
    expect(advice.notRanked.map((s) => s.label)).toContain('host');
    if (!gpu) {
      expect(advice.memory).toMatchObject({ labels: ['pool:upstream=host'], value: 8 * MiB });
      expect(advice.driverCalls).toMatchObject({ labels: ['pool:upstream=host'], value: 3 });
      expect(advice.caveats.some((c) => c.startsWith('Replayed without a GPU'))).toBe(true);
    }
  });

  it('weighs the picks against the recorded allocator, as PyTorch', () => {
    // the pool over host memory stands in for a device strategy (on a GPU it would keep host memory)
    const ok: StrategyReplay[] = [{ ...rows[0]!, memory: 'device' }];
    const baseline: RecordedBaseline = {
      label: 'PyTorch caching allocator (recorded)',
      peakAllocatedBytes: peakLive,
      peakReservedBytes: 16 * MiB,
      allocatedAtPeakBytes: peakLive,
      fragmentationAtPeakBytes: 16 * MiB - peakLive,
      driverAllocs: 5,
      driverFrees: 1,
      reservedTimeline: { timeNs: [], reservedBytes: [] },
    };
    const advice = recommendStrategy(ok, { minCapacity: false, baseline, gpu: false });
    expect(advice.memory!.baseline).toEqual({ value: 16 * MiB, lessBy: 0.5 });
    expect(advice.lines[0]).toBe("Least memory: pool:upstream=host peaks at 8.00 MiB reserved, 50% less than PyTorch's 16.00 MiB.");
    expect(advice.driverCalls!.baseline).toEqual({ value: 6, lessBy: 0.5 });
  });
});
