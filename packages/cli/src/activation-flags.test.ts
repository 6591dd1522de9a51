/**
 * The mlp's activation flags on the command line (--checkpoint, --nano-batches, --layer-prefetch):
 * bad values exit 2 at once naming the flag, for train and for compare (before any child runs), the
 * help lists them, and compare hands them to its child processes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CompareResult } from '@gpumem/compare';
import { testTime } from '../../../tests/time-budget.js';

// The built CLI, as a user runs it, on the CPU path.
const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const env = { ...process.env, CUDA_VISIBLE_DEVICES: '' };
const gpumem = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env, timeout: testTime(120_000) });
const dir = mkdtempSync(join(tmpdir(), 'gpumem-activations-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tiny = ['--train-subset', '256', '--test-subset', '64', '--hidden', '32', '--hidden-layers', '4'];

describe('activation flags: bad values exit 2 naming the flag', () => {
  const cases: Array<[string[], RegExp]> = [
    [['--checkpoint', '-1'], /'--checkpoint' must be at least 0 \(received -1\)/],
    [['--checkpoint', '1.5'], /'--checkpoint' must be an integer \(received '1.5'\)/],
    [
      ['--checkpoint', '6', '--hidden-layers', '4'],
      /'--checkpoint' must be at most 5, the mlp's layers \(4 hidden and the output layer\) \(received 6\)/,
    ],
    [['--checkpoint'], /flag '--checkpoint' needs a value/],
    [['--nano-batches', '0'], /'--nano-batches' must be at least 1 \(received 0\)/],
    [['--nano-batches', 'two'], /'--nano-batches' must be an integer \(received 'two'\)/],
    [['--nano-batches', '65', '--batch', '64'], /'--nano-batches' must be at most the batch, 64 \(received 65\)/],
    [['--model', 'gcn', '--checkpoint', '2'], /'--checkpoint' applies to the mlp only \(received --model gcn\)/],
    [['--model', 'gcn', '--nano-batches', '2'], /'--nano-batches' applies to the mlp only/],
    [['--cuda-graph', '--nano-batches', '2'], /'--nano-batches' does not go with '--cuda-graph'/],
    [['--cuda-graph', '--layer-prefetch'], /'--layer-prefetch' does not go with '--cuda-graph'/],
  ];
  for (const command of ['train', 'compare']) {
    for (const [args, message] of cases) {
      it(`gpumem ${command} ${args.join(' ')}`, () => {
        const r = gpumem(command, ...(command === 'train' ? ['--allocator', 'host'] : ['--allocators', 'host']), ...args);
        expect(r.signal).toBeNull();
        expect(r.stderr).toMatch(message);
        expect(r.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
        expect(r.status).toBe(2);
        expect(r.stdout).not.toMatch(/epoch/); // nothing ran
      });
    }
  }

  it('--help of train and compare lists them', () => {
    for (const command of ['train', 'compare']) {
      const r = gpumem(command, '--help');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/--checkpoint N +mlp: activation checkpointing/);
      expect(r.stdout).toMatch(/--nano-batches N +mlp: run each batch as N slices/);
      expect(r.stdout).toMatch(/--layer-prefetch +trainer-inserted prefetch/);
    }
  });
});

describe('activation flags: they reach the training', () => {
  it('gpumem train runs with all three', () => {
    const json = join(dir, 'train.json');
    const r = gpumem(
      'train',
      '--allocator',
      'host',
      ...tiny,
      '--checkpoint',
      '2',
      '--nano-batches',
      '2',
      '--layer-prefetch',
      '--json',
      json,
    );
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.status).toBe(0);
    const result = JSON.parse(readFileSync(json, 'utf8')) as { epochs: Array<{ losses: number[] }> };
    expect(result.epochs[0]!.losses).toHaveLength(4);
  });

  it(
    'gpumem compare hands them to each run’s child process (more allocations per step: recomputed inputs, nano-batches)',
    () => {
      const events = (...flags: string[]) => {
        const json = join(dir, `compare-${flags.join('') || 'plain'}.json`);
        const r = gpumem('compare', '--allocators', 'host', ...tiny, '--epochs', '1', '--json', json, ...flags);
        expect(r.status, r.stderr).toBe(0);
        const result = JSON.parse(readFileSync(json, 'utf8')) as CompareResult;
        expect(result.runs[0]!.status).toBe('ok');
        return { recorded: result.runs[0]!.eventsRecorded, title: result.workload.title };
      };
      const plain = events();
      const checkpointed = events('--checkpoint', '2');
      const sliced = events('--nano-batches', '4');
      // 5 layers, checkpoint 2: layers 1 and 3's inputs are recomputed, one allocation and one free each a step
      expect(checkpointed.recorded - plain.recorded).toBe(4 * 4);
      expect(sliced.recorded).toBeGreaterThan(2 * plain.recorded);
      expect(checkpointed.title).toMatch(/checkpoint every 2 layers/);
      expect(sliced.title).toMatch(/4 nano-batches/);
    },
    testTime(180_000),
  );
});
