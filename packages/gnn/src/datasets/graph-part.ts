/**
 * One rank's part of a graph split across ranks by rows (1D): rank r owns nodes
 * [r·stride, r·stride + count), stride = ceil(N / ranks), with their rows of both CSR forms
 * (column indices stay global), their labels, and (A·x) for its rows. A·x needs feature rows of
 * every rank, so the ranks exchange their feature rows once (an all-gather through the run's
 * communicator, into a buffer from the run's allocator); the input features never change, so the
 * layer-1 aggregation is not repeated per epoch (the partitioned GCN computes (A·x)·W1ᵀ).
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import type { Runtime } from '../runtime.js';
import type { Tensor } from '../tensor.js';
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
    throw new RangeError(`Expected at least one node per rank but received ${n} nodes over ${size} ranks (rows of ${stride}: rank ${rank} would own none); use fewer devices or more nodes`);
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

/** Rows [start, start + count) of a CSR matrix, column indices kept, as tensors of their own. */
function sliceCsr(rt: Runtime, a: Csr, block: RowBlock, n: number, marks: Uint8Array): { csr: Csr; reads: number } {
  const rowptr = a.rowptr.view(block.start, [block.count + 1]).toArray() as Int32Array;
  const first = rowptr[0]!;
  const nnz = rowptr[block.count]! - first;
  for (let i = 0; i <= block.count; i++) rowptr[i] = rowptr[i]! - first;
  const col = nnz > 0 ? (a.col.view(first, [nnz]).toArray() as Int32Array) : new Int32Array(0);
  const val = nnz > 0 ? (a.val.view(first, [nnz]).toArray() as Float32Array) : new Float32Array(0);
  marks.fill(0);
  let reads = 0;
  const end = block.start + block.count;
  for (let i = 0; i < nnz; i++) {
    const c = col[i]!;
    if ((c < block.start || c >= end) && c < n && marks[c] === 0) {
      marks[c] = 1;
      reads++;
    }
  }
  const csr = rt.tagged('graph', () => ({
    rowptr: rt.keep(rt.fromArray(rowptr, [block.count + 1])),
    col: rt.keep(nnz > 0 ? rt.fromArray(col, [nnz]) : rt.empty([1], 'i32')),
    val: rt.keep(nnz > 0 ? rt.fromArray(val, [nnz]) : rt.zeros([1])),
    nnz,
  }));
  return { csr, reads };
}

/**
 * This rank's part of `graph` (made whole on every rank from the same seed): its rows of the CSR
 * forms, labels and features are copied out, the whole graph is freed, and the ranks' feature rows
 * are all-gathered to compute (A·x) for this rank's rows. f32 features and the CSR forms only.
 */
export function partitionGraph(rt: Runtime, graph: Graph, comm: Communicator): GraphPart {
  if (graph.features.dtype !== 'f32') throw new RangeError(`Expected f32 features for a graph split across ranks but received ${graph.features.dtype}`);
  const n = graph.numNodes;
  const f = graph.numFeatures;
  const block = rowBlock(n, comm.rank, comm.size);
  const marks = new Uint8Array(n);
  const forward = sliceCsr(rt, graph.csr, block, n, marks);
  const backward = sliceCsr(rt, graph.csrT, block, n, marks);
  const labels = rt.tagged('graph', () => rt.keep(rt.fromArray(graph.labels.view(block.start, [block.count]).toArray() as Int32Array, [block.count])));
  const own = rt.tagged('features', () => rt.keep(rt.empty([block.count, f])));
  rt.ops.scale(rt.onDevice, rt.s, 1, graph.features.rows(block.start, block.count).ptr, own.ptr, own.size); // a copy
  const { numEdges, numClasses, trainNodes } = graph;
  graph.dispose();
  // every rank's feature rows, gathered in place into one [ranks·stride, F] buffer
  const ax = rt.tagged('features', () =>
    rt.keep(
      rt.scope(() => {
        const all = rt.tagged('communication', () => rt.empty([comm.size * block.stride, f]));
        const slot = all.rows(block.start, block.count);
        rt.ops.scale(rt.onDevice, rt.s, 1, own.ptr, slot.ptr, own.size);
        own.dispose();
        comm.allGather(all.ptr + block.start * f * 4, all.ptr, block.stride * f, rt.stream);
        const out = rt.empty([block.count, f]);
        rt.ops.spmm(rt.onDevice, rt.s, forward.csr.rowptr.ptr, forward.csr.col.ptr, forward.csr.val.ptr, all.ptr, out.ptr, block.count, f);
        return out;
      }),
    ),
  );
  const part: GraphPart = {
    ...block,
    numNodes: n,
    numEdges,
    numFeatures: f,
    numClasses,
    trainNodes,
    ax,
    labels,
    csr: forward.csr,
    csrT: backward.csr,
    remoteRows: { forward: forward.reads, backward: backward.reads, remote: n - block.count },
    dispose() {
      for (const t of [ax, labels, forward.csr.rowptr, forward.csr.col, forward.csr.val, backward.csr.rowptr, backward.csr.col, backward.csr.val]) t.dispose();
    },
  };
  return part;
}
