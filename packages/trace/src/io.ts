/**
 * Reading trace files, for every format: what the path is (a regular file, or `-` for standard
 * input; a directory, a FIFO, a device or a socket is refused before anything is read from it), how
 * the content is compressed (told by its first bytes: gzip is read, every member; zstd too where this
 * Node has it, every frame; xz, bzip2 and zip are named with the command that decompresses them), its
 * content bounded in size once decompressed, and its lines.
 * @module
 */
import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { pipeline, Readable, type Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import * as zlib from 'node:zlib';
import { nonRegularFileKind } from '@gpumem/allocator-core';
import { maxDecompressedTraceBytes, TraceFileError, TraceFormatError } from './formats/model.js';
import { startsLikeZstd, ZstdFramesError, zstdFrames } from './zstd-frames.js';

/** A line longer than this is not part of a trace (a binary file, or one without line breaks). */
export const maxTraceLineChars = 1 << 20;

/** The path that names standard input. */
const stdinPath = '-';

/** The compressions told apart by their first bytes. */
type TraceCompression = 'gzip' | 'zstd' | 'xz' | 'bzip2' | 'zip';

/** Each compression's test of the first bytes, and the command that undoes it where this reader cannot. */
const compressions: ReadonlyArray<{ name: TraceCompression; starts: (data: Uint8Array) => boolean; command: string }> = [
  { name: 'gzip', starts: magic([0x1f, 0x8b]), command: 'gzip -d' },
  { name: 'zstd', starts: startsLikeZstd, command: 'zstd -d' }, // a frame, or a skippable frame (pzstd)
  { name: 'xz', starts: magic([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), command: 'xz -d' },
  // 'BZh', then the block size '1'..'9'
  { name: 'bzip2', starts: (d) => magic([0x42, 0x5a, 0x68])(d) && d.length > 3 && d[3]! >= 0x31 && d[3]! <= 0x39, command: 'bzip2 -d' },
  { name: 'zip', starts: magic([0x50, 0x4b, 0x03, 0x04]), command: 'unzip' },
];

function magic(bytes: readonly number[]): (data: Uint8Array) => boolean {
  return (data) => bytes.length <= data.length && bytes.every((b, i) => data[i] === b);
}

/** The compression `data` starts with, or undefined. */
function compressionOf(data: Uint8Array): TraceCompression | undefined {
  return compressions.find((c) => c.starts(data))?.name;
}

/** zlib's zstd decompressor, where this Node has one (22.15 and later); undefined before. */
const createZstdDecompress: (() => Transform) | undefined = Reflect.get(zlib, 'createZstdDecompress');

/**
 * The content of `raw` (compressed bytes) decompressed, or undefined where this Node cannot: gzip's
 * every member (zlib reads concatenated members, and refuses other bytes after them), zstd's every
 * frame.
 */
function decompressed(compression: TraceCompression, raw: AsyncIterable<Buffer>): Readable | undefined {
  if (compression === 'gzip') {
    const gunzip = zlib.createGunzip();
    pipeline(Readable.from(raw), gunzip, () => undefined); // errors reach gunzip, and its reader
    return gunzip;
  }
  if (compression === 'zstd' && createZstdDecompress) return Readable.from(zstdFrames(raw, createZstdDecompress));
  return undefined;
}

/** The content of a trace file, decompressed, with its first bytes read ahead to tell its format. */
interface TraceSource {
  /** The path (`-` for standard input). */
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
  /** How many bytes the content likely holds: a hint for a buffer that takes it whole (it grows past it). */
  readonly sizeHint: number;
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

/** The error for a path that is not a regular file, `kind` saying what it is. */
function notRegular(path: string, kind: string): TraceFileError {
  return new TraceFileError(
    path,
    'ERR_TRACE_NOT_FILE',
    `${path} is ${kind}, not a regular file: give a trace file, or - to read one from standard input (cat ${path} | gpumem ... -)`,
  );
}

/** Deflate's largest ratio of output to input (RFC 1951: a 258-byte match costs at least 2 bits). */
const maxDeflateRatio = 1032;

/** The raw bytes of a path: a regular file, opened once and checked through its descriptor, or standard input. */
interface RawInput {
  chunks: AsyncIterable<Buffer>;
  close(): void;
  /** The file's size (undefined for standard input). */
  size: number | undefined;
  /** gzip's ISIZE (the last member's size modulo 2^32), read from the file's last 4 bytes; undefined for standard input. */
  lastFourBytes: Buffer | undefined;
}

/**
 * Opens `path` for reading: `-` is standard input (not a terminal); anything else must be a regular
 * file. It is opened without blocking (a FIFO would block the open until a writer came) and checked
 * through the descriptor it is then read from, so what is checked is what is read.
 */
async function openRaw(path: string): Promise<RawInput> {
  if (path === stdinPath) {
    if (process.stdin.isTTY) {
      throw new TraceFileError(path, 'ERR_TRACE_NOT_FILE', 'standard input (-) is a terminal: pipe a trace into it, or give its path');
    }
    return { chunks: process.stdin, close: () => process.stdin.pause(), size: undefined, lastFourBytes: undefined };
  }
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY).catch(
    async (e: NodeJS.ErrnoException) => {
      // a socket cannot be opened at all (ENXIO): say what it is, as for a FIFO
      if (e.code === 'ENXIO' && (await stat(path).catch(() => undefined))?.isSocket()) throw notRegular(path, 'a socket');
      throw e;
    },
  );
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) {
      throw new TraceFileError(
        path,
        'EISDIR',
        `${path} is ${nonRegularFileKind(stats)}: give a trace file (gpumem JSONL, an RMM CSV log or a PyTorch memory snapshot)`,
      );
    }
    const kind = nonRegularFileKind(stats);
    if (kind !== undefined) throw notRegular(path, kind);
    let lastFourBytes: Buffer | undefined;
    if (stats.size >= 18) {
      const { buffer } = await handle.read(Buffer.alloc(4), 0, 4, stats.size - 4);
      lastFourBytes = buffer;
    }
    const stream = handle.createReadStream({ start: 0, highWaterMark: 1 << 20 });
    return { chunks: stream, close: () => stream.destroy(), size: stats.size, lastFourBytes };
  } catch (e) {
    await handle.close();
    throw e;
  }
}

/** `first` chunks, then the rest of `it`. */
async function* prepend(first: Buffer[], it: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  yield* first;
  for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
}

/**
 * Opens a trace file (or `-`, standard input): refuses a directory, a FIFO, a device or a socket and a
 * compression this reader cannot undo ({@link TraceFileError}), decompresses gzip (and zstd where this
 * Node can), and reads ahead `headBytes` of the content. Compressed content may decompress to at most
 * `maxDecompressedBytes`. The file system's errors (ENOENT, EACCES) pass through.
 */
export async function openTraceFile(
  path: string,
  options: { maxDecompressedBytes?: number; headBytes?: number } = {},
): Promise<TraceSource> {
  const maxBytes = options.maxDecompressedBytes ?? maxDecompressedTraceBytes;
  const headBytes = options.headBytes ?? 4096;
  const raw = await openRaw(path);
  // The first bytes tell the compression: read until there are 8 of them, or the input ends.
  const rawIt = raw.chunks[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const firstRaw: Buffer[] = [];
  let firstRawBytes = 0;
  try {
    while (firstRawBytes < 8) {
      const r = await rawIt.next();
      if (r.done) break;
      firstRaw.push(r.value);
      firstRawBytes += r.value.length;
    }
  } catch (e) {
    raw.close();
    throw e;
  }
  const compression = compressionOf(Buffer.concat(firstRaw).subarray(0, 8));
  const rawChunks = prepend(firstRaw, rawIt);
  let stream: AsyncIterable<Buffer> = rawChunks;
  let sizeHint = raw.size ?? 1 << 16;
  if (compression !== undefined) {
    const d = decompressed(compression, rawChunks);
    if (d === undefined) {
      raw.close();
      const command = compressions.find((c) => c.name === compression)!.command;
      const why = compression === 'zstd' ? ` (Node ${process.version} has no zstd; Node 22.15 and later read it)` : '';
      throw new TraceFileError(
        path,
        'ERR_TRACE_COMPRESSION',
        `${path} is ${compression}-compressed, which this reader does not decompress${why}: decompress it first (${command} ${path})`,
      );
    }
    stream = d;
    // gzip's trailer gives the last member's size, believed where deflate could make it from the file
    sizeHint =
      compression === 'gzip' && raw.lastFourBytes !== undefined && raw.size !== undefined
        ? Math.min(raw.lastFourBytes.readUInt32LE(0), maxBytes, raw.size * maxDeflateRatio)
        : 1 << 16;
  }
  const it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const close = () => {
    raw.close();
    if (stream !== rawChunks) (stream as Readable).destroy();
  };
  let bytes = 0;
  /** The next chunk, counted against the limit; undefined at the end. */
  const next = async (): Promise<Buffer | undefined> => {
    let r: IteratorResult<Buffer>;
    try {
      r = await it.next();
    } catch (e) {
      if (e instanceof ZstdFramesError) throw new TraceSourceError(e.message);
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
  return { file: path, compression, head, chunks: chunks(), sizeHint: Math.max(head.length, sizeHint), close };
}

/**
 * All of a source's content in one Buffer (a pickle is read whole), written into one buffer sized
 * from what the file says (its size; gzip's trailer) and grown where that is short, so the content is
 * held once, not as chunks and then their concatenation. Content that does not fit in memory is a
 * {@link TraceFormatError} naming the file.
 */
export async function readAll(source: TraceSource, maxBytes: number = maxDecompressedTraceBytes): Promise<Buffer> {
  let length = 0;
  try {
    let buffer = Buffer.allocUnsafe(Math.min(source.sizeHint, maxBytes));
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
          `its ${source.compression ?? 'uncompressed'} content (more than ${length} bytes) does not fit in this process's memory (${e.message})`,
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
 * The lines of a file (a regular file, or `-` for standard input), streamed in chunks, with their
 * 1-based numbers. A line longer than {@link maxTraceLineChars} is a {@link TraceFormatError} (a
 * binary file, or no line breaks); a path that is not a regular file a {@link TraceFileError}.
 */
export async function* readLines(path: string): AsyncGenerator<[string, number]> {
  const raw = await openRaw(path);
  try {
    for await (const { firstLine, lines } of lineBatches(raw.chunks, path)) {
      for (let i = 0; i < lines.length; i++) yield [lines[i]!, firstLine + i];
    }
  } finally {
    raw.close();
  }
}
