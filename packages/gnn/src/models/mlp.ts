/**
 * MLP: a stack of Linear + ReLU, then a Linear to the classes.
 * @module
 */
import { Linear, ParameterSet, type Parameter, type SGD } from '../nn.js';
import type { Runtime } from '../runtime.js';
import type { Tensor } from '../tensor.js';

export class Mlp {
  readonly layers: Linear[] = [];
  readonly params: ParameterSet;

  /**
   * sizes: [inputs, hidden..., classes], e.g. [784, 784, 784, 784, 784, 10]. Every hidden layer is
   * a Linear with its ReLU fused in.
   */
  constructor(
    private readonly rt: Runtime,
    readonly sizes: readonly number[],
    seed: number,
  ) {
    const layerSizes = sizes.slice(1).map((out, i) => [`fc${i + 1}`, sizes[i]!, out] as const);
    this.params = new ParameterSet(rt, layerSizes.flatMap(([name, i, o]) => Linear.parameterSpecs(name, i, o)));
    let offset = 0;
    layerSizes.forEach(([name, inputs, outputs], i) => {
      const layer = new Linear(rt, name, inputs, outputs, this.params, i + 1 < layerSizes.length);
      layer.init(seed, offset);
      offset += layer.weight.value.size + layer.bias.value.size;
      this.layers.push(layer);
    });
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /** x: [rows, inputs] → logits [rows, classes]. */
  forward(x: Tensor): Tensor {
    return this.layers.reduce((h, layer) => layer.forward(h), x);
  }

  /** The last layer, which makes the logits. */
  get output(): Linear {
    return this.layers[this.layers.length - 1]!;
  }

  /**
   * Gradients of every parameter from dLogits [rows, classes]. outputBiasGradDone: the last
   * layer's bias gradient was already written (softmaxCrossEntropyBiasGrad).
   */
  backward(dLogits: Tensor, outputBiasGradDone = false): void {
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const dx = this.layers[i]!.backward(d, i > 0, outputBiasGradDone && i === this.layers.length - 1);
      if (dx) d = dx;
    }
  }

  /**
   * backward(dLogits) and then sgd.step(), with the work that is off the critical path moved to the
   * stream `side`: the main stream runs the chain of input gradients (each layer's masked bias
   * gradient, then dx = dy W), while `side` computes each layer's weight gradient as soon as its dy
   * exists and updates the layer's parameters as soon as dx no longer needs W. The same kernels on
   * the same inputs as backward + step, so the results are bit-identical; only independent work
   * overlaps. The main stream waits for `side` before returning, so later work on it (and frees of
   * the step's tensors) is ordered after everything here. Inside a CUDA Graph capture the waits
   * become the graph's edges.
   */
  backwardAndStep(dLogits: Tensor, sgd: SGD, side: number, outputBiasGradDone = false): void {
    const { rt } = this;
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const layer = this.layers[i]!;
      if (!(outputBiasGradDone && i === this.layers.length - 1)) layer.biasGrad(d);
      rt.ops.streamWait(rt.onDevice, side, rt.s); // dy (masked) and db exist
      layer.weightGrad(d, side);
      const dx = i > 0 ? layer.inputGrad(d) : undefined;
      if (dx) rt.ops.streamWait(rt.onDevice, side, rt.s); // W is no longer read
      const { offset, count } = this.#range(layer);
      sgd.stepRange(offset, count, side);
      layer.release();
      if (dx) d = dx;
    }
    rt.ops.streamWait(rt.onDevice, rt.s, side);
  }

  /** A layer's weight and bias: one contiguous range of the ParameterSet. */
  #range(layer: Linear): { offset: number; count: number } {
    const base = this.params.values.ptr;
    const { value: w } = layer.weight;
    const { value: b } = layer.bias;
    if (b.ptr !== w.ptr + 4 * w.size) throw new Error(`${layer.name}: weight and bias are not adjacent in the ParameterSet`);
    return { offset: (w.ptr - base) / 4, count: w.size + b.size };
  }

  dispose(): void {
    this.params.dispose();
  }
}
