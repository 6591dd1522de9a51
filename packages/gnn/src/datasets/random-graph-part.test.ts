/**
 * The random graph drawn by rows (randomGraphPart) is, to the bit, the part that partitionGraph cuts
 * from the whole graph: both CSR forms, the labels and the remote rows, for every rank of 1, 2 and
 * 3. The exchange is not under test here (a communicator that moves nothing): the training tests
 * over real ranks cover it.
 */
import { describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import type { Communicator } from '@gpumem/distributed';
import { Runtime } from '../framework/runtime.js';
import { randomGraph } from './graphs.js';
import { partitionGraph, type GraphPart } from './graph-part.js';
import { randomGraphPart } from './random-graph-part.js';

function still(rank: number, size: number): Communicator {
  const none = () => undefined;
  return { backend: 'host', rank, size, capturable: false, allReduce: none, allGather: none, broadcast: none, abort: none, dispose: none };
}

function contents(part: GraphPart) {
  const csr = (a: GraphPart['csr']) => [
    Array.from(a.rowptr.toArray()),
    Array.from(a.col.toArray()).slice(0, a.nnz),
    Array.from(a.val.toArray()).slice(0, a.nnz),
  ];
  return {
    block: [part.start, part.count, part.stride],
    csr: csr(part.csr),
    csrT: csr(part.csrT),
    labels: Array.from(part.labels.toArray()),
    remote: part.remoteRows,
  };
}

describe('the random graph drawn by rows', () => {
  it('equals the whole graph cut by rows, for every rank of 1, 2 and 3', () => {
    const allocator = new HostAllocator();
    const rt = new Runtime(allocator);
    const options = { nodes: 1001, edgesPerNode: 7, features: 5, classes: 4, seed: 3 };
    try {
      for (const size of [1, 2, 3]) {
        for (let rank = 0; rank < size; rank++) {
          const cut = partitionGraph(rt, randomGraph(rt, options), still(rank, size));
          const drawn = randomGraphPart(rt, options, still(rank, size));
          expect(contents(drawn)).toEqual(contents(cut));
          cut.dispose();
          drawn.dispose();
        }
      }
      expect(rt.liveTensors).toBe(0);
    } finally {
      rt.dispose();
      allocator.dispose();
    }
  });

  it('refuses what it does not draw: bf16 features, normalised edges', () => {
    const allocator = new HostAllocator();
    const rt = new Runtime(allocator);
    try {
      expect(() => randomGraphPart(rt, { nodes: 100, featureDtype: 'bf16' }, still(0, 2))).toThrow(/f32 features/);
      expect(() => randomGraphPart(rt, { nodes: 100, normalisation: 'sym' }, still(0, 2))).toThrow(/normalisation 'none'/);
      expect(() => randomGraphPart(rt, { nodes: 3 }, still(3, 4))).toThrow(/at least one node per rank/);
    } finally {
      rt.dispose();
      allocator.dispose();
    }
  });
});
