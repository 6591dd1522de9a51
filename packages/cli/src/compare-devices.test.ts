/**
 * `gpumem compare --devices`: the flags that go with --devices, and a comparison over two ranks on
 * the host end to end through the built CLI (the ranks run the built
 * packages/gnn/dist/training/rank-main.js with the host communicator). The table's line of each
 * device's peaks is tested in @gpumem/compare's compare-table.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChromeTrace, CompareResult } from '@gpumem/compare';
import { testTime } from '../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-compare-devices-'));
const env = { ...process.env, CUDA_VISIBLE_DEVICES: '' };
const run = (...args: string[]) =>
  spawnSync(process.execPath, [cli, 'compare', ...args], { encoding: 'utf8', env, timeout: testTime(300_000) });

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('gpumem compare --devices (CPU)', () => {
  it.each([
    [['--communicator', 'host'], /'--communicator' goes with '--devices'/],
    [['--timeout', '1000'], /'--timeout' goes with '--devices'/],
    [['--devices', 'two'], /'--devices' must be a number of ranks from 1 to 1024 or a comma-separated list/],
    [['--devices', '2', '--inline'], /'--inline' does not go with '--devices'/],
    [['--devices', '0,1'], /'--devices' names cuda:0, and no CUDA device is here/],
  ])('refuses %j with exit 2', (args, message) => {
    const r = run('--model', 'gcn', '--dataset', 'sbm', '--allocators', 'host', ...args);
    expect(r.stderr).toMatch(message);
    expect(r.status).toBe(2);
  });

  it('explains --devices in its help, with an example', () => {
    const r = run('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/With --devices/);
    expect(r.stdout).toMatch(/gpumem compare --model gcn --dataset sbm --allocators host --devices 2/);
  });

  it(
    "trains the gcn over two host ranks and writes each device's memory to the JSON, the report and the trace",
    () => {
      const json = join(dir, 'devices.json');
      const report = join(dir, 'devices.html');
      const trace = join(dir, 'devices-trace.json');
      const r = run(
        '--model',
        'gcn',
        '--dataset',
        'sbm',
        '--devices',
        '2',
        '--epochs',
        '2',
        '--allocators',
        'host',
        '--repeat',
        '1',
        '--json',
        json,
        '--report',
        report,
        '--trace-json',
        trace,
      );
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/, over 2 devices, on host \(CPU kernels\)/);
      expect(r.stdout).toMatch(/^host per device \(peak allocated \/ reserved\): rank 0 \(host\) .* \u00b7 rank 1 \(host\) /m);
      const result = JSON.parse(readFileSync(json, 'utf8')) as CompareResult;
      expect(result.workload.options).toMatchObject({ devices: '2' });
      expect(result.runs).toHaveLength(1);
      const [host] = result.runs;
      expect(host).toMatchObject({ allocator: 'host', status: 'ok', timeline: null });
      expect(host!.epochs).toHaveLength(2);
      expect(host!.devices).toHaveLength(2);
      host!.devices!.forEach((d, rank) => {
        expect(d).toMatchObject({ rank, device: 'host' });
        expect(d.peakAllocatedBytes).toBeGreaterThan(0);
        expect(d.peakReservedBytes).toBeGreaterThanOrEqual(d.peakAllocatedBytes);
        // one sample per gcn epoch, on the launcher's clock
        expect(d.timeline.tMs).toHaveLength(2);
        expect(d.timeline.tMs[0]!).toBeGreaterThan(0);
        expect(d.timeline.tMs[1]!).toBeGreaterThan(d.timeline.tMs[0]!);
        expect(d.phases.map((p) => p.name)).toEqual(['epoch 1', 'epoch 2']);
        expect(d.remoteRows!.remote).toBeGreaterThan(0);
      });
      expect(host!.peakAllocatedBytes).toBe(Math.max(...host!.devices!.map((d) => d.peakAllocatedBytes)));
      const html = readFileSync(report, 'utf8');
      expect(html).toContain('<figure class="timeline devices" data-run="0">');
      expect(html).toMatch(/rank 1 \(host\)/);
      const chrome = JSON.parse(readFileSync(trace, 'utf8')) as ChromeTrace;
      expect(chrome.metadata.processes.map((p) => [p.pid, p.rank ?? null])).toEqual([
        [1, null],
        [2, 0],
        [3, 1],
      ]);
      expect(chrome.traceEvents.filter((e) => e.ph === 'C' && e.pid === 3 && e.name === 'allocated')).toHaveLength(2);
    },
    testTime(300_000),
  );
});
