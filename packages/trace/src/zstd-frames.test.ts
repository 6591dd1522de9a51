/**
 * Compressed traces read as the compressors' own tools read them: every zstd frame and gzip member in
 * turn, zstd's skippable frames skipped (pzstd starts its files with one), and bytes after the last
 * frame or member refused.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readTrace, TraceFormatError } from './format.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-frames-'));
const zstdCompressSync: ((data: Uint8Array) => Buffer) | undefined = Reflect.get(zlib, 'zstdCompressSync');
const noZstd = zstdCompressSync === undefined;
const zstd = (text: string) => zstdCompressSync!(Buffer.from(text));

const header = '{"format":"gpumem-trace","version":1,"source":"test"}\n';
const events = (from: number, n: number) =>
  Array.from(
    { length: n },
    (_, i) => `{"timeNs":${from + i},"action":"alloc","ptr":${4096 * (from + i + 1)},"bytes":64,"stream":0,"tag":0}\n`,
  ).join('');
/** A skippable frame of `n` bytes of payload (magic 0x184D2A5X, then its size). */
function skippable(n: number, variant = 0): Buffer {
  const b = Buffer.alloc(8 + n, 0xab);
  b.writeUInt32LE(0x184d2a50 + variant, 0);
  b.writeUInt32LE(n, 4);
  return b;
}

function written(name: string, bytes: Buffer): string {
  const file = join(dir, name);
  writeFileSync(file, bytes);
  return file;
}

describe('zstd files (Node without zstd: skipped, it has no zstd to read)', () => {
  it.skipIf(noZstd)('reads every frame of a file of two frames (cat a.zst b.zst)', async () => {
    const file = written('two.jsonl.zst', Buffer.concat([zstd(header + events(0, 399)), zstd(events(399, 399))]));
    const trace = await readTrace(file);
    expect(trace.events.length).toBe(798);
    expect(trace.events[798 - 1]!.timeNs).toBe(797);
  });

  it.skipIf(noZstd)('skips skippable frames, first (as pzstd writes) and between frames', async () => {
    const file = written(
      'pzstd.jsonl.zst',
      Buffer.concat([skippable(4), zstd(header + events(0, 10)), skippable(0, 15), zstd(events(10, 5)), skippable(100, 3)]),
    );
    expect((await readTrace(file)).events.length).toBe(15);
  });

  it.skipIf(noZstd)('refuses bytes after the last frame, naming the file and the offset', async () => {
    const frame = zstd(header + events(0, 3));
    for (const tail of [Buffer.from('garbage!'), Buffer.from([0x28, 0xb5]), Buffer.alloc(5)]) {
      const file = written('trailing.jsonl.zst', Buffer.concat([frame, tail]));
      await expect(readTrace(file)).rejects.toThrow(TraceFormatError);
      await expect(readTrace(file)).rejects.toThrow(
        new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:\\d+: .*byte ${frame.length}`),
      );
    }
  });

  it.skipIf(noZstd)('refuses a truncated frame and a file of skippable frames only', async () => {
    const frame = zstd(header + events(0, 50));
    await expect(readTrace(written('cut.jsonl.zst', frame.subarray(0, frame.length - 5)))).rejects.toThrow(/truncated/);
    await expect(readTrace(written('skips.zst', skippable(8)))).rejects.toThrow(TraceFormatError);
  });

  it.skipIf(noZstd)('reads a snapshot (read whole) across frames too', async () => {
    const { readFileSync } = await import('node:fs');
    const pickle = readFileSync(new URL('./snapshot/fixtures/snapshot-p4.pickle', import.meta.url));
    const half = Math.floor(pickle.length / 2);
    const file = written(
      'split.pickle.zst',
      Buffer.concat([skippable(12), zstdCompressSync!(pickle.subarray(0, half)), zstdCompressSync!(pickle.subarray(half))]),
    );
    expect((await readTrace(file)).events.length).toBe(8);
  });
});

describe('gzip files', () => {
  it('reads every member of concatenated gzip files (cat a.gz b.gz)', async () => {
    const file = written('two.jsonl.gz', Buffer.concat([zlib.gzipSync(header + events(0, 399)), zlib.gzipSync(events(399, 399))]));
    expect((await readTrace(file)).events.length).toBe(798);
  });

  it('refuses bytes after the last member that are not a member', async () => {
    const file = written('trailing.jsonl.gz', Buffer.concat([zlib.gzipSync(header + events(0, 3)), Buffer.from('garbage!')]));
    await expect(readTrace(file)).rejects.toThrow(/the gzip stream is corrupt or truncated/);
  });
});
