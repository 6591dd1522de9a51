/**
 * `gpumem compare` with a strategy that keeps memory in two tiers (device and host), end to end
 * through the built CLI with a test plug-in that has a host tier: its peaks split in the table, the
 * JSON, the report and the trace (the table's own tests are in @gpumem/compare's compare-table.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { formatBytes } from '@gpumem/allocator-core';
import type { CompareResult } from '@gpumem/compare';
import { plainCompareHeader } from '../../../compare/src/compare-table.testing.js';
import { readTable } from '../../../compare/src/text-table.testing.js';
import { testTime } from '../../../../tests/time-budget.js';

// The built CLI, as a user runs it, with a test plug-in that has a host tier.
const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const tieredPlugin = fileURLToPath(new URL('../../../compare/src/fixtures/tiered-plugin.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-tiers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('gpumem compare with a strategy that has a host tier (CPU)', () => {
  it(
    'prints its peaks split, writes the split to the JSON file, and leaves the other row as it was',
    () => {
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
        { encoding: 'utf8', env: { ...process.env, GPUMEM_PLUGINS: tieredPlugin, CUDA_VISIBLE_DEVICES: '' }, timeout: testTime(120_000) },
      );
      expect(r.stderr).not.toMatch(/Error:/);
      expect(r.status).toBe(0);
      const { header, rows, after: notes } = readTable(r.stdout);
      // the plug-in moves nothing between its tiers: no column for it
      expect(header).toEqual(plainCompareHeader('images/s'));
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
    },
    testTime(180_000),
  );
});
