/**
 * The 2-layer GCN over ranks that each own a block of rows (1D partition, see GraphPart): the same
 * model and parameters as Gcn, computed as conv1 = (A·x)·W1ᵀ + b1 on the rank's rows of the
 * precomputed A·x (no exchange per epoch), ReLU and dropout on the rank's rows (the mask of the
 * single-device run at those rows), and conv2 = A·(a1·W2ᵀ) + b2, for which every rank needs all
 * rows of a1·W2ᵀ ([N, classes]): an all-gather. Backward all-gathers ∂logits the same way for
 * Aᵀ·∂logits on its rows, and each rank's weight gradients are partial sums over its rows, summed
 * over the ranks with one all-reduce of the flat gradient buffer before the optimizer step.
 * Exchanged per epoch: 2 x N x classes floats; memory per rank: its rows' activations only.
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import { checkDropoutProbability, type ParameterSet, type Parameter } from '../framework/nn.js';
import type { Runtime } from '../framework/runtime.js';
import type { Tensor } from '../framework/tensor.js';
import type { GraphPart } from '../datasets/graph-part.js';
import { gcnLayers } from './gcn.js';

export class PartitionedGcn {
  readonly params: ParameterSet;
  readonly #w1: Parameter;
  readonly #b1: Parameter;
  readonly #w2: Parameter;
  readonly #b2: Parameter;
  #a1: Tensor | undefined; // conv1's output after ReLU and dropout, this rank's rows [count, H]
  #dropped = false;

  constructor(
    private readonly rt: Runtime,
    private readonly comm: Communicator,
    inputs: number,
    readonly hidden: number,
    readonly classes: number,
    readonly dropout: number,
    seed: number,
  ) {
    checkDropoutProbability(dropout, 'dropout');
    // Gcn's initialisation, on every rank; then rank 0's values everywhere (as data-parallel trainers do)
    const { params, conv1, conv2 } = gcnLayers(rt, inputs, hidden, classes, seed);
    this.params = params;
    [this.#w1, this.#b1, this.#w2, this.#b2] = [conv1.weight, conv1.bias, conv2.weight, conv2.bias];
    comm.broadcast(this.params.values.ptr, this.params.size, 0, rt.stream);
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /** [count, classes] = A·h over this rank's rows, h = [all rows, classes] gathered from every rank's `rows`. */
  #aggregateGathered(part: GraphPart, transpose: boolean, fill: (slot: Tensor) => void): Tensor {
    const { rt, comm, classes } = this;
    return rt.scope(() => {
      const all = rt.tagged('communication', () => rt.empty([comm.size * part.stride, classes]));
      fill(all.rows(part.start, part.count));
      comm.allGather(all.ptr + part.start * classes * 4, all.ptr, part.stride * classes, rt.stream);
      const a = transpose ? part.csrT : part.csr;
      const out = rt.empty([part.count, classes]);
      rt.ops.spmm(rt.onDevice, rt.s, a.rowptr.ptr, a.col.ptr, a.val.ptr, all.ptr, out.ptr, part.count, classes);
      return out;
    });
  }

  /** → logits for this rank's rows [count, classes]. `dropoutOffset` picks the step's mask (of all N rows). */
  forward(part: GraphPart, training: boolean, seed: number, dropoutOffset: number): Tensor {
    const { rt, hidden, classes } = this;
    const n = part.count;
    const a1 = rt.empty([n, hidden]);
    rt.ops.gemm(rt.onDevice, rt.s, false, true, n, hidden, part.numFeatures, 1, part.ax.ptr, this.#w1.value.ptr, 0, a1.ptr);
    rt.ops.addBiasRelu(rt.onDevice, rt.s, a1.ptr, this.#b1.value.ptr, n, hidden);
    this.#dropped = training && this.dropout > 0;
    if (this.#dropped) {
      rt.scope(() => {
        const mask = rt.empty(a1.shape, 'u8');
        rt.ops.dropout(rt.onDevice, rt.s, a1.ptr, a1.ptr, mask.ptr, a1.size, this.dropout, seed, dropoutOffset + part.start * hidden);
      });
    }
    this.#a1 = a1;
    const logits = this.#aggregateGathered(part, false, (slot) => {
      rt.ops.gemm(rt.onDevice, rt.s, false, true, n, classes, hidden, 1, a1.ptr, this.#w2.value.ptr, 0, slot.ptr);
    });
    rt.ops.addBias(rt.onDevice, rt.s, logits.ptr, this.#b2.value.ptr, n, classes);
    return logits;
  }

  /**
   * Consumes dLogits (this rank's rows, the gradient of its rows' mean loss) scaled by `weight`
   * (its share of the global mean), writes the gradients summed over the ranks, and frees the
   * step's activations.
   */
  backward(dLogits: Tensor, part: GraphPart, weight: number): void {
    const { rt, comm, hidden, classes } = this;
    const a1 = this.#a1;
    if (!a1) throw new Error('gcn: backward before forward');
    const n = part.count;
    const dH2 = this.#aggregateGathered(part, true, (slot) => {
      rt.ops.scale(rt.onDevice, rt.s, weight, dLogits.ptr, slot.ptr, slot.size);
      dLogits.dispose();
      rt.ops.biasGrad(rt.onDevice, rt.s, slot.ptr, this.#b2.grad.ptr, n, classes, false);
    });
    rt.ops.gemm(rt.onDevice, rt.s, true, false, classes, hidden, n, 1, dH2.ptr, a1.ptr, 0, this.#w2.grad.ptr);
    const d = rt.empty([n, hidden]); // ∂a1, then ∂z1 in place
    rt.ops.gemm(rt.onDevice, rt.s, false, false, n, hidden, classes, 1, dH2.ptr, this.#w2.value.ptr, 0, d.ptr);
    dH2.dispose();
    rt.ops.reluBackward(rt.onDevice, rt.s, a1.ptr, d.ptr, d.ptr, d.size);
    if (this.#dropped) rt.ops.scale(rt.onDevice, rt.s, 1 / (1 - this.dropout), d.ptr, d.ptr, d.size);
    a1.dispose();
    this.#a1 = undefined;
    rt.ops.biasGrad(rt.onDevice, rt.s, d.ptr, this.#b1.grad.ptr, n, hidden, false);
    rt.ops.gemm(rt.onDevice, rt.s, true, false, hidden, part.numFeatures, n, 1, d.ptr, part.ax.ptr, 0, this.#w1.grad.ptr);
    d.dispose();
    rt.tagged('communication', () => comm.allReduce(this.params.grads.ptr, this.params.size, rt.stream));
  }

  dispose(): void {
    this.#a1?.dispose();
    this.params.dispose();
  }
}
