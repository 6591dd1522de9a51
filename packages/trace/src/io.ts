/**
 * Reading trace files, for every format: what the path is (a file, not a directory), how the file
 * is compressed (told by its first bytes: gzip is read, zstd too where this Node has it; xz, bzip2
 * and zip are named with the command that decompresses them), its content bounded in size once
 * decompressed, and its lines.
 * @module
 */
import { createReadStream } from 'node:fs';
import { open, readFile, stat } from 'node:fs/promises';
import type { Readable, Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import * as zlib from 'node:zlib';
import { maxDecompressedTraceBytes, TraceFileError, TraceFormatError } from './formats/model.js';

/** A line longer than this is not part of a trace (a binary file, or one without line breaks). */
export const maxTraceLineChars = 1 << 20;

/** The compressions told apart by their first bytes. */
type TraceCompression = 'gzip' | 'zstd' | 'xz' | 'bzip2' | 'zip';

/** Each compression's magic bytes, and the command that undoes it where this reader cannot. */
const compressions: ReadonlyArray<{ name: TraceCompression; magic: readonly number[]; command: string }> = [
  { name: 'gzip', magic: [0x1f, 0x8b], command: 'gzip -d' },
  { name: 'zstd', magic: [0x28, 0xb5, 0x2f, 0xfd], command: 'zstd -d' },
  { name: 'xz', magic: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], command: 'xz -d' },
  { name: 'bzip2', magic: [0x42, 0x5a, 0x68], command: 'bzip2 -d' }, // 'BZh', then the block size '1'..'9'
  { name: 'zip', magic: [0x50, 0x4b, 0x03, 0x04], command: 'unzip' },
];

/** The compression `data` starts with, or undefined. */
function compressionOf(data: Uint8Array): TraceCompression | undefined {
  const found = compressions.find((c) => c.magic.length <= data.length && c.magic.every((b, i) => data[i] === b));
  if (found?.name === 'bzip2' && !(data.length > 3 && data[3]! >= 0x31 && data[3]! <= 0x39)) return undefined;
  return found?.name;
}

/** zlib's zstd decompressor, where this Node has one (22.15 and later); undefined before. */
const createZstdDecompress: (() => Transform) | undefined = Reflect.get(zlib, 'createZstdDecompress');

/** A decompressor for `compression`, or undefined where this Node has none. */
function decompressor(compression: TraceCompression): Transform | undefined {
  if (compression === 'gzip') return zlib.createGunzip();
  if (compression === 'zstd' && createZstdDecompress) return createZstdDecompress();
  return undefined;
}

/** The content of a trace file, decompressed, with its first bytes read ahead to tell its format. */
interface TraceSource {
  /** The path. */
  readonly file: string;
  /** How the file was compressed, or undefined. */
  readonly compression: TraceCompression | undefined;
  /** The first bytes of the content: at least the number asked for, unless the content is shorter. */
  readonly head: Buffer;
  /**
   * Every byte of the content, `head` first, in chunks; read once. A corrupt or truncated stream,
   * and content past the size limit, end it with a {@link TraceSourceError}.
   */
  readonly chunks: AsyncIterable<Buffer>;
  /** Stops reading (when the content is not read to its end). */
  close(): void;
}

/** Why a source's content could not be read (corrupt, truncated, too large): a reason without a location. */
class TraceSourceError extends Error {
  override readonly name = 'TraceSourceError';
  readonly code = 'GPUMEM_TRACE_SOURCE';
}

/** A {@link TraceFormatError} for a source failure where the content has no lines (a pickle). */
function sourceFormatError(file: string, e: TraceSourceError): TraceFormatError {
  const error = new TraceFormatError(file, 0, e.message);
  error.message = `${file}: ${e.message}`;
  return error;
}

/** The first `n` bytes of a file (fewer when it is shorter). */
async function firstBytesOf(path: string, n: number): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const { bytesRead, buffer } = await file.read(Buffer.alloc(n), 0, n, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}

/**
 * Opens a trace file: refuses a directory and a compression this reader cannot undo
 * ({@link TraceFileError}), decompresses gzip (and zstd where this Node can), and reads ahead
 * `headBytes` of the content. Compressed content may decompress to at most `maxDecompressedBytes`.
 * The file system's errors (ENOENT, EACCES) pass through.
 */
export async function openTraceFile(
  path: string,
  options: { maxDecompressedBytes?: number; headBytes?: number } = {},
): Promise<TraceSource> {
  const maxBytes = options.maxDecompressedBytes ?? maxDecompressedTraceBytes;
  const headBytes = options.headBytes ?? 4096;
  if ((await stat(path)).isDirectory()) {
    throw new TraceFileError(
      path,
      'EISDIR',
      `${path} is a directory: give a trace file (gpumem JSONL, an RMM CSV log or a PyTorch memory snapshot)`,
    );
  }
  const compression = compressionOf(await firstBytesOf(path, 8));
  const file = createReadStream(path, { highWaterMark: 1 << 20 });
  let stream: Readable = file;
  if (compression !== undefined) {
    const d = decompressor(compression);
    if (d === undefined) {
      file.destroy();
      const command = compressions.find((c) => c.name === compression)!.command;
      const why = compression === 'zstd' ? ` (Node ${process.version} has no zstd; Node 22.15 and later read it)` : '';
      throw new TraceFileError(
        path,
        'ERR_TRACE_COMPRESSION',
        `${path} is ${compression}-compressed, which this reader does not decompress${why}: decompress it first (${command} ${path})`,
      );
    }
    file.on('error', (e) => d.destroy(e));
    stream = file.pipe(d);
  }
  const it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const close = () => {
    file.destroy();
    if (stream !== file) stream.destroy();
  };
  let bytes = 0;
  /** The next chunk, counted against the limit; undefined at the end. */
  const next = async (): Promise<Buffer | undefined> => {
    let r: IteratorResult<Buffer>;
    try {
      r = await it.next();
    } catch (e) {
      // The file system's errors carry a syscall; the decompressor's do not.
      if (compression !== undefined && (e as NodeJS.ErrnoException).syscall === undefined) {
        throw new TraceSourceError(`the ${compression} stream is corrupt or truncated (${(e as Error).message})`);
      }
      throw e;
    }
    if (r.done) return undefined;
    bytes += r.value.length;
    if (compression !== undefined && bytes > maxBytes) throw new TraceSourceError(`the file decompresses to more than ${maxBytes} bytes`);
    return r.value;
  };
  const first: Buffer[] = [];
  let firstBytes = 0;
  let done = false;
  // A stream failure while reading ahead waits for the reader of the chunks, which knows where it is.
  let failure: TraceSourceError | undefined;
  try {
    while (firstBytes < headBytes && !done) {
      const chunk = await next();
      if (chunk === undefined) done = true;
      else {
        first.push(chunk);
        firstBytes += chunk.length;
      }
    }
  } catch (e) {
    if (!(e instanceof TraceSourceError)) {
      close();
      throw e;
    }
    failure = e;
  }
  const head = Buffer.concat(first);
  if (failure && head.length === 0) {
    close();
    throw sourceFormatError(path, failure); // nothing to tell a format by
  }
  async function* chunks(): AsyncGenerator<Buffer> {
    try {
      if (head.length > 0) yield head;
      if (failure) throw failure;
      for (let chunk = done ? undefined : await next(); chunk !== undefined; chunk = await next()) yield chunk;
    } finally {
      close();
    }
  }
  return { file: path, compression, head, chunks: chunks(), close };
}

/** Deflate's largest ratio of output to input (RFC 1951: a 258-byte match costs at least 2 bits). */
const maxDeflateRatio = 1032;

/**
 * How many bytes a compressed file is likely to decompress to, bounded by what it can: gzip's
 * trailer (ISIZE, the size modulo 2^32 of its last member) where it is within deflate's largest
 * ratio of the file's size, else a small start. A hint only: the buffer grows past it.
 */
async function decompressedSizeHint(source: TraceSource, maxBytes: number): Promise<number> {
  const start = Math.max(source.head.length, 1 << 16);
  if (source.compression !== 'gzip') return start;
  const { size } = await stat(source.file);
  if (size < 18) return start;
  const file = await open(source.file, 'r');
  try {
    const { buffer } = await file.read(Buffer.alloc(4), 0, 4, size - 4);
    const isize = buffer.readUInt32LE(0);
    return Math.max(source.head.length, Math.min(isize, maxBytes, size * maxDeflateRatio));
  } finally {
    await file.close();
  }
}

/**
 * All of a source's content in one Buffer (a pickle is read whole). Compressed content is written
 * into one buffer sized from the file's own trailer and grown where that is short, so the content
 * is held once, not as chunks and then their concatenation. Content that does not fit in memory is
 * a {@link TraceFormatError} naming the file.
 */
export async function readAll(source: TraceSource, maxBytes: number = maxDecompressedTraceBytes): Promise<Buffer> {
  if (source.compression === undefined) {
    source.close();
    return readFile(source.file); // one buffer of the file's size, never a copy of chunks
  }
  let length = 0;
  try {
    let buffer = Buffer.allocUnsafe(await decompressedSizeHint(source, maxBytes));
    for await (const chunk of source.chunks) {
      if (length + chunk.length > buffer.length) {
        const grown = Buffer.allocUnsafe(Math.max(length + chunk.length, Math.min(buffer.length * 2, maxBytes)));
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      chunk.copy(buffer, length);
      length += chunk.length;
    }
    return buffer.subarray(0, length);
  } catch (e) {
    if (e instanceof TraceSourceError) throw sourceFormatError(source.file, e);
    if (e instanceof RangeError) {
      source.close();
      throw sourceFormatError(
        source.file,
        new TraceSourceError(
          `its ${source.compression} content (more than ${length} bytes) does not fit in this process's memory (${e.message})`,
        ),
      );
    }
    throw e;
  }
}

/** Consecutive lines of a text, the first of them numbered `firstLine` (1-based), without line breaks. */
interface LineBatch {
  firstLine: number;
  lines: string[];
}

/**
 * The lines of chunks of text, a chunk's worth at a time. A line longer than
 * {@link maxTraceLineChars}, and a source failure, are a {@link TraceFormatError} at their line.
 */
export async function* lineBatches(chunks: AsyncIterable<Buffer>, file: string): AsyncGenerator<LineBatch> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let n = 0;
  try {
    for await (const chunk of chunks) {
      pending += decoder.write(chunk);
      const lines: string[] = [];
      let start = 0;
      for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n', start)) {
        lines.push(pending.slice(start, end));
        start = end + 1;
      }
      pending = pending.slice(start);
      if (lines.length > 0) {
        yield { firstLine: n + 1, lines };
        n += lines.length;
      }
      if (pending.length > maxTraceLineChars) {
        throw new TraceFormatError(
          file,
          n + 1,
          `the line is longer than ${maxTraceLineChars} characters: not a trace file (binary, or no line breaks)`,
        );
      }
    }
  } catch (e) {
    if (e instanceof TraceSourceError) throw new TraceFormatError(file, n + 1, e.message);
    throw e;
  }
  pending += decoder.end();
  if (pending.length > 0) yield { firstLine: n + 1, lines: [pending] };
}

/**
 * The lines of a file, streamed in chunks, with their 1-based numbers. A line longer than
 * {@link maxTraceLineChars} is a {@link TraceFormatError} (a binary file, or no line breaks).
 */
export async function* readLines(path: string): AsyncGenerator<[string, number]> {
  for await (const { firstLine, lines } of lineBatches(createReadStream(path, { highWaterMark: 1 << 20 }), path)) {
    for (let i = 0; i < lines.length; i++) yield [lines[i]!, firstLine + i];
  }
}
