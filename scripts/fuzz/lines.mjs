// The trace fuzzer's mutations of the line formats (gpumem's JSONL, RMM's CSV): hostile numbers,
// hostile values for each JSON field (wrong types, deep nesting, long strings, many tags), lines at
// and past the reader's limit, blank lines past its limit, hostile CSV fields, and RMM times that
// run far past the first one.
import { maxBlankTraceLines, maxTraceLineChars } from '@gpumem/trace';
import { int, pick } from './draw.mjs';

const MiB = 2 ** 20;

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

/** The mutations of each line format, by name. */
export const jsonlMutations = { number, 'json-field': jsonlField, 'tags-bomb': tagsBomb, 'long-lines': longLines };
export const rmmCsvMutations = { number, 'csv-field': csvField, 'long-lines': longLines, 'rmm-times': rmmTimes };
