/**
 * writeTrace writes through the core's OutputFile: a trace appears whole at the end, a hard link's
 * other name keeps its bytes, and a target that is not a regular file is refused untouched.
 */
import { execFileSync } from 'node:child_process';
import { linkSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OutputFileError } from '@gpumem/allocator-core';
import { afterAll, describe, expect, it } from 'vitest';
import { readTrace, writeTrace, type AllocationTrace } from './format.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-write-trace-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// More events than one batch of lines (4,096), so the file is written in several pieces.
const trace: AllocationTrace = {
  header: { source: 'test', allocator: 'pool', device: 'host' },
  events: Array.from({ length: 10_000 }, (_, i) => ({
    timeNs: i,
    action: i % 2 === 0 ? ('alloc' as const) : ('free' as const),
    ptr: 0x1000 + Math.floor(i / 2) * 0x1000,
    bytes: 512,
    stream: 0,
    tag: 0,
  })),
};

describe('writeTrace', () => {
  it('through a hard link writes a new file: the other name keeps its bytes', async () => {
    const precious = join(dir, 'precious');
    const link = join(dir, 'hl.jsonl');
    writeFileSync(precious, 'precious\n');
    linkSync(precious, link);
    await writeTrace(link, trace, 'jsonl');
    expect(readFileSync(precious, 'utf8')).toBe('precious\n');
    expect((await readTrace(link)).events).toHaveLength(10_000);
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('a FIFO or a folder as the target is an OutputFileError naming it, the target untouched', async () => {
    const fifo = join(dir, 'pipe.jsonl');
    execFileSync('mkfifo', [fifo]);
    await expect(writeTrace(fifo, trace, 'jsonl')).rejects.toThrow(OutputFileError);
    await expect(writeTrace(fifo, trace, 'jsonl')).rejects.toThrow(/pipe\.jsonl.*: is a named pipe \(FIFO\)/);
    expect(lstatSync(fifo).isFIFO()).toBe(true);
    await expect(writeTrace(dir, trace, 'rmm-csv')).rejects.toThrow(/is a folder/);
    await expect(writeTrace(join(dir, 'a\0b.jsonl'), trace, 'jsonl')).rejects.toThrow(/contains a NUL byte/);
  });
});
