/**
 * Absurd training sizes on the command line: exit 2 at once with a message naming the flag or the
 * memory estimate, never a crash, a stack trace or a long wait.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTime } from '../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

describe('gpumem train: absurd sizes exit 2 at once, naming the flag or the estimate', () => {
  const run = (...args: string[]) => spawnSync(process.execPath, [cli, 'train', ...args], { encoding: 'utf8', timeout: testTime(60_000) });
  const cases: Array<[string[], RegExp]> = [
    [['--model', 'gcn', '--nodes', '1e12'], /'--nodes' must be at most 2147483647 \(received 1e12\)/],
    [
      ['--model', 'gcn', '--nodes', '2000000000'],
      /nodes x edgesPerNode <= 2,147,483,647 \(edge indices are 32-bit\) but received 2,000,000,000 x 10 = 20,000,000,000/,
    ],
    [
      ['--model', 'gcn', '--hidden', '65536', '--nodes', '100000000'],
      /hidden 65,536.* needs at least [\d.]+ TiB .* but (the host|cuda:0) has [\d.]+ GiB in all: use fewer nodes, features or hidden units/,
    ],
    [['--model', 'gcn', '--dataset', 'sbm', '--nodes', '50000000'], /at most 2,000,000 nodes for the sbm dataset/],
    [['--batch', '0'], /'--batch' must be at least 1 \(received 0\)/],
    [['--epochs', '-1'], /'--epochs' must be at least 1 \(received -1\)/],
    [['--features', 'abc'], /'--features' must be an integer \(received 'abc'\)/],
    [['--nodes', '1.5'], /'--nodes' must be an integer \(received '1.5'\)/],
    [['--hidden', '0'], /'--hidden' must be at least 1 \(received 0\)/],
  ];
  for (const [args, message] of cases) {
    it(`gpumem train ${args.join(' ')}`, () => {
      const r = run('--allocator', 'host', ...args);
      expect(r.signal).toBeNull(); // neither killed by the timeout nor crashed
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
      expect(r.status).toBe(2);
    });
  }
});
