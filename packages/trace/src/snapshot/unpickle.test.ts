import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TraceFormatError } from '../format.js';
import { isPickle, PickleFormatError, unpickle, type PickleDict, type PickleValue } from './unpickle.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const load = (name: string) => readFileSync(fixture(name));

/** Pickle bytes from opcodes and operands: numbers are bytes, strings are latin1 text. */
function pk(...parts: (number | string | Buffer)[]): Buffer {
  return Buffer.concat(parts.map((p) => (typeof p === 'number' ? Buffer.from([p]) : typeof p === 'string' ? Buffer.from(p, 'latin1') : p)));
}
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
const u64 = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n);
  return b;
};
const PROTO4 = pk(0x80, 4);

/** The error `fn` throws (failing the test when it returns). */
function errorOf(fn: () => unknown): PickleFormatError {
  try {
    fn();
  } catch (e) {
    return e as PickleFormatError;
  }
  throw new Error('expected an error');
}

describe('unpickle', () => {
  it('reads protocols 2, 4 and 5 of the same snapshot to the same value', () => {
    const p2 = unpickle(load('snapshot-p2.pickle'));
    const p4 = unpickle(load('snapshot-p4.pickle'));
    const p5 = unpickle(load('snapshot-p5.pickle'));
    expect(p4).toEqual(p2);
    expect(p5).toEqual(p2);
    expect(p2).toBeInstanceOf(Map);
    const root = p2 as PickleDict;
    expect([...root.keys()]).toEqual(['segments', 'device_traces', 'allocator_settings', 'external_annotations']);
    const traces = root.get('device_traces') as PickleDict[][];
    expect(traces.map((t) => t.length)).toEqual([16, 7, 0]);
    const first = traces[0]![0]!;
    // LONG1 addresses beyond 2^31 and 2^32 come back as exact numbers
    expect(Object.fromEntries(first)).toMatchObject({
      action: 'segment_alloc',
      addr: 139_800_000_000_000,
      size: 20 << 20,
      stream: 0,
      time_us: 1_732_000_000_000_000,
    });
    // shared Python objects (a traceback's frame list) stay shared: the memo hands out the same value
    expect(traces[0]![1]!.get('frames')).toBe(first.get('frames'));
    expect(((first.get('frames') as PickleDict[])[0] as PickleDict).get('line')).toBe(42);
    const segment = (root.get('segments') as PickleDict[])[0]!;
    expect(segment.get('segment_pool_id')).toEqual([0, 0]);
    expect(Object.isFrozen(segment.get('segment_pool_id'))).toBe(true); // a tuple
    expect(segment.get('is_expandable')).toBe(false);
    const settings = root.get('allocator_settings') as PickleDict;
    expect(settings.get('max_split_size')).toBe(-1);
    expect(settings.get('garbage_collection_threshold')).toBe(0);
  });

  it('reads every scalar form: ints of each width and sign, big ints, floats, bools, None, strings, bytes', () => {
    const value = unpickle(
      pk(
        PROTO4,
        ']',
        '(',
        'K',
        200, // BININT1
        'M',
        0x34,
        0x12, // BININT2
        'J',
        u32(0xfffffffb), // BININT: -5
        0x8a,
        0, // LONG1 of 0 bytes: 0
        0x8a,
        2,
        0x00,
        0xff, // LONG1: -256
        0x8a,
        7,
        0x00,
        0x40,
        0x0e,
        0x65,
        0x25,
        0x7f,
        0x00, // LONG1, 7 bytes, positive
        0x8a,
        9,
        5,
        0,
        0,
        0,
        0,
        0,
        0,
        0x80,
        0, // LONG1: 2^63 + 5, a bigint
        0x8a,
        8,
        0,
        0,
        0,
        0,
        0,
        0xff,
        0xff,
        0xff, // LONG1: -2^40, 8 bytes
        0x8b,
        u32(1),
        0x7f, // LONG4: 127
        'G',
        Buffer.from([0x3f, 0xf8, 0, 0, 0, 0, 0, 0]), // BINFLOAT 1.5
        0x88,
        0x89,
        'N',
        0x8c,
        6,
        Buffer.from('héllo'), // SHORT_BINUNICODE
        'X',
        u32(2),
        'ok', // BINUNICODE
        0x8d,
        u64(1n),
        'z', // BINUNICODE8
        'C',
        2,
        1,
        2, // SHORT_BINBYTES
        ')',
        'K',
        1,
        'K',
        2,
        0x86, // EMPTY_TUPLE, TUPLE2
        'e',
        '.',
      ),
    ) as PickleValue[];
    expect(value).toEqual([
      200,
      0x1234,
      -5,
      0,
      -256,
      0x7f25650e4000,
      2n ** 63n + 5n,
      -(2 ** 40),
      127,
      1.5,
      true,
      false,
      null,
      'héllo',
      'ok',
      'z',
      new Uint8Array([1, 2]),
      [],
      [1, 2],
    ]);
  });

  it('reads the protocol 0/1 container opcodes a protocol-2 pickle may hold: LIST, DICT, TUPLE, POP, DUP, memo', () => {
    const value = unpickle(
      pk(
        0x80,
        2,
        '(',
        'K',
        1,
        'K',
        2,
        'l',
        'q',
        0,
        '(',
        'X',
        u32(1),
        'k',
        'h',
        0,
        'd',
        'r',
        u32(70000),
        '(',
        'K',
        9,
        't',
        'N',
        '0',
        'j',
        u32(70000),
        '2',
        0x87,
        '.',
      ),
    );
    // stack at STOP: [1, 2], {'k': [1, 2]}, ((9,), that dict, that dict): POP dropped the None
    const [tuple, dict, again] = value as [PickleValue[], PickleDict, PickleDict];
    expect(value).toHaveLength(3);
    expect(tuple).toEqual([9]);
    expect(dict).toEqual(new Map([['k', [1, 2]]]));
    expect(again).toBe(dict);
  });

  it('reads a batch larger than the call stack allows (APPENDS loops, it does not spread)', () => {
    const n = 300_000;
    const list = unpickle(pk(PROTO4, ']', '(', Buffer.alloc(n, 'N'), 'e', '.')) as PickleValue[];
    expect(list).toHaveLength(n);
  });

  it('refuses code and objects: GLOBAL, STACK_GLOBAL, REDUCE, NEWOBJ, BUILD, PERSID, EXT, out-of-band buffers', () => {
    const p2 = errorOf(() => unpickle(load('os-system-p2.pickle'), 'evil.pickle'));
    expect(p2).toBeInstanceOf(TraceFormatError);
    expect(p2).toMatchObject({ name: 'TraceFormatError', file: 'evil.pickle', offset: 2, opcode: 'GLOBAL' });
    expect(p2.message).toBe(
      'evil.pickle: byte 2 (GLOBAL): the pickle asks to import posix.system; a memory snapshot holds only dicts, lists, numbers and strings, so the file is refused (nothing in it is run)',
    );
    expect(errorOf(() => unpickle(load('os-system-p4.pickle')))).toMatchObject({
      opcode: 'STACK_GLOBAL',
      reason: expect.stringContaining('posix.system'),
    });
    expect(errorOf(() => unpickle(load('object-p4.pickle')))).toMatchObject({
      offset: 31,
      opcode: 'STACK_GLOBAL',
      reason: expect.stringContaining('builtins.object'),
    });
    // each object opcode, even with operands a real pickle would give it
    for (const [code, name] of [
      [0x52, 'REDUCE'],
      [0x62, 'BUILD'],
      [0x81, 'NEWOBJ'],
      [0x92, 'NEWOBJ_EX'],
      [0x6f, 'OBJ'],
      [0x69, 'INST'],
      [0x51, 'BINPERSID'],
      [0x50, 'PERSID'],
      [0x82, 'EXT1'],
      [0x83, 'EXT2'],
      [0x84, 'EXT4'],
      [0x97, 'NEXT_BUFFER'],
      [0x98, 'READONLY_BUFFER'],
    ] as const) {
      const e = errorOf(() => unpickle(pk(PROTO4, 'N', 'N', code, '.')));
      expect(e).toMatchObject({ offset: 4, opcode: name, reason: expect.stringContaining('refused') });
    }
  });

  it('refuses declared lengths beyond the end of the file, without allocating them', () => {
    expect(errorOf(() => unpickle(pk(PROTO4, 0x8d, u64(2n ** 60n), 'abc')))).toMatchObject({
      offset: 2,
      opcode: 'BINUNICODE8',
      reason: 'declares a string of 1152921504606846976 bytes but only 3 remain (truncated file?)',
    });
    expect(errorOf(() => unpickle(pk(PROTO4, 'X', u32(0xffffffff), '.')))).toMatchObject({
      opcode: 'BINUNICODE',
      reason: expect.stringMatching(/4294967295 bytes but only 1 remain/),
    });
    expect(errorOf(() => unpickle(pk(PROTO4, 0x95, u64(2n ** 64n - 1n), 'N.')))).toMatchObject({ opcode: 'FRAME' });
    // a file cut inside a frame says so
    expect(errorOf(() => unpickle(pk(PROTO4, 0x95, u64(65538n), 'N.')))).toMatchObject({
      opcode: 'FRAME',
      reason: 'declares a frame of 65538 bytes but only 2 remain (truncated file?)',
    });
    expect(errorOf(() => unpickle(pk(PROTO4, 0x96, u64(1n << 40n))))).toMatchObject({ opcode: 'BYTEARRAY8' });
    expect(errorOf(() => unpickle(pk(PROTO4, 0x8b, u32(0x7fffffff), 'N')))).toMatchObject({
      opcode: 'LONG4',
      reason: expect.stringMatching(/declares an? integer/),
    });
    expect(errorOf(() => unpickle(pk(PROTO4, 0x8b, u32(0xffffffff), 'N')))).toMatchObject({
      opcode: 'LONG4',
      reason: 'negative length -1',
    });
    expect(errorOf(() => unpickle(pk(PROTO4, 0x8b, u32(5000), Buffer.alloc(5000), '.')))).toMatchObject({
      reason: expect.stringMatching(/5000 bytes is longer than the 1024/),
    });
  });

  it('limits nesting: MARKs open at once', () => {
    const deep = pk(PROTO4, Buffer.alloc(100_000, '('), '.');
    expect(errorOf(() => unpickle(deep))).toMatchObject({
      offset: 1002,
      opcode: 'MARK',
      reason: 'more than 1000 MARKs open at once (nesting too deep)',
    });
    expect(unpickle(pk(PROTO4, Buffer.alloc(10, '('), 'N', Buffer.alloc(10, 't'), '.'), 'f', { maxOpenMarks: 10 })).toEqual([
      [[[[[[[[[null]]]]]]]]],
    ]);
  });

  // recursion would overflow the stack at this depth; quadratic work (4 * 10^10 steps) would pass any test timeout
  it('builds deep structures without MARKs, with no recursion', () => {
    const n = 200_000; // EMPTY_LIST n times, then APPEND n - 1 times: lists nested n deep
    let v = unpickle(pk(PROTO4, Buffer.alloc(n, ']'), Buffer.alloc(n - 1, 'a'), '.')) as PickleValue[];
    let depth = 1;
    while (v.length > 0) {
      v = v[0] as PickleValue[];
      depth++;
    }
    expect(depth).toBe(n);
  });

  it('names the offset and the opcode of every malformation', () => {
    const cases: [Buffer, Partial<PickleFormatError>][] = [
      [pk(), { offset: 0, opcode: '', reason: expect.stringMatching(/not a pickle of protocol 2 to 5/) }],
      [pk('{"format":'), { offset: 0, reason: expect.stringMatching(/not a pickle/) }],
      [pk(0x80, 1, '.'), { offset: 0, reason: 'pickle protocol 1 is not supported (protocols 2 to 5 are)' }],
      [pk(0x80, 6, '.'), { offset: 0, reason: 'pickle protocol 6 is not supported (protocols 2 to 5 are)' }],
      [pk(PROTO4, 0x80, 9, '.'), { offset: 2, opcode: 'PROTO', reason: 'pickle protocol 9 is not supported (protocols 2 to 5 are)' }],
      [pk(PROTO4, 'N'), { offset: 3, opcode: '', reason: 'the pickle ends without a STOP opcode (truncated file?)' }],
      [pk(PROTO4, '.'), { offset: 2, opcode: 'STOP', reason: expect.stringMatching(/stack is empty/) }],
      [pk(PROTO4, 'J', 1, 2), { offset: 2, opcode: 'BININT', reason: 'the int needs 4 bytes but only 2 remain (truncated file?)' }],
      [pk(PROTO4, 'h', 7, '.'), { offset: 2, opcode: 'BINGET', reason: 'memo entry 7 was never stored' }],
      [pk(PROTO4, 'q', 0), { offset: 2, opcode: 'BINPUT', reason: 'the stack is empty' }],
      [pk(PROTO4, '}', 'K', 1, 'a', '.'), { offset: 5, opcode: 'APPEND', reason: 'expects a list under the item, found dict' }],
      [pk(PROTO4, ']', 'K', 1, 'K', 2, 's', '.'), { opcode: 'SETITEM', reason: 'expects a dict under the items, found list' }],
      [pk(PROTO4, '}', ']', 'K', 2, 's', '.'), { opcode: 'SETITEM', reason: 'a dict key must be hashable, found list' }],
      [pk(PROTO4, '}', '(', 'K', 1, 'u', '.'), { opcode: 'SETITEMS', reason: 'expects key/value pairs, found 1 items' }],
      [pk(PROTO4, 'e', '.'), { opcode: 'APPENDS', reason: 'no MARK is open' }],
      [pk(PROTO4, 'I', '1\n.'), { opcode: 'INT', reason: expect.stringMatching(/protocol 0 or 1/) }],
      [pk(PROTO4, 0x8f, '.'), { opcode: 'EMPTY_SET', reason: expect.stringMatching(/set/) }],
      [pk(PROTO4, 0xff, '.'), { offset: 2, opcode: '0xff', reason: 'not a pickle opcode (corrupt file?)' }],
    ];
    for (const [bytes, expected] of cases) {
      const e = errorOf(() => unpickle(bytes, 'f.pickle'));
      expect(e, bytes.toString('hex')).toBeInstanceOf(PickleFormatError);
      expect(e, bytes.toString('hex')).toMatchObject({ name: 'TraceFormatError', file: 'f.pickle', line: 0, ...expected });
      expect(e.message).toMatch(/^f\.pickle: byte \d+/);
    }
  });

  it('ignores bytes after STOP, as Python does', () => {
    expect(unpickle(pk(PROTO4, 'N', '.', 'garbage'))).toBeNull();
  });

  it('tells pickles by their first bytes', () => {
    expect(isPickle(load('snapshot-p2.pickle'))).toBe(true);
    expect(isPickle(pk(0x80, 1))).toBe(false);
    expect(isPickle(pk(0x80))).toBe(false);
    expect(isPickle(load('snapshot-p4.pickle.gz'))).toBe(false);
  });
});
