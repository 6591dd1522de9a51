import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTable } from '../../compare/src/text-table.testing.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { CompareResult } from '@gpumem/compare';
import { testTime } from '../../../tests/time-budget.js';

// The built CLI, as a user runs it (npm ci builds it), on the CPU path.
const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const arena = fileURLToPath(new URL('../../../examples/dist/arena/index.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-'));
const env = { ...process.env, GPUMEM_PLUGINS: arena, CUDA_VISIBLE_DEVICES: '' };
const run = (...args: string[]) =>
  spawnSync(process.execPath, [cli, 'compare', ...args], { encoding: 'utf8', env, timeout: testTime(120_000) });
// one run of each allocator: these tests are about the rows, not the ranking of their times
const tiny = ['--train-subset', '256', '--test-subset', '128', '--hidden', '32', '--epochs', '2', '--repeat', '1'];

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The table's data rows (between the rule and the notes), keyed by allocator. */
function tableRows(stdout: string): Map<string, string[]> {
  return readTable(stdout).rows;
}

describe('gpumem compare (CPU)', () => {
  it(
    'runs every allocator, one row each, an OOM row for a pool too small, and JSON that matches the table',
    () => {
      const json = join(dir, 'cmp.json');
      const r = run(
        ...tiny,
        '--allocators',
        'host,pool:upstream=host,arena:upstream=host,pool:upstream=host:maxReservedBytes=4KiB',
        '--json',
        json,
      );
      expect(r.stderr).not.toMatch(/Error:/);
      expect(r.status).toBe(0);
      const rows = tableRows(r.stdout);
      expect([...rows.keys()]).toEqual(['host', 'pool:upstream=host', 'arena:upstream=host', 'pool:upstream=host:maxReservedBytes=4KiB']);
      expect(rows.get('pool:upstream=host:maxReservedBytes=4KiB')![1]).toBe('OOM');
      expect(r.stdout).toMatch(/pool:upstream=host:maxReservedBytes=4KiB: out of memory: /);
      const result = JSON.parse(readFileSync(json, 'utf8')) as CompareResult;
      expect(result.runs.map((x) => x.allocator)).toEqual([...rows.keys()]);
      for (const x of result.runs.filter((x) => x.status === 'ok')) {
        const cells = rows.get(x.allocator)!;
        expect(cells[1]).toBe('ok');
        expect(cells[2]).toMatch(new RegExp(`^${x.medianEpochMs!.toFixed(1)} ms`));
        expect(cells[9]).toMatch(new RegExp(`^${x.finalLoss!.toFixed(4)}`));
        expect(x.epochs).toHaveLength(2);
        expect(x.timeline!.tMs.length).toBeGreaterThan(10);
      }
      // the same math on every allocator: identical losses, so every completed run holds the best loss
      expect(result.best.finalLoss).toEqual(['host', 'pool:upstream=host', 'arena:upstream=host']);
      expect(result.runs[3]!.status).toBe('oom');
      expect(result.runs[3]!.oomCount).toBeGreaterThanOrEqual(1);
    },
    testTime(180_000),
  );

  it(
    'defaults to every registered allocator that can run here and writes the report and trace',
    () => {
      const report = join(dir, 'r.html');
      const trace = join(dir, 't.json');
      const r = run(...tiny, '--report', report, '--trace-json', trace);
      expect(r.status).toBe(0);
      const rows = tableRows(r.stdout);
      // every registered strategy that runs without a GPU and needs no options (plug-ins included)
      const names = [...rows.keys()];
      expect(names).toEqual(expect.arrayContaining(['arena', 'host', 'pool']));
      for (const gpuOnly of ['cuda', 'uvm', 'async', 'plugin']) expect(names).not.toContain(gpuOnly);
      expect(r.stdout).toMatch(new RegExp(`report: ${report.replaceAll('.', '\\.')}`));
      expect(readFileSync(report, 'utf8')).toMatch(/<html/i);
      expect(JSON.parse(readFileSync(trace, 'utf8')).traceEvents.length).toBeGreaterThan(0);
    },
    testTime(180_000),
  );

  it(
    'an injected upstream failure becomes an OOM row with its stats, and the next allocator still runs',
    () => {
      const json = join(dir, 'fault.json');
      const r = run(...tiny, '--allocators', 'pool:upstream=host:faultInjection.failAfterBytes=1MiB,host', '--json', json);
      expect(r.status).toBe(0);
      const result = JSON.parse(readFileSync(json, 'utf8')) as CompareResult;
      expect(result.runs.map((x) => x.status)).toEqual(['oom', 'ok']);
      expect(result.runs[0]!.error).toMatch(/out of memory|injected/i);
      expect(result.runs[0]!.stats!.oomCount).toBeGreaterThanOrEqual(1);
      expect(result.runs[0]!.stats!.reservedBytes).toBeLessThanOrEqual(2 ** 20);
      expect(result.runs[1]!.epochs).toHaveLength(2);
    },
    testTime(120_000),
  );

  it.each([
    [['--allocators', 'nope'], /'--allocators' names 'nope', which is not registered \(registered: .*host/],
    [['--allocators', 'cuda'], /'--allocators' names 'cuda', which needs a CUDA device/],
    [['--allocators', 'pool:oops'], /'--allocators': Expected key=value/],
    [['--model', 'rnn'], /'--model' must be one of mlp, gcn/],
    [['--epochs', '0'], /'--epochs' must be at least 1/],
    [['--bogus'], /^gpumem compare: unknown flag --bogus\nsee gpumem compare --help$/m],
  ])('bad flags %j exit 2 with a clear message', (args, message) => {
    const r = run(...args);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('--help explains the command with examples', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/Usage: gpumem compare/);
    expect(r.stdout).toMatch(/Examples:/);
    expect(r.stdout).toMatch(/--allocators/);
  });
});
