// The trace fuzzer's byte-level mutations, for every reader: bytes flipped (to opcodes of a pickle,
// to the punctuation and digits of a text), truncation, deletion, splicing and insertion from
// another seed, and a section repeated many times (whole lines of a text). Each takes the content,
// the generator, the format and another seed's content, and returns new content.
import { int, pick } from './draw.mjs';

const MiB = 2 ** 20;
/** The most content a repeated section may grow a case to. */
const maxRepeatBytes = 8 * MiB;

const textBytes = [0x22, 0x2c, 0x2d, 0x2e, 0x30, 0x31, 0x39, 0x3a, 0x5b, 0x5d, 0x7b, 0x7d, 0x0a, 0x0d, 0x20, 0x00, 0x7f, 0xc3, 0xff];
const pickleBytes = [
  0x28, 0x2e, 0x30, 0x31, 0x32, 0x4a, 0x4b, 0x4d, 0x4e, 0x58, 0x5d, 0x61, 0x65, 0x68, 0x6a, 0x71, 0x72, 0x73, 0x75, 0x7d, 0x80, 0x85, 0x86,
  0x87, 0x8a, 0x8b, 0x8c, 0x8d, 0x94, 0x95, 0x00, 0x7f, 0xff,
];

function flip(data, rnd, format) {
  const out = Buffer.from(data);
  if (out.length === 0) return out;
  const interesting = format === 'torch-snapshot' ? pickleBytes : textBytes;
  for (let k = 1 + int(rnd, 8); k > 0; k--) out[int(rnd, out.length)] = rnd() < 0.5 ? int(rnd, 256) : pick(rnd, interesting);
  return out;
}

const truncate = (data, rnd) => data.subarray(0, int(rnd, data.length + 1));

function remove(data, rnd) {
  const start = int(rnd, data.length + 1);
  return Buffer.concat([data.subarray(0, start), data.subarray(start + 1 + int(rnd, 256))]);
}

function splice(data, rnd, _format, other) {
  return Buffer.concat([data.subarray(0, int(rnd, data.length + 1)), other.subarray(int(rnd, other.length + 1))]);
}

function insert(data, rnd, _format, other) {
  const at = int(rnd, data.length + 1);
  const from = int(rnd, other.length + 1);
  return Buffer.concat([data.subarray(0, at), other.subarray(from, from + 1 + int(rnd, 4096)), data.subarray(at)]);
}

/** A section repeated many times: whole lines of a text, a run of bytes of a pickle. */
function repeat(data, rnd, format) {
  let start = int(rnd, data.length + 1);
  let end = Math.min(data.length, start + 1 + int(rnd, 64));
  if (format !== 'torch-snapshot') {
    start = data.lastIndexOf(0x0a, start - 1) + 1;
    let next = start;
    for (let lines = 1 + int(rnd, 3); lines > 0 && next < data.length; lines--) {
      const nl = data.indexOf(0x0a, next);
      next = nl < 0 ? data.length : nl + 1;
    }
    end = Math.max(next, start + 1);
  }
  const section = data.subarray(start, end);
  const times = Math.min(pick(rnd, [2, 10, 100, 1000, 10_000, 100_000]), Math.floor(maxRepeatBytes / Math.max(1, section.length)));
  return Buffer.concat([data.subarray(0, start), ...Array.from({ length: times }, () => section), data.subarray(start)]);
}

/** The byte-level mutations, by name. */
export const byteMutations = { flip, truncate, remove, splice, insert, repeat };
