/**
 * `gpumem compare`'s table with a strategy that keeps memory in two tiers (device and host): its
 * peaks split, the bytes moved between the tiers in a column of their own where any moved; the
 * table as it was when no run has a host tier. Then end to end, through the built CLI, with a test
 * plug-in that has a host tier.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { formatBytes } from '@gpumem/allocator-core';
import type { CompareResult } from '@gpumem/compare';
import { sampleCompareResult } from '../../../compare/src/fixture.js';
import { formatCompareTable } from './compare-command.js';
import { readTable } from '../table-cells.testing.js';

/** The header cells and the data rows (by allocator) of the table. */
function parse(table: string): { header: string[]; rows: Map<string, string[]>; notes: string[] } {
  const { header, rows, after } = readTable(table);
  return { header, rows, notes: after };
}

const plainHeader = [
  'allocator',
  'status',
  'median epoch (min\u2013max)',
  'nodes/s',
  'peak allocated',
  'peak reserved',
  'reserved/alloc',
  'upstream calls',
  'OOMs',
  'final loss',
  'accuracy',
];

describe('the compare table with a host tier', () => {
  it('is as it was when no run has a host tier', () => {
    const { header, rows, notes } = parse(formatCompareTable(sampleCompareResult()));
    expect(header).toEqual(plainHeader);
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
    const { header, rows, notes } = parse(table);
    expect(header).toEqual([...plainHeader.slice(0, 7), 'moved to host / device', ...plainHeader.slice(7)]);
    const tiered = rows.get('tiered')!;
    expect(tiered).toHaveLength(12);
    const split = (peak: number, s: { deviceBytes: number; hostBytes: number }) =>
      `${formatBytes(peak)} (${formatBytes(s.deviceBytes)} device + ${formatBytes(s.hostBytes)} host)`;
    // the total stays first (what is ranked: the tiered run has the lowest peak allocated here)
    expect(tiered[4]).toBe(`${split(result.runs[4]!.peakAllocatedBytes!, tiers.peakAllocated)} *`);
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
    const { header, rows, notes } = parse(formatCompareTable(result));
    expect(header).toEqual(plainHeader);
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
    const { rows } = parse(formatCompareTable(result));
    const baseline = rows.get('torch-eager')!;
    expect(baseline).toHaveLength(12);
    expect(baseline[1]).toBe('baseline');
    expect(baseline[7]).toBe('-');
  });
});

// The built CLI, as a user runs it, with a test plug-in that has a host tier.
const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const tieredPlugin = fileURLToPath(new URL('../../../compare/src/fixtures/tiered-plugin.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-tiers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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

describe('gpumem compare with a strategy that has a host tier (CPU)', () => {
  it('prints its peaks split, writes the split to the JSON file, and leaves the other row as it was', () => {
    const json = join(dir, 'tiers.json');
    const report = join(dir, 'tiers.html');
    const trace = join(dir, 'tiers-trace.json');
    const r = spawnSync(
      process.execPath,
      [
        cli,
        'compare',
        '--train-subset',
        '256',
        '--test-subset',
        '128',
        '--hidden',
        '32',
        '--epochs',
        '2',
        '--allocators',
        'host,tiered-test',
        '--json',
        json,
        '--report',
        report,
        '--trace-json',
        trace,
      ],
      { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: tieredPlugin, CUDA_VISIBLE_DEVICES: '' }, timeout: 120_000 },
    );
    expect(r.stderr).not.toMatch(/Error:/);
    expect(r.status).toBe(0);
    const { header, rows, notes } = parse(r.stdout);
    // the plug-in moves nothing between its tiers: no column for it
    expect(header).toEqual(plainHeader.map((h) => (h === 'nodes/s' ? 'images/s' : h)));
    const result = JSON.parse(readFileSync(json, 'utf8')) as CompareResult;
    const [host, tiered] = result.runs;
    expect(host).not.toHaveProperty('tiers');
    expect(rows.get('host')![4]).toMatch(/^[\d.]+ [KMG]?i?B( \*)?$/);
    const tiers = tiered!.tiers!;
    expect(tiers.peakAllocated.hostBytes).toBeGreaterThan(0);
    expect(tiers.peakAllocated.deviceBytes + tiers.peakAllocated.hostBytes).toBe(tiered!.peakAllocatedBytes);
    expect(rows.get('tiered-test')![4]).toContain(
      `(${formatBytes(tiers.peakAllocated.deviceBytes)} device + ${formatBytes(tiers.peakAllocated.hostBytes)} host)`,
    );
    expect(notes.some((n) => n.startsWith('device + host: '))).toBe(true);
    // through the child process: the epochs' stats and the timeline carry the host part
    for (const epoch of tiered!.epochs) expect(epoch.stats.peakHostAllocatedBytes).toBeGreaterThan(0);
    expect(tiered!.timeline!.hostAllocatedBytes).toHaveLength(tiered!.timeline!.tMs.length);
    expect(Math.max(...tiered!.timeline!.hostAllocatedBytes!)).toBeGreaterThan(0);
    expect(host!.timeline).not.toHaveProperty('hostAllocatedBytes');
    expect(readFileSync(report, 'utf8')).toContain('<canvas id="timeline-1-tiers"');
    const names = new Set(
      (JSON.parse(readFileSync(trace, 'utf8')).traceEvents as { ph: string; pid: number; name: string }[])
        .filter((e) => e.ph === 'C')
        .map((e) => `${e.pid} ${e.name}`),
    );
    expect(names).toEqual(new Set(['1 allocated', '1 reserved', '2 allocated', '2 reserved', '2 host allocated', '2 host reserved']));
  }, 180_000);
});
