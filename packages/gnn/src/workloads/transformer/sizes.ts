/**
 * The transformer's sizes from its options: defaults filled in and every bound checked, before
 * anything is allocated. The command line asks for the first problem (naming its flags), train()
 * and the memory estimate get a RangeError with the same words (naming train()'s options).
 * @module
 */
import type { OptionNames } from '../workload.js';
import { transformerDefaults } from './defaults.js';
import type { TransformerTrainOptions } from './options.js';

/** The transformer's sizes, every one given or defaulted. */
export interface TransformerSizes {
  vocab: number;
  embed: number;
  heads: number;
  layers: number;
  context: number;
  minLen: number;
  maxLen: number;
  minBatch: number;
  maxBatch: number;
  stepsPerEpoch: number;
}

/** Elements of one tensor the kernels index with 32-bit integers. */
const maxElements = 2 ** 31 - 1;

/**
 * The sizes of `o` with the defaults filled in, or the first problem with them (naming options
 * through `name`): integers out of range, a width that the heads do not divide, a schedule whose
 * bounds are reversed or longer than the context, tensors past 32-bit indices (options of other
 * workloads are refused before: workloads/taken-options.ts).
 */
export function transformerSizes(o: Partial<TransformerTrainOptions>, name: OptionNames): TransformerSizes | string {
  if (o.dataset !== undefined && o.dataset !== transformerDefaults.dataset)
    return `'${name('dataset')}' must be '${transformerDefaults.dataset}' for the transformer (received '${String(o.dataset)}')`;
  const sizes = {} as TransformerSizes;
  const bounds: Record<keyof TransformerSizes, [number, number]> = {
    vocab: [2, 2 ** 21],
    embed: [1, 65536],
    heads: [1, 65536],
    layers: [1, 1024],
    context: [1, 2 ** 20],
    minLen: [1, 2 ** 20],
    maxLen: [1, 2 ** 20],
    minBatch: [1, 2 ** 20],
    maxBatch: [1, 2 ** 20],
    stepsPerEpoch: [1, 2 ** 24],
  };
  for (const key of Object.keys(bounds) as Array<keyof TransformerSizes>) {
    const value = o[key] ?? transformerDefaults[key];
    const [min, max] = bounds[key];
    if (!Number.isSafeInteger(value) || value < min || value > max)
      return `'${name(key)}' must be an integer from ${min} to ${max} (received ${String(value)})`;
    sizes[key] = value;
  }
  const { vocab, embed, heads, context, minLen, maxLen, minBatch, maxBatch } = sizes;
  if (embed % heads !== 0)
    return `'${name('embed')}' ${embed} must be a multiple of '${name('heads')}' ${heads} (each head is embed / heads wide)`;
  if (minLen > maxLen) return `'${name('minLen')}' ${minLen} must be at most '${name('maxLen')}' ${maxLen}`;
  if (maxLen > context)
    return `'${name('maxLen')}' ${maxLen} must be at most '${name('context')}' ${context} (the position embedding's rows)`;
  if (minBatch > maxBatch) return `'${name('minBatch')}' ${minBatch} must be at most '${name('maxBatch')}' ${maxBatch}`;
  const rows = maxBatch * maxLen;
  const widest = Math.max(vocab, 4 * embed);
  if (rows * widest > maxElements)
    return `'${name('maxBatch')}' x '${name('maxLen')}' x ${widest === vocab ? `'${name('vocab')}'` : `4 x '${name('embed')}'`} must be at most ${maxElements.toLocaleString('en-US')} (tensors are indexed with 32-bit integers) but is ${(rows * widest).toLocaleString('en-US')}`;
  if (rows * heads * maxLen > maxElements)
    return `'${name('maxBatch')}' x '${name('heads')}' x '${name('maxLen')}'² (the attention scores) must be at most ${maxElements.toLocaleString('en-US')} (tensors are indexed with 32-bit integers) but is ${(rows * heads * maxLen).toLocaleString('en-US')}`;
  return sizes;
}

/** {@link transformerSizes} for train(): the sizes, or a RangeError naming train()'s options. */
export function checkedTransformerSizes(o: Partial<TransformerTrainOptions>): TransformerSizes {
  const sizes = transformerSizes(o, (option) => option);
  if (typeof sizes === 'string') throw new RangeError(`Expected transformer options that fit together: ${sizes}`);
  return sizes;
}
