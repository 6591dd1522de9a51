/**
 * MLP: a stack of Linear + ReLU, then a Linear to the classes.
 * @module
 */
import { Linear, ParameterSet, type Parameter } from '../nn.js';
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
    rt: Runtime,
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

  backward(dLogits: Tensor): void {
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const dx = this.layers[i]!.backward(d, i > 0);
      if (dx) d = dx;
    }
  }

  dispose(): void {
    this.params.dispose();
  }
}
