/**
 * `gpumem compare`'s table for the terminal: the marks of each column's best and of ties lined up,
 * and a strategy that keeps memory in two tiers (device and host): its peaks split, the bytes moved
 * between the tiers in a column of their own where any moved; the table as it was when no run has a
 * host tier; over several devices, a line of each device's peaks under it.
 */
import { describe, expect, it } from 'vitest';
import { formatBytes } from '@gpumem/allocator-core';
import { formatCompareTable } from './compare-table.js';
import { sampleCompareResult } from './fixture.js';
import { sampleDevicesCompareResult } from './fixture-devices.js';
import { plainCompareHeader } from './compare-table.testing.js';
import { readTable } from './text-table.testing.js';

const MiB = 2 ** 20;

describe('the compare table with a host tier', () => {
  it('is as it was when no run has a host tier', () => {
    const { header, rows, after: notes } = readTable(formatCompareTable(sampleCompareResult()));
    expect(header).toEqual(plainCompareHeader());
    for (const cells of rows.values()) {
      expect(cells).toHaveLength(11);
      expect(cells.join(' ')).not.toMatch(/device|host/);
    }
    expect(notes.join('\n')).not.toMatch(/host tier|moved to host/);
  });

  it("splits the tiered run's peaks into device and host, and adds the bytes moved between the tiers", () => {
    const result = sampleCompareResult({ tiered: true });
    const tiers = result.runs[4]!.tiers!;
    const table = formatCompareTable(result);
    const { header, rows, after: notes } = readTable(table);
    expect(header).toEqual([...plainCompareHeader().slice(0, 7), 'moved to host / device', ...plainCompareHeader().slice(7)]);
    const tiered = rows.get('tiered')!;
    expect(tiered).toHaveLength(12);
    const split = (peak: number, s: { deviceBytes: number; hostBytes: number }) =>
      `${formatBytes(peak)} (${formatBytes(s.deviceBytes)} device + ${formatBytes(s.hostBytes)} host)`;
    // the total stays first (what is ranked), and carries the column's mark where it is the lowest
    const mark = result.best.peakAllocatedBytes?.includes('tiered') ? ' *' : '';
    expect(tiered[4]).toBe(`${split(result.runs[4]!.peakAllocatedBytes!, tiers.peakAllocated)}${mark}`);
    expect(tiered[5]).toBe(split(result.runs[4]!.peakReservedBytes!, tiers.peakReserved));
    expect(tiered[7]).toBe(`${formatBytes(tiers.bytesMovedToHost)} / ${formatBytes(tiers.bytesMovedToDevice)}`);
    for (const allocator of ['cuda', 'pool', 'async', 'arena']) {
      const cells = rows.get(allocator)!;
      expect(cells).toHaveLength(12);
      expect(cells[4]).not.toMatch(/device|host/);
      expect(cells[5]).not.toMatch(/device|host/);
      expect(cells[7]).toBe('-');
    }
    expect(notes.some((n) => n.startsWith('device + host: '))).toBe(true);
    expect(notes.some((n) => n.startsWith('moved to host / device: '))).toBe(true);
  });

  it('shows the split but no column of bytes moved when no run moved any', () => {
    const result = sampleCompareResult({ tiered: true });
    result.runs[4]!.tiers = { ...result.runs[4]!.tiers!, bytesMovedToHost: 0, bytesMovedToDevice: 0 };
    const { header, rows, after: notes } = readTable(formatCompareTable(result));
    expect(header).toEqual(plainCompareHeader());
    expect(rows.get('tiered')![4]).toMatch(/ device \+ .* host\)/);
    expect(notes.some((n) => n.startsWith('moved to host'))).toBe(false);
  });

  it('puts a dash under the bytes moved for a baseline', () => {
    const result = sampleCompareResult({ tiered: true });
    result.baselines = [
      {
        name: 'torch-eager',
        file: 'torch.jsonl',
        epochs: [],
        medianEpochMs: null,
        epochSpread: null,
        peakAllocatedBytes: 1000,
        peakReservedBytes: 2000,
        finalLoss: null,
        accuracy: null,
        about: {},
      },
    ];
    const { rows } = readTable(formatCompareTable(result));
    const baseline = rows.get('torch-eager')!;
    expect(baseline).toHaveLength(12);
    expect(baseline[1]).toBe('baseline');
    expect(baseline[7]).toBe('-');
  });
});

describe("the compare table's figures", () => {
  it('line up in a column with marks: an unmarked figure ends where a marked one does', () => {
    const table = formatCompareTable(sampleCompareResult());
    const lines = table.split('\n');
    const header = lines.find((l) => l.startsWith('allocator '))!;
    const rule = lines[lines.indexOf(header) + 1]!;
    const start = header.indexOf('peak reserved');
    const end = rule.indexOf(' ', start) === -1 ? rule.length : rule.indexOf(' ', start);
    const rows = lines.slice(lines.indexOf(header) + 2).filter((l) => /^\S+ +(ok|OOM|error) /.test(l));
    const cells = rows.map((l) => l.slice(start, end));
    expect(cells.some((c) => / [*=]$/.test(c))).toBe(true);
    // every figure's last digit in one place (two before the end, where the mark goes)
    for (const c of cells) expect(c.at(-3)).toMatch(/[0-9B-]/);
  });
});

describe('the compare table of runs over several devices', () => {
  it("keeps one row per run and lists each device's peaks under the table, one line per run", () => {
    const table = formatCompareTable(sampleDevicesCompareResult());
    const lines = table.split('\n');
    const { rows } = readTable(table);
    expect([...rows.keys()]).toEqual(['pool', 'async', 'cuda']);
    for (const row of rows.values()) expect(row).toHaveLength(11);
    expect(lines).toContain(
      `pool per device (peak allocated / reserved): cuda:0 ${formatBytes(108 * MiB)} / ${formatBytes(128 * MiB)} \u00b7 cuda:1 ${formatBytes(118 * MiB)} / ${formatBytes(128 * MiB)}`,
    );
    expect(table).toMatch(
      /over several devices: epoch times are the slowest rank's; peaks, upstream calls and OOMs the largest of any one device/,
    );
    expect(table).toMatch(/cuda: out of memory: rank 1 of 2 failed: OutOfMemoryError/);
  });

  it('is as it was without such runs', () => {
    expect(formatCompareTable(sampleCompareResult())).not.toMatch(/per device|several devices/);
  });
});
