/**
 * `gpumem doctor`: the three verdicts on traces whose answers are known, the terminal, JSON and
 * HTML outputs, the default capacity, and bad input. Spawns the built CLI (build first: npx tsc -b
 * tsconfig.json); on a machine without a GPU the device strategies run on their host twins.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatBytes, hasCudaDevice } from '@gpumem/allocator-core';
import type { DoctorVerdict } from '@gpumem/trace';
import { UsageError } from './args.js';
import { runDoctor } from './doctor-command.js';
import { type CaseRow, fragmentingRows, trainingRows, trainingTags } from '../../../trace/src/doctor-cases.testing.js';

const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const run = (args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-doctor-'));
const fixture = (name: string) => fileURLToPath(new URL(`../../../trace/src/snapshot/fixtures/${name}`, import.meta.url));
const MiB = 1024 * 1024;

/** A gpumem JSONL trace of `events` ([action, ptr, bytes, tag]), with tag names when given. */
function writeTrace(name: string, events: CaseRow[], tags?: string[]): string {
  const file = join(dir, name);
  const header = { format: 'gpumem-trace', version: 1, source: 'test', eventCount: events.length, ...(tags && { tags }) };
  const lines = [
    JSON.stringify(header),
    ...events.map(([action, ptr, bytes, tag], i) => JSON.stringify({ timeNs: i * 1000, action, ptr, bytes, stream: 0, tag: tag ?? 0 })),
  ];
  writeFileSync(file, lines.map((l) => `${l}\n`).join(''));
  return file;
}

const fragmenting = writeTrace('fragmenting.jsonl', fragmentingRows);
const training = writeTrace('training.jsonl', trainingRows, trainingTags);

const jsonOf = (stdout: string) => JSON.parse(stdout) as { capacitySource: string; verdict: DoctorVerdict };

describe('gpumem doctor', () => {
  it("says fragmentation when PyTorch's default (its twin, caching) runs out and expandable fits", () => {
    const json = join(dir, 'fragmentation.json');
    const report = join(dir, 'fragmentation.html');
    const r = run(['doctor', fragmenting, '--capacity', '26MiB', '--outside', '0', '--json', json, '--report', report]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('capacity 26.00 MiB (--capacity)');
    expect(r.stdout).toContain('verdict: fragmentation');
    expect(r.stdout).toContain(
      "Fragmentation: the live bytes peak at 20.00 MiB, under the capacity of 26.00 MiB, but PyTorch's default allocator (replayed by its twin, the caching strategy) needs 40.00 MiB",
    );
    expect(r.stdout).toMatch(/expandable fits in 2\d\.\d\d MiB \(2\d\.\d\d MiB to 2\d\.\d\d MiB on the device\), \d\.\d\d MiB to spare\./);
    const { verdict } = JSON.parse(readFileSync(json, 'utf8')) as { verdict: DoctorVerdict };
    expect(verdict.kind).toBe('fragmentation');
    expect(verdict.best).toMatchObject({ label: 'expandable', fits: true });
    // the driver's strategies are left out on any machine (on a GPU, cudaMalloc per call would read as needing the live bytes)
    expect(r.stderr).toContain('gpumem doctor: leaving out cuda, uvm, async: their memory is the driver');
    expect(verdict.strategies.map((s) => s.label).sort()).toEqual([
      "caching (PyTorch's allocator)",
      'expandable',
      'host',
      'pinned',
      'pool',
      'tiered',
    ]);
    expect(verdict.pytorch).toMatchObject({ label: "caching (PyTorch's allocator)", fits: false });
    const html = readFileSync(report, 'utf8');
    expect(html).toMatch(/^<!DOCTYPE html>/);
    expect(html).toContain('<section id="verdict" class="verdict fragmentation">');
    expect(html).toContain('<th scope="row">expandable</th>');
    expect(html).not.toContain('<script');
  });

  it('says real when the live bytes exceed the capacity, and what would reduce them', () => {
    const r = run(['doctor', training, '--capacity', '16MiB', '--outside', '0', '--json', '-']);
    expect(r.status, r.stderr).toBe(0);
    const { verdict } = jsonOf(r.stdout);
    expect(verdict.kind).toBe('real');
    expect(verdict.excessBytes).toBe(9 * MiB);
    expect(verdict.reductions.map((x) => x.kind)).toEqual(['tiered-by-tag', 'sleep-idle-tags', 'checkpointing']);
    // with the JSON on stdout, the verdict's text goes to stderr
    expect(r.stderr).toContain('Real: the live bytes peak at 25.00 MiB, 9.00 MiB more than the capacity of 16.00 MiB');
    expect(r.stderr).toContain('Tiered placement by tag: with the allocations of weights (12.00 MiB at the peak) in host memory');
  });

  it('says fits with the margin of the strategy needing the least, and that PyTorch fits', () => {
    const r = run(['doctor', fragmenting, '--capacity', '64MiB', '--outside', '0', '--json', '-']);
    expect(r.status, r.stderr).toBe(0);
    const { verdict } = jsonOf(r.stdout);
    expect(verdict.kind).toBe('fits');
    expect(verdict.best!.label).toBe('expandable');
    expect(verdict.best!.marginBytes).toBe(64 * MiB - verdict.best!.needBytes);
    expect(r.stderr).toContain(
      `Fits: under expandable, which needs ${formatBytes(verdict.best!.needBytes)} (${formatBytes(verdict.best!.band.lowBytes)} to ${formatBytes(verdict.best!.band.highBytes)} on the device) of 64.00 MiB, ${formatBytes(verdict.best!.marginBytes)} to spare`,
    );
    expect(r.stderr).toMatch(/PyTorch's default allocator \(replayed by its twin, the caching strategy\) fits: it needs 40\.00 MiB/);
  });

  it("takes a snapshot's capacity from its OOM entry: what PyTorch reserved plus what the device had free", () => {
    const r = run(['doctor', fixture('snapshot-p4.pickle'), '--json', '-']);
    expect(r.status, r.stderr).toBe(0);
    const { verdict, capacitySource } = jsonOf(r.stdout);
    expect(verdict.capacityBytes).toBe(24 * MiB + 1_234_567);
    expect(capacitySource).toMatch(/^the snapshot's first out-of-memory entry/);
    // the failed request (40 GB) is replayed: the OOM was real
    expect(verdict.kind).toBe('real');
    // that capacity is what the allocator could have had: nothing outside it is added
    expect(verdict.uncertainty.outside).toMatchObject({ lowBytes: 0, highBytes: 0 });
  });

  it('says too close to call, with the band and the margin, where the capacity lies inside the deciding band', () => {
    // 25 MiB live, 0 to 1 MiB outside the allocator: a device of 25.5 MiB cannot be called
    const r = run([
      'doctor',
      training,
      '--capacity',
      '25.5MiB',
      '--outside',
      '0..1MiB',
      '--json',
      '-',
      '--report',
      join(dir, 'close.html'),
    ]);
    expect(r.status, r.stderr).toBe(0);
    const { verdict } = jsonOf(r.stdout);
    expect(verdict.kind).toBe('too-close');
    expect(verdict.decision).toMatchObject({ by: 'live', band: { lowBytes: 25 * MiB, highBytes: 26 * MiB }, marginBytes: 0 });
    expect(r.stderr).toContain('verdict: too-close (too close to call)');
    expect(r.stderr).toContain('decided by the live bytes: band 25.00 MiB to 26.00 MiB');
    expect(readFileSync(join(dir, 'close.html'), 'utf8')).toContain('<section id="verdict" class="verdict too-close">');
  });

  it('counts 0-250 MiB outside the allocator by default where the capacity is given, measured on H200s', () => {
    const r = run(['doctor', training, '--capacity', '24MiB', '--json', '-']);
    expect(r.status, r.stderr).toBe(0);
    const { verdict } = jsonOf(r.stdout);
    expect(verdict.kind).toBe('real');
    expect(verdict.uncertainty.outside).toMatchObject({ lowBytes: 0, highBytes: 250 * MiB });
    expect(verdict.uncertainty.pytorchModelError).toBe(0.004);
    expect(verdict.uncertainty.pytorchModelErrorFloorBytes).toBe(4 * MiB);
    const bad = run(['doctor', training, '--capacity', '1GiB', '--outside', '2MiB..1MiB']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("'--outside 2MiB..1MiB': LOW must be at most HIGH");
    expect(run(['doctor', training, '--capacity', '1GiB', '--outside', 'lots']).status).toBe(2);
    expect(run(['doctor', training, '--capacity', '1GiB', '--model-error', '2']).status).toBe(2);
  });

  it('gives the same verdict under ulimit -v and for a 64 GiB request, larger than this machine: the replays take no memory', () => {
    // 64 GiB allocated and freed, then 20 MiB live: the pool and expandable replay over addresses alone
    const huge = writeTrace('huge.jsonl', [['alloc', 1, 64 * 1024 * MiB], ['free', 1, 64 * 1024 * MiB], ...fragmentingRows]);
    const args = ['doctor', huge, '--capacity', '80GiB', '--outside', '0', '--json', '-'];
    const free = run(args);
    expect(free.status, free.stderr).toBe(0);
    const limited = spawnSync('bash', ['-c', 'ulimit -v 2000000 && exec "$0" "$@"', process.execPath, cli, ...args], { encoding: 'utf8' });
    expect(limited.status, limited.stderr).toBe(0);
    const a = jsonOf(free.stdout).verdict;
    const b = jsonOf(limited.stdout).verdict;
    expect(a.kind).toBe('fits');
    expect(b.kind).toBe(a.kind);
    const ranked = (v: DoctorVerdict) => v.strategies.filter((s) => s.ranked).map((s) => [s.label, s.needBytes, s.addressOnly]);
    expect(ranked(b)).toEqual(ranked(a));
    expect(ranked(a)).toEqual(
      expect.arrayContaining([
        ['pool', expect.any(Number), true],
        ['expandable', expect.any(Number), true],
      ]),
    );
    expect(a.pytorch.needBytes).toBeGreaterThanOrEqual(64 * 1024 * MiB);
  });

  it.skipIf(hasCudaDevice())('asks for --capacity when the trace records none and there is no GPU (exit 2)', () => {
    const r = run(['doctor', fragmenting]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("give '--capacity SIZE'");
  });

  it('refuses bad input with a clear message: exit 1 for a file it cannot read, 2 for bad usage', () => {
    const missing = run(['doctor', join(dir, 'missing.pickle'), '--capacity', '1GiB']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(`gpumem doctor: cannot read '${join(dir, 'missing.pickle')}': no such file`);

    const nulBytes = join(dir, 'nul.pickle');
    writeFileSync(nulBytes, Buffer.alloc(64));
    const nul = run(['doctor', nulBytes, '--capacity', '1GiB']);
    expect(nul.status).toBe(1);
    expect(nul.stderr).toContain('gpumem doctor: malformed trace:');

    for (const [capacity, message] of [
      ['12XB', "'--capacity'"],
      ['0x10MiB', "'--capacity'"],
      ['0', "'--capacity' must be more than 0 bytes"],
      ['-1GiB', "'--capacity'"],
    ] as const) {
      const bad = run(['doctor', fragmenting, '--capacity', capacity]);
      expect(bad.status, capacity).toBe(2);
      expect(bad.stderr, capacity).toContain(message);
    }
    const none = run(['doctor']);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain('gpumem doctor: expected a FILE');
    const over = run(['doctor', fragmenting, '--capacity', '1GiB', '--json', fragmenting]);
    expect(over.status).toBe(2);
    expect(over.stderr).toContain('would overwrite the input');
  });

  it('refuses a path with a NUL byte before reading anything', async () => {
    await expect(runDoctor(['trace\0.jsonl', '--capacity', '1GiB'])).rejects.toThrow(UsageError);
    await expect(runDoctor([fragmenting, '--capacity', '1GiB', '--report', 'out\0.html'])).rejects.toThrow(/holds a NUL byte/);
  });

  it('prints its help', () => {
    const r = run(['help', 'doctor']);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Usage: gpumem doctor FILE');
    expect(r.stdout).toContain('torch._C._cuda_attach_out_of_memory_observer(oom_observer)');
  });
});
