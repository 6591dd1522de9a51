/**
 * One rank's part of the random graph, made without the whole graph: the generator is
 * counter-based (edge i and node i's features and label come from their index alone), so a rank
 * draws the edges in chunks, keeps those that end in its rows (for A) or start there (for Aᵀ), and
 * draws only its own rows' features and labels. Its device memory at setup is one chunk of edges
 * and its own part (and, in the exchange, one other rank's block of features), so setup grows with
 * N / ranks like training does. The part is the one
 * partitionGraph() cuts from the whole graph, to the bit: the CSR forms keep each row's edges in
 * edge order, as the stable sort of the whole graph's build does.
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import type { Runtime } from '../framework/runtime.js';
import { randomGraphFeatures, randomGraphShape, type RandomGraphOptions } from './graphs.js';
import { finishPart, remoteReads, rowBlock, uploadCsr, type GraphPart, type RowBlock } from './graph-part.js';

/** Edges drawn per chunk. */
const edgeChunk = 1 << 24;

/** A growing list of (row, col) pairs, filled in place by drawEdges after reserve(). */
class PairList {
  rows = new Int32Array(1024);
  cols = new Int32Array(1024);
  length = 0;

  /** Makes room for `extra` more pairs (doubling), so that a chunk's pairs are written without a check each. */
  reserve(extra: number): void {
    let capacity = this.rows.length;
    while (capacity < this.length + extra) capacity *= 2;
    if (capacity === this.rows.length) return;
    const grow = (a: Int32Array) => {
      const b = new Int32Array(capacity);
      b.set(a.subarray(0, this.length));
      return b;
    };
    this.rows = grow(this.rows);
    this.cols = grow(this.cols);
  }
}

/** CSR of `rows` local rows from (row, col) pairs in edge order: a stable counting sort by row. */
function countingSort(pairs: PairList, rows: number): { rowptr: Int32Array; col: Int32Array } {
  const rowptr = new Int32Array(rows + 1);
  for (let i = 0; i < pairs.length; i++) rowptr[pairs.rows[i]! + 1]!++;
  for (let r = 0; r < rows; r++) rowptr[r + 1]! += rowptr[r]!;
  const cursor = rowptr.slice(0, rows);
  const col = new Int32Array(pairs.length);
  for (let i = 0; i < pairs.length; i++) col[cursor[pairs.rows[i]!]!++] = pairs.cols[i]!;
  return { rowptr, col };
}

/** This rank's rows of A (edges ending there) and of Aᵀ (edges starting there), as pair lists in edge order. */
function drawEdges(rt: Runtime, n: number, e: number, seed: number, block: RowBlock): { forward: PairList; backward: PairList } {
  const forward = new PairList();
  const backward = new PairList();
  const start = block.start;
  const end = block.start + block.count;
  rt.tagged('setup', () =>
    rt.scope(() => {
      const size = Math.min(edgeChunk, e);
      const [src, dst] = [rt.empty([size], 'i32'), rt.empty([size], 'i32')];
      for (let at = 0; at < e; at += edgeChunk) {
        const count = Math.min(edgeChunk, e - at);
        rt.ops.randomInts(rt.onDevice, rt.s, src.ptr, count, n, seed, at);
        rt.ops.randomInts(rt.onDevice, rt.s, dst.ptr, count, n, seed, e + at);
        const s = src.view(0, [count]).toArray() as Int32Array;
        const d = dst.view(0, [count]).toArray() as Int32Array;
        // at most every edge of the chunk lands in each list: room first, then a plain loop over locals
        // (a method call and a capacity check per edge made this loop most of setup's time at 10^8 nodes)
        forward.reserve(count);
        backward.reserve(count);
        const [fRows, fCols, bRows, bCols] = [forward.rows, forward.cols, backward.rows, backward.cols];
        let [fLength, bLength] = [forward.length, backward.length];
        for (let i = 0; i < count; i++) {
          const u = s[i]!;
          const v = d[i]!;
          if (v >= start && v < end) {
            fRows[fLength] = v - start; // A: row = target
            fCols[fLength++] = u;
          }
          if (u >= start && u < end) {
            bRows[bLength] = u - start; // Aᵀ: row = source
            bCols[bLength++] = v;
          }
        }
        forward.length = fLength;
        backward.length = bLength;
      }
    }),
  );
  return { forward, backward };
}

/** This rank's part of randomGraph(options) (f32 features, no normalisation: every edge weighs 1), then finishPart. */
export function randomGraphPart(rt: Runtime, options: RandomGraphOptions, comm: Communicator): GraphPart {
  const { n, f, c, seed, e, dtype, trainNodes } = randomGraphShape(options);
  if (dtype !== 'f32') throw new RangeError(`Expected f32 features for a graph split across ranks but received ${dtype}`);
  if ((options.normalisation ?? 'none') !== 'none')
    throw new RangeError("Expected normalisation 'none' for the random graph split across ranks");
  const block = rowBlock(n, comm.rank, comm.size);
  const { forward, backward } = drawEdges(rt, n, e, seed, block);
  const marks = new Uint8Array(n);
  const a = countingSort(forward, block.count);
  const at = countingSort(backward, block.count);
  const remoteRows = {
    forward: remoteReads(a.col, block, n, marks),
    backward: remoteReads(at.col, block, n, marks),
    remote: n - block.count,
  };
  const csr = uploadCsr(rt, a.rowptr, a.col, undefined);
  const csrT = uploadCsr(rt, at.rowptr, at.col, undefined);
  const features = rt.tagged('features', () => randomGraphFeatures(rt, block.count, f, seed + 1, 'f32', block.start));
  const labels = rt.tagged('graph', () => rt.keep(rt.empty([block.count], 'i32')));
  rt.ops.randomInts(rt.onDevice, rt.s, labels.ptr, block.count, c, seed + 2, block.start);
  const hostCsr = { rowptr: a.rowptr, col: a.col, val: undefined };
  return finishPart(
    rt,
    { block, numNodes: n, numEdges: e, numFeatures: f, numClasses: c, trainNodes, csr, csrT, hostCsr, labels, features, remoteRows },
    comm,
  );
}
