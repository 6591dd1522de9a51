/**
 * The transformer's schedule and tokens: deterministic from the seed, inside their bounds, the
 * generator's first values fixed, and bench/baselines/transformer_data.py (the PyTorch baseline's
 * data, run here without torch) generating exactly the same shapes and tokens.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { baseShapes, epochOrder, epochShapes, heldOutTokens, MarkovChain, Rng, stepTokens } from './schedule.js';

const bounds = { minLen: 3, maxLen: 9, minBatch: 1, maxBatch: 4, stepsPerEpoch: 7 };

describe('the transformer schedule', () => {
  it("the generator's first values (the same constants are in the Python baseline)", () => {
    const rng = new Rng(0, 0);
    expect([rng.next(), rng.next(), rng.next(), rng.next()]).toEqual([959515257, 3521021369, 844782002, 547131984]);
    const other = new Rng(1, 0);
    expect(other.next()).not.toBe(959515257);
    expect(() => new Rng(-1, 0)).toThrow(RangeError);
    expect(() => new Rng(0, 2 ** 32)).toThrow(RangeError);
  });

  it('below(n) is uniform enough over [0, n)', () => {
    const rng = new Rng(5, 9);
    const counts = new Array<number>(10).fill(0);
    for (let i = 0; i < 100_000; i++) counts[rng.below(10)]!++;
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });

  it('draws every shape inside its bounds, the same for the same seed, shuffled per epoch', () => {
    const shapes = baseShapes(bounds, 3);
    expect(shapes).toHaveLength(7);
    for (const s of shapes) {
      expect(s.length).toBeGreaterThanOrEqual(3);
      expect(s.length).toBeLessThanOrEqual(9);
      expect(s.batch).toBeGreaterThanOrEqual(1);
      expect(s.batch).toBeLessThanOrEqual(4);
    }
    expect(baseShapes(bounds, 3)).toEqual(shapes);
    expect(baseShapes(bounds, 4)).not.toEqual(shapes);
    const wide = baseShapes({ minLen: 64, maxLen: 1024, minBatch: 4, maxBatch: 12, stepsPerEpoch: 200 }, 0);
    expect(new Set(wide.map((s) => s.length)).size).toBeGreaterThan(150); // lengths really vary
    expect(new Set(wide.map((s) => s.batch)).size).toBe(9); // every batch from 4 to 12
    const order0 = epochOrder(7, 3, 0);
    expect([...order0].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(epochOrder(7, 3, 0)).toEqual(order0);
    expect(epochOrder(7, 3, 1)).not.toEqual(order0);
    const sorted = (list: { length: number; batch: number }[]) => list.map((s) => `${s.length}x${s.batch}`).sort();
    expect(sorted(epochShapes(bounds, 3, 1))).toEqual(sorted(shapes)); // the same batches every epoch
  });

  it('tokens come from a sparse order-2 chain: inside the vocabulary, at most 8 successors per pair, targets the inputs shifted', () => {
    const chain = new MarkovChain(32, 1);
    const { inputs, targets } = stepTokens(chain, 1, 0, { batch: 3, length: 400 });
    expect(inputs).toHaveLength(1200);
    const successors = new Map<number, Set<number>>();
    const byB = new Map<number, Set<number>>();
    for (let s = 0; s < 3; s++) {
      for (let t = 0; t < 400; t++) {
        const i = s * 400 + t;
        expect(inputs[i]).toBeGreaterThanOrEqual(0);
        expect(inputs[i]).toBeLessThan(32);
        if (t + 1 < 400) expect(inputs[i + 1]).toBe(targets[i]);
        if (t > 0) {
          const key = inputs[i - 1]! * 32 + inputs[i]!;
          successors.set(key, (successors.get(key) ?? new Set()).add(targets[i]!));
          byB.set(inputs[i]!, (byB.get(inputs[i]!) ?? new Set()).add(targets[i]!));
        }
      }
    }
    for (const next of successors.values()) expect(next.size).toBeLessThanOrEqual(8);
    for (const next of byB.values()) expect(next.size).toBeLessThanOrEqual(8);
    expect(stepTokens(chain, 1, 0, { batch: 3, length: 400 })).toEqual({ inputs, targets });
    expect(stepTokens(chain, 1, 1, { batch: 3, length: 400 }).inputs).not.toEqual(inputs);
    expect(heldOutTokens(chain, 1, { batch: 2, length: 50 }).inputs).not.toEqual(inputs.subarray(0, 100));
    expect(() => new MarkovChain(1, 0)).toThrow(RangeError);
  });
});

const python = spawnSync('python3', ['--version'], { encoding: 'utf8' });
const pythonMissing = python.error || python.status !== 0 ? 'python3 is not on PATH' : '';

describe.skipIf(pythonMissing !== '')(
  `the Python baseline's data generates the same shapes and tokens${pythonMissing ? ` [skipped: ${pythonMissing}]` : ''}`,
  () => {
    it('for two seeds: shapes, every step of two epochs, the held-out batch', () => {
      const script = fileURLToPath(new URL('../../../../../bench/baselines/transformer_data.py', import.meta.url));
      for (const seed of [0, 7]) {
        const vocab = 40;
        const run = spawnSync(
          'python3',
          [
            script,
            '--seed',
            String(seed),
            '--vocab',
            String(vocab),
            '--min-len',
            '3',
            '--max-len',
            '9',
            '--min-batch',
            '1',
            '--max-batch',
            '4',
            '--steps-per-epoch',
            '7',
            '--epochs',
            '2',
          ],
          { encoding: 'utf8' },
        );
        expect(run.status, run.stderr).toBe(0);
        const out = JSON.parse(run.stdout) as {
          first: number[];
          shapes: [number, number][];
          steps: { epoch: number; step: number; length: number; batch: number; inputs: number[]; targets: number[] }[];
          held_out: { inputs: number[]; targets: number[] };
        };
        const rng = new Rng(seed, 0);
        expect(out.first).toEqual([rng.next(), rng.next(), rng.next(), rng.next()]);
        expect(out.shapes).toEqual(baseShapes(bounds, seed).map((s) => [s.length, s.batch]));
        const chain = new MarkovChain(vocab, seed);
        expect(out.steps).toHaveLength(14);
        for (const step of out.steps) {
          const shape = epochShapes(bounds, seed, step.epoch)[step.step]!;
          expect([step.length, step.batch]).toEqual([shape.length, shape.batch]);
          const tokens = stepTokens(chain, seed, step.epoch * 7 + step.step, shape);
          expect(step.inputs).toEqual([...tokens.inputs]);
          expect(step.targets).toEqual([...tokens.targets]);
        }
        const held = heldOutTokens(chain, seed, { batch: 1, length: 9 });
        expect(out.held_out).toEqual({ inputs: [...held.inputs], targets: [...held.targets] });
      }
    });
  },
);
