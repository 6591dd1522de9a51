/**
 * The readers' budget on decoded work: a small file that decodes to millions of events (a pickle
 * referencing one entry dict by DUP or BINGET, event lines repeated in a compressed file) ends in a
 * TraceBudgetError naming the file, the limit and the setting that raises it, before memory runs out;
 * real traces stay well inside it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { defaultMaxTraceEvents, maxTraceEvents, maxTraceEventsVariable, pickleValuesPerEvent } from './formats/budget.js';
import { parseTrace, readTrace, TraceBudgetError, TraceFormatError } from './format.js';
import { parseSnapshot, SnapshotFormatError } from './snapshot/snapshot.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-budget-'));
const zstdCompressSync: ((data: Uint8Array) => Buffer) | undefined = Reflect.get(zlib, 'zstdCompressSync');

const shortStr = (s: string) => Buffer.from([0x8c, s.length, ...Buffer.from(s)]);
const long8 = (n: number) => {
  const b = Buffer.alloc(10);
  b[0] = 0x8a; // LONG1
  b[1] = 8;
  b.writeBigInt64LE(BigInt(n), 2);
  return b;
};

/** One history entry dict (an allocation), left on the stack. */
const entry = Buffer.concat([
  Buffer.from([0x7d, 0x28]), // EMPTY_DICT MARK
  shortStr('action'),
  shortStr('alloc'),
  shortStr('addr'),
  long8(139_800_000_000_000),
  shortStr('size'),
  Buffer.from([0x4b, 64]),
  shortStr('stream'),
  Buffer.from([0x4b, 0]),
  shortStr('time_us'),
  long8(1_732_000_000_000_000),
  shortStr('frames'),
  Buffer.from([0x5d, 0x75]), // EMPTY_LIST SETITEMS
]);

/** `{'segments': [], 'device_traces': [[<refs>]]}`, `refs` being the opcodes that push the history's entries. */
function snapshotOf(refs: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from([0x80, 4, 0x7d]), // PROTO 4, EMPTY_DICT
    shortStr('segments'),
    Buffer.from([0x5d, 0x73]), // EMPTY_LIST SETITEM
    shortStr('device_traces'),
    Buffer.from([0x5d, 0x5d, 0x28]), // EMPTY_LIST EMPTY_LIST MARK
    refs,
    Buffer.from([0x65, 0x61, 0x73, 0x2e]), // APPENDS APPEND SETITEM STOP
  ]);
}

/** A history of one entry dict and `count` DUPs of it. */
const dupBomb = (count: number) => snapshotOf(Buffer.concat([entry, Buffer.alloc(count, 0x32)]));

/** A history of one memoized entry dict (BINPUT 0) and `count` BINGETs of it, in APPENDS batches of 1000. */
function bingetBomb(count: number): Buffer {
  const parts = [entry, Buffer.from([0x71, 0, 0x65])]; // BINPUT 0, the first APPENDS
  for (let left = count; left > 0; left -= 1000) {
    const n = Math.min(1000, left);
    parts.push(Buffer.from([0x28]), Buffer.alloc(2 * n, Buffer.from([0x68, 0])), Buffer.from([0x65]));
  }
  return snapshotOf(Buffer.concat([...parts, Buffer.from([0x28])])); // a MARK for snapshotOf's APPENDS
}

const jsonlHeader = '{"format":"gpumem-trace","version":1,"source":"test"}\n';
const jsonlEvent = (i: number) => `{"timeNs":${i},"action":"alloc","ptr":${4096 * (i + 1)},"bytes":64,"stream":0,"tag":0}\n`;

describe('the readers budget decoded work', () => {
  it.skipIf(zstdCompressSync === undefined)(
    'refuses a 1 KB zstd pickle of 30 million DUPs of one entry with a typed error naming the file, the limit and the setting (Node without zstd: skipped, it has no zstd to read)',
    async () => {
      const file = join(dir, 'dups.pickle.zst');
      const bytes = zstdCompressSync!(dupBomb(30_000_000));
      expect(bytes.length).toBeLessThan(2048);
      writeFileSync(file, bytes);
      const error = await readTrace(file).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TraceBudgetError);
      const budget = error as TraceBudgetError;
      expect(budget.code).toBe('ERR_TRACE_BUDGET');
      expect(budget.limit).toBe(defaultMaxTraceEvents);
      expect(budget.message).toContain(file);
      expect(budget.message).toContain(`${maxTraceEventsVariable}=`);
      expect(budget.message).toContain('(DUP)');
    },
  );

  it('refuses a history denser than PyTorch writes (one entry referenced by DUP) below the event limit', () => {
    const error = (() => {
      try {
        return parseSnapshot(dupBomb(100_000), 'dups.pickle');
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(SnapshotFormatError);
    expect((error as Error).message).toMatch(
      /^dups\.pickle: device_traces\[0\]: 100001 entries in \d+ bytes of pickle, more than one per 16 bytes/,
    );
  });

  it('counts memo references: BINGETs of one entry past the limit end in the budget error', () => {
    const error = (() => {
      try {
        return parseSnapshot(bingetBomb(5000), 'memo.pickle', { maxEvents: 4000 });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(TraceBudgetError);
    expect((error as TraceBudgetError).limit).toBe(4000);
    expect((error as Error).message).toMatch(/^memo\.pickle: byte \d+ \(APPENDS\): a list, dict or tuple of more than 4000 items/);
  });

  it('counts every value decoded, references included, against 16 a event', () => {
    // 40 lists of 90 BINGETs: no container passes 100 items, but 3,600 references pass 16 x 100
    const refs = Buffer.concat(
      Array.from({ length: 40 }, () =>
        Buffer.concat([Buffer.from([0x28]), Buffer.alloc(180, Buffer.from([0x68, 0])), Buffer.from([0x6c])]),
      ),
    );
    const data = Buffer.concat([Buffer.from([0x80, 4, 0x4e, 0x71, 0, 0x28]), refs, Buffer.from([0x6c, 0x2e])]);
    expect(() => parseSnapshot(data, 'refs.pickle', { maxEvents: 100 })).toThrow(
      new RegExp(`more than ${100 * pickleValuesPerEvent} values decoded, past the readers' budget`),
    );
  });

  it('stops a JSONL trace at the event past the limit, at its line', () => {
    const text = jsonlHeader + Array.from({ length: 12 }, (_, i) => jsonlEvent(i)).join('');
    expect(parseTrace(text, 'ok.jsonl', { maxEvents: 12 }).events.length).toBe(12);
    const error = (() => {
      try {
        return parseTrace(text, 'big.jsonl', { maxEvents: 10 });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(TraceBudgetError);
    expect(error).toBeInstanceOf(TraceFormatError);
    expect((error as TraceBudgetError).line).toBe(12);
    expect((error as Error).message).toMatch(
      /^big\.jsonl:12: more than 10 events, past the readers' budget on decoded work; .*GPUMEM_TRACE_MAX_EVENTS=40/,
    );
  });

  it('applies to compressed files as to plain ones (gzip members of repeated event lines)', async () => {
    const member = zlib.gzipSync(Array.from({ length: 100 }, (_, i) => jsonlEvent(i)).join(''));
    const file = join(dir, 'repeated.jsonl.gz');
    writeFileSync(file, Buffer.concat([zlib.gzipSync(jsonlHeader), ...Array.from({ length: 50 }, () => member)]));
    await expect(readTrace(file, { maxEvents: 4999 })).rejects.toThrow(TraceBudgetError);
    expect((await readTrace(file, { maxEvents: 5000 })).events.length).toBe(5000);
  });

  it('takes its limit from GPUMEM_TRACE_MAX_EVENTS, and refuses a setting that is not a positive integer', () => {
    expect(maxTraceEvents(undefined, {})).toBe(defaultMaxTraceEvents);
    expect(maxTraceEvents(undefined, { [maxTraceEventsVariable]: '5' })).toBe(5);
    expect(maxTraceEvents(7, { [maxTraceEventsVariable]: '5' })).toBe(7);
    for (const bad of ['0', '-1', '1e9', ' 5', '0x10', 'many', '99999999999999999999']) {
      expect(() => maxTraceEvents(undefined, { [maxTraceEventsVariable]: bad })).toThrow(
        new RegExp(`^${maxTraceEventsVariable} must be a positive integer`),
      );
    }
    expect(() => maxTraceEvents(0)).toThrow(RangeError);
    expect(() => maxTraceEvents(1.5)).toThrow(RangeError);
  });
});
