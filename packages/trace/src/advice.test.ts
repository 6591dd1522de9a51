import { describe, expect, it } from 'vitest';
import { strategyPackages } from '../../../scripts/sync-workspaces.mjs';
import { adviseAllocator, strategyMemory, type AdviceCandidate } from './advice.js';

// every strategy package registers itself on import (the workspaces say which are strategies)
for (const { name } of strategyPackages()) await import(name);

const GiB = 2 ** 30;
const row = (label: string, o: Partial<AdviceCandidate> = {}): AdviceCandidate => ({
  label,
  ooms: 0,
  peakReservedBytes: 16 * GiB,
  driverCalls: 100,
  nsPerCall: 500,
  ...o,
});

describe('adviseAllocator', () => {
  it('picks the smallest minimum capacity, the fewest driver calls and the fastest calls, against PyTorch', () => {
    const advice = adviseAllocator(
      [
        row('pool', { minCapacityBytes: 16 * GiB, driverCalls: 12, nsPerCall: 80 }),
        row('async:releaseThreshold=0', { minCapacityBytes: 14.5 * GiB, driverCalls: 400, nsPerCall: 300 }),
        row('cuda', { minCapacityBytes: 15 * GiB, driverCalls: 9000, nsPerCall: 9000 }),
      ],
      { minCapacity: true, baseline: { name: 'PyTorch', peakReservedBytes: 17.8 * GiB, driverCalls: 40 } },
    );
    expect(advice.memory).toMatchObject({ labels: ['async:releaseThreshold=0'], value: 14.5 * GiB });
    expect(advice.memory!.baseline!.lessBy).toBeCloseTo(1 - 14.5 / 17.8);
    expect(advice.lines).toEqual([
      "Least memory: async:releaseThreshold=0 needs 14.50 GiB, 19% less than PyTorch's 17.80 GiB.",
      "Fewest driver calls: pool, 12 calls, 70% fewer than PyTorch's 40 calls.",
      'Fastest calls: pool, 80 ns per call on average (next: async:releaseThreshold=0, 300 ns).',
    ]);
  });

  it('without --min-capacity ranks memory by peak reserved; says "more" when PyTorch does better; names ties', () => {
    const advice = adviseAllocator(
      [row('pool', { peakReservedBytes: 2 * GiB }), row('host', { peakReservedBytes: 2 * GiB, driverCalls: 100 })],
      {
        minCapacity: false,
        baseline: { name: 'PyTorch', peakReservedBytes: GiB, driverCalls: 50 },
      },
    );
    expect(advice.lines[0]).toBe("Least memory: pool and host peak at 2.00 GiB reserved, 100% more than PyTorch's 1.00 GiB.");
    expect(advice.lines[1]).toBe("Fewest driver calls: pool and host, 100 calls, 100% more than PyTorch's 50 calls.");
    expect(advice.lines[2]).toBe('Fastest calls: pool and host, 500 ns per call on average.');
  });

  it('leaves out strategies that ran out of memory, and says so when all did', () => {
    const some = adviseAllocator([row('pool', { ooms: 3, peakReservedBytes: GiB }), row('host', { peakReservedBytes: 2 * GiB })], {
      minCapacity: false,
    });
    expect(some.memory!.labels).toEqual(['host']);
    expect(some.lines[0]).toBe('Least memory: host peaks at 2.00 GiB reserved.');
    const none = adviseAllocator([row('pool', { ooms: 1 })], { minCapacity: false, capacityBytes: 8 * GiB });
    expect(none.lines).toEqual([
      'No strategy replayed the whole trace without running out of memory at 8.00 GiB; --min-capacity finds how much each needs.',
    ]);
    const hostFits = adviseAllocator([row('pool', { ooms: 1 }), row('host', { memory: 'host' })], {
      minCapacity: false,
      capacityBytes: 8 * GiB,
    });
    expect(hostFits.lines[0]).toBe(
      'No strategy that uses the device replayed the whole trace without running out of memory at 8.00 GiB; --min-capacity finds how much each needs.',
    );
    const searched = adviseAllocator([row('pool', { ooms: 1 })], { minCapacity: true, capacityBytes: 8 * GiB });
    expect(searched.lines[0]).toMatch(/no strategy replayed the trace without running out of memory under the search's cap/);
  });

  it("ranks memory among device strategies only: host memory is not the GPU's, and a spilling strategy says what it spilled", () => {
    // What a CPU machine saw on a GPU snapshot: host and tiered at the trace's peak live bytes.
    const advice = adviseAllocator(
      [
        row('host', { memory: 'host', minCapacityBytes: 256 * 2 ** 20, driverCalls: 1, nsPerCall: 10 }),
        row('tiered', { memory: 'spills', minCapacityBytes: 256 * 2 ** 20, spilledBytes: 92 * 2 ** 20, driverCalls: 70, nsPerCall: 3000 }),
        row('pinned', { memory: 'host', minCapacityBytes: 300 * 2 ** 20, driverCalls: 5 }),
        row('pool', { memory: 'device', minCapacityBytes: 288 * 2 ** 20, driverCalls: 38, nsPerCall: 600 }),
      ],
      {
        minCapacity: true,
        baseline: { name: 'PyTorch', peakReservedBytes: 320 * 2 ** 20, driverCalls: 40 },
        skipped: [
          { label: 'cuda', reason: 'no CUDA device' },
          { label: 'async', reason: 'no CUDA device' },
        ],
        withoutGpu: true,
      },
    );
    expect(advice.memory!.labels).toEqual(['pool']);
    expect(advice.driverCalls!.labels).toEqual(['pool']); // tiered competes for calls, the host strategies do not
    expect(advice.speed!.labels).toEqual(['pool']);
    expect(advice.notRanked.map((n) => n.label)).toEqual(['host', 'pinned', 'tiered']);
    expect(advice.skipped).toEqual([
      { label: 'cuda', reason: 'no CUDA device' },
      { label: 'async', reason: 'no CUDA device' },
    ]);
    expect(advice.lines).toEqual([
      "Least memory: pool needs 288.00 MiB, 10% less than PyTorch's 320.00 MiB.",
      "Fewest driver calls: pool, 38 calls, 5% fewer than PyTorch's 40 calls.",
      'Fastest calls: pool, 600 ns per call on average (next: tiered, 3000 ns).',
      'Not ranked: host and pinned keep their memory in host memory, not on the GPU.',
      'Not ranked for memory: tiered holds what does not fit on the device in host memory (92.00 MiB at most in the tracked pass), so its minimum capacity counts on host memory; it trades device memory for transfers over the bus.',
      'Caveat: not replayed, so not compared: cuda and async (no CUDA device).',
      "Caveat: replayed without a GPU: the device strategies ran on their host twins (the same logic over host memory); times are not a GPU's.",
    ]);
  });

  it('compares with no baseline that recorded nothing (a snapshot without segment entries)', () => {
    const advice = adviseAllocator([row('pool', { minCapacityBytes: GiB })], {
      minCapacity: true,
      baseline: { name: 'PyTorch', peakReservedBytes: 0, driverCalls: 0 },
    });
    expect(advice.lines.slice(0, 2)).toEqual(['Least memory: pool needs 1.00 GiB.', 'Fewest driver calls: pool, 100 calls.']);
    expect(advice.memory!.baseline).toBeUndefined();
  });

  it('says when no device strategy, or no strategy at all, was replayed', () => {
    const hostOnly = adviseAllocator([row('host', { memory: 'host' })], { minCapacity: false });
    expect(hostOnly.memory).toBeUndefined();
    expect(hostOnly.lines[0]).toBe('Least memory: no strategy that keeps its memory on the device was replayed.');
    const none = adviseAllocator([], { minCapacity: false, skipped: [{ label: 'cuda', reason: 'failed: CudaError: no device' }] });
    expect(none.lines).toEqual([
      'No strategy was replayed, so there is nothing to recommend.',
      'Caveat: not replayed, so not compared: cuda (failed: CudaError: no device).',
    ]);
  });
});

describe('strategyMemory', () => {
  it('reads where a strategy keeps its memory from its registry flags', () => {
    expect(strategyMemory('pool')).toBe('device');
    expect(strategyMemory('host')).toBe('host');
    expect(strategyMemory('pinned')).toBe('host');
    expect(strategyMemory('tiered')).toBe('spills');
  });
});
