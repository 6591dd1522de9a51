import { describe, expect, it } from 'vitest';
import { adviseAllocator, type AdviceCandidate } from './advice.js';

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
      { minCapacity: true, peer: { name: 'PyTorch', peakReservedBytes: 17.8 * GiB, driverCalls: 40 } },
    );
    expect(advice.memory).toMatchObject({ labels: ['async:releaseThreshold=0'], value: 14.5 * GiB });
    expect(advice.memory!.peer!.lessBy).toBeCloseTo(1 - 14.5 / 17.8);
    expect(advice.lines).toEqual([
      "Least memory: async:releaseThreshold=0 needs 14.50 GiB, 19% less than PyTorch's 17.80 GiB.",
      "Fewest driver calls: pool, 12 calls, 70% fewer than PyTorch's 40 calls.",
      'Fastest calls: pool, 80 ns per call on average (next: async:releaseThreshold=0, 300 ns).',
    ]);
  });

  it('without --min-capacity ranks memory by peak reserved; says "more" when PyTorch does better; names ties', () => {
    const advice = adviseAllocator([row('pool', { peakReservedBytes: 2 * GiB }), row('host', { peakReservedBytes: 2 * GiB, driverCalls: 100 })], {
      minCapacity: false,
      peer: { name: 'PyTorch', peakReservedBytes: GiB, driverCalls: 50 },
    });
    expect(advice.lines[0]).toBe("Least memory: pool and host peak at 2.00 GiB reserved, 100% more than PyTorch's 1.00 GiB.");
    expect(advice.lines[1]).toBe("Fewest driver calls: pool and host, 100 calls, 100% more than PyTorch's 50 calls.");
    expect(advice.lines[2]).toBe('Fastest calls: pool and host, 500 ns per call on average.');
  });

  it('leaves out strategies that ran out of memory, and says so when all did', () => {
    const some = adviseAllocator([row('pool', { ooms: 3, peakReservedBytes: GiB }), row('host', { peakReservedBytes: 2 * GiB })], { minCapacity: false });
    expect(some.memory!.labels).toEqual(['host']);
    expect(some.lines[0]).toBe('Least memory: host peaks at 2.00 GiB reserved.');
    const none = adviseAllocator([row('pool', { ooms: 1 })], { minCapacity: false, capacityBytes: 8 * GiB });
    expect(none.lines).toEqual(['No strategy replayed the whole trace without running out of memory at 8.00 GiB; --min-capacity finds how much each needs.']);
    const searched = adviseAllocator([row('pool', { ooms: 1 })], { minCapacity: true, capacityBytes: 8 * GiB });
    expect(searched.lines[0]).toMatch(/no strategy replayed the trace without running out of memory under the search's cap/);
  });
});
