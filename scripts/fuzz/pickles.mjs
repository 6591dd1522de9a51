// The trace fuzzer's mutations of PyTorch snapshots (pickles): opcodes with huge length and index
// fields, nesting hundreds of thousands deep, snapshot fields given hostile values, and
// memoization bombs.
import { int, pick } from './draw.mjs';
import { pickle } from './pickle.mjs';
import { snapshotValue } from './seeds.mjs';

/** Opcodes with a length or index field, followed by the largest values it holds. */
const lengthOpcodes = [0x58, 0x8d, 0x8e, 0x8b, 0x95, 0x6a, 0x72, 0x42, 0x54, 0x96, 0x8c, 0x43, 0x68];

function hugeLength(data, rnd) {
  const at = int(rnd, data.length + 1);
  const value = pick(rnd, [
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    [0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0],
    [0, 0, 0, 0x80, 0, 0, 0, 0],
    [0, 0, 0x40, 0, 0, 0, 0, 0],
  ]);
  return Buffer.concat([data.subarray(0, at), Buffer.from([pick(rnd, lengthOpcodes), ...value]), data.subarray(at)]);
}

/** Nesting thousands deep put in at any point: marks, lists appended into lists, dicts in dicts. */
function deepPickle(data, rnd) {
  const n = pick(rnd, [100, 1000, 10_000, 200_000]);
  const kind = int(rnd, 3);
  const piece =
    kind === 0
      ? Buffer.alloc(n, '(')
      : kind === 1
        ? Buffer.concat([Buffer.alloc(n, ']'), Buffer.alloc(n - 1, 'a')])
        : Buffer.concat([Buffer.from('K\x01}'.repeat(n), 'latin1'), Buffer.alloc(n, 's')]);
  const at = rnd() < 0.5 ? Math.max(0, data.lastIndexOf(0x2e)) : int(rnd, data.length + 1);
  return Buffer.concat([data.subarray(0, at), piece, data.subarray(at)]);
}

/** A hostile value for a snapshot field. */
function hostileValue(rnd) {
  switch (int(rnd, 8)) {
    case 0:
      return pick(rnd, [-1, 2 ** 53, 2 ** 53 + 2, 2 ** 64, -(2 ** 63), 2 ** 70, 1e300, -0.5, Number.NaN, Number.POSITIVE_INFINITY]);
    case 1:
      return pick(rnd, [null, true, false, '', 'alloc', 'segment_free', 'free_completed', 'active_allocated', 0, 1]);
    case 2: {
      let v = [];
      for (let d = pick(rnd, [10, 1000, 20_000]); d > 0; d--) v = [v];
      return v;
    }
    case 3:
      return 'f'.repeat(pick(rnd, [1000, 600_000]));
    case 4:
      return Array.from({ length: pick(rnd, [1000, 100_000]) }, () => null);
    case 5:
      return { filename: 'x'.repeat(pick(rnd, [10, 600_000])), line: pick(rnd, [1, -1, 2 ** 60]), name: pick(rnd, [null, 'f', 3]) };
    case 6:
      return [];
    default:
      return {};
  }
}

/** A generated snapshot with one field somewhere given a hostile value. */
function snapshotField(_data, rnd) {
  const value = snapshotValue({ entries: 30 });
  const containers = [];
  const walk = (v, depth) => {
    if (v === null || typeof v !== 'object' || depth > 6) return;
    containers.push(v);
    for (const child of Object.values(v)) walk(child, depth + 1);
  };
  walk(value, 0);
  for (let k = 1 + int(rnd, 3); k > 0; k--) {
    const target = pick(rnd, containers);
    const keys = Array.isArray(target) ? target.map((_, i) => i) : Object.keys(target);
    if (keys.length === 0) continue;
    target[pick(rnd, keys)] = hostileValue(rnd);
  }
  return pickle(value, rnd() < 0.5 ? 2 : 4);
}

/**
 * A memoization bomb: a small pickle whose references to one memoized object multiply it. Entries
 * whose frames (one shared list, or a list each) hold one frame with a long filename (a 600 KB one
 * in a list each of 25,000 entries once ran the reader out of heap), one segment listed many
 * times, or settings of shared dicts.
 */
function memoBomb(_data, rnd) {
  const kind = int(rnd, 3);
  if (kind === 0) {
    const frame = { filename: `/${'a'.repeat(pick(rnd, [1024, 65_536, 600_000]))}.py`, line: 1, name: 'f'.repeat(pick(rnd, [1, 600_000])) };
    const length = pick(rnd, [1, 100]);
    const shared = Array.from({ length }, () => frame);
    // one list shared by every entry, or a fresh list per entry holding the one frame
    const framesOf = rnd() < 0.5 ? () => shared : () => Array.from({ length }, () => frame);
    return pickle(snapshotValue({ entries: pick(rnd, [1000, 5000, 25_000]), framesOf }), 4);
  }
  const value = snapshotValue({ entries: 10 });
  if (kind === 1) {
    const segment = value.segments[0];
    segment.blocks = Array.from({ length: pick(rnd, [100, 1000]) }, () => segment.blocks[0]);
    value.segments = Array.from({ length: pick(rnd, [1000, 50_000]) }, () => segment);
  } else {
    let level = {};
    for (let d = pick(rnd, [4, 8]); d > 0; d--) {
      const next = {};
      for (let k = 0; k < 100; k++) next[`k${k}`] = level;
      level = next;
    }
    value.allocator_settings = level;
  }
  return pickle(value, 4);
}

/** The mutations of a snapshot, by name. */
export const snapshotMutations = {
  'huge-length': hugeLength,
  'deep-nesting': deepPickle,
  'snapshot-field': snapshotField,
  'memo-bomb': memoBomb,
};
