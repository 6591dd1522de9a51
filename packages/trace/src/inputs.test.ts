/**
 * What a trace input may be: a regular file, or `-` for standard input. A FIFO, a device or a
 * socket is refused at once with a typed error (reading one would block or never end), without
 * waiting for a writer.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readLines, readTrace, TraceFileError } from './format.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-trace-inputs-'));
const header = '{"format":"gpumem-trace","version":1,"source":"test"}\n';
const event = '{"timeNs":1,"action":"alloc","ptr":4096,"bytes":64,"stream":0,"tag":0}\n';
const isLinux = process.platform === 'linux';

/** The error `readTrace(path)` ends in. */
const failure = (path: string) =>
  readTrace(path).then(
    () => undefined,
    (e: unknown) => e as TraceFileError,
  );

describe('trace inputs are regular files', () => {
  it.skipIf(!isLinux)('refuses a FIFO without blocking on it (no writer ever comes)', async () => {
    const fifo = join(dir, 'trace.fifo');
    const made = spawnSync('mkfifo', [fifo]);
    expect(made.status).toBe(0);
    const error = await failure(fifo);
    expect(error).toBeInstanceOf(TraceFileError);
    expect(error?.code).toBe('ERR_TRACE_NOT_FILE');
    expect(error?.message).toBe(
      `${fifo} is a named pipe (FIFO), not a regular file: give a trace file, or - to read one from standard input (cat ${fifo} | gpumem ... -)`,
    );
    await expect(readLines(fifo).next()).rejects.toThrow(TraceFileError);
  });

  it.skipIf(!isLinux)('refuses character devices (/dev/zero would never end, /dev/null reads as empty)', async () => {
    for (const device of ['/dev/zero', '/dev/null', '/dev/urandom']) {
      const error = await failure(device);
      expect(error).toBeInstanceOf(TraceFileError);
      expect(error?.message).toMatch(new RegExp(`^${device} is a character device, not a regular file`));
    }
  });

  it.skipIf(!isLinux)('refuses a socket', async () => {
    const path = join(dir, 'trace.sock');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path, resolve));
    try {
      expect((await failure(path))?.message).toMatch(/is a socket, not a regular file/);
    } finally {
      server.close();
    }
  });

  it('still refuses a directory as EISDIR', async () => {
    expect((await failure(dir))?.code).toBe('EISDIR');
  });
});

describe('- is standard input', () => {
  const built = fileURLToPath(new URL('../dist/index.js', import.meta.url));
  /** readTrace('-') in a child process whose standard input is `input`: its output (events, or the error). */
  const readStdin = (input: Buffer) =>
    spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { readTrace } from ${JSON.stringify(built)};
         readTrace('-').then((t) => console.log(t.format, t.events.length), (e) => console.log(e.name, e.message));`,
      ],
      { input, encoding: 'utf8' },
    );

  it('reads a JSONL trace, plain or gzip-compressed, from standard input', () => {
    const text = header + event.repeat(5);
    expect(readStdin(Buffer.from(text)).stdout.trim()).toBe('jsonl 5');
    expect(readStdin(zlib.gzipSync(text)).stdout.trim()).toBe('jsonl 5');
  });

  it('reads a snapshot (read whole) from standard input', () => {
    const pickle = readFileSync(new URL('./snapshot/fixtures/snapshot-p4.pickle.gz', import.meta.url));
    expect(readStdin(pickle).stdout.trim()).toBe('torch-snapshot 8');
  });

  it('says what is wrong with what came on standard input, naming it -', () => {
    expect(readStdin(Buffer.from('hello\n')).stdout.trim()).toMatch(/^TraceFormatError -:1: not a trace/);
  });

  it('a file named - in the folder is reached as ./-', async () => {
    const sub = mkdtempSync(join(dir, 'dash-'));
    writeFileSync(join(sub, '-'), header + event);
    expect((await readTrace(join(sub, '-'))).events.length).toBe(1);
  });
});
