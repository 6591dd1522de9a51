import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  formatFromPath,
  parseTrace,
  readTrace,
  rmmCsvHeader,
  serializeTrace,
  TraceFormatError,
  writeTrace,
  type AllocationTrace,
} from './format.js';

export const rmmSample = fileURLToPath(new URL('./fixtures/rmm-sample.csv', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-'));

const trace: AllocationTrace = {
  header: {
    source: 'gpumem record',
    allocator: 'pool',
    device: 'cuda:0',
    createdAt: '2025-03-04T10:20:30.123Z',
    workload: { model: 'mlp', epochs: 1 },
    droppedEvents: 2,
  },
  events: [
    { timeNs: 0, action: 'alloc', ptr: 0x7f3a2c000000, bytes: 4096, stream: 0, tag: 1, reservedBytes: 2 << 20 },
    { timeNs: 1_500, action: 'alloc', ptr: 0x7f3a2c001000, bytes: 1000, stream: 0x5612a8e3c9f0, tag: 2, reservedBytes: 2 << 20 },
    { timeNs: 2_250_001, action: 'oom', ptr: 0, bytes: 2 ** 45, stream: 0, tag: 2, reservedBytes: 2 << 20 },
    { timeNs: 3_000_000_000, action: 'free', ptr: 0x7f3a2c000000, bytes: 4096, stream: 0, tag: 3, reservedBytes: 2 << 20 },
    { timeNs: 3_000_000_999, action: 'free', ptr: 0x7f3a2c001000, bytes: 1000, stream: 0x5612a8e3c9f0, tag: 3, reservedBytes: 0 },
  ],
};

describe('trace formats', () => {
  it('JSONL round-trips the header and every field, through a file', async () => {
    const file = join(dir, 'round.jsonl');
    await writeTrace(file, trace, 'jsonl');
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(6);
    expect(JSON.parse(lines[0]!)).toMatchObject({ format: 'gpumem-trace', version: 1, eventCount: 5, allocator: 'pool' });
    const back = await readTrace(file);
    expect(back.format).toBe('jsonl');
    expect(back.header).toEqual(trace.header);
    expect(back.events).toEqual(trace.events);
  });

  it("RMM CSV round-trips what RMM's columns hold: time to the microsecond, action, pointer, size, stream", async () => {
    const file = join(dir, 'round.csv');
    await writeTrace(file, trace, 'rmm-csv');
    const text = readFileSync(file, 'utf8');
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe(rmmCsvHeader);
    // thread, HH:MM:SS.ffffff, action, 0x pointer, decimal size, 0x stream: as logging_resource_adaptor writes them
    expect(lines[1]).toMatch(/^\d+,\d{2}:\d{2}:\d{2}\.\d{6},allocate,0x7f3a2c000000,4096,0x0$/);
    expect(lines[2]).toMatch(/,allocate,0x7f3a2c001000,1000,0x5612a8e3c9f0$/);
    expect(lines[3]).toMatch(/,allocate failure,0x0,35184372088832,0x0$/);
    expect(lines[4]).toMatch(/,free,0x7f3a2c000000,4096,0x0$/);
    const back = await readTrace(file);
    expect(back.format).toBe('rmm-csv');
    expect(back.header.source).toBe('rmm-csv');
    expect(back.events.map((e) => [e.action, e.ptr, e.bytes, e.stream])).toEqual(
      trace.events.map((e) => [e.action, e.ptr, e.bytes, e.stream]),
    );
    // times are relative to the first event, in whole microseconds
    expect(back.events.map((e) => e.timeNs)).toEqual([0, 1_000, 2_250_000, 3_000_000_000, 3_000_000_000]);
    expect(back.events.every((e) => e.thread === process.pid && e.tag === 0 && e.reservedBytes === undefined)).toBe(true);
    expect(parseTrace(text, 'same')).toEqual(back);
  });

  it("reads RMM's sample log: two streams, two threads, an allocation failure", async () => {
    const sample = await readTrace(rmmSample);
    expect(sample.format).toBe('rmm-csv');
    expect(sample.events).toHaveLength(48);
    expect(new Set(sample.events.map((e) => e.stream))).toEqual(new Set([0, 0x5612a8e3c9f0]));
    expect(new Set(sample.events.map((e) => e.thread)).size).toBe(2);
    expect(sample.events.filter((e) => e.action === 'oom')).toEqual([expect.objectContaining({ ptr: 0, bytes: 68719476736 })]);
    expect(sample.events[0]).toMatchObject({ timeNs: 0, action: 'alloc', ptr: 0x7f3a2c000000, bytes: 4000000 });
    expect(sample.events[1]!.timeNs).toBe(9_000);
  });

  it('accepts the other forms real RMM logs hold: printf-style hex, (nil), CRLF, epoch seconds, midnight', () => {
    const text = [
      rmmCsvHeader,
      '7,23:59:59.999000,allocate,7f3a2c000000,256,0',
      '7,23:59:59.999500,allocate failure,(nil),512,0x0',
      '7,00:00:00.000250,free,0x7F3A2C000000,256,0',
      '',
    ].join('\r\n');
    const t = parseTrace(text, 'crlf.csv');
    expect(t.events.map((e) => [e.timeNs, e.action, e.ptr])).toEqual([
      [0, 'alloc', 0x7f3a2c000000],
      [500_000, 'oom', 0],
      [1_250_000, 'free', 0x7f3a2c000000],
    ]);
    const epoch = parseTrace(`${rmmCsvHeader}\n1,1634567890.123456,allocate,0x100,1,0x0\n1,1634567890.234567,free,0x100,1,0x0\n`);
    expect(epoch.events.map((e) => e.timeNs)).toEqual([0, 111_111_000]);
  });

  it('tells the form from the file name', () => {
    expect(formatFromPath('a/run.jsonl')).toBe('jsonl');
    expect(formatFromPath('run.NDJSON')).toBe('jsonl');
    expect(formatFromPath('rmm_log.csv')).toBe('rmm-csv');
    expect(formatFromPath('trace.txt')).toBeUndefined();
  });

  it('serializes small traces to a string the parser reads back', () => {
    expect(parseTrace(serializeTrace(trace, 'jsonl')).events).toEqual(trace.events);
  });
});

const jsonHeader = '{"format":"gpumem-trace","version":1,"source":"test"}';
const ev = (fields: string) => `{"timeNs":0,"action":"alloc","ptr":4096,"bytes":256,"stream":0,"tag":0${fields}}`;

/** Malformed inputs: each must be a TraceFormatError naming the line, with a reason. */
const malformed: Array<[string, string, number, RegExp]> = [
  ['an empty file', '', 1, /the file is empty/],
  [
    'a header that is neither form',
    'time,action,ptr\n',
    1,
    /expected a gpumem JSONL trace .*, an RMM logging CSV .* or a PyTorch memory snapshot .*; but the file starts with "time,action,ptr"/,
  ],
  ['a binary file', '\u0000\u0001ELF\u0002\n', 1, /not a trace in any form this reader knows: expected a gpumem JSONL trace/],
  ['a JSON header with another marker', '{"format":"chrome-trace","version":1}\n', 1, /"format" is "chrome-trace"/],
  ['a newer version', '{"format":"gpumem-trace","version":2}\n', 1, /version 2 is newer than this reader/],
  ['a header that is not JSON', '{"format":"gpumem-trace",\n', 1, /not valid JSON/],
  ['a header field of the wrong type', '{"format":"gpumem-trace","version":1,"allocator":5}\n', 1, /"allocator" must be a string/],
  ['a truncated JSON event', `${jsonHeader}\n${ev('')}\n{"timeNs":5,"action":"fr`, 3, /not a JSON event object.*truncated/],
  [
    'an unknown JSON action',
    `${jsonHeader}\n{"timeNs":0,"action":"realloc","ptr":1,"bytes":1}\n`,
    2,
    /"action" must be one of "alloc", "free", "oom" \(received "realloc"\)/,
  ],
  ['a negative size', `${jsonHeader}\n${ev('').replace('"bytes":256', '"bytes":-256')}\n`, 2, /"bytes" must be a non-negative integer/],
  ['a fractional size', `${jsonHeader}\n${ev('').replace('"bytes":256', '"bytes":2.5')}\n`, 2, /"bytes" must be a non-negative integer/],
  ['a size above 2^53', `${jsonHeader}\n${ev('').replace('"bytes":256', '"bytes":9007199254740993')}\n`, 2, /larger than 2\^53 - 1/],
  [
    'a size given as a string',
    `${jsonHeader}\n${ev('').replace('"bytes":256', '"bytes":"256"')}\n`,
    2,
    /"bytes" must be a non-negative integer/,
  ],
  ['a missing field', `${jsonHeader}\n{"timeNs":0,"action":"alloc","bytes":1}\n`, 2, /no "ptr" field/],
  ['an allocation with a null pointer', `${jsonHeader}\n${ev('').replace('"ptr":4096', '"ptr":0')}\n`, 2, /null pointer/],
  ['a JSON array for an event', `${jsonHeader}\n[1,2,3]\n`, 2, /expected a JSON event object/],
  [
    'fewer events than announced',
    `{"format":"gpumem-trace","version":1,"eventCount":3}\n${ev('')}\n`,
    3,
    /announces 3 events but the file holds 1 \(truncated\?\)/,
  ],
  [
    'a truncated CSV row',
    `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0x7f3a2c000000,40`,
    2,
    /expected 6 comma-separated fields .* found 5 \(truncated line\?\)/,
  ],
  ['a CSV row with an extra field', `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0x100,40,0x0,9\n`, 2, /found 7/],
  [
    'an unknown RMM action',
    `${rmmCsvHeader}\n1,14:03:21.100012,deallocate,0x100,40,0x0\n`,
    2,
    /Action must be one of allocate, free, allocate failure \(received 'deallocate'\)/,
  ],
  [
    'a negative RMM size',
    `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0x100,-40,0x0\n`,
    2,
    /Size must be a non-negative decimal integer \(received '-40'\)/,
  ],
  [
    'an RMM size above 2^53',
    `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0x100,18446744073709551615,0x0\n`,
    2,
    /Size 18446744073709551615 is larger than 2\^53 - 1/,
  ],
  ['a pointer that is not hex', `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0xZZ,40,0x0\n`, 2, /Pointer must be a hexadecimal address/],
  [
    'a 64-bit pointer',
    `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0xffffffffffffffff,40,0x0\n`,
    2,
    /Pointer 0xffffffffffffffff is larger than 2\^53 - 1/,
  ],
  ['a bad time', `${rmmCsvHeader}\n1,25:03:21.100012,allocate,0x100,40,0x0\n`, 2, /not a valid time of day/],
  ['a time in another form', `${rmmCsvHeader}\n1,yesterday,allocate,0x100,40,0x0\n`, 2, /Time must be HH:MM:SS\.ffffff/],
  ['a bad thread id', `${rmmCsvHeader}\n0x1f,14:03:21.100012,allocate,0x100,40,0x0\n`, 2, /Thread must be a decimal thread id/],
  [
    'an epoch time more than 2^53 ns after the first',
    `${rmmCsvHeader}\n1,0.000001,allocate,0x100,40,0x0\n1,999999999999.5,free,0x100,40,0x0\n`,
    3,
    /Time '999999999999\.5' lies more than 2\^53 ns \(104 days\) after the first event's/,
  ],
  [
    'a time of day past midnight 105 times (a day each), then 23:59:59 again',
    `${rmmCsvHeader}\n${Array.from({ length: 240 }, (_, i) => `1,${i % 2 ? '00:00:01' : '23:59:59'},allocate,0x${(i + 1).toString(16)},40,0x0`).join('\n')}\n`,
    212,
    /Time '23:59:59' lies more than 2\^53 ns \(104 days\) after the first event's/,
  ],
];

describe('malformed traces', () => {
  it.each(malformed)('%s: a TraceFormatError naming the line', (_, text, line, reason) => {
    let error: unknown;
    try {
      parseTrace(text, 'bad.trace');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TraceFormatError);
    const e = error as TraceFormatError;
    expect(e.file).toBe('bad.trace');
    expect(e.line).toBe(line);
    expect(e.reason).toMatch(reason);
    expect(e.message).toBe(`bad.trace:${line}: ${e.reason}`);
  });

  it('the same errors come from files, with the path', async () => {
    const file = join(dir, 'bad.csv');
    writeFileSync(file, `${rmmCsvHeader}\n1,14:03:21.100012,allocate,0x100,40,0x0\n1,14:03:21.100013,free,0x100`);
    await expect(readTrace(file)).rejects.toMatchObject({ name: 'TraceFormatError', file, line: 3 });
  });

  it('a file without line breaks is rejected once a line passes 1 MiB, not read whole', async () => {
    const file = join(dir, 'long.jsonl');
    writeFileSync(file, `${jsonHeader}\n${'x'.repeat(3 << 20)}`);
    await expect(readTrace(file)).rejects.toMatchObject({
      name: 'TraceFormatError',
      line: 2,
      reason: expect.stringMatching(/longer than 1048576 characters/),
    });
  });

  it('a missing file is the file system error, not a TraceFormatError', async () => {
    await expect(readTrace(join(dir, 'none.jsonl'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('module structure', () => {
  it('the modules of this package import one another without a cycle (static or dynamic imports)', () => {
    const root = fileURLToPath(new URL('.', import.meta.url));
    const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    const imports = new Map<string, string[]>();
    for (const f of files) {
      const text = readFileSync(join(root, f), 'utf8');
      const targets = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)].map((m) => join(dirname(f), `${m[1]}.ts`));
      imports.set(join(f), targets);
    }
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        cycles.push([...path.slice(path.indexOf(f)), f].join(' → '));
        return;
      }
      state.set(f, 'open');
      for (const t of imports.get(f) ?? []) visit(t, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of imports.keys()) visit(f, []);
    expect(imports.get('format.ts')).toContain(join('formats', 'index.ts'));
    expect(cycles).toEqual([]);
  });
});
