// The trace fuzzer's cases: a seed and a mutation drawn from one seeded generator, so that case N of
// seed S is the same input on every run. Mutations work on the uncompressed content and the case is
// compressed again where the seed was (so they reach the reader past gzip's check), or on the
// compressed bytes themselves. Besides byte-level ones (flips, truncation, splicing, repeated
// sections) each reader has its own: hostile field values, huge length fields, deep nesting,
// memoization bombs, and gzip bombs of bounded size.
import { createGzip, gzipSync } from 'node:zlib';
import { maxBlankTraceLines, maxTraceLineChars } from '@gpumem/trace';
import { pickle } from './pickle.mjs';
import { fuzzFormats, snapshotValue } from './seeds.mjs';

const MiB = 2 ** 20;
/** Deflate's largest ratio of output to input: a corrupt stream decompresses to at most this much more. */
const maxDeflateRatio = 1032;
/** The most content a repeated section may grow a case to. */
const maxRepeatBytes = 8 * MiB;

const pick = (rnd, items) => items[Math.floor(rnd() * items.length)];
const int = (rnd, below) => Math.floor(rnd() * below);

/** gzip of `piece` repeated `count` times, as concatenated members (each member compressed once). */
const memberCache = new Map();
function repeatedMembers(piece, count) {
  const key = piece.toString('latin1');
  let member = memberCache.get(key);
  if (member === undefined) {
    member = gzipSync(piece, { level: 9 });
    if (memberCache.size < 64) memberCache.set(key, member);
  }
  return Array.from({ length: count }, () => member);
}

/** `filler` repeated to about 1 MiB. */
function mebibyteOf(filler) {
  return Buffer.concat(Array.from({ length: Math.max(1, Math.floor(MiB / filler.length)) }, () => filler));
}

/**
 * `head`, then `filler` repeated to about `bytes`, then `tail`, gzipped in 1 MiB members (gzip's
 * trailer then gives the size of the last member only): a bomb built without holding its content.
 */
function gzipBomb(head, filler, bytes, tail = Buffer.alloc(0)) {
  const piece = mebibyteOf(filler);
  const count = Math.max(1, Math.round(bytes / piece.length));
  const file = Buffer.concat([gzipSync(head), ...repeatedMembers(piece, count), gzipSync(tail)]);
  return { file, contentBytes: head.length + count * piece.length + tail.length };
}

/** The same content as {@link gzipBomb} as one gzip member, compressed a mebibyte at a time. */
async function gzipBombMember(head, filler, bytes) {
  const piece = mebibyteOf(filler);
  const count = Math.max(1, Math.round(bytes / piece.length));
  const gzip = createGzip({ level: 9 });
  const out = [];
  gzip.on('data', (d) => out.push(d));
  const done = new Promise((resolve, reject) => gzip.on('end', resolve).on('error', reject));
  gzip.write(head);
  for (let i = 0; i < count; i++) if (!gzip.write(piece)) await new Promise((resolve) => gzip.once('drain', resolve));
  gzip.end();
  await done;
  return { file: Buffer.concat(out), contentBytes: head.length + count * piece.length };
}

// ---- byte-level mutations, for every reader -------------------------------------------------------

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

// ---- line formats (JSONL, RMM CSV) ----------------------------------------------------------------

const hostileNumbers = [
  '-1',
  '0.5',
  '1e308',
  '1e-7',
  '-0',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '18446744073709551616',
  '99999999999999999999999999999',
  '4294967295',
  '4294967296',
  'NaN',
  'Infinity',
  '0x7fffffffffffffff',
  '00000000000000000000000001',
];

/** A number of the text replaced by a hostile one. */
function number(data, rnd) {
  const text = data.toString('utf8');
  const numbers = [...text.matchAll(/-?\d+(?:\.\d+)?/g)];
  if (numbers.length === 0) return data;
  const m = pick(rnd, numbers);
  return Buffer.from(`${text.slice(0, m.index)}${pick(rnd, hostileNumbers)}${text.slice(m.index + m[0].length)}`, 'utf8');
}

/** A JSON value nested `depth` deep: arrays, objects, or both. */
function deepValue(depth, rnd) {
  const kind = int(rnd, 3);
  if (kind === 0) return `${'['.repeat(depth)}${']'.repeat(depth)}`;
  if (kind === 1) return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  return `${'[{"a":'.repeat(depth)}1${'}]'.repeat(depth)}`;
}

/** Many tag names, some of them repeated (tags that share a name are one tag). */
function manyTags(rnd) {
  const count = pick(rnd, [100, 10_000, 100_000]);
  const distinct = Math.max(1, Math.floor(count * pick(rnd, [0.01, 0.5, 0.99])));
  return JSON.stringify(Array.from({ length: count }, (_, i) => `t${i % distinct}`));
}

/** A JSON header whose tags are many names, some of them repeated, and events tagged up to past the last. */
function tagsBomb(data, rnd) {
  const lines = data.toString('utf8').split('\n');
  let header;
  try {
    header = JSON.parse(lines[0]);
  } catch {
    return data;
  }
  if (header === null || typeof header !== 'object') return data;
  const { tags: _, ...rest } = header;
  const body = JSON.stringify(rest).slice(1, -1);
  lines[0] = `{${body}${body ? ',' : ''}"tags":${manyTags(rnd)}}`;
  return Buffer.from(lines.join('\n'), 'utf8');
}

/** A JSON value a field may be given: wrong types, hostile numbers, deep nesting, long and many strings. */
function hostileJson(rnd) {
  switch (int(rnd, 7)) {
    case 0:
      return pick(
        rnd,
        hostileNumbers.filter((n) => !/^(NaN|Infinity|0x|0\d)/.test(n)),
      );
    case 1:
      return pick(rnd, ['null', 'true', '""', '[]', '{}', '"alloc"', '"oom"', '"gpumem-trace"', '1', '0', '[1]', '{"model":"gcn"}']);
    case 2:
      return deepValue(pick(rnd, [31, 32, 33, 100, 5000, 100_000]), rnd);
    case 3:
      return JSON.stringify('x'.repeat(pick(rnd, [100, 65_536, maxTraceLineChars - 100, maxTraceLineChars + 1])));
    case 4:
      return manyTags(rnd);
    case 5:
      return JSON.stringify(Array.from({ length: pick(rnd, [10, 10_000]) }, (_, i) => ({ [`k${i}`]: [i] })));
    default:
      return `"${'\\ud800'.repeat(pick(rnd, [1, 1000]))}"`;
  }
}

const jsonlKeys = ['format', 'version', 'source', 'allocator', 'device', 'createdAt', 'workload', 'tags', 'droppedEvents', 'eventCount'];
const eventKeys = ['timeNs', 'action', 'ptr', 'bytes', 'stream', 'tag', 'reservedBytes', 'thread'];

/** Line `i` of `lines` (the header or an event) given a hostile value for one field, or a field removed. */
function jsonlField(data, rnd) {
  const lines = data.toString('utf8').split('\n');
  const i = rnd() < 0.5 ? 0 : int(rnd, lines.length);
  const keys = i === 0 ? jsonlKeys : eventKeys;
  const key = rnd() < 0.9 ? pick(rnd, keys) : `extra${int(rnd, 10)}`;
  let object;
  try {
    object = JSON.parse(lines[i]);
  } catch {
    return data;
  }
  if (object === null || typeof object !== 'object') return data;
  if (rnd() < 0.15) {
    delete object[key];
    lines[i] = JSON.stringify(object);
  } else {
    const { [key]: _, ...rest } = object;
    const body = JSON.stringify(rest).slice(1, -1);
    lines[i] = `{${body}${body ? ',' : ''}${JSON.stringify(key)}:${hostileJson(rnd)}}`;
  }
  return Buffer.from(lines.join('\n'), 'utf8');
}

/** A line about as long as the reader's limit (or longer), or many blank lines, at a line boundary. */
function longLines(data, rnd, format) {
  const text = data.toString('utf8');
  const breaks = [0, ...[...text.matchAll(/\n/g)].map((m) => m.index + 1)];
  const at = pick(rnd, breaks);
  let inserted;
  if (rnd() < 0.5) {
    const length = pick(rnd, [maxTraceLineChars - 1, maxTraceLineChars, maxTraceLineChars + 1, 2.5 * MiB]);
    const body = format === 'jsonl' ? `{"action":"alloc","x":"${'y'.repeat(length)}"}` : `1,${'9'.repeat(length)},allocate,0x1,1,0x0`;
    inserted = rnd() < 0.5 ? `${body}\n` : body;
  } else {
    const count = pick(rnd, [1000, maxBlankTraceLines - 1, maxBlankTraceLines + 1]);
    inserted = pick(rnd, ['\n', '\r\n', ' \n', '\t\r\n']).repeat(count);
  }
  return Buffer.from(`${text.slice(0, at)}${inserted}${text.slice(at)}`, 'utf8');
}

const csvValues = {
  0: ['0', '', ' ', '-1', '9007199254740993', '1'.repeat(40), '0x10'],
  1: [
    '99:99:99',
    '23:59:60.999999999',
    '24:00:00',
    '00:00:00.0000000001',
    '999999999999.999999999',
    '999999999999',
    '0.000000001',
    '1:2:3',
    '12:00:00:123456',
    '',
  ],
  2: ['allocate', 'free', 'allocate failure', 'ALLOCATE', 'deallocate', '', 'allocate failure,'],
  3: ['(nil)', '0x0', '0x', '-1', 'fffffffffffff', 'fffffffffffffff', `0x${'f'.repeat(20)}`, `0x${'0'.repeat(30)}1`, 'zz'],
  4: ['0', '', '-1', '1.5', '9007199254740991', '9007199254740992', '1e9', `${'9'.repeat(400)}`],
  5: ['(nil)', '0x0', `0x${'f'.repeat(16)}`, '0x1fffffffffffff', '0x20000000000000', 'x'],
};

/** A field of a CSV row given a hostile value. */
function csvField(data, rnd) {
  const lines = data.toString('utf8').split('\n');
  if (lines.length < 2) return data;
  const i = 1 + int(rnd, lines.length - 1);
  const fields = lines[i].replace(/\r$/, '').split(',');
  if (fields.length !== 6) return data;
  const column = int(rnd, 6);
  fields[column] = pick(rnd, csvValues[column]);
  lines[i] = fields.join(',');
  return Buffer.from(lines.join('\n'), 'utf8');
}

/** An RMM log whose time of day goes back past an hour again and again (a day added each time), or far forward. */
function rmmTimes(_data, rnd) {
  const rows = pick(rnd, [100, 1000, 20_000]);
  const times = pick(rnd, [
    ['23:59:59.000000', '00:00:01.000000'],
    ['12:00:00.000001', '10:00:00.000000'],
    ['0.000001', '999999999999.5'],
  ]);
  const lines = ['Thread,Time,Action,Pointer,Size,Stream'];
  for (let i = 0; i < rows; i++)
    lines.push(`1,${times[i % times.length]},${i % 2 ? 'free' : 'allocate'},0x${(4096 * (1 + (i >> 1))).toString(16)},64,0x0`);
  return Buffer.from(`${lines.join('\n')}\n`, 'utf8');
}

// ---- PyTorch snapshots (pickles) ------------------------------------------------------------------

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

// ---- gzip bombs -----------------------------------------------------------------------------------

/**
 * A gzip bomb for `format` decompressing to about `bytes`: the size bombs of each reader. For a
 * pickle, `values` is the most values it holds at once.
 */
function bombFor(format, rnd, bytes) {
  if (format === 'torch-snapshot') {
    switch (int(rnd, 3)) {
      case 0: // a pickle's STOP, then zeros (its reader takes the content whole)
        return { ...gzipBomb(Buffer.from([0x80, 4, 0x4e, 0x2e]), Buffer.alloc(4096), bytes), values: 1 };
      case 1: {
        // NONEs held at once, up to the unpickler's cap on values
        // (at most 4 MiB: each costs a reference in a growing array, which takes seconds a few million)
        const bomb = gzipBomb(Buffer.from([0x80, 4, 0x28]), Buffer.alloc(4096, 'N'), Math.min(bytes, 4 * MiB), Buffer.from('l.'));
        return { ...bomb, values: bomb.contentBytes };
      }
      default: {
        // a snapshot, then its own bytes over and over
        const bomb = gzipBomb(pickle(snapshotValue(), 4), pickle(snapshotValue(), 4), bytes);
        return { ...bomb, values: bomb.contentBytes };
      }
    }
  }
  const head = Buffer.from(
    format === 'jsonl'
      ? '{"format":"gpumem-trace","version":1,"source":"bomb"}\n'
      : 'Thread,Time,Action,Pointer,Size,Stream\n140437529597760,14:03:21.100012,allocate,0x7f3a2c000000,4000000,0x0\n',
  );
  const row =
    format === 'jsonl'
      ? '{"timeNs":1,"action":"alloc","ptr":4096,"bytes":64,"stream":0,"tag":0}\n'
      : '140437529597760,14:03:21.100012,free,0x7f3a2c000000,4000000,0x0\n';
  const filler = pick(rnd, [row, '\n', 'x', `${row.trimEnd()},`]);
  return { ...gzipBomb(head, Buffer.from(filler), bytes), values: 0 };
}

// ---- cases ----------------------------------------------------------------------------------------

/** The mutations of each reader, by name: (content, rnd, format, other content) => content. */
const contentMutations = {
  common: { flip, truncate, remove, splice, insert, repeat },
  jsonl: { number, 'json-field': jsonlField, 'tags-bomb': tagsBomb, 'long-lines': longLines },
  'rmm-csv': { number, 'csv-field': csvField, 'long-lines': longLines, 'rmm-times': rmmTimes },
  'torch-snapshot': { 'huge-length': hugeLength, 'deep-nesting': deepPickle, 'snapshot-field': snapshotField, 'memo-bomb': memoBomb },
};

/** The most values content of `bytes` may hold: a pickle's every value costs at least one byte. */
const valuesOf = (format, bytes) => (format === 'torch-snapshot' ? bytes : 0);

/**
 * Case `index` of a run: a reader, one of its seeds (of `seeds`, drawn with `rnd`) and a mutation. Returns the bytes
 * of the file, the reader's options, `contentBytes` (the most the file can decompress to) and
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
  if (s.gzip && roll < 0.15) {
    // the compressed bytes themselves: a corrupt or truncated stream, or a lying trailer
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

/**
 * The size bombs every run starts with: files that once broke a reader. A snapshot of 25,000 entries,
 * each with a frames list of its own holding one memoized frame with a 600 KB filename (it ran the
 * reader out of heap); a gzipped pickle of `N.` and `bombBytes` of zeros, one gzip member (its
 * content was held twice, which the memory allowance of 1.25 bytes a byte and 128 MiB catches from
 * some 200 MiB); JSONL headers holding an array 5,000 deep in each field (a stack overflow).
 */
export async function sizeBombs({ bombBytes }) {
  const frame = { filename: `/${'a'.repeat(600_000)}.py`, line: 7, name: 'forward' };
  const d1 = pickle(snapshotValue({ entries: 25_000, framesOf: () => [frame] }), 4);
  const d5 = await gzipBombMember(Buffer.from([0x80, 4, 0x4e, 0x2e]), Buffer.alloc(4096), bombBytes);
  const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
  const d6 = ['workload', 'eventCount', 'tags', 'source', 'format'].map((field) =>
    Buffer.from(
      `${field === 'format' ? `{"format":${deep},"version":1}` : `{"format":"gpumem-trace","version":1,"${field}":${deep}}`}\n`,
      'utf8',
    ),
  );
  const d1gz = gzipSync(d1, { level: 9 });
  return [
    {
      format: 'torch-snapshot',
      seed: 'size-bomb',
      mutation: 'frames-memo-bomb',
      bytes: d1gz,
      contentBytes: d1.length,
      values: d1.length,
      options: {},
    },
    {
      format: 'torch-snapshot',
      seed: 'size-bomb',
      mutation: 'zeros-after-stop',
      bytes: d5.file,
      contentBytes: d5.contentBytes,
      values: 1,
      options: {},
    },
    ...d6.map((bytes, i) => ({
      format: 'jsonl',
      seed: 'size-bomb',
      mutation: `deep-${['workload', 'eventCount', 'tags', 'source', 'format'][i]}`,
      bytes,
      contentBytes: bytes.length,
      values: 0,
      options: {},
    })),
  ];
}
