// The trace fuzzer's cases: a reader, one of its seeds and a mutation drawn from one seeded
// generator, so that case N of seed S is the same input on every run. Mutations work on the
// uncompressed content and the case is compressed again where the seed was (so they reach the
// reader past gzip's check), or on the compressed bytes themselves. Besides the byte-level ones
// (./bytes.mjs) each reader has its own (./lines.mjs, ./pickles.mjs), a few cases are gzip
// bombs of bounded size (./bombs.mjs), and a few amplify (./amplify.mjs: memo references and DUPs
// by the million, many frames, nested compression).
import { gzipSync } from 'node:zlib';
import { amplify } from './amplify.mjs';
import { bombFor } from './bombs.mjs';
import { byteMutations } from './bytes.mjs';
import { pick } from './draw.mjs';
import { jsonlMutations, rmmCsvMutations } from './lines.mjs';
import { snapshotMutations } from './pickles.mjs';
import { fuzzFormats } from './seeds.mjs';

const MiB = 2 ** 20;
/** Deflate's largest ratio of output to input: a corrupt stream decompresses to at most this much more. */
const maxDeflateRatio = 1032;

/** The mutations of each reader, by name: (content, rnd, format, other content) => content. */
const contentMutations = {
  common: byteMutations,
  jsonl: jsonlMutations,
  'rmm-csv': rmmCsvMutations,
  'torch-snapshot': snapshotMutations,
};

/** The most values content of `bytes` may hold: a pickle's every value costs at least one byte. */
const valuesOf = (format, bytes) => (format === 'torch-snapshot' ? bytes : 0);

/**
 * Case `index` of a run: a reader, one of its seeds (of `seeds`, drawn with `rnd`) and a mutation.
 * Returns the bytes of the file, the reader's options, `contentBytes` (the most the file can decompress to) and
 * `values` (the most values its content may hold at once: one a byte for a pickle, none for the
 * line formats), which the memory allowance of the case is measured against.
 */
export function fuzzCase(index, seeds, rnd) {
  const format = pick(rnd, fuzzFormats);
  const s = pick(
    rnd,
    seeds.filter((seed) => seed.format === format),
  );
  const other = pick(rnd, seeds).content;
  const options = {};
  if (s.format === 'torch-snapshot' && rnd() < 0.05) options.device = pick(rnd, [0, 1, 3]);
  const base = { index, format: s.format, seed: s.name, options };
  const roll = rnd();
  if (roll < 0.04) {
    const bytes = Math.floor(pick(rnd, [0.25, 1, 4, 16]) * MiB);
    if (rnd() < 0.3) options.maxDecompressedBytes = Math.floor(bytes / 2);
    const { file, contentBytes, values } = bombFor(s.format, rnd, bytes);
    return { ...base, mutation: 'gzip-bomb', bytes: file, contentBytes, values };
  }
  if (roll < 0.1) return { ...base, ...amplify(s.format, s.content, rnd) };
  if (s.gzip && roll < 0.15) {
    // the compressed bytes themselves: a corrupt or truncated stream, or a lying trailer
    const { flip, truncate, remove, splice } = byteMutations;
    const mutated = pick(rnd, [flip, truncate, remove, splice])(gzipSync(s.content), rnd, 'gzip', other);
    const contentBytes = Math.max(s.content.length, mutated.length * maxDeflateRatio);
    return { ...base, mutation: 'gzip-bytes', bytes: mutated, contentBytes, values: valuesOf(s.format, contentBytes) };
  }
  const own = contentMutations[s.format];
  const table = rnd() < 0.5 ? contentMutations.common : own;
  const names = Object.keys(table);
  const mutation = pick(rnd, names);
  let content = table[mutation](s.content, rnd, s.format, other);
  let name = mutation;
  if (rnd() < 0.25) {
    const second = pick(rnd, Object.keys(contentMutations.common));
    content = contentMutations.common[second](content, rnd, s.format, other);
    name = `${mutation}+${second}`;
  }
  const gzip = s.gzip ? rnd() < 0.9 : rnd() < 0.05;
  const bytes = gzip ? gzipSync(content, { level: 1 }) : content;
  return { ...base, mutation: name, bytes, contentBytes: content.length, values: valuesOf(s.format, content.length) };
}
