/**
 * Where the flags of gpumem train live: each workload declares the flags of its own options
 * (Workload.flags), and the command line declares only the ones workloads share.
 */
import { describe, expect, it } from 'vitest';
import { getWorkload, listWorkloads } from '@gpumem/gnn';
import { commonTrainFlags, trainFlags } from './train-options.js';

const ownFlags: Record<string, string[]> = {
  mlp: ['hidden-layers', 'batch', 'cuda-graph', 'checkpoint', 'nano-batches', 'train-subset', 'test-subset'],
  gcn: ['nodes', 'edges-per-node', 'features', 'classes', 'aggregation', 'row-blocks', 'feature-dtype'],
};

describe('workload flags', () => {
  for (const [model, flags] of Object.entries(ownFlags)) {
    it(`the ${model}'s own flags are declared by the ${model}, not by the command line`, () => {
      const declared = getWorkload(model).flags ?? {};
      for (const flag of flags) {
        expect(declared, flag).toHaveProperty([flag]);
        expect(commonTrainFlags, flag).not.toHaveProperty([flag]);
        const { option: _option, ...spec } = declared[flag]!;
        expect(trainFlags[flag], flag).toEqual({ ...spec, help: `${model}: ${spec.help}` });
      }
    });
  }

  it("--batch names the option it sets (the mlp's batchSize)", () => {
    expect(getWorkload('mlp').flags?.batch?.option).toBe('batchSize');
  });

  it('the shared flags stay with the command line, and no workload declares them', () => {
    for (const flag of ['model', 'dataset', 'hidden', 'epochs', 'lr', 'seed', 'layer-prefetch', 'devices']) {
      expect(commonTrainFlags, flag).toHaveProperty([flag]);
      for (const w of listWorkloads()) expect(w.flags ?? {}, `${w.name} --${flag}`).not.toHaveProperty([flag]);
    }
  });
});
