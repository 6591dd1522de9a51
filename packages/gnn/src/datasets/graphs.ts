/**
 * Graphs for the GCN: the random graph, generated on the device (N nodes, K·N random
 * directed edges, random features and labels), and a stochastic block model whose labels can be
 * learnt. Both end as CSR matrices of the aggregation (rows: target nodes) and of its transpose.
 * @module
 */
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';

/** Largest index a CSR or edge list can hold: they are 32-bit. */
export const maxIndex = 2 ** 31 - 1;
/** Largest SBM the host-side generator builds (its edge lists are JavaScript arrays). */
export const maxSbmNodes = 2_000_000;

function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** An integer in [min, max]; RangeError naming `name` otherwise. */
function checkInt(value: unknown, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in [${min}, ${count(max)}]`;
    throw new RangeError(`Expected ${range} for ${name} but received ${String(value)}`);
  }
  return value;
}

/** A finite number in [min, max]. */
function checkNumber(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new RangeError(`Expected a number in [${min}, ${max}] for ${name} but received ${String(value)}`);
  }
  return value;
}

/** A CSR matrix: rowptr i32[N+1], col i32[nnz], val f32[nnz]. */
export interface Csr {
  rowptr: Tensor;
  col: Tensor;
  val: Tensor;
  nnz: number;
}

export interface Graph {
  numNodes: number;
  numEdges: number;
  numFeatures: number;
  numClasses: number;
  features: Tensor; // [N, F]
  labels: Tensor; // i32 [N]
  /** Nodes 0 .. trainNodes-1 are the training mask. */
  trainNodes: number;
  /**
   * Edge lists, for the scatter aggregation: messages flow src -> dst with weight. Freed by
   * dropEdgeLists() where only the CSR forms are needed.
   */
  src: Tensor; // i32 [E]
  dst: Tensor; // i32 [E]
  weight: Tensor; // f32 [E], the normalisation of each edge
  /** out = A · h aggregates at targets (rows = dst); its transpose carries gradients back. */
  csr: Csr;
  csrT: Csr;
  /** Frees the edge lists (src, dst, weight); the CSR forms stay. */
  dropEdgeLists(): void;
  /** Frees every tensor of the graph. */
  dispose(): void;
}

export type Normalisation = 'none' | 'sym';

/** Builds both CSR forms and edge weights from edge lists on the device (or host). */
function finishGraph(
  rt: Runtime,
  base: Omit<Graph, 'csr' | 'csrT' | 'weight' | 'dispose' | 'dropEdgeLists'>,
  normalisation: Normalisation,
): Graph {
  const { numNodes: n, numEdges: e } = base;
  const ops = rt.ops;
  const build = (rows: Tensor, cols: Tensor): Csr => {
    const [rowptr, col, val] = rt.tagged(
      'graph',
      () => [rt.keep(rt.empty([n + 1], 'i32')), rt.keep(rt.empty([e], 'i32')), rt.keep(rt.empty([e]))] as const,
    );
    rt.scope(() => {
      const tempBytes = ops.csrBuildTempBytes(rt.onDevice, e, n);
      const temp = rt.empty([Math.max(tempBytes, 1)], 'u8');
      ops.csrBuild(rt.onDevice, rt.s, rows.ptr, cols.ptr, e, n, rowptr.ptr, col.ptr, temp.ptr, tempBytes);
    });
    return { rowptr, col, val, nnz: e };
  };
  const csr = build(base.dst, base.src);
  const csrT = build(base.src, base.dst);
  const weight = rt.tagged('graph', () => rt.keep(rt.empty([e])));
  if (normalisation === 'none') {
    ops.fillF32(rt.onDevice, rt.s, csr.val.ptr, e, 1);
    ops.fillF32(rt.onDevice, rt.s, csrT.val.ptr, e, 1);
    ops.fillF32(rt.onDevice, rt.s, weight.ptr, e, 1);
  } else {
    rt.scope(() => {
      // GCN's symmetric normalisation with in-degrees (counted at targets, self loops included):
      // w(src -> dst) = 1 / sqrt(deg[dst] · deg[src]).
      const deg = rt.empty([n]);
      ops.rowDegrees(rt.onDevice, rt.s, csr.rowptr.ptr, n, deg.ptr);
      ops.edgeNorm(rt.onDevice, rt.s, csr.rowptr.ptr, csr.col.ptr, n, deg.ptr, 0, csr.val.ptr);
      ops.edgeNorm(rt.onDevice, rt.s, csrT.rowptr.ptr, csrT.col.ptr, n, deg.ptr, 0, csrT.val.ptr);
      ops.edgeNormList(rt.onDevice, rt.s, base.src.ptr, base.dst.ptr, deg.ptr, e, 0, weight.ptr);
    });
  }
  const graph: Graph = {
    ...base,
    csr,
    csrT,
    weight,
    dropEdgeLists() {
      for (const t of [base.src, base.dst, weight]) t.dispose();
    },
    dispose() {
      for (const t of [
        graph.features,
        graph.labels,
        base.src,
        base.dst,
        weight,
        csr.rowptr,
        csr.col,
        csr.val,
        csrT.rowptr,
        csrT.col,
        csrT.val,
      ]) {
        t.dispose();
      }
    },
  };
  return graph;
}

export interface RandomGraphOptions {
  nodes: number;
  edgesPerNode?: number; // default 10
  features?: number; // default 128
  classes?: number; // default 10
  seed?: number;
  normalisation?: Normalisation; // default 'none': gcn-seed sums messages as index_add does
  /** How the features are stored: 'f32' (default) or 'bf16' (the same values rounded to bf16). */
  featureDtype?: FeatureDtype;
}

export type FeatureDtype = 'f32' | 'bf16';

/** Rows of features drawn per chunk when they are stored as bf16 (drawn in f32, then rounded). */
const bf16Chunk = 1 << 24;

/**
 * The random graph's features, N x F standard normal values drawn on the device (a counter-based
 * generator, so drawing them in chunks gives the same values), stored as f32 or rounded to bf16.
 */
export function randomGraphFeatures(rt: Runtime, n: number, f: number, seed: number, dtype: FeatureDtype, firstRow = 0): Tensor {
  const features = rt.keep(rt.empty([n, f], dtype));
  if (dtype === 'f32') {
    rt.ops.randomNormal(rt.onDevice, rt.s, features.ptr, n * f, seed, firstRow * f);
    return features;
  }
  rt.tagged('setup', () =>
    rt.scope(() => {
      const total = n * f;
      const chunk = rt.empty([Math.min(bf16Chunk, total)]);
      for (let at = 0; at < total; at += bf16Chunk) {
        const count = Math.min(bf16Chunk, total - at);
        rt.ops.randomNormal(rt.onDevice, rt.s, chunk.ptr, count, seed, firstRow * f + at);
        rt.ops.f32ToBf16(rt.onDevice, rt.s, chunk.ptr, features.ptr + 2 * at, count);
      }
    }),
  );
  return features;
}

/** f32 features rounded to bf16 in a new tensor; the f32 tensor is freed. */
export function featuresToBf16(rt: Runtime, features: Tensor): Tensor {
  if (features.dtype === 'bf16') return features;
  const out = rt.tagged('features', () => rt.keep(rt.empty(features.shape, 'bf16')));
  rt.ops.f32ToBf16(rt.onDevice, rt.s, features.ptr, out.ptr, features.size);
  features.dispose();
  return out;
}

/**
 * The random graph's sizes from its options, checked: N nodes, K edges per node, F features, C
 * classes, the seed and E = N·K edges (edge i runs from randomInts(seed, i) to randomInts(seed, E + i),
 * both modulo N; node i's features are randomNormal(seed + 1) at i·F.., its label randomInts(seed + 2, i)).
 */
export function randomGraphShape(options: RandomGraphOptions): {
  n: number;
  k: number;
  f: number;
  c: number;
  seed: number;
  e: number;
  dtype: FeatureDtype;
  trainNodes: number;
} {
  const n = checkInt(options.nodes, 'nodes', 1, maxIndex);
  const k = checkInt(options.edgesPerNode ?? 10, 'edgesPerNode', 1);
  const f = checkInt(options.features ?? 128, 'features', 1);
  const c = checkInt(options.classes ?? 10, 'classes', 1, maxIndex);
  const seed = checkInt(options.seed ?? 0, 'seed', 0);
  const e = n * k;
  if (e > maxIndex) {
    throw new RangeError(
      `Expected nodes x edgesPerNode <= ${count(maxIndex)} (edge indices are 32-bit) but received ${count(n)} x ${k} = ${count(e)}`,
    );
  }
  const dtype = options.featureDtype ?? 'f32';
  if (dtype !== 'f32' && dtype !== 'bf16')
    throw new RangeError(`Expected 'f32' or 'bf16' for featureDtype but received '${String(dtype)}'`);
  return { n, k, f, c, seed, e, dtype, trainNodes: Math.max(1, Math.floor(n / 10)) };
}

/** The random graph, generated on the runtime's device. */
export function randomGraph(rt: Runtime, options: RandomGraphOptions): Graph {
  const { n, f, c, seed, e, dtype, trainNodes } = randomGraphShape(options);
  const ops = rt.ops;
  const [src, dst] = rt.tagged('graph', () => [rt.keep(rt.empty([e], 'i32')), rt.keep(rt.empty([e], 'i32'))] as const);
  ops.randomInts(rt.onDevice, rt.s, src.ptr, e, n, seed, 0);
  ops.randomInts(rt.onDevice, rt.s, dst.ptr, e, n, seed, e);
  const [features, labels] = rt.tagged(
    'features',
    () => [randomGraphFeatures(rt, n, f, seed + 1, dtype), rt.keep(rt.empty([n], 'i32'))] as const,
  );
  ops.randomInts(rt.onDevice, rt.s, labels.ptr, n, c, seed + 2, 0);
  return finishGraph(
    rt,
    { numNodes: n, numEdges: e, numFeatures: f, numClasses: c, features, labels, trainNodes, src, dst },
    options.normalisation ?? 'none',
  );
}

export interface SbmOptions {
  nodes: number;
  classes?: number; // default 4
  features?: number; // default 16
  /** Expected neighbours in the same block, and in other blocks. */
  degreeIn?: number; // default 8
  degreeOut?: number; // default 1
  /** Standard deviation of the feature noise around each class's mean. */
  noise?: number; // default 2
  seed?: number;
  /** Fraction of nodes in the training mask (a prefix; node order is shuffled). */
  trainFraction?: number; // default 0.3
}

/** xorshift128+ in 32-bit halves: a small seeded PRNG for host-side graph generation. */
function prng(seed: number): () => number {
  let a = (seed ^ 0x9e3779b9) >>> 0 || 1;
  let b = (seed * 2654435761) >>> 0 || 2;
  return () => {
    let t = a;
    const s = b;
    a = s;
    t ^= t << 11;
    t ^= t >>> 8;
    b = (t ^ s ^ (s >>> 19)) >>> 0;
    return b / 2 ** 32;
  };
}

/**
 * A stochastic block model: nodes in `classes` blocks, edges dense within blocks and sparse across
 * them, features a noisy class signal. Symmetric (both directions of every edge) with self loops
 * and GCN normalisation, so a GCN learns the labels well above chance.
 */
export function sbmGraph(rt: Runtime, options: SbmOptions): Graph {
  const n = checkInt(options.nodes, 'nodes', 1, maxSbmNodes);
  const c = checkInt(options.classes ?? 4, 'classes', 1, maxIndex);
  const f = checkInt(options.features ?? 16, 'features', 1);
  const degreeIn = checkNumber(options.degreeIn ?? 8, 'degreeIn', 0, 1000);
  const degreeOut = checkNumber(options.degreeOut ?? 1, 'degreeOut', 0, 1000);
  const noise = checkNumber(options.noise ?? 2, 'noise', 0, Number.MAX_VALUE);
  const trainFraction = checkNumber(options.trainFraction ?? 0.3, 'trainFraction', 0, 1);
  const rand = prng(checkInt(options.seed ?? 0, 'seed', 0));
  const labels = new Int32Array(n);
  for (let i = 0; i < n; i++) labels[i] = Math.floor(rand() * c);
  const byClass: number[][] = Array.from({ length: c }, () => []);
  labels.forEach((l, i) => {
    byClass[l]!.push(i);
  });
  const src: number[] = [];
  const dst: number[] = [];
  const edge = (u: number, v: number) => {
    src.push(u, v);
    dst.push(v, u);
  };
  for (let u = 0; u < n; u++) {
    const same = byClass[labels[u]!]!;
    for (let j = 0; j < degreeIn / 2; j++) edge(u, same[Math.floor(rand() * same.length)]!);
    for (let j = 0; j < degreeOut / 2; j++) edge(u, Math.floor(rand() * n));
    src.push(u);
    dst.push(u); // self loop
  }
  const means = Array.from({ length: c * f }, () => rand() * 2 - 1);
  const features = new Float32Array(n * f);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < f; j++) {
      const gauss = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
      features[i * f + j] = means[labels[i]! * f + j]! + noise * gauss;
    }
  }
  return graphFromEdges(rt, {
    nodes: n,
    src,
    dst,
    features,
    numFeatures: f,
    labels,
    numClasses: c,
    trainNodes: Math.max(1, Math.floor(n * trainFraction)),
    normalisation: 'sym',
  });
}

/** A graph given as edge lists and per-node data on the host. */
export interface EdgeListGraph {
  nodes: number;
  /** Edge e goes from node src[e] to node dst[e]; ids in [0, nodes). */
  src: ArrayLike<number>;
  dst: ArrayLike<number>;
  /** nodes x numFeatures, row-major; every value finite. */
  features: ArrayLike<number>;
  numFeatures: number;
  /** One class in [0, numClasses) per node. */
  labels: ArrayLike<number>;
  numClasses: number;
  /** Nodes 0 .. trainNodes-1 are the training mask (default: all). */
  trainNodes?: number;
  /** 'sym' (default): GCN's symmetric normalisation by in-degrees; 'none': every weight 1. */
  normalisation?: Normalisation;
}

/**
 * Checks a graph given as edge lists, before anything is allocated: RangeError (TypeError for a
 * wrong kind of value) naming the argument, the element and the edge or node, e.g.
 * `src[17] is 120 (edge 17: 120 -> 3)`.
 */
export function checkEdgeListGraph(g: EdgeListGraph): void {
  if (g === null || typeof g !== 'object') throw new TypeError(`Expected a graph object for graph but received ${String(g)}`);
  const n = checkInt(g.nodes, 'nodes', 1, maxIndex);
  const f = checkInt(g.numFeatures, 'numFeatures', 1);
  const c = checkInt(g.numClasses, 'numClasses', 1, maxIndex);
  for (const name of ['src', 'dst', 'features', 'labels'] as const) {
    const v = g[name];
    if (v === null || typeof v !== 'object' || typeof v.length !== 'number') {
      throw new TypeError(`Expected an array or typed array for ${name} but received ${v === null ? 'null' : typeof v}`);
    }
  }
  const { src, dst, features, labels } = g;
  if (src.length !== dst.length)
    throw new RangeError(`Expected src and dst of the same length but received ${count(src.length)} and ${count(dst.length)}`);
  if (src.length > maxIndex)
    throw new RangeError(`Expected at most ${count(maxIndex)} edges (edge indices are 32-bit) but received ${count(src.length)}`);
  for (let e = 0; e < src.length; e++) {
    const [u, v] = [src[e]!, dst[e]!];
    if (!(Number.isInteger(u) && u >= 0 && u < n) || !(Number.isInteger(v) && v >= 0 && v < n)) {
      const [name, bad] = !(Number.isInteger(u) && u >= 0 && u < n) ? ['src', u] : ['dst', v];
      throw new RangeError(
        `Expected node ids in [0, ${count(n)}) in ${name} but ${name}[${e}] is ${String(bad)} (edge ${e}: ${String(u)} -> ${String(v)})`,
      );
    }
  }
  if (features.length !== n * f) {
    throw new RangeError(`Expected nodes x numFeatures = ${count(n * f)} values in features but received ${count(features.length)}`);
  }
  for (let i = 0; i < features.length; i++) {
    if (!Number.isFinite(features[i])) {
      throw new RangeError(
        `Expected finite features but features[${i}] (node ${Math.floor(i / f)}, feature ${i % f}) is ${String(features[i])}`,
      );
    }
  }
  if (labels.length !== n) throw new RangeError(`Expected one label per node (${count(n)}) but received ${count(labels.length)}`);
  for (let i = 0; i < n; i++) {
    const l = labels[i]!;
    if (!(Number.isInteger(l) && l >= 0 && l < c))
      throw new RangeError(`Expected labels in [0, ${c}) but labels[${i}] (node ${i}) is ${String(l)}`);
  }
  if (g.trainNodes !== undefined) checkInt(g.trainNodes, 'trainNodes', 1, n);
  if (g.normalisation !== undefined && g.normalisation !== 'sym' && g.normalisation !== 'none') {
    throw new RangeError(`Expected 'sym' or 'none' for normalisation but received '${String(g.normalisation)}'`);
  }
}

/**
 * A graph from edge lists and per-node data on the host (checked first with
 * {@link checkEdgeListGraph}, so that no kernel ever sees an id outside the graph), copied to the
 * runtime's device, with both CSR forms built there.
 */
export function graphFromEdges(rt: Runtime, g: EdgeListGraph): Graph {
  checkEdgeListGraph(g);
  const n = g.nodes;
  const e = g.src.length;
  return finishGraph(
    rt,
    {
      numNodes: n,
      numEdges: e,
      numFeatures: g.numFeatures,
      numClasses: g.numClasses,
      features: rt.tagged('features', () => rt.keep(rt.fromArray(Float32Array.from(g.features), [n, g.numFeatures]))),
      labels: rt.tagged('features', () => rt.keep(rt.fromArray(Int32Array.from(g.labels), [n]))),
      trainNodes: g.trainNodes ?? n,
      src: rt.tagged('graph', () => rt.keep(rt.fromArray(Int32Array.from(g.src), [e]))),
      dst: rt.tagged('graph', () => rt.keep(rt.fromArray(Int32Array.from(g.dst), [e]))),
    },
    g.normalisation ?? 'sym',
  );
}
