/**
 * bench/baselines/transformer_torch.py, the PyTorch baseline, run on the CPU where torch is
 * installed: it trains on the schedule gpumem trains on, its loss falls as gpumem's does, and it
 * prints the JSON lines `gpumem compare --baseline` reads. Skipped, saying why, without torch.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { train } from '../../training/train.js';
import { epochShapes } from './schedule.js';
import { testTime } from '../../../../../tests/time-budget.js';

const script = fileURLToPath(new URL('../../../../../bench/baselines/transformer_torch.py', import.meta.url));
const probe = spawnSync('python3', ['-c', 'import torch'], { encoding: 'utf8' });
const noTorch = probe.error ? 'python3 is not on PATH' : probe.status !== 0 ? 'python3 cannot import torch' : '';

const sizes = {
  vocab: 32,
  embed: 32,
  heads: 2,
  layers: 1,
  context: 32,
  minLen: 8,
  maxLen: 32,
  minBatch: 2,
  maxBatch: 6,
  stepsPerEpoch: 12,
};
const flags = Object.entries(sizes).flatMap(([k, v]) => [`--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, String(v)]);

describe.skipIf(noTorch !== '')(`the PyTorch baseline of the transformer${noTorch ? ` [skipped: ${noTorch}]` : ''}`, () => {
  it('trains on the same shapes as gpumem, its loss falls alike, and prints per-epoch JSON lines and a summary', () => {
    const r = spawnSync('python3', [script, '--device', 'cpu', '--epochs', '3', '--seed', '2', '--lr', '0.01', ...flags], {
      encoding: 'utf8',
      timeout: testTime(300_000),
    });
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(4);
    const epochs = lines.slice(0, 3) as Array<{
      peer: string;
      epoch: number;
      epoch_ms: number;
      loss: number;
      losses: number[];
      shapes: number[][];
    }>;
    const bounds = { ...sizes };
    epochs.forEach((e, i) => {
      expect(e.peer).toBe('torch-eager');
      expect(e.epoch).toBe(i + 1);
      expect(e.epoch_ms).toBeGreaterThan(0);
      expect(e.losses).toHaveLength(12);
      expect(e.shapes).toEqual(epochShapes(bounds, 2, i).map((s) => [s.length, s.batch]));
    });
    expect(lines[3]).toMatchObject({ peer: 'torch-eager', summary: true, mode: 'eager' });
    const ours = train({ model: 'transformer', allocator: 'host', epochs: 3, seed: 2, lr: 0.01, ...sizes });
    expect(epochs[2]!.loss).toBeLessThan(epochs[0]!.loss);
    // different initial values (each framework's generator), the same model and data: the same loss within a tenth
    for (let i = 0; i < 3; i++) expect(Math.abs(epochs[i]!.loss - ours.epochs[i]!.loss)).toBeLessThan(0.1 * ours.epochs[i]!.loss);
  });
});
