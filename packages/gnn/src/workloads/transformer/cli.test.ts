/**
 * `gpumem train` and `gpumem compare` with --model transformer, as a user runs them (the built CLI):
 * its flags in the help, a run, a comparison, and bad flags exit 2 naming them.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hasCudaDevice } from '@gpumem/allocator-core';
import { testTime } from '../../../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../../../../cli/dist/cli.js', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: testTime(120_000) });
/** Sizes the CPU kernels train in well under a second an epoch, GPU or not. */
const tiny = ['--vocab', '32', '--embed', '32', '--heads', '2', '--layers', '1', '--context', '32', '--min-len', '8', '--max-len', '32'];
const gpu = hasCudaDevice();

describe('gpumem train --model transformer', () => {
  it('lists its flags in the help', () => {
    const r = run('train', '--help');
    expect(r.status).toBe(0);
    for (const flag of ['vocab', 'embed', 'heads', 'layers', 'context', 'min-len', 'max-len', 'min-batch', 'max-batch', 'steps-per-epoch'])
      expect(r.stdout).toMatch(new RegExp(`--${flag} N +transformer: `));
    expect(r.stdout).toMatch(
      /--model mlp\|gcn\|transformer +the model \(default mlp where MNIST is installed, else gcn.*\): .*transformer, a GPT-style decoder/,
    );
  });

  it('trains with its flags and prints its table', () => {
    const r = run(
      'train',
      '--model',
      'transformer',
      '--allocator',
      'host',
      '--epochs',
      '2',
      '--steps-per-epoch',
      '5',
      ...tiny,
      '--json',
      '-',
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/transformer on markov, allocator 'host'/);
    expect(r.stderr).toMatch(/held-out acc/);
    const result = JSON.parse(r.stdout) as { model: string; epochs: { losses: number[]; evaluationLoss: number }[] };
    expect(result.model).toBe('transformer');
    expect(result.epochs.map((e) => e.losses.length)).toEqual([5, 5]);
    expect(result.epochs.every((e) => Number.isFinite(e.evaluationLoss))).toBe(true);
  });

  it.skipIf(gpu)(`without a GPU, trains a tiny transformer unless told its sizes${gpu ? ' [skipped: a GPU is here]' : ''}`, () => {
    const r = run('train', '--model', 'transformer', '--allocator', 'host', '--steps-per-epoch', '3');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/no CUDA device: the CPU kernels on a tiny transformer \(vocab 64, embed 64/);
  });

  it('compare runs it under each allocator', () => {
    const r = run(
      'compare',
      '--model',
      'transformer',
      '--allocators',
      'host,pool:upstream=host',
      '--epochs',
      '2',
      '--steps-per-epoch',
      '4',
      ...tiny,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^transformer on markov \(vocab 32, embed 32, 2 heads, 1 layers, length 8-32/m);
    expect(r.stdout).toMatch(/tokens\/s/);
    expect(r.stdout).toMatch(/^pool:upstream=host +ok/m);
  });

  const bad: Array<[string[], RegExp]> = [
    [['--model', 'transformer', '--embed', '30', '--heads', '4'], /'--embed' 30 must be a multiple of '--heads' 4/],
    [['--model', 'transformer', '--min-len', '200', '--max-len', '100'], /'--min-len' 200 must be at most '--max-len' 100/],
    [['--model', 'transformer', '--max-len', '2048'], /'--max-len' 2048 must be at most '--context' 1024/],
    [['--model', 'transformer', '--hidden', '64'], /'--hidden' does not apply to the transformer: its width is '--embed'/],
    [['--model', 'transformer', '--cuda-graph'], /'--cuda-graph' does not apply to the transformer/],
    [['--model', 'transformer', '--devices', '2'], /'--devices' 2: the transformer trains on one device only/],
    [['--model', 'transformer', '--layers', '0'], /'--layers' must be at least 1 \(received 0\)/],
    [['--model', 'mlp', '--max-len', '64'], /'--max-len' applies to the transformer only \(received --model mlp\)/],
  ];
  for (const [args, message] of bad) {
    it(`exits 2 naming the flag: gpumem train ${args.join(' ')}`, () => {
      const r = run('train', '--allocator', 'host', ...args);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.status).toBe(2);
    });
  }
});
