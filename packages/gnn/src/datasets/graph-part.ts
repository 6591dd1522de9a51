/**
 * One rank's part of a graph split across ranks by rows (1D): rank r owns nodes
 * [r·stride, r·stride + count), stride = ceil(N / ranks), with their rows of both CSR forms
 * (column indices stay global), their labels, and (A·x) for its rows. A·x needs feature rows of
 * every rank: the ranks exchange them once, as CAGNET's 1D algorithm does, in one stage per rank q
 * (q broadcasts its rows into a buffer of one block, from the run's allocator, and every rank adds
 * its edges' products from q's columns), so no rank ever holds more than one other block. The input
 * features never change, so the layer-1 aggregation is not repeated per epoch (the partitioned GCN
 * computes (A·x)·W1ᵀ).
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import type { Csr, Graph } from './graphs.js';

/** Which rows a rank owns: [start, start + count); every rank's block is `stride` rows apart. */
export interface RowBlock {
  start: number;
  count: number;
  stride: number;
}

/** Rank `rank`'s rows of `n` split over `size` ranks; RangeError when a rank would own none. */
export function rowBlock(n: number, rank: number, size: number): RowBlock {
  const stride = Math.ceil(n / size);
  const start = rank * stride;
  const count = Math.min(stride, n - start);
  if (count <= 0) {
    throw new RangeError(
      `Expected at least one node per rank but received ${n} nodes over ${size} ranks (rows of ${stride}: rank ${rank} would own none); use fewer devices or more nodes`,
    );
  }
  return { start, count, stride };
}

/** Of the rows other ranks own, how many this part's edges read (the rows an exchange of needed rows would move). */
export interface RemoteRows {
  /** Distinct other-rank rows read by the forward aggregation (A's rows here) and by the backward one (Aᵀ's). */
  forward: number;
  backward: number;
  /** Rows owned by other ranks. */
  remote: number;
}

export interface GraphPart extends RowBlock {
  numNodes: number;
  numEdges: number;
  numFeatures: number;
  numClasses: number;
  /** Nodes 0 .. trainNodes-1 (global) are the training mask. */
  trainNodes: number;
  /** (A·x) for this part's rows: [count, features]. */
  ax: Tensor;
  labels: Tensor; // i32 [count]
  /** This part's rows of A and Aᵀ, global column indices. */
  csr: Csr;
  csrT: Csr;
  remoteRows: RemoteRows;
  dispose(): void;
}

/** How many distinct rows outside `block` (and below n) the column indices read; `marks` is scratch of n bytes. */
export function remoteReads(col: Int32Array, block: RowBlock, n: number, marks: Uint8Array): number {
  marks.fill(0);
  let reads = 0;
  const end = block.start + block.count;
  for (let i = 0; i < col.length; i++) {
    const c = col[i]!;
    if ((c < block.start || c >= end) && c < n && marks[c] === 0) {
      marks[c] = 1;
      reads++;
    }
  }
  return reads;
}

/** A CSR matrix of the runtime's memory from host arrays (an empty one keeps 1-element col and val). */
export function uploadCsr(rt: Runtime, rowptr: Int32Array, col: Int32Array, val: Float32Array | undefined): Csr {
  const nnz = col.length;
  return rt.tagged('graph', () => {
    const v = rt.keep(nnz === 0 ? rt.zeros([1]) : val ? rt.fromArray(val, [nnz]) : rt.empty([nnz]));
    if (nnz > 0 && !val) rt.ops.fillF32(rt.onDevice, rt.s, v.ptr, nnz, 1);
    return {
      rowptr: rt.keep(rt.fromArray(rowptr, [rowptr.length])),
      col: rt.keep(nnz > 0 ? rt.fromArray(col, [nnz]) : rt.empty([1], 'i32')),
      val: v,
      nnz,
    };
  });
}

/** A CSR matrix in host memory (val undefined: every value is 1). */
interface HostCsr {
  rowptr: Int32Array;
  col: Int32Array;
  val: Float32Array | undefined;
}

/** The entries of `a` in columns [lo, hi), with column indices less lo: the block of stage q. */
function columnBlock(a: HostCsr, lo: number, hi: number): HostCsr {
  const rows = a.rowptr.length - 1;
  const rowptr = new Int32Array(rows + 1);
  let nnz = 0;
  for (let i = 0; i < a.col.length; i++) if (a.col[i]! >= lo && a.col[i]! < hi) nnz++;
  const col = new Int32Array(nnz);
  const val = a.val ? new Float32Array(nnz) : undefined;
  let k = 0;
  for (let r = 0; r < rows; r++) {
    for (let i = a.rowptr[r]!; i < a.rowptr[r + 1]!; i++) {
      const c = a.col[i]!;
      if (c < lo || c >= hi) continue;
      col[k] = c - lo;
      if (val) val[k] = a.val![i]!;
      k++;
    }
    rowptr[r + 1] = k;
  }
  return { rowptr, col, val };
}

/** Rows [start, start + count) of a CSR matrix, column indices kept, as tensors of their own (and in host memory). */
function sliceCsr(rt: Runtime, a: Csr, block: RowBlock, n: number, marks: Uint8Array): { csr: Csr; host: HostCsr; reads: number } {
  const rowptr = a.rowptr.view(block.start, [block.count + 1]).toArray() as Int32Array;
  const first = rowptr[0]!;
  const nnz = rowptr[block.count]! - first;
  for (let i = 0; i <= block.count; i++) rowptr[i] = rowptr[i]! - first;
  const col = nnz > 0 ? (a.col.view(first, [nnz]).toArray() as Int32Array) : new Int32Array(0);
  const val = nnz > 0 ? (a.val.view(first, [nnz]).toArray() as Float32Array) : new Float32Array(0);
  return { csr: uploadCsr(rt, rowptr, col, val), host: { rowptr, col, val }, reads: remoteReads(col, block, n, marks) };
}

/** A rank's rows of a graph before the exchange: both CSR forms, labels and its own feature rows. */
export interface PartPieces {
  block: RowBlock;
  numNodes: number;
  numEdges: number;
  numFeatures: number;
  numClasses: number;
  trainNodes: number;
  csr: Csr;
  csrT: Csr;
  /** A's rows here in host memory, for the exchange's column blocks. */
  hostCsr: HostCsr;
  labels: Tensor; // i32 [count]
  /** This rank's feature rows, f32 [count, F]; freed by finishPart. */
  features: Tensor;
  remoteRows: RemoteRows;
}

/**
 * This rank's part of `graph` (made whole on every rank from the same seed): its rows of the CSR
 * forms, labels and features are copied out, the whole graph is freed, and the ranks' feature rows
 * are all-gathered to compute (A·x) for this rank's rows. f32 features and the CSR forms only.
 */
export function partitionGraph(rt: Runtime, graph: Graph, comm: Communicator): GraphPart {
  if (graph.features.dtype !== 'f32')
    throw new RangeError(`Expected f32 features for a graph split across ranks but received ${graph.features.dtype}`);
  const n = graph.numNodes;
  const f = graph.numFeatures;
  const block = rowBlock(n, comm.rank, comm.size);
  const marks = new Uint8Array(n);
  const forward = sliceCsr(rt, graph.csr, block, n, marks);
  const backward = sliceCsr(rt, graph.csrT, block, n, marks);
  const labels = rt.tagged('graph', () =>
    rt.keep(rt.fromArray(graph.labels.view(block.start, [block.count]).toArray() as Int32Array, [block.count])),
  );
  const features = rt.tagged('features', () => rt.keep(rt.empty([block.count, f])));
  rt.ops.scale(rt.onDevice, rt.s, 1, graph.features.rows(block.start, block.count).ptr, features.ptr, features.size); // a copy
  const { numEdges, numClasses, trainNodes } = graph;
  graph.dispose();
  return finishPart(
    rt,
    {
      block,
      numNodes: n,
      numEdges,
      numFeatures: f,
      numClasses,
      trainNodes,
      csr: forward.csr,
      csrT: backward.csr,
      hostCsr: forward.host,
      labels,
      features,
      remoteRows: { forward: forward.reads, backward: backward.reads, remote: n - block.count },
    },
    comm,
  );
}

/**
 * The part from its pieces: (A·x) for this rank's rows, in one stage per rank q: q's feature rows
 * are broadcast into a buffer of one block (from the run's allocator), and this rank adds the
 * product of its edges from q's columns (the column block of stage q) to A·x. The buffer and the
 * rank's own feature rows are then freed.
 */
export function finishPart(rt: Runtime, pieces: PartPieces, comm: Communicator): GraphPart {
  const { block, csr, csrT, labels, features: own, hostCsr } = pieces;
  const f = pieces.numFeatures;
  const ax = rt.tagged('features', () => rt.keep(rt.zeros([block.count, f])));
  rt.scope(() => {
    const stage = rt.tagged('communication', () => rt.empty([block.stride, f]));
    for (let q = 0; q < comm.size; q++) {
      const lo = q * block.stride;
      if (q === comm.rank) rt.ops.scale(rt.onDevice, rt.s, 1, own.ptr, stage.ptr, own.size);
      comm.broadcast(stage.ptr, block.stride * f, q, rt.stream);
      const sub = columnBlock(hostCsr, lo, Math.min(lo + block.stride, pieces.numNodes));
      if (sub.col.length === 0) continue;
      rt.scope(() => {
        const a = uploadCsr(rt, sub.rowptr, sub.col, sub.val);
        const product = rt.empty([block.count, f]);
        rt.ops.spmm(rt.onDevice, rt.s, a.rowptr.ptr, a.col.ptr, a.val.ptr, stage.ptr, product.ptr, block.count, f);
        rt.ops.axpy(rt.onDevice, rt.s, 1, product.ptr, ax.ptr, ax.size);
        for (const t of [a.rowptr, a.col, a.val]) t.dispose(); // kept by uploadCsr
      });
    }
    own.dispose();
  });
  return {
    ...block,
    numNodes: pieces.numNodes,
    numEdges: pieces.numEdges,
    numFeatures: f,
    numClasses: pieces.numClasses,
    trainNodes: pieces.trainNodes,
    ax,
    labels,
    csr,
    csrT,
    remoteRows: pieces.remoteRows,
    dispose() {
      for (const t of [ax, labels, csr.rowptr, csr.col, csr.val, csrT.rowptr, csrT.col, csrT.val]) t.dispose();
    },
  };
}
