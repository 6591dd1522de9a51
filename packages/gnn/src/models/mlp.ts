/**
 * MLP: a stack of Linear + ReLU, then a Linear to the classes.
 * @module
 */
import { Linear, ParameterSet, ReLU, type Parameter } from '../nn.js';
import type { Runtime } from '../runtime.js';
import type { Tensor } from '../tensor.js';

export class Mlp {
  readonly layers: Linear[] = [];
  readonly params: ParameterSet;
  readonly #relus: ReLU[] = [];

  /** sizes: [inputs, hidden..., classes], e.g. [784, 784, 784, 784, 784, 10]. */
  constructor(
    rt: Runtime,
    readonly sizes: readonly number[],
    seed: number,
  ) {
    const layerSizes = sizes.slice(1).map((out, i) => [`fc${i + 1}`, sizes[i]!, out] as const);
    this.params = new ParameterSet(rt, layerSizes.flatMap(([name, i, o]) => Linear.parameterSpecs(name, i, o)));
    let offset = 0;
    for (let i = 0; i + 1 < sizes.length; i++) {
      const layer = new Linear(rt, `fc${i + 1}`, sizes[i]!, sizes[i + 1]!, this.params);
      layer.init(seed, offset);
      offset += layer.weight.value.size + layer.bias.value.size;
      this.layers.push(layer);
      if (i + 2 < sizes.length) this.#relus.push(new ReLU(rt));
    }
  }

  get parameters(): Parameter[] {
    return this.params.list;
  }

  /** x: [rows, inputs] → logits [rows, classes]. */
  forward(x: Tensor): Tensor {
    let h = x;
    this.layers.forEach((layer, i) => {
      h = layer.forward(h);
      const relu = this.#relus[i];
      if (relu) h = relu.forward(h);
    });
    return h;
  }

  backward(dLogits: Tensor): void {
    let d = dLogits;
    for (let i = this.layers.length - 1; i >= 0; i--) {
      const relu = this.#relus[i];
      if (relu) d = relu.backward(d);
      const dx = this.layers[i]!.backward(d, i > 0);
      if (dx) d = dx;
    }
  }

  dispose(): void {
    this.params.dispose();
  }
}
