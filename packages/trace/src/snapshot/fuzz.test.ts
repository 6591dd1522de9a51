/**
 * Every truncation and thousands of seeded random mutations of the snapshot fixtures: the reader
 * must give a sound trace or a TraceFormatError, never another exception, never a hang. A hang is
 * the test's timeout; how long a parse takes is no assertion here (a busy machine is no defect):
 * the reader's speed is measured by bench/ and its work is bounded by its item limits.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { seededRandom as random } from '@gpumem/allocator-core/tools';
import { describe, expect, it } from 'vitest';
import { TraceFormatError } from '../format.js';
import { parseSnapshot, type SnapshotTrace } from './snapshot.js';
import { defaultMaxPickleItems, pickleCycleMarker, PickleFormatError, unpickle } from './unpickle.js';

const load = (name: string) => readFileSync(fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url)));

/** Bytes a mutation likes to write: opcodes that change the machine's state, and boundary values. */
const interesting = [
  0x28, 0x2e, 0x30, 0x31, 0x4a, 0x4b, 0x4d, 0x58, 0x5d, 0x61, 0x65, 0x68, 0x6a, 0x71, 0x72, 0x73, 0x75, 0x7d, 0x80, 0x85, 0x86, 0x87, 0x8a,
  0x8b, 0x8c, 0x8d, 0x94, 0x95, 0x00, 0x7f, 0xff,
];

function mutate(data: Buffer, rnd: () => number): Buffer {
  const out = Buffer.from(data);
  const at = () => Math.floor(rnd() * out.length);
  switch (Math.floor(rnd() * 5)) {
    case 0: // a few random bytes
      for (let k = 1 + Math.floor(rnd() * 4); k > 0; k--) out[at()] = Math.floor(rnd() * 256);
      return out;
    case 1: // an opcode or a boundary value
      out[at()] = interesting[Math.floor(rnd() * interesting.length)]!;
      return out;
    case 2: {
      // a range deleted
      const start = at();
      return Buffer.concat([out.subarray(0, start), out.subarray(Math.min(out.length, start + 1 + Math.floor(rnd() * 16)))]);
    }
    case 3: {
      // a range duplicated
      const start = at();
      const piece = out.subarray(start, start + 1 + Math.floor(rnd() * 16));
      return Buffer.concat([out.subarray(0, start), piece, out.subarray(start)]);
    }
    default: // a length or memo index set to its largest value
      out[at()] = 0xff;
      out[at()] = 0xff;
      return out;
  }
}

/** What a trace read from any input must satisfy. */
function soundness(t: SnapshotTrace): string | undefined {
  const isCount = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  let last = 0;
  for (const e of t.events) {
    if (!['alloc', 'free', 'oom'].includes(e.action)) return `action ${e.action}`;
    if (![e.timeNs, e.ptr, e.bytes, e.stream, e.tag].every(isCount)) return `fields ${JSON.stringify(e)}`;
    if (e.timeNs < last) return 'times go back';
    last = e.timeNs;
    if (!(Number.isFinite(e.reservedBytes) && e.reservedBytes! >= 0)) return `reservedBytes ${e.reservedBytes}`;
  }
  const p = t.pytorch;
  if (p.reservedTimeline.timeNs.length !== p.reservedTimeline.reservedBytes.length) return 'timeline lengths';
  if (p.reservedTimeline.reservedBytes.some((v) => !(Number.isFinite(v) && v >= 0))) return 'timeline values';
  if (![p.peakReservedBytes, p.peakAllocatedBytes].every((v) => Number.isFinite(v) && v >= 0)) return 'peaks';
  if (!t.devices.includes(t.header.snapshot.device)) return 'device';
  return undefined;
}

interface Tally {
  ok: number;
  errors: number;
  problems: string[];
}

/** Parses `bytes`; records a problem for anything but a sound trace or a TraceFormatError. */
function check(bytes: Buffer, label: string, tally: Tally): void {
  try {
    const problem = soundness(parseSnapshot(bytes, 'fuzz.pickle'));
    if (problem) tally.problems.push(`${label}: unsound trace (${problem})`);
    else tally.ok++;
  } catch (e) {
    if (e instanceof TraceFormatError) tally.errors++;
    else tally.problems.push(`${label}: ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`);
  }
}

const fixtures = [
  'snapshot-p2.pickle',
  'snapshot-p4.pickle',
  'snapshot-p5.pickle',
  'snapshot-p4.pickle.gz',
  'untimed.pickle',
  'no-history.pickle',
  'ring-full.pickle',
];

describe('snapshot reader under corrupt input', () => {
  for (const name of fixtures) {
    it(`every truncation of ${name} is a TraceFormatError`, () => {
      const data = load(name);
      const tally: Tally = { ok: 0, errors: 0, problems: [] };
      // every prefix of small files; of big ones, a stride and the last 256
      const stride = data.length > 10_000 ? 13 : 1;
      for (let n = 0; n < data.length; n++)
        if (n % stride === 0 || n > data.length - 256) check(data.subarray(0, n), `${name}[0:${n}]`, tally);
      expect(tally.problems.slice(0, 10)).toEqual([]);
      expect(tally.ok).toBe(0); // the STOP opcode is the last byte: no prefix is a whole pickle
    });

    if (!name.endsWith('.gz')) {
      it(`every truncation of ${name} past its first two bytes says the file is truncated`, () => {
        const data = load(name);
        const silent: string[] = [];
        for (let n = 2; n < data.length; n++) {
          try {
            parseSnapshot(data.subarray(0, n), 'cut.pickle');
          } catch (e) {
            if (!/truncated/.test((e as Error).message)) silent.push(`[0:${n}] ${(e as Error).message}`);
          }
        }
        expect(silent.slice(0, 5)).toEqual([]);
      });
    }
  }

  for (const [index, name] of fixtures.entries()) {
    const rounds = name.startsWith('ring-full') ? 300 : 2000;
    it(`${rounds} random mutations of ${name} give a sound trace or a TraceFormatError`, () => {
      const data = load(name);
      const rnd = random(0x5eed + index);
      const tally: Tally = { ok: 0, errors: 0, problems: [] };
      for (let r = 0; r < rounds; r++) {
        let mutated = mutate(data, rnd);
        if (rnd() < 0.3) mutated = mutate(mutated, rnd);
        check(mutated, `${name} round ${r}`, tally);
      }
      expect(tally.problems.slice(0, 10)).toEqual([]);
      expect(tally.ok + tally.errors).toBe(rounds);
    });
  }

  it('mutations inside a gzip-compressed snapshot reach the reader (recompressed, so the CRC holds)', () => {
    const data = load('snapshot-p4.pickle');
    const rnd = random(0x9a1);
    const tally: Tally = { ok: 0, errors: 0, problems: [] };
    for (let r = 0; r < 500; r++) check(gzipSync(mutate(data, rnd)), `gz round ${r}`, tally);
    expect(tally.problems.slice(0, 10)).toEqual([]);
    expect(tally.ok).toBeGreaterThan(0);
    expect(tally.errors).toBeGreaterThan(0);
  });

  it('mutations reach past the unpickler: some give traces, some structural errors', () => {
    const data = load('snapshot-p2.pickle');
    const rnd = random(42);
    const kinds = new Map<string, number>();
    for (let r = 0; r < 2000; r++) {
      try {
        parseSnapshot(mutate(data, rnd), 'f');
        kinds.set('trace', (kinds.get('trace') ?? 0) + 1);
      } catch (e) {
        const kind = (e as { offset?: number }).offset !== undefined ? 'pickle' : 'snapshot';
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }
    }
    expect(kinds.get('trace')).toBeGreaterThan(50);
    expect(kinds.get('pickle')).toBeGreaterThan(50);
    expect(kinds.get('snapshot')).toBeGreaterThan(10);
  });
});

describe('snapshot reader under hostile input', () => {
  const s = (text: string) => Buffer.concat([Buffer.from([0x8c, text.length]), Buffer.from(text, 'latin1')]);
  const op = (...codes: (number | string)[]) => Buffer.from(codes.map((c) => (typeof c === 'number' ? c : c.charCodeAt(0))));

  it('does not multiply work through shared references (one segment listed 50000 times, 1000 blocks each)', () => {
    const bytes = Buffer.concat([
      op(0x80, 4, '}'),
      // root['device_traces'] = [[{'action': 'alloc', 'addr': 16, 'size': 16}]]
      s('device_traces'),
      op(']', ']', '}'),
      s('action'),
      s('alloc'),
      op('s'),
      s('addr'),
      op('K', 16, 's'),
      s('size'),
      op('K', 16, 's', 'a', 'a', 's'),
      // root['segments'] = [seg] * 50001, seg = {'device': 0, 'total_size': 1, 'blocks': [block] * 1000}
      s('segments'),
      op(']', '}', 'q', 0),
      s('device'),
      op('K', 0, 's'),
      s('total_size'),
      op('K', 1, 's'),
      s('blocks'),
      op(']', '}', 'q', 1),
      s('state'),
      s('active_allocated'),
      op('s'),
      s('size'),
      op('K', 8, 's', 'a'),
      op('('),
      Buffer.from('h\x01'.repeat(999), 'latin1'),
      op('e', 's', 'a'),
      op('('),
      Buffer.from('h\x00'.repeat(50_000), 'latin1'),
      op('e', 's', '.'),
    ]);
    expect(() => parseSnapshot(bytes, 'shared.pickle')).toThrow(/segments\[\d+\]\.blocks: holds more items than a file of this size can/);
  });

  it('rejects a deeply nested pickle, and reads a deep value that is not a snapshot as such', () => {
    expect(() => parseSnapshot(Buffer.concat([op(0x80, 4), Buffer.alloc(50_000, '('), op('.')]), 'deep.pickle')).toThrow(
      /nesting too deep/,
    );
    const n = 100_000;
    const deepList = Buffer.concat([op(0x80, 4), Buffer.alloc(n, ']'), Buffer.alloc(n - 1, 'a'), op('.')]);
    expect(() => parseSnapshot(deepList, 'deep.pickle')).toThrow(/no allocation history in deep\.pickle \(it holds a list/);
    // {1: {1: {1: ...}}}, n deep
    const deepDict = Buffer.concat([op(0x80, 4, '}'), Buffer.from('K\x01}'.repeat(n), 'latin1'), Buffer.alloc(n, 's'), op('.')]);
    expect(() => parseSnapshot(deepDict, 'deep.pickle')).toThrow(/dict has neither 'segments' nor 'device_traces'/);
  });

  it('refuses a gzip bomb beyond the limit', () => {
    const bomb = gzipSync(Buffer.alloc(64 << 20));
    expect(bomb.length).toBeLessThan(100_000);
    expect(() => parseSnapshot(bomb, 'bomb.gz', { maxDecompressedBytes: 16 << 20 })).toThrow(
      /bomb\.gz: gzip: decompresses to more than 16777216 bytes/,
    );
  });

  it('refuses a pickle holding more values at once than its cap with a typed error, never a crash', () => {
    const nones = Buffer.concat([op(0x80, 4), Buffer.alloc(5000, 'N'), op('.')]);
    expect(() => unpickle(nones, 'nones.pickle', { maxItems: 1000 })).toThrow(PickleFormatError);
    expect(() => unpickle(nones, 'nones.pickle', { maxItems: 1000 })).toThrow(
      /nones\.pickle: byte 1002 \(NONE\): the pickle holds more than 1000 values at once/,
    );
    // NONE APPEND pairs into one list, and one value memoized over and over
    expect(() => unpickle(Buffer.concat([op(0x80, 4, ']'), Buffer.from('Na'.repeat(5000)), op('.')]), 'pairs', { maxItems: 1000 })).toThrow(
      /byte \d+ \(NONE\): the pickle holds more than 1000/,
    );
    expect(() => unpickle(Buffer.concat([op(0x80, 4, 'N'), Buffer.alloc(5000, 0x94), op('.')]), 'memo', { maxItems: 1000 })).toThrow(
      /\(MEMOIZE\): the pickle holds more than 1000/,
    );
    // values popped again are no longer held
    expect(unpickle(Buffer.concat([op(0x80, 4), Buffer.from('N0'.repeat(5000)), op('N', '.')]), 'popped', { maxItems: 1000 })).toBeNull();
    expect(
      unpickle(Buffer.concat([op(0x80, 4), Buffer.from('(NNN1'.repeat(5000)), op('N', '.')]), 'popped', { maxItems: 1000 }),
    ).toBeNull();
    // the default stays below V8's array limit (2^27 elements), past which the process aborts
    expect(defaultMaxPickleItems).toBeLessThan(2 ** 27);
  });

  it('reads allocator_settings that hold themselves, or one dict many times over, in time linear in the file', () => {
    const pairs = (count: number, memoIndex: number) =>
      Array.from({ length: count }, (_, i) => Buffer.concat([s(`k${i}`), op('h', memoIndex)]));
    const history = Buffer.concat([
      s('device_traces'),
      op(']', ']', '}'),
      s('action'),
      s('alloc'),
      op('s'),
      s('addr'),
      op('K', 16, 's'),
      s('size'),
      op('K', 16, 's', 'a', 'a', 's'),
    ]);
    // settings = {'k0': settings, ..., 'k99': settings}
    const selfRef = Buffer.concat([
      op(0x80, 4, '}'),
      history,
      s('allocator_settings'),
      op('}', 'q', 0, '('),
      ...pairs(100, 0),
      op('u', 's', '.'),
    ]);
    expect(selfRef.length).toBeLessThan(1000);
    const cyclic = parseSnapshot(selfRef, 'self.pickle').header.snapshot.allocatorSettings!;
    expect(Object.keys(cyclic)).toHaveLength(100);
    expect(cyclic.k0).toBe(pickleCycleMarker);
    expect(pickleCycleMarker).toBe('<cycle>');
    // d4 = {}; d3 = {k0..k99: d4}; d2 = {k0..k99: d3}; d1 = {k0..k99: d2}; settings = {k0..k99: d1}: 10^8 values if copied
    const levels = [op('}', 'q', 4, '0')];
    for (let level = 3; level >= 1; level--) levels.push(Buffer.concat([op('}', 'q', level, '('), ...pairs(100, level + 1), op('u', '0')]));
    const shared = Buffer.concat([
      op(0x80, 4, '}'),
      history,
      s('allocator_settings'),
      ...levels,
      op('}', '('),
      ...pairs(100, 1),
      op('u', 's', '.'),
    ]);
    // copied, this would be 10^8 values: the header stays small because shared values are cut, not expanded
    const header = parseSnapshot(shared, 'shared.pickle').header;
    const json = JSON.stringify(header);
    expect(json.length).toBeLessThan(100_000);
    expect(json).toContain('"allocatorSettings":{"k0":{"k0":{"k0":{"k0":"…"');
  });
});
