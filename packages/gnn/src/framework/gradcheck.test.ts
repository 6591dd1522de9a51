/**
 * Every layer's backward against finite differences of its forward, on the CPU kernels (runs in
 * CI). Central differences in float32 with step 1e-2 on O(1) values: agreement within 2e-2
 * relative (or 2e-3 absolute for tiny gradients) is what float32 allows.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { xorshift32 } from '@gpumem/allocator-core/tools';
import { Runtime } from './runtime.js';
import { Dropout, Linear, ParameterSet, ReLU, softmaxCrossEntropy, type Parameter } from './nn.js';
import { GcnConv } from '../models/gcn.js';
import { sbmGraph, type Graph } from '../datasets/graphs.js';
import type { Tensor } from './tensor.js';

const step = 1e-2;

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

function random(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  const next = xorshift32((seed * 2654435761) >>> 0 || 1);
  for (let i = 0; i < n; i++) out[i] = (next() / 2 ** 32) * 2 - 1;
  return out;
}

function readScalar(ptr: number): number {
  const out = new Float32Array(1);
  allocator.read(ptr, out);
  return out[0]!;
}

/**
 * Checks d(loss)/d(target) for a sample of target's elements. `run(backward)` computes the loss
 * (mean cross-entropy, into lossPtr) and, when asked, the gradients; `analytic()` reads the
 * gradient of target after a backward run.
 */
function check(target: Tensor, run: (backward: boolean) => void, lossPtr: number, analytic: () => Float32Array, samples = 24) {
  run(true);
  const grad = analytic();
  const values = target.toFloat32();
  const n = values.length;
  const picks = new Set<number>();
  for (let i = 0; picks.size < Math.min(samples, n); i++) picks.add((i * 7919 + 13) % n);
  let worst = 0;
  for (const i of picks) {
    const original = values[i]!;
    const at = (v: number) => {
      target.write(new Float32Array([v]), i);
      run(false);
      return readScalar(lossPtr);
    };
    const numeric = (at(original + step) - at(original - step)) / (2 * step);
    target.write(new Float32Array([original]), i);
    const error = Math.abs(numeric - grad[i]!);
    const tolerance = Math.max(2e-3, 2e-2 * Math.abs(numeric));
    worst = Math.max(worst, error / tolerance);
    expect(error, `element ${i}: numeric ${numeric}, analytic ${grad[i]}`).toBeLessThanOrEqual(tolerance);
  }
  return worst;
}

function zeroGrads(params: Parameter[]) {
  for (const p of params) rt.ops.fillF32(false, 0, p.grad.ptr, p.grad.size, 0);
}

describe('finite-difference gradient checks (CPU)', () => {
  const rows = 6;
  const classes = 5;

  function classifierHarness(
    build: () => { forward: (x: Tensor) => Tensor; backward: (d: Tensor) => Tensor | undefined; params: Parameter[] },
    inputs: number,
  ) {
    const x = rt.keep(rt.fromArray(random(rows * inputs, 3), [rows, inputs]));
    const labels = rt.keep(
      rt.fromArray(
        Int32Array.from({ length: rows }, (_, i) => i % classes),
        [rows],
      ),
    );
    const scalars = rt.keep(rt.zeros([2], 'i32'));
    const model = build();
    let dx: Tensor | undefined;
    const run = (backward: boolean) => {
      zeroGrads(model.params);
      rt.scope(() => {
        const logits = model.forward(x);
        const d = softmaxCrossEntropy(rt, logits, labels, rows, scalars.ptr, scalars.ptr + 4);
        if (backward) {
          dx?.dispose();
          const g = model.backward(d);
          dx = g ? rt.keep(g) : undefined;
        }
      });
    };
    return { x, scalars, model, run, dxValues: () => dx!.toFloat32() };
  }

  it('Linear: weight, bias and input', () => {
    const inputs = 7;
    const h = classifierHarness(() => {
      const layer = new Linear(rt, 'fc', inputs, classes, new ParameterSet(rt, Linear.parameterSpecs('fc', inputs, classes)));
      layer.init(1, 0);
      return { forward: (x) => layer.forward(x), backward: (d) => layer.backward(d, true), params: layer.parameters };
    }, inputs);
    const [w, b] = h.model.params as [Parameter, Parameter];
    check(w.value, h.run, h.scalars.ptr, () => w.grad.toFloat32());
    check(b.value, h.run, h.scalars.ptr, () => b.grad.toFloat32());
    check(h.x, h.run, h.scalars.ptr, h.dxValues);
  });

  it('Linear → ReLU → Linear', () => {
    const inputs = 5;
    const h = classifierHarness(() => {
      const params = new ParameterSet(rt, [...Linear.parameterSpecs('a', inputs, 9), ...Linear.parameterSpecs('b', 9, classes)]);
      const a = new Linear(rt, 'a', inputs, 9, params);
      const relu = new ReLU(rt);
      const b = new Linear(rt, 'b', 9, classes, params);
      a.init(2, 0);
      b.init(2, 1000);
      return {
        forward: (x) => b.forward(relu.forward(a.forward(x))),
        backward: (d) => a.backward(relu.backward(b.backward(d, true)!), true),
        params: [...a.parameters, ...b.parameters],
      };
    }, inputs);
    for (const p of h.model.params) check(p.value, h.run, h.scalars.ptr, () => p.grad.toFloat32(), 12);
    check(h.x, h.run, h.scalars.ptr, h.dxValues);
  });

  it('Linear with its ReLU fused (bias add + ReLU, ReLU mask + bias gradient) → Linear', () => {
    const inputs = 5;
    const h = classifierHarness(() => {
      const params = new ParameterSet(rt, [...Linear.parameterSpecs('a', inputs, 9), ...Linear.parameterSpecs('b', 9, classes)]);
      const a = new Linear(rt, 'a', inputs, 9, params, true);
      const b = new Linear(rt, 'b', 9, classes, params);
      a.init(2, 0);
      b.init(2, 1000);
      return { forward: (x) => b.forward(a.forward(x)), backward: (d) => a.backward(b.backward(d, true)!, true), params: params.list };
    }, inputs);
    for (const p of h.model.params) check(p.value, h.run, h.scalars.ptr, () => p.grad.toFloat32(), 12);
    check(h.x, h.run, h.scalars.ptr, h.dxValues);
  });

  it('Dropout (a fixed mask for a fixed seed)', () => {
    const inputs = 8;
    const h = classifierHarness(() => {
      const a = new Linear(rt, 'a', inputs, classes, new ParameterSet(rt, Linear.parameterSpecs('a', inputs, classes)));
      const drop = new Dropout(rt, 0.4);
      a.init(4, 0);
      return {
        forward: (x) => a.forward(drop.forward(x, 99, 0, true)),
        backward: (d) => drop.backward(a.backward(d, true)!),
        params: a.parameters,
      };
    }, inputs);
    check(h.x, h.run, h.scalars.ptr, h.dxValues);
  });

  describe.each(['spmm', 'scatter'] as const)('GcnConv (%s)', (aggregation) => {
    let graph: Graph;
    beforeEach(() => {
      graph = sbmGraph(rt, { nodes: 12, classes: 3, features: 4, seed: 5 });
    });
    afterEach(() => graph.dispose());

    it('weight, bias and input', () => {
      const conv = new GcnConv(rt, 'conv', 4, 3, new ParameterSet(rt, GcnConv.parameterSpecs('conv', 4, 3)), 1, 0);
      const scalars = rt.keep(rt.zeros([2], 'i32'));
      const x = graph.features;
      let dx: Tensor | undefined;
      const run = (backward: boolean) => {
        zeroGrads(conv.parameters);
        rt.scope(() => {
          const logits = conv.forward(x, graph, aggregation);
          const d = softmaxCrossEntropy(rt, logits, graph.labels, graph.trainNodes, scalars.ptr, scalars.ptr + 4);
          if (backward) {
            dx?.dispose();
            const g = conv.backward(d, graph, aggregation, true);
            dx = g ? rt.keep(g) : undefined;
          }
        });
      };
      check(conv.weight.value, run, scalars.ptr, () => conv.weight.grad.toFloat32());
      check(conv.bias.value, run, scalars.ptr, () => conv.bias.grad.toFloat32());
      check(x, run, scalars.ptr, () => dx!.toFloat32());
    });
  });
});
