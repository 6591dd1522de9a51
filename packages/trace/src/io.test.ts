/**
 * Reading trace files: compression told by magic bytes, paths that are not trace files, hostile
 * line content, and the events held in typed columns.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  maxBlankTraceLines,
  parseTrace,
  readTrace,
  serializeTrace,
  TraceFileError,
  TraceFormatError,
  type AllocationTrace,
} from './format.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-io-'));
const snapshotFixture = (name: string) => fileURLToPath(new URL(`./snapshot/fixtures/${name}`, import.meta.url));
const header = '{"format":"gpumem-trace","version":1,"source":"test"}';

const trace: AllocationTrace = {
  header: { source: 'test', tags: ['setup'] },
  events: [
    { timeNs: 0, action: 'alloc', ptr: 0x7f3a2c000000, bytes: 4096, stream: 0, tag: 0, reservedBytes: 2 << 20 },
    { timeNs: 10, action: 'alloc', ptr: 0x7f3a2c001000, bytes: 512, stream: 0x5612a8e3c9f0, tag: 1, thread: 7 },
    { timeNs: 20, action: 'oom', ptr: 0, bytes: 2 ** 45, stream: 0, tag: 0 },
    { timeNs: 30, action: 'free', ptr: 0x7f3a2c000000, bytes: 4096, stream: 0, tag: 0, reservedBytes: 0 },
  ],
};

function write(name: string, data: string | Buffer): string {
  const file = join(dir, name);
  writeFileSync(file, data);
  return file;
}

/** zlib's zstd compressor where this Node has one (22.15 and later). */
const zstdCompressSync: ((data: Buffer) => Buffer) | undefined = Reflect.get(zlib, 'zstdCompressSync');

describe('compressed traces', () => {
  it('names xz, bzip2 and zip files with the command that decompresses them, not as malformed lines', async () => {
    const cases: Array<[string, Buffer, RegExp]> = [
      [
        't.jsonl.xz',
        Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6]),
        /t\.jsonl\.xz is xz-compressed, which this reader does not decompress: decompress it first \(xz -d .*t\.jsonl\.xz\)$/,
      ],
      ['t.csv.bz2', Buffer.from('BZh91AY&SY\u0000\u0001'), /is bzip2-compressed.*decompress it first \(bzip2 -d /],
      ['t.zip', Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0]), /is zip-compressed.*decompress it first \(unzip /],
    ];
    for (const [name, data, message] of cases) {
      const error = await readTrace(write(name, data)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TraceFileError);
      expect(error).toMatchObject({ code: 'ERR_TRACE_COMPRESSION', file: join(dir, name), message: expect.stringMatching(message) });
    }
  });

  it('reads zstd where this Node has it, and otherwise says to decompress it first', async () => {
    const text = serializeTrace(trace, 'jsonl');
    if (zstdCompressSync) {
      const back = await readTrace(write('t.jsonl.zst', zstdCompressSync(Buffer.from(text))));
      expect([...back.events]).toEqual(trace.events);
    } else {
      const file = write('t.jsonl.zst', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x04, 0x21, 0x00]));
      await expect(readTrace(file)).rejects.toMatchObject({
        name: 'TraceFileError',
        code: 'ERR_TRACE_COMPRESSION',
        message: expect.stringMatching(
          /is zstd-compressed, which this reader does not decompress \(Node v\d+.* has no zstd; Node 22\.15 and later read it\): decompress it first \(zstd -d /,
        ),
      });
    }
  });

  it('reads every format gzip-compressed, the pickle included', async () => {
    const pickle = readFileSync(snapshotFixture('snapshot-p2.pickle'));
    const plain = await readTrace(snapshotFixture('snapshot-p2.pickle'));
    const gz = await readTrace(write('s.pickle.gz', zlib.gzipSync(pickle)));
    expect(gz.format).toBe('torch-snapshot');
    expect(gz.events).toEqual(plain.events);
    for (const format of ['jsonl', 'rmm-csv'] as const) {
      expect((await readTrace(write(`t.${format}.gz`, zlib.gzipSync(serializeTrace(trace, format))))).format).toBe(format);
    }
  });
});

describe('paths and content that are not traces', () => {
  it('reads a gzipped pickle into one buffer whatever its trailer says: exact, short (several members), or lying', async () => {
    const pickle = readFileSync(snapshotFixture('snapshot-p4.pickle'));
    const expected = await readTrace(snapshotFixture('snapshot-p4.pickle'));
    const gz = zlib.gzipSync(pickle);
    const half = pickle.length >> 1;
    const members = Buffer.concat([zlib.gzipSync(pickle.subarray(0, half)), zlib.gzipSync(pickle.subarray(half))]);
    const lying = Buffer.from(gz);
    lying.writeUInt32LE(0xffffffff, lying.length - 4); // ISIZE: 4 GiB; the data is what it is
    for (const [name, data] of [
      ['exact.pickle.gz', gz],
      ['members.pickle.gz', members],
    ] as const) {
      const read = await readTrace(write(name, data));
      expect([...read.events]).toEqual([...expected.events]);
    }
    // a lying trailer only sizes the first buffer (within deflate's ratio of the file): gzip's check then fails
    await expect(readTrace(write('lying.pickle.gz', lying))).rejects.toThrow(TraceFormatError);
  });

  it('a compressed pickle past the decompression limit is a TraceFormatError naming the file', async () => {
    const file = write(
      'big.pickle.gz',
      zlib.gzipSync(Buffer.concat([Buffer.from([0x80, 4, 0x4e]), Buffer.alloc(4 << 20), Buffer.from('.')])),
    );
    await expect(readTrace(file, { maxDecompressedBytes: 1 << 20 })).rejects.toThrow(/big\.pickle\.gz: .*more than 1048576 bytes/);
  });

  it('a header holding an array 5,000 deep is a TraceFormatError, not a stack overflow, in any field', async () => {
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    for (const field of ['workload', 'eventCount', 'tags', 'source', 'format']) {
      const head = field === 'format' ? `{"format":${deep},"version":1}` : `{"format":"gpumem-trace","version":1,"${field}":${deep}}`;
      const error = await readTrace(write(`deep-${field}.jsonl`, `${head}\n`)).catch((e: unknown) => e);
      expect(error, field).toBeInstanceOf(TraceFormatError);
      expect((error as Error).message.length, field).toBeLessThan(400);
    }
    const nested = `{"format":"gpumem-trace","version":1,"workload":{"a":${deep}}}`;
    await expect(readTrace(write('deep-nested.jsonl', `${nested}\n`))).rejects.toThrow(/"workload" nests deeper than 32 levels/);
    const fine = await readTrace(
      write('workload.jsonl', `{"format":"gpumem-trace","version":1,"workload":{"model":"gcn","n":{"nodes":[1,2]}}}\n`),
    );
    expect(fine.header.workload).toEqual({ model: 'gcn', n: { nodes: [1, 2] } });
  });

  it('a directory is a TraceFileError (EISDIR) that says so', async () => {
    const sub = join(dir, 'traces');
    mkdirSync(sub);
    const error = await readTrace(sub).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TraceFileError);
    expect(error).toMatchObject({
      code: 'EISDIR',
      message: `${sub} is a folder: give a trace file (gpumem JSONL, an RMM CSV log or a PyTorch memory snapshot)`,
    });
  });

  it('a text file of another kind is told every format this reader knows', async () => {
    const file = write('notes.txt', 'hello\nworld\n');
    await expect(readTrace(file)).rejects.toMatchObject({
      name: 'TraceFormatError',
      line: 1,
      reason: expect.stringMatching(
        /^not a trace in any form this reader knows: expected a gpumem JSONL trace .*, an RMM logging CSV .* or a PyTorch memory snapshot .*, plain or gzip-compressed; but the file starts with "hello"$/,
      ),
    });
  });

  it('a truncated snapshot says it is truncated', async () => {
    const pickle = readFileSync(snapshotFixture('snapshot-p4.pickle'));
    const file = write('cut.pickle', pickle.subarray(0, Math.floor(pickle.length * 0.8)));
    await expect(readTrace(file)).rejects.toMatchObject({
      name: 'TraceFormatError',
      message: expect.stringMatching(/\(truncated file\?\)$/),
    });
  });

  it('a gzip file of blank lines is refused at the blank-line limit, naming the line', async () => {
    const file = write('blank.jsonl.gz', zlib.gzipSync(`${header}\n${'\n'.repeat(maxBlankTraceLines + 10)}`));
    expect(readFileSync(file).length).toBeLessThan(10_000);
    await expect(readTrace(file)).rejects.toMatchObject({
      name: 'TraceFormatError',
      line: maxBlankTraceLines + 2,
      reason: `more than ${maxBlankTraceLines} blank lines: not a trace file`,
    });
    // a few blank lines are fine
    const few = await readTrace(
      write('few.jsonl', `${header}\n\n${JSON.stringify({ timeNs: 0, action: 'alloc', ptr: 16, bytes: 16 })}\n\n\n`),
    );
    expect(few.events).toHaveLength(1);
  });
});

describe('events read from a file', () => {
  it('are held in typed columns behind a read-only array view', async () => {
    const file = write('view.jsonl', serializeTrace(trace, 'jsonl'));
    const back = await readTrace(file);
    const events = back.events;
    expect(Array.isArray(events)).toBe(true);
    expect(events).toHaveLength(4);
    expect(events[1]).toEqual(trace.events[1]);
    expect(events[4]).toBeUndefined();
    expect([...events]).toEqual(trace.events);
    expect(events.map((e) => e.action)).toEqual(['alloc', 'alloc', 'oom', 'free']);
    expect(events.at(-1)).toEqual(trace.events[3]);
    expect(JSON.parse(JSON.stringify(events))).toEqual(trace.events);
    expect(Object.keys(events)).toEqual(['0', '1', '2', '3']);
    expect(() => {
      events[0] = trace.events[1]!;
    }).toThrow(TypeError);
    expect(() => events.push(trace.events[0]!)).toThrow(TypeError);
    // a copy is an ordinary array
    const copy = [...events];
    copy.push(trace.events[0]!);
    expect(copy).toHaveLength(5);
  });

  it("keep every field across the columns' chunks, optional fields only where given", () => {
    const n = 70_000; // the first chunk grows from 1024 to 65536 events, then a second chunk
    const events: AllocationTrace['events'] = [];
    for (let i = 0; i < n; i++) {
      const e: AllocationTrace['events'][number] = {
        timeNs: i * 3,
        action: i % 3 === 2 ? 'free' : 'alloc',
        ptr: 2 ** 40 + i * 256,
        bytes: (i % 7) + 1,
        stream: i % 5 === 0 ? 0x5612a8e3c9f0 : 0,
        tag: i % 4,
      };
      if (i >= 2000 && i % 2 === 0) e.reservedBytes = i * 4096;
      if (i % 1000 === 999) e.thread = 2 ** 40 + i;
      events.push(e);
    }
    const back = parseTrace(serializeTrace({ header: { source: 'test' }, events }, 'jsonl'));
    expect(back.events).toHaveLength(n);
    expect([...back.events]).toEqual(events);
    expect(back.events[65_536]).toEqual(events[65_536]);
  });

  it('parse errors stay TraceFormatErrors with the line', async () => {
    const file = write('bad.jsonl', `${header}\n{"timeNs":0,"action":"alloc","ptr":0,"bytes":8}\n`);
    await expect(readTrace(file)).rejects.toBeInstanceOf(TraceFormatError);
    await expect(readTrace(file)).rejects.toMatchObject({ line: 2, reason: 'an allocation of 8 bytes has a null pointer' });
  });
});
