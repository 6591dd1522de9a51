/**
 * Allocation traces: the model, and its two file forms.
 *
 * - **JSONL**, gpumem's own: the first line is a header object
 *   (`{"format":"gpumem-trace","version":1,"source":...}`), then one event object per line.
 * - **RMM's logging CSV**, as `rmm::mr::logging_resource_adaptor` writes it: the header
 *   `Thread,Time,Action,Pointer,Size,Stream`, then one row per event, e.g.
 *   `140243462133568,14:03:21.123456,allocate,0x7f1e2c000000,1024,0x0`.
 *
 * Readers take files line by line (never the whole file as one string), check every field, and
 * throw {@link TraceFormatError} naming the file and the line for anything malformed.
 * {@link readTrace} also reads PyTorch's memory snapshots (see `snapshot/snapshot.ts`), and any of
 * these forms gzip-compressed, telling them apart by their first bytes.
 * @module
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { createGunzip } from 'node:zlib';
import type { AllocationAction, AllocationEvent } from '@gpumem/allocator-core';
import { once } from 'node:events';
import { StringDecoder } from 'node:string_decoder';

/** What happened: an allocation, a free, or an allocation that failed (out of memory). */
export type TraceAction = AllocationAction;

/** One event of a trace: the project's one allocation event type, as the tracking layers record it. */
export type TraceEvent = AllocationEvent;

/** What a trace says about itself. */
export interface TraceHeader {
  /** Who made it: 'gpumem record', 'rmm-csv' (read from an RMM log), ... */
  source: string;
  /** The allocator it was recorded on. */
  allocator?: string;
  /** The device it was recorded on ('host', 'cuda:0'). */
  device?: string;
  /** When it was recorded (ISO 8601). */
  createdAt?: string;
  /** The workload that produced it (model, dataset, flags). */
  workload?: Record<string, unknown>;
  /** Events the recorder's ring buffer overwrote before they were read: the trace starts mid-run. */
  droppedEvents?: number;
  /** What each event tag means: `tags[event.tag]` (the trainer's phases: setup, forward, ...). */
  tags?: string[];
}

/** An allocation trace: a header and its events, in the order they happened. */
export interface AllocationTrace {
  header: TraceHeader;
  events: TraceEvent[];
}

/** The file forms a trace can take. */
export type TraceFileFormat = 'jsonl' | 'rmm-csv';

/** Every file form, for flag help and messages. */
export const traceFileFormats: readonly TraceFileFormat[] = ['jsonl', 'rmm-csv'];

/** The forms {@link readTrace} reads: the written forms, and PyTorch's memory snapshots. */
export type ReadTraceFormat = TraceFileFormat | 'torch-snapshot';

/** A trace read from a file, with the form it was in. */
export interface ReadTrace extends AllocationTrace {
  format: ReadTraceFormat;
}

/** Options of {@link readTrace}. */
export interface ReadTraceOptions {
  /** PyTorch snapshots: the CUDA device whose history to read (default: the first with entries). */
  device?: number;
  /** Gzip-compressed files: the most bytes they may decompress to (default {@link maxDecompressedTraceBytes}). */
  maxDecompressedBytes?: number;
}

/** What a gzip-compressed trace may decompress to by default: more is refused (a gzip bomb, or not a trace). */
export const maxDecompressedTraceBytes = 2 ** 31;

/** True when `data` starts with gzip's magic bytes (1f 8b). */
export function isGzip(data: Uint8Array): boolean {
  return data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b;
}

/** True when `data` starts like a pickle of protocol 2 to 5 (PyTorch's snapshots). */
function isPickleStart(data: Uint8Array): boolean {
  return data.length >= 2 && data[0] === 0x80 && data[1]! >= 2 && data[1]! <= 5;
}

/** The JSONL header's format marker and the version this code writes and reads. */
export const traceFormatMarker = 'gpumem-trace';
export const traceFormatVersion = 1;

/** RMM's CSV header line (logging_resource_adaptor::header()). */
export const rmmCsvHeader = 'Thread,Time,Action,Pointer,Size,Stream';

/** A line longer than this is not part of a trace (a binary file, or one without line breaks). */
export const maxTraceLineChars = 1 << 20;

/** A malformed trace file: says which file, which line (1-based) and what is wrong with it. */
export class TraceFormatError extends Error {
  override readonly name = 'TraceFormatError';
  constructor(
    /** The file (or the name given to parsed text). */
    readonly file: string,
    /** The 1-based line. */
    readonly line: number,
    /** What is wrong, without the location. */
    readonly reason: string,
  ) {
    super(`${file}:${line}: ${reason}`);
  }
}

/** The form a file name implies: `.jsonl`/`.ndjson` → 'jsonl', `.csv` → 'rmm-csv'; undefined otherwise. */
export function formatFromPath(path: string): TraceFileFormat | undefined {
  const lower = path.toLowerCase();
  if (lower.endsWith('.jsonl') || lower.endsWith('.ndjson')) return 'jsonl';
  if (lower.endsWith('.csv')) return 'rmm-csv';
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Writing

function hex(value: number): string {
  return `0x${value.toString(16)}`;
}

/** Local time of day as RMM writes it (spdlog's `%H:%M:%S.%f`: microseconds, 6 digits). */
function timeOfDay(baseMs: number, timeNs: number): string {
  const totalUs = Math.floor(baseMs) * 1000 + Math.floor(timeNs / 1000);
  const date = new Date(Math.floor(totalUs / 1000));
  const pad = (v: number, n = 2) => String(v).padStart(n, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(totalUs % 1_000_000, 6)}`;
}

const rmmActions: Record<TraceAction, string> = { alloc: 'allocate', free: 'free', oom: 'allocate failure' };

/**
 * The lines of a trace in `format`, without line breaks. JSONL keeps everything; RMM's CSV keeps
 * what its columns hold (time to the microsecond, as a time of day from `header.createdAt`, action,
 * pointer, size, stream, thread) and drops the header, tags and reserved bytes.
 */
export function* traceLines(trace: AllocationTrace, format: TraceFileFormat): Generator<string> {
  if (format === 'jsonl') {
    yield JSON.stringify({ format: traceFormatMarker, version: traceFormatVersion, ...trace.header, eventCount: trace.events.length });
    for (const e of trace.events) {
      const line: Record<string, number | string> = { timeNs: e.timeNs, action: e.action, ptr: e.ptr, bytes: e.bytes, stream: e.stream, tag: e.tag };
      if (e.reservedBytes !== undefined) line.reservedBytes = e.reservedBytes;
      if (e.thread !== undefined) line.thread = e.thread;
      yield JSON.stringify(line);
    }
    return;
  }
  const created = trace.header.createdAt === undefined ? Number.NaN : Date.parse(trace.header.createdAt);
  const baseMs = Number.isFinite(created) ? created : Date.now();
  yield rmmCsvHeader;
  for (const e of trace.events) {
    yield `${e.thread ?? process.pid},${timeOfDay(baseMs, e.timeNs)},${rmmActions[e.action]},${hex(e.ptr)},${e.bytes},${hex(e.stream)}`;
  }
}

/** The whole trace as one string (small traces; files go through {@link writeTrace}). */
export function serializeTrace(trace: AllocationTrace, format: TraceFileFormat): string {
  let out = '';
  for (const line of traceLines(trace, format)) out += `${line}\n`;
  return out;
}

/** Writes `trace` to `path` in `format`, streaming, a batch of lines at a time. */
export async function writeTrace(path: string, trace: AllocationTrace, format: TraceFileFormat): Promise<void> {
  const out = createWriteStream(path, { encoding: 'utf8' });
  const failed = new Promise<never>((_, reject) => out.once('error', reject));
  failed.catch(() => undefined);
  const write = async (chunk: string) => {
    if (!out.write(chunk)) await Promise.race([once(out, 'drain'), failed]);
  };
  let batch = '';
  let count = 0;
  for (const line of traceLines(trace, format)) {
    batch += `${line}\n`;
    if (++count === 4096) {
      await write(batch);
      batch = '';
      count = 0;
    }
  }
  if (batch) await write(batch);
  out.end();
  await Promise.race([once(out, 'finish'), failed]);
}

// ---------------------------------------------------------------------------------------------
// Reading

const maxSafe = Number.MAX_SAFE_INTEGER;

/** Checks an event's fields against each other; returns a reason, or undefined when it is sound. */
function eventProblem(e: TraceEvent): string | undefined {
  if (e.action === 'alloc' && e.ptr === 0 && e.bytes > 0) return `an allocation of ${e.bytes} bytes has a null pointer`;
  if (e.action === 'free' && e.ptr === 0 && e.bytes > 0) return `a free of ${e.bytes} bytes has a null pointer`;
  return undefined;
}

/** Turns the lines of a trace file into a trace: one line at a time, the first being the header. */
class TraceParser {
  #format: TraceFileFormat | undefined;
  #header: TraceHeader = { source: 'unknown' };
  #events: TraceEvent[] = [];
  #expected: number | undefined;
  #lastLine = 0;
  // RMM times: the first event's time, and a day offset for logs that run past midnight.
  #base: [number, number] | undefined;
  #lastSeconds = 0;
  #dayNs = 0;

  constructor(readonly file: string) {}

  #fail(line: number, reason: string): never {
    throw new TraceFormatError(this.file, line, reason);
  }

  /** Feeds line `n` (1-based, without its line break). */
  line(raw: string, n: number): void {
    this.#lastLine = n;
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (this.#format === undefined) {
      this.#readHeader(n === 1 && text.startsWith('\uFEFF') ? text.slice(1) : text, n);
      return;
    }
    if (text.trim() === '') return;
    const event = this.#format === 'jsonl' ? this.#jsonEvent(text, n) : this.#csvEvent(text, n);
    const problem = eventProblem(event);
    if (problem) this.#fail(n, problem);
    this.#events.push(event);
  }

  /** The trace, once every line has been fed. */
  finish(): ReadTrace {
    if (this.#format === undefined) this.#fail(1, `the file is empty; expected a gpumem trace header or RMM's CSV header '${rmmCsvHeader}'`);
    if (this.#expected !== undefined && this.#expected !== this.#events.length) {
      this.#fail(
        this.#lastLine + 1,
        `the header announces ${this.#expected} events but the file holds ${this.#events.length}` +
          (this.#events.length < this.#expected ? ' (truncated?)' : ''),
      );
    }
    return { format: this.#format, header: this.#header, events: this.#events };
  }

  #readHeader(text: string, n: number): void {
    if (text.trim() === rmmCsvHeader) {
      this.#format = 'rmm-csv';
      this.#header = { source: 'rmm-csv' };
      return;
    }
    const expected = `expected a gpumem trace header ({"format":"${traceFormatMarker}","version":${traceFormatVersion},...}) or RMM's CSV header '${rmmCsvHeader}'`;
    if (!text.trimStart().startsWith('{')) this.#fail(n, `${expected} but the line starts with ${JSON.stringify(text.slice(0, 24))}`);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.#fail(n, `${expected} but the header is not valid JSON (${(e as Error).message})`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) this.#fail(n, `${expected} but received ${JSON.stringify(value)}`);
    const h = value as Record<string, unknown>;
    if (h.format !== traceFormatMarker) this.#fail(n, `${expected} but "format" is ${JSON.stringify(h.format)}`);
    if (h.version !== traceFormatVersion) {
      const newer = typeof h.version === 'number' && h.version > traceFormatVersion;
      this.#fail(n, `trace version ${JSON.stringify(h.version)} ${newer ? 'is newer than this reader' : 'is not supported'}; this reader reads version ${traceFormatVersion}`);
    }
    const str = (key: string): string | undefined => {
      const v = h[key];
      if (v === undefined) return undefined;
      if (typeof v !== 'string') this.#fail(n, `header field "${key}" must be a string (received ${JSON.stringify(v)})`);
      return v;
    };
    const header: TraceHeader = { source: str('source') ?? 'unknown' };
    const allocator = str('allocator');
    const device = str('device');
    const createdAt = str('createdAt');
    if (allocator !== undefined) header.allocator = allocator;
    if (device !== undefined) header.device = device;
    if (createdAt !== undefined) header.createdAt = createdAt;
    if (h.workload !== undefined) {
      if (h.workload === null || typeof h.workload !== 'object' || Array.isArray(h.workload)) {
        this.#fail(n, `header field "workload" must be an object (received ${JSON.stringify(h.workload)})`);
      }
      header.workload = h.workload as Record<string, unknown>;
    }
    if (h.tags !== undefined) {
      if (!Array.isArray(h.tags) || h.tags.some((t) => typeof t !== 'string')) {
        this.#fail(n, `header field "tags" must be an array of strings (received ${JSON.stringify(h.tags).slice(0, 80)})`);
      }
      header.tags = h.tags as string[];
    }
    if (h.droppedEvents !== undefined) header.droppedEvents = this.#count(h.droppedEvents, 'droppedEvents', n, 'header field');
    if (h.eventCount !== undefined) this.#expected = this.#count(h.eventCount, 'eventCount', n, 'header field');
    this.#format = 'jsonl';
    this.#header = header;
  }

  /** A non-negative integer no larger than 2^53 - 1. */
  #count(value: unknown, name: string, n: number, what = 'field'): number {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > maxSafe) {
      const why = typeof value === 'number' && Number.isInteger(value) && value > maxSafe ? ' (larger than 2^53 - 1)' : '';
      this.#fail(n, `${what} "${name}" must be a non-negative integer up to 2^53 - 1 (received ${JSON.stringify(value)})${why}`);
    }
    return value;
  }

  #jsonEvent(text: string, n: number): TraceEvent {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.#fail(n, `not a JSON event object (${(e as Error).message}); truncated line?`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) this.#fail(n, `expected a JSON event object but received ${text.slice(0, 80)}`);
    const o = value as Record<string, unknown>;
    if (o.action !== 'alloc' && o.action !== 'free' && o.action !== 'oom') {
      this.#fail(n, `"action" must be one of "alloc", "free", "oom" (received ${JSON.stringify(o.action)})`);
    }
    for (const key of ['timeNs', 'ptr', 'bytes'] as const) if (o[key] === undefined) this.#fail(n, `the event has no "${key}" field`);
    const event: TraceEvent = {
      timeNs: this.#count(o.timeNs, 'timeNs', n),
      action: o.action,
      ptr: this.#count(o.ptr, 'ptr', n),
      bytes: this.#count(o.bytes, 'bytes', n),
      stream: o.stream === undefined ? 0 : this.#count(o.stream, 'stream', n),
      tag: o.tag === undefined ? 0 : this.#count(o.tag, 'tag', n),
    };
    if (event.tag > 0xffffffff) this.#fail(n, `"tag" must fit in 32 bits (received ${event.tag})`);
    if (o.reservedBytes !== undefined) event.reservedBytes = this.#count(o.reservedBytes, 'reservedBytes', n);
    if (o.thread !== undefined) event.thread = this.#count(o.thread, 'thread', n);
    return event;
  }

  #csvEvent(text: string, n: number): TraceEvent {
    const fields = text.split(',').map((f) => f.trim());
    if (fields.length !== 6) {
      this.#fail(n, `expected 6 comma-separated fields (${rmmCsvHeader}) but found ${fields.length}${fields.length < 6 ? ' (truncated line?)' : ''}`);
    }
    const [thread, time, action, pointer, size, stream] = fields as [string, string, string, string, string, string];
    const act = action === 'allocate' ? 'alloc' : action === 'free' ? 'free' : action === 'allocate failure' ? 'oom' : undefined;
    if (act === undefined) this.#fail(n, `Action must be one of allocate, free, allocate failure (received '${action}')`);
    if (!/^\d+$/.test(thread)) this.#fail(n, `Thread must be a decimal thread id (received '${thread}')`);
    return {
      timeNs: this.#csvTime(time, n),
      action: act,
      ptr: this.#hex(pointer, 'Pointer', n),
      bytes: this.#decimal(size, 'Size', n),
      stream: this.#hex(stream, 'Stream', n),
      tag: 0,
      thread: this.#decimal(thread, 'Thread', n),
    };
  }

  #decimal(text: string, name: string, n: number): number {
    if (!/^\d+$/.test(text)) this.#fail(n, `${name} must be a non-negative decimal integer (received '${text}')`);
    const value = Number(text);
    if (value > maxSafe) this.#fail(n, `${name} ${text} is larger than 2^53 - 1`);
    return value;
  }

  /** A pointer or stream as RMM prints them: `0x7f1e2c000000` (fmt), `7f1e2c000000` (printf %llx), `0x0`, `(nil)`. */
  #hex(text: string, name: string, n: number): number {
    if (text === '(nil)') return 0;
    const m = /^(?:0x)?([0-9a-fA-F]+)$/.exec(text);
    if (!m) this.#fail(n, `${name} must be a hexadecimal address such as 0x7f1e2c000000 (received '${text}')`);
    const digits = m[1]!.replace(/^0+(?=.)/, '');
    const value = Number.parseInt(digits, 16);
    if (digits.length > 14 || value > maxSafe) this.#fail(n, `${name} ${text} is larger than 2^53 - 1`);
    return value;
  }

  /** RMM's `HH:MM:SS.ffffff` (time of day), or seconds with a fraction; ns since the first event. */
  #csvTime(text: string, n: number): number {
    let seconds: number;
    let fracNs: number;
    let timeOfDayForm = false;
    const tod = /^(\d{1,2}):(\d{2}):(\d{2})(?:[.:](\d{1,9}))?$/.exec(text);
    const plain = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(text);
    if (tod) {
      const [h, m, s] = [Number(tod[1]), Number(tod[2]), Number(tod[3])];
      if (h > 23 || m > 59 || s > 60) this.#fail(n, `Time '${text}' is not a valid time of day`);
      seconds = h * 3600 + m * 60 + s;
      fracNs = Number((tod[4] ?? '').padEnd(9, '0'));
      timeOfDayForm = true;
    } else if (plain) {
      seconds = Number(plain[1]);
      fracNs = Number((plain[2] ?? '').padEnd(9, '0'));
    } else {
      this.#fail(n, `Time must be HH:MM:SS.ffffff (received '${text}')`);
    }
    if (this.#base === undefined) this.#base = [seconds, fracNs];
    else if (timeOfDayForm && seconds < this.#lastSeconds - 3600) this.#dayNs += 86_400e9; // past midnight
    this.#lastSeconds = seconds;
    const ns = (seconds - this.#base[0]) * 1e9 + (fracNs - this.#base[1]) + this.#dayNs;
    return Math.max(0, ns);
  }
}

/** Parses a trace held in memory (JSONL or RMM CSV, told apart by the first line). */
export function parseTrace(text: string, file = '<input>'): ReadTrace {
  const parser = new TraceParser(file);
  let start = 0;
  let n = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    parser.line(text.slice(start, end), ++n);
    start = end + 1;
  }
  return parser.finish();
}

/**
 * The lines of chunks of text, with their 1-based numbers; `maxBytes` bounds the bytes taken in
 * (decompressed files), and a gzip stream's failure becomes a {@link TraceFormatError} at its line.
 */
async function* linesOf(chunks: AsyncIterable<Buffer>, file: string, maxBytes = Infinity): AsyncGenerator<[string, number]> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let n = 0;
  let bytes = 0;
  try {
    for await (const chunk of chunks) {
      bytes += chunk.length;
      if (bytes > maxBytes) throw new TraceFormatError(file, n + 1, `the file decompresses to more than ${maxBytes} bytes`);
      pending += decoder.write(chunk);
      let start = 0;
      for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n', start)) {
        yield [pending.slice(start, end), ++n];
        start = end + 1;
      }
      pending = pending.slice(start);
      if (pending.length > maxTraceLineChars) {
        throw new TraceFormatError(file, n + 1, `the line is longer than ${maxTraceLineChars} characters: not a trace file (binary, or no line breaks)`);
      }
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('Z_')) {
      throw new TraceFormatError(file, n + 1, `the gzip stream is corrupt or truncated (${(e as Error).message})`);
    }
    throw e;
  }
  pending += decoder.end();
  if (pending.length > 0) yield [pending, ++n];
}

/**
 * The lines of a file, streamed in chunks, with their 1-based numbers. A line longer than
 * {@link maxTraceLineChars} is a {@link TraceFormatError} (a binary file, or no line breaks).
 */
export function readLines(path: string): AsyncGenerator<[string, number]> {
  return linesOf(createReadStream(path, { highWaterMark: 1 << 20 }), path);
}

/** The first `n` bytes of a file (fewer when it is shorter). */
async function head(path: string, n: number): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const { bytesRead, buffer } = await file.read(Buffer.alloc(n), 0, n, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}

/**
 * The decompressed chunks of a gzip file, the first of them read ahead: `first` holds at least its
 * first 2 bytes (fewer only when the whole content is shorter) so the content's form can be told.
 */
async function gunzipFile(path: string): Promise<{ first: Buffer; chunks: AsyncIterable<Buffer>; close: () => void }> {
  const source = createReadStream(path, { highWaterMark: 1 << 20 });
  const gunzip = createGunzip();
  source.on('error', (e) => gunzip.destroy(e));
  source.pipe(gunzip);
  const it = gunzip[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const close = () => {
    source.destroy();
    gunzip.destroy();
  };
  let first = Buffer.alloc(0);
  let done = false;
  try {
    while (first.length < 2 && !done) {
      const r = await it.next();
      if (r.done) done = true;
      else first = Buffer.concat([first, r.value]);
    }
  } catch (e) {
    close();
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('Z_')) throw new TraceFormatError(path, 1, `the gzip stream is corrupt or truncated (${(e as Error).message})`);
    throw e;
  }
  async function* chunks(): AsyncGenerator<Buffer> {
    try {
      if (first.length > 0) yield first;
      for (let r = done ? undefined : await it.next(); r && !r.done; r = await it.next()) yield r.value;
    } finally {
      close();
    }
  }
  return { first, chunks: chunks(), close };
}

/**
 * Reads a trace file: gzip-compressed or not, JSONL or RMM CSV (told apart by the first line, read
 * line by line), or a PyTorch memory snapshot (a pickle, told apart by its first bytes; see
 * `readSnapshot`). Throws {@link TraceFormatError} for a malformed file, and the file system's error
 * when it cannot be read.
 */
export async function readTrace(path: string, options: ReadTraceOptions = {}): Promise<ReadTrace> {
  // Imported when needed: the snapshot reader imports this module.
  const snapshot = async () => (await import('./snapshot/snapshot.js')).readSnapshot(path, options);
  const start = await head(path, 2);
  if (isPickleStart(start)) return snapshot();
  let lines: AsyncIterable<[string, number]>;
  if (isGzip(start)) {
    const gz = await gunzipFile(path);
    if (isPickleStart(gz.first)) {
      gz.close();
      return snapshot();
    }
    lines = linesOf(gz.chunks, path, options.maxDecompressedBytes ?? maxDecompressedTraceBytes);
  } else {
    lines = readLines(path);
  }
  const parser = new TraceParser(path);
  for await (const [line, n] of lines) parser.line(line, n);
  return parser.finish();
}
