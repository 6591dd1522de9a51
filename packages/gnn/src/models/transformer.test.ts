/**
 * The transformer on the CPU kernels: its forward against a plain float64 reference written out
 * here (embeddings, pre-LN blocks with causal multi-head attention and a tanh-GELU MLP, the tied
 * head), causality, every parameter's gradient against finite differences of the loss, and every
 * activation freed by backward.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HostAllocator } from '@gpumem/allocator-core';
import { xorshift32 } from '@gpumem/allocator-core/tools';
import { Runtime } from '../framework/runtime.js';
import { softmaxCrossEntropy } from '../framework/nn.js';
import type { Tensor } from '../framework/tensor.js';
import { Transformer, transformerParameters, type TransformerConfig } from './transformer.js';

const config: TransformerConfig = { vocab: 7, context: 6, embed: 8, heads: 2, layers: 2 };
const [B, T] = [2, 5];

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

/** xorshift32 values in [-scale, scale). */
function random(n: number, seed: number, scale: number): Float32Array {
  const out = new Float32Array(n);
  const next = xorshift32((seed * 2654435761) >>> 0 || 1);
  for (let i = 0; i < n; i++) out[i] = (next() / 2 ** 32 - 0.5) * 2 * scale;
  return out;
}

const tokens = Int32Array.from({ length: B * T }, (_, i) => (i * 5 + 3) % config.vocab);
const targets = Int32Array.from({ length: B * T }, (_, i) => (i * 3 + 1) % config.vocab);

/** A model whose parameters are all random (LayerNorms' gammas around 1), so every gradient is well away from 0. */
function randomModel(): Transformer {
  const model = new Transformer(rt, config, 1);
  const values = random(model.params.size, 11, 0.5);
  for (const p of model.params.list) {
    if (/ln.*\.weight$/.test(p.name)) {
      const at = (p.value.ptr - model.params.values.ptr) / 4;
      for (let i = 0; i < p.value.size; i++) values[at + i] = 1 + values[at + i]!;
    }
  }
  model.params.values.write(values);
  return model;
}

/** The logits [B*T, V] of the model's parameters for `tokens`, in float64, from the definitions. */
function referenceLogits(model: Transformer, tok: Int32Array): Float64Array {
  const { vocab: V, embed: C, heads: H, layers: L } = config;
  const D = C / H;
  const rows = B * T;
  const all = model.params.values.toFloat32();
  const param = (name: string) => {
    const p = model.params.get(name);
    const at = (p.value.ptr - model.params.values.ptr) / 4;
    return all.subarray(at, at + p.value.size);
  };
  const layerNorm = (x: Float64Array, name: string) => {
    const [g, b] = [param(`${name}.weight`), param(`${name}.bias`)];
    const y = new Float64Array(x.length);
    for (let r = 0; r < rows; r++) {
      const row = x.subarray(r * C, (r + 1) * C);
      const mean = row.reduce((a, v) => a + v, 0) / C;
      const variance = row.reduce((a, v) => a + (v - mean) ** 2, 0) / C;
      for (let c = 0; c < C; c++) y[r * C + c] = ((row[c]! - mean) / Math.sqrt(variance + 1e-5)) * g[c]! + b[c]!;
    }
    return y;
  };
  const linear = (x: Float64Array, name: string, inF: number, outF: number) => {
    const [w, bias] = [param(`${name}.weight`), param(`${name}.bias`)];
    const y = new Float64Array(rows * outF);
    for (let r = 0; r < rows; r++)
      for (let o = 0; o < outF; o++) {
        let s = bias[o]!;
        for (let i = 0; i < inF; i++) s += x[r * inF + i]! * w[o * inF + i]!;
        y[r * outF + o] = s;
      }
    return y;
  };
  const [wte, wpe] = [param('wte'), param('wpe')];
  let x = new Float64Array(rows * C);
  for (let r = 0; r < rows; r++) for (let c = 0; c < C; c++) x[r * C + c] = wte[tok[r]! * C + c]! + wpe[(r % T) * C + c]!;
  for (let l = 0; l < L; l++) {
    const qkv = linear(layerNorm(x, `h${l}.ln1`), `h${l}.attn.qkv`, C, 3 * C);
    const y = new Float64Array(rows * C);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let i = 0; i < T; i++) {
          const at = (t: number, part: number, d: number) => qkv[(b * T + t) * 3 * C + part * C + h * D + d]!;
          const scores = Array.from({ length: i + 1 }, (_, j) => {
            let s = 0;
            for (let d = 0; d < D; d++) s += at(i, 0, d) * at(j, 1, d);
            return s / Math.sqrt(D);
          });
          const max = Math.max(...scores);
          const e = scores.map((s) => Math.exp(s - max));
          const z = e.reduce((a, v) => a + v, 0);
          for (let d = 0; d < D; d++) y[(b * T + i) * C + h * D + d] = e.reduce((a, p, j) => a + (p / z) * at(j, 2, d), 0);
        }
    const x1 = linear(y, `h${l}.attn.proj`, C, C).map((v, i) => v + x[i]!);
    const hidden = linear(layerNorm(x1, `h${l}.ln2`), `h${l}.mlp.fc`, C, 4 * C).map(
      (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3))),
    );
    x = linear(hidden, `h${l}.mlp.proj`, 4 * C, C).map((v, i) => v + x1[i]!);
  }
  const xf = layerNorm(x, 'lnf');
  const logits = new Float64Array(rows * V);
  for (let r = 0; r < rows; r++)
    for (let v = 0; v < V; v++) {
      let s = 0;
      for (let c = 0; c < C; c++) s += xf[r * C + c]! * wte[v * C + c]!;
      logits[r * V + v] = s;
    }
  return logits;
}

describe('the transformer on the CPU kernels', () => {
  it('has the parameters of its sizes, initialised as GPT-2 (weights N(0, 0.02), biases 0, LayerNorms 1 and 0)', () => {
    const model = new Transformer(rt, { vocab: 50, context: 64, embed: 32, heads: 4, layers: 3 }, 0);
    expect(model.params.size).toBe(transformerParameters({ vocab: 50, context: 64, embed: 32, heads: 4, layers: 3 }));
    expect(model.params.size).toBe(50 * 32 + 64 * 32 + 3 * (12 * 32 * 32 + 13 * 32) + 2 * 32);
    const wte = model.params.get('wte').value.toFloat32();
    const std = Math.sqrt(wte.reduce((a, v) => a + v * v, 0) / wte.length);
    expect(std).toBeGreaterThan(0.018);
    expect(std).toBeLessThan(0.022);
    expect([...model.params.get('h1.attn.qkv.bias').value.toFloat32()].every((v) => v === 0)).toBe(true);
    expect([...model.params.get('h2.ln2.weight').value.toFloat32()].every((v) => v === 1)).toBe(true);
    expect([...model.params.get('lnf.bias').value.toFloat32()].every((v) => v === 0)).toBe(true);
    model.dispose();
  });

  it('computes the logits of the definitions (float64 reference) within float32 rounding', () => {
    const model = randomModel();
    const input = rt.keep(rt.fromArray(tokens, [B * T]));
    const logits = model.forward(input, B, T, false).toFloat32();
    const expected = referenceLogits(model, tokens);
    let worst = 0;
    for (let i = 0; i < expected.length; i++)
      worst = Math.max(worst, Math.abs(logits[i]! - expected[i]!) / Math.max(1, Math.abs(expected[i]!)));
    expect(worst).toBeLessThan(1e-4);
    expect(rt.liveTensors).toBe(4); // parameters, gradients, tokens, logits: evaluation keeps nothing else
  });

  it('is causal: a token changes the logits of its own and later positions only', () => {
    const model = randomModel();
    const run = (tok: Int32Array) => rt.scope(() => model.forward(rt.fromArray(tok, [B * T]), B, T, false).toFloat32());
    const before = run(tokens);
    const changed = Int32Array.from(tokens);
    changed[3] = (changed[3]! + 1) % config.vocab; // sequence 0, position 3
    const after = run(changed);
    const V = config.vocab;
    for (let r = 0; r < B * T; r++) {
      const same = before.subarray(r * V, (r + 1) * V).every((v, i) => v === after[r * V + i]);
      expect(same, `row ${r}`).toBe(r < 3 || r >= T); // the rows before it, and the other sequence, unchanged
    }
  });

  it("every parameter's gradient matches central differences of the loss, and backward frees every activation", () => {
    const model = randomModel();
    const input = rt.keep(rt.fromArray(tokens, [B * T]));
    const labels = rt.keep(rt.fromArray(targets, [B * T]));
    const scalars = rt.keep(rt.zeros([2], 'i32'));
    const live = rt.liveTensors;
    const lossOf = (backward: boolean): number =>
      rt.scope(() => {
        const logits = model.forward(input, B, T, backward);
        const d: Tensor = softmaxCrossEntropy(rt, logits, labels, B * T, scalars.ptr, scalars.ptr + 4);
        logits.dispose();
        if (backward) model.backward(d);
        expect(rt.liveTensors).toBe(live + (backward ? 0 : 1)); // without backward, dLogits is the scope's
        const out = new Float32Array(1);
        allocator.read(scalars.ptr, out);
        return out[0]!;
      });
    lossOf(true);
    const grads = model.params.grads.toFloat32();
    const values = model.params.values.toFloat32();
    const step = 1e-2;
    let checked = 0;
    for (const p of model.params.list) {
      const at = (p.value.ptr - model.params.values.ptr) / 4;
      // a few elements of each: for wpe, rows of positions the batch uses and one it does not (gradient 0)
      const picks = p.name === 'wpe' ? [0, 9, 4 * 8 + 3, 5 * 8 + 1] : [0, Math.floor(p.value.size / 2), p.value.size - 1];
      for (const i of picks) {
        const original = values[at + i]!;
        const lossAt = (v: number) => {
          model.params.values.write(Float32Array.of(v), at + i);
          return lossOf(false);
        };
        const numeric = (lossAt(original + step) - lossAt(original - step)) / (2 * step);
        model.params.values.write(Float32Array.of(original), at + i);
        const analytic = grads[at + i]!;
        expect(Math.abs(numeric - analytic), `${p.name}[${i}]: numeric ${numeric}, analytic ${analytic}`).toBeLessThanOrEqual(
          Math.max(5e-4, 2e-2 * Math.abs(numeric)),
        );
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(60);
    expect(grads.subarray(0, config.vocab * config.embed).some((g) => g !== 0)).toBe(true);
  });
});
