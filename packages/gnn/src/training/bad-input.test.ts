/**
 * Bad input beyond the allocator API: graphs with ids outside the graph, NaN features, zero nodes;
 * training sizes past the kernels' 32-bit indices or the machine's memory (bad sizes on the command
 * line: packages/cli/src/train-sizes.test.ts). Each is a
 * typed error with a message naming the input, raised before anything large is allocated (checked
 * with the allocator's statistics), never a crash or a hang. docs/reliability.md lists them.
 */
import { totalmem } from 'node:os';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { Runtime } from '../framework/runtime.js';
import { checkEdgeListGraph, graphFromEdges, sbmGraph, randomGraph, type EdgeListGraph } from '../datasets/graphs.js';
import { checkTrainingFits, estimateTrainingMemory, InsufficientMemoryError, trainingShape } from './memory-estimate.js';
import { train } from './train.js';

/** A 4-node graph: a path 0 -> 1 -> 2 -> 3 with a self loop on each node. */
function small(overrides: Partial<EdgeListGraph> = {}): EdgeListGraph {
  return {
    nodes: 4,
    src: [0, 1, 2, 0, 1, 2, 3],
    dst: [1, 2, 3, 0, 1, 2, 3],
    features: new Float32Array(8).fill(0.5),
    numFeatures: 2,
    labels: [0, 1, 0, 1],
    numClasses: 2,
    ...overrides,
  };
}

describe('graphs: ids, features and sizes checked before the device sees them', () => {
  let allocator: HostAllocator;
  let rt: Runtime;
  beforeEach(() => {
    allocator = new HostAllocator();
    rt = new Runtime(allocator);
  });
  afterEach(() => {
    rt.dispose();
    allocator.dispose();
  });

  /** Expects `fn` to throw `pattern` (RangeError unless told) with nothing allocated. */
  const rejects = (fn: () => unknown, pattern: RegExp, type: new (...a: never[]) => Error = RangeError) => {
    expect(fn).toThrow(type);
    expect(fn).toThrow(pattern);
    expect(allocator.stats().allocCount).toBe(0);
  };

  it('a well-formed edge list builds both CSR forms', () => {
    const g = graphFromEdges(rt, small({ normalisation: 'none' }));
    expect([g.numNodes, g.numEdges, g.trainNodes]).toEqual([4, 7, 4]);
    expect([...(g.csr.rowptr.toArray() as Int32Array)]).toEqual([0, 1, 3, 5, 7]); // in-edges per target
    expect([...(g.csrT.rowptr.toArray() as Int32Array)]).toEqual([0, 2, 4, 6, 7]); // out-edges per source
    g.dispose();
    expect(allocator.stats().allocatedBytes).toBe(0);
  });

  it('out-of-range, negative, fractional and NaN node ids name the edge', () => {
    rejects(
      () => graphFromEdges(rt, small({ dst: [1, 2, 4, 0, 1, 2, 3] })),
      /node ids in \[0, 4\) in dst but dst\[2\] is 4 \(edge 2: 2 -> 4\)/,
    );
    rejects(() => graphFromEdges(rt, small({ src: [0, -1, 2, 0, 1, 2, 3] })), /src\[1\] is -1 \(edge 1: -1 -> 2\)/);
    rejects(() => graphFromEdges(rt, small({ src: [0, 1, 2.5, 0, 1, 2, 3] })), /src\[2\] is 2.5/);
    rejects(() => graphFromEdges(rt, small({ src: [0, 1, 2, 0, 1, 2, Number.NaN] })), /src\[6\] is NaN/);
    rejects(() => graphFromEdges(rt, small({ dst: Int32Array.from([1, 2, 3, 0, 1, 2, 2 ** 31 - 1]) })), /dst\[6\] is 2147483647/);
    rejects(() => graphFromEdges(rt, small({ dst: [1, 2] })), /src and dst of the same length but received 7 and 2/);
  });

  it('NaN or infinite features, bad labels, zero nodes, wrong lengths', () => {
    const nan = new Float32Array(8).fill(1);
    nan[5] = Number.NaN;
    rejects(() => graphFromEdges(rt, small({ features: nan })), /features\[5\] \(node 2, feature 1\) is NaN/);
    rejects(
      () => graphFromEdges(rt, small({ features: [1, 1, 1, Infinity, 1, 1, 1, 1] })),
      /features\[3\] \(node 1, feature 1\) is Infinity/,
    );
    rejects(
      () => graphFromEdges(rt, small({ features: new Float32Array(6) })),
      /nodes x numFeatures = 8 values in features but received 6/,
    );
    rejects(() => graphFromEdges(rt, small({ labels: [0, 1, 2, 0] })), /labels in \[0, 2\) but labels\[2\] \(node 2\) is 2/);
    rejects(() => graphFromEdges(rt, small({ labels: [0, 1] })), /one label per node \(4\) but received 2/);
    rejects(
      () => graphFromEdges(rt, small({ nodes: 0, features: [], labels: [] })),
      /Expected an integer in \[1, 2,147,483,647\] for nodes but received 0/,
    );
    rejects(() => graphFromEdges(rt, small({ trainNodes: 5 })), /for trainNodes but received 5/);
    rejects(() => graphFromEdges(rt, small({ src: null as never })), /array or typed array for src/, TypeError);
    rejects(() => checkEdgeListGraph(undefined as never), /graph object/, TypeError);
  });

  it('randomGraph and sbmGraph check their sizes before allocating', () => {
    rejects(() => randomGraph(rt, { nodes: 0 }), /for nodes but received 0/);
    rejects(() => randomGraph(rt, { nodes: -5 }), /for nodes but received -5/);
    rejects(() => randomGraph(rt, { nodes: Number.NaN }), /for nodes but received NaN/);
    rejects(() => randomGraph(rt, { nodes: 1e12 }), /for nodes but received 1000000000000/);
    rejects(() => randomGraph(rt, { nodes: 300_000_000 }), /nodes x edgesPerNode <= 2,147,483,647 .* 300,000,000 x 10 = 3,000,000,000/);
    rejects(() => randomGraph(rt, { nodes: 100, features: 0 }), /for features but received 0/);
    rejects(() => sbmGraph(rt, { nodes: 3_000_000 }), /Expected an integer in \[1, 2,000,000\] for nodes but received 3000000/);
    rejects(() => sbmGraph(rt, { nodes: 100, trainFraction: 2 }), /for trainFraction but received 2/);
    rejects(() => sbmGraph(rt, { nodes: 100, degreeIn: Number.NaN }), /for degreeIn but received NaN/);
  });
});

describe('training sizes: refused with the estimate before anything is allocated', () => {
  it("the estimate follows the models' memory plans (bench/RESULTS.md figures)", () => {
    const gcn = estimateTrainingMemory(trainingShape({ model: 'gcn', nodes: 2_000_000 }));
    expect(gcn.total / 1e9).toBeGreaterThan(5.3);
    expect(gcn.total / 1e9).toBeLessThanOrEqual(5.54); // measured peak allocated: 5.54 GB
    const scatter = estimateTrainingMemory(trainingShape({ model: 'gcn', nodes: 2_000_000, aggregation: 'scatter' }));
    expect(scatter.total / 1e9).toBeGreaterThan(25);
    expect(scatter.total / 1e9).toBeLessThanOrEqual(26.19); // measured: 24.39 GiB = 26.19 GB
    const mlp = estimateTrainingMemory(trainingShape({ model: 'mlp', hidden: 65536, hiddenLayers: 1 }));
    expect(mlp.parts.parameters).toBe(2 * 4 * (784 * 65536 + 65536 + 65536 * 10 + 10));
    // `hidden` is the width of each of the (default 4) hidden layers, as on the command line
    const wide = estimateTrainingMemory(trainingShape({ model: 'mlp', hidden: 65536 }));
    expect(wide.total).toBeGreaterThan(100e9); // 12.9 G parameters, with gradients
    expect(trainingShape({ model: 'mlp', hidden: 65536 })).toEqual(trainingShape({ model: 'mlp', hidden: [65536, 65536, 65536, 65536] }));
    expect(() => trainingShape({ model: 'mlp', hidden: [8, 8], hiddenLayers: 3 })).toThrow(/hiddenLayers to match the 2 widths/);
  });

  it('sizes past the 32-bit indices are RangeErrors naming them', () => {
    expect(() => trainingShape({ model: 'gcn', nodes: 2_000_000_000 })).toThrow(
      /nodes x edgesPerNode <= 2,147,483,647 .* = 20,000,000,000/,
    );
    expect(() => trainingShape({ model: 'gcn', nodes: 3e9 })).toThrow(/at most 2,147,483,647 for nodes/);
    expect(() => trainingShape({ model: 'gcn', dataset: 'sbm', nodes: 5_000_000 })).toThrow(/use the random dataset for larger graphs/);
    expect(() => trainingShape({ model: 'mlp', batchSize: 0 })).toThrow(/positive integer for batchSize but received 0/);
  });

  it('train() refuses a graph that cannot fit, naming the estimate and the memory, and allocates nothing', () => {
    const allocator = new HostAllocator();
    try {
      let error: unknown;
      try {
        train({ model: 'gcn', allocator, nodes: 100_000_000, hidden: 65536, epochs: 1 });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InsufficientMemoryError);
      expect(error).toBeInstanceOf(RangeError);
      const e = error as InsufficientMemoryError;
      expect(e.availableBytes).toBe(totalmem());
      expect(e.where).toBe('host');
      expect(e.estimate.total).toBeGreaterThan(5e13); // two 1e8 x 65536 activations: 52 TB
      expect(e.message).toMatch(
        /^gcn on the random graph with 100,000,000 nodes, 1,000,000,000 edges, 128 features, hidden 65,536, 10 classes \(spmm, A·x once\) needs at least [\d.]+ TiB \(graph [\d.]+ GiB, activations [\d.]+ TiB, parameters [\d.]+ MiB\) but the host has [\d.]+ GiB in all/,
      );
      expect(allocator.stats().allocCount).toBe(0);
      // a configuration that fits is accepted, and the estimate returned
      expect(checkTrainingFits({ model: 'gcn', nodes: 1000 }, allocator).total).toBeGreaterThan(0);
    } finally {
      allocator.dispose();
    }
  });
});
