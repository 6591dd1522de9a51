/**
 * The 2-layer GCN of models/gcn.ts computed in row blocks, for graphs whose activations fill the
 * device. The same parameters, initialisation and dropout masks; the first layer is reassociated:
 * conv1 = A·(x·W1ᵀ) + b1 = (A·x)·W1ᵀ + b1, which is cheaper too when there are fewer features than
 * hidden units (the aggregation runs over F columns instead of H).
 *
 * Memory plan at N nodes, F features, H hidden units, C classes, blocks of R rows:
 *   forward:  for each block, its rows of A·x (R x F) are aggregated into one block buffer and
 *             multiplied by W1ᵀ into the block's rows of a1 (N x H in all: the step's one large
 *             activation, kept as one tensor per block, so that a strategy that places memory
 *             may keep some blocks on the device and others elsewhere), then bias, ReLU and
 *             dropout run on the block (the mask is one block's). conv2's product a1·W2ᵀ is
 *             taken block by block too; its N x C tensors are small.
 *   backward: dW2 = (Aᵀ·dLogits)ᵀ·a1 first; then, block by block, the hidden gradient
 *             (Aᵀ·dLogits)·W2, masked by ReLU and dropout (read off a1), is written over a1 in
 *             place; conv1's dW1 = Σ blocks dᵀ·(A·x) recomputes each block of A·x (activation
 *             checkpointing of the aggregation) instead of keeping the N x F product.
 * So the peak is x, the graph, a1 and a few N x C tensors, plus one block of buffers: against the
 * plain plan's two N x H tensors. x may be stored as bf16 (only the aggregation reads it).
 * @module
 */
import { checkDropoutProbability, type ParameterSet, type Parameter } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import type { Csr, Graph } from '../datasets/graphs.js';
import { type GcnConv, gcnLayers } from './gcn.js';

export class BlockedGcn {
  readonly conv1: GcnConv;
  readonly conv2: GcnConv;
  readonly params: ParameterSet;
  /** conv1's output after ReLU and dropout, one tensor per block of rows (a strategy may place them apart). */
  #a1: Tensor[] | undefined;
  #dropped = false;

  constructor(
    private readonly rt: Runtime,
    inputs: number,
    readonly hidden: number,
    classes: number,
    readonly dropout: number,
    readonly rowBlocks: number,
    seed: number,
    /** Trainer-inserted prefetch: each layer's operands to the device before it runs. */
    private readonly layerPrefetch = false,
  ) {
    checkDropoutProbability(dropout, 'dropout');
    if (!Number.isSafeInteger(rowBlocks) || rowBlocks <= 0)
      throw new RangeError(`Expected positive integer for rowBlocks but received ${String(rowBlocks)}`);
    ({ params: this.params, conv1: this.conv1, conv2: this.conv2 } = gcnLayers(rt, inputs, hidden, classes, seed));
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /** Rows per block, and the blocks as [first row, rows]. */
  #blocks(n: number): { rows: number; list: Array<[number, number]> } {
    const rows = Math.ceil(n / Math.min(this.rowBlocks, n));
    const list: Array<[number, number]> = [];
    for (let r0 = 0; r0 < n; r0 += rows) list.push([r0, Math.min(rows, n - r0)]);
    return { rows, list };
  }

  /** out (rows x F, f32) = rows [r0, r0 + rows) of A·x, with x stored as f32 or bf16. */
  #aggregateRows(a: Csr, x: Tensor, r0: number, rows: number, out: Tensor): void {
    const { rt } = this;
    const f = x.shape[1]!;
    const rowptr = a.rowptr.ptr + 4 * r0; // the rows' nonzeros keep their absolute positions in col and val
    if (x.dtype === 'bf16') rt.ops.spmmBf16(rt.onDevice, rt.s, rowptr, a.col.ptr, a.val.ptr, x.ptr, out.ptr, rows, f);
    else rt.ops.spmm(rt.onDevice, rt.s, rowptr, a.col.ptr, a.val.ptr, x.ptr, out.ptr, rows, f);
  }

  #prefetch(...tensors: Tensor[]): void {
    if (this.layerPrefetch) this.rt.prefetchToDevice(...tensors);
  }

  /** → logits [N, classes]. `dropoutOffset` picks this step's dropout mask (as Gcn.forward). */
  forward(graph: Graph, training: boolean, seed: number, dropoutOffset: number): Tensor {
    const { rt, hidden: h } = this;
    const n = graph.numNodes;
    const x = graph.features;
    const f = x.shape[1]!;
    const c = this.conv2.outFeatures;
    const w1 = this.conv1.weight.value;
    const b1 = this.conv1.bias.value;
    this.#dropped = training && this.dropout > 0;
    this.#release(); // a forward that backward never followed
    this.#prefetch(graph.csr.rowptr, graph.csr.col, graph.csr.val, x, this.params.values);
    const { rows, list } = this.#blocks(n);
    const a1: Tensor[] = [];
    try {
      rt.scope(() => {
        const ax = rt.empty([rows, f]);
        const mask = this.#dropped ? rt.empty([rows, h], 'u8') : undefined;
        for (const [r0, count] of list) {
          const block = rt.tagged('activations', () => rt.keep(rt.empty([count, h])));
          a1.push(block);
          this.#aggregateRows(graph.csr, x, r0, count, ax);
          rt.ops.gemm(rt.onDevice, rt.s, false, true, count, h, f, 1, ax.ptr, w1.ptr, 0, block.ptr);
          rt.ops.addBiasRelu(rt.onDevice, rt.s, block.ptr, b1.ptr, count, h);
          if (mask)
            rt.ops.dropout(rt.onDevice, rt.s, block.ptr, block.ptr, mask.ptr, block.size, this.dropout, seed, dropoutOffset + r0 * h);
        }
      });
      this.#a1 = a1;
      // conv2: logits = A·(a1·W2ᵀ) + b2, the product taken block by block
      const logits = rt.scope(() => {
        const h2 = rt.empty([n, c]);
        list.forEach(([r0, count], i) => {
          this.#prefetch(a1[i]!);
          rt.ops.gemm(rt.onDevice, rt.s, false, true, count, c, h, 1, a1[i]!.ptr, this.conv2.weight.value.ptr, 0, h2.ptr + 4 * r0 * c);
        });
        const logits = rt.empty([n, c]);
        rt.ops.spmm(rt.onDevice, rt.s, graph.csr.rowptr.ptr, graph.csr.col.ptr, graph.csr.val.ptr, h2.ptr, logits.ptr, n, c);
        rt.ops.addBias(rt.onDevice, rt.s, logits.ptr, this.conv2.bias.value.ptr, n, c);
        return logits;
      });
      if (!training) this.#release(); // evaluation: no backward needs the activation
      return logits;
    } catch (e) {
      for (const t of a1) t.dispose();
      this.#a1 = undefined;
      throw e;
    }
  }

  /** Frees the activation a forward kept. */
  #release(): void {
    for (const t of this.#a1 ?? []) t.dispose();
    this.#a1 = undefined;
  }

  /** Consumes dLogits; writes every parameter's gradient and frees the step's activations. */
  backward(dLogits: Tensor, graph: Graph): void {
    const { rt, hidden: h } = this;
    const a1 = this.#a1;
    if (!a1) throw new Error('gcn: backward before forward');
    this.#a1 = undefined;
    const n = graph.numNodes;
    const c = this.conv2.outFeatures;
    const x = graph.features;
    const f = x.shape[1]!;
    const { rows, list } = this.#blocks(n);
    try {
      rt.scope(() => {
        // conv2: db2, then dH2 = Aᵀ·dLogits and dW2 = Σ dH2ᵀ·a1 while a1 is still the activation
        this.#prefetch(graph.csrT.rowptr, graph.csrT.col, graph.csrT.val, dLogits);
        rt.ops.biasGrad(rt.onDevice, rt.s, dLogits.ptr, this.conv2.bias.grad.ptr, n, c, false);
        const dH2 = rt.empty([n, c]);
        rt.ops.spmm(rt.onDevice, rt.s, graph.csrT.rowptr.ptr, graph.csrT.col.ptr, graph.csrT.val.ptr, dLogits.ptr, dH2.ptr, n, c);
        dLogits.dispose();
        // per block: dW2 += dH2ᵀ·a1, then the hidden gradient (dH2·W2) through ReLU and dropout over a1
        rt.scope(() => {
          const d = rt.empty([rows, h]);
          list.forEach(([r0, count], i) => {
            const block = a1[i]!;
            this.#prefetch(block);
            const dH2rows = dH2.ptr + 4 * r0 * c;
            rt.ops.gemm(rt.onDevice, rt.s, true, false, c, h, count, 1, dH2rows, block.ptr, i === 0 ? 0 : 1, this.conv2.weight.grad.ptr);
            rt.ops.gemm(rt.onDevice, rt.s, false, false, count, h, c, 1, dH2rows, this.conv2.weight.value.ptr, 0, d.ptr);
            rt.ops.reluBackward(rt.onDevice, rt.s, block.ptr, d.ptr, block.ptr, block.size);
            if (this.#dropped) rt.ops.scale(rt.onDevice, rt.s, 1 / (1 - this.dropout), block.ptr, block.ptr, block.size);
          });
        });
        dH2.dispose();
        // conv1: db1 = column sums of the hidden gradient; dW1 = Σ dᵀ·(A·x), A·x recomputed per block
        this.#prefetch(graph.csr.rowptr, graph.csr.col, graph.csr.val, x);
        const ax = rt.empty([rows, f]);
        list.forEach(([r0, count], i) => {
          const block = a1[i]!;
          rt.ops.biasGrad(rt.onDevice, rt.s, block.ptr, this.conv1.bias.grad.ptr, count, h, i > 0);
          this.#aggregateRows(graph.csr, x, r0, count, ax);
          rt.ops.gemm(rt.onDevice, rt.s, true, false, h, f, count, 1, block.ptr, ax.ptr, i === 0 ? 0 : 1, this.conv1.weight.grad.ptr);
        });
      });
    } finally {
      for (const t of a1) t.dispose();
    }
  }

  dispose(): void {
    this.#release();
    this.params.dispose();
  }
}
