/**
 * Reading and writing trace files, in every format of the map in `./formats/`: gpumem's JSONL,
 * RMM's logging CSV, and (read only) PyTorch's memory snapshots; each plain or compressed, told
 * apart by their first bytes.
 *
 * Line formats are read a chunk of lines at a time (never the whole file as one string) into typed
 * columns; every field is checked, and anything malformed is a {@link TraceFormatError} naming the
 * file and the line.
 * @module
 */
import { OutputFile } from '@gpumem/allocator-core';
import type { ByteTraceFormat, LineTraceFormat } from './formats/descriptor.js';
import { traceFormats } from './formats/index.js';
import type { AllocationTrace, ReadTrace, ReadTraceOptions, TraceFileFormat } from './formats/model.js';
import { TraceFormatError } from './formats/model.js';
import { maxTraceEvents } from './formats/budget.js';
import { lineBatches, openTraceFile, readAll } from './io.js';

export {
  isGzip,
  maxDecompressedTraceBytes,
  TraceFileError,
  TraceFormatError,
  type AllocationTrace,
  type ReadTrace,
  type ReadTraceFormat,
  type ReadTraceOptions,
  type TraceAction,
  type TraceEvent,
  type TraceFileFormat,
  type TraceHeader,
} from './formats/model.js';
export { defaultMaxTraceEvents, maxTraceEventsVariable, TraceBudgetError } from './formats/budget.js';
export { traceFormatMarker, traceFormatVersion } from './formats/jsonl.js';
export { rmmCsvHeader } from './formats/rmm-csv.js';
export { maxBlankTraceLines } from './formats/line-parser.js';
export { maxTraceLineChars, readLines } from './io.js';

const formats = Object.values(traceFormats);
const lineFormats = formats.filter((f): f is LineTraceFormat => f.kind === 'lines');
const byteFormats = formats.filter((f): f is ByteTraceFormat => f.kind === 'bytes');

/** Every form a trace is written in, for flag help and messages. */
export const traceFileFormats: readonly TraceFileFormat[] = lineFormats.map((f) => f.name);

/** The form a file name implies: `.jsonl`/`.ndjson` → 'jsonl', `.csv` → 'rmm-csv'; undefined otherwise. */
export function formatFromPath(path: string): TraceFileFormat | undefined {
  const lower = path.toLowerCase();
  return lineFormats.find((f) => f.extensions.some((e) => lower.endsWith(e)))?.name;
}

/** What the readers expect, for messages: every format of the map. */
function expectedForms(): string {
  const names = formats.map((f) => f.description);
  return `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}, plain or gzip-compressed`;
}

/** The line format whose first line `firstLine` is, or a TraceFormatError naming every format. */
function lineFormatOf(firstLine: string, file: string, empty: boolean): LineTraceFormat {
  const text = firstLine.startsWith('\uFEFF') ? firstLine.slice(1) : firstLine;
  const found = lineFormats.find((f) => f.recognizes(text.endsWith('\r') ? text.slice(0, -1) : text));
  if (found) return found;
  if (empty) throw new TraceFormatError(file, 1, `the file is empty; expected ${expectedForms()}`);
  throw new TraceFormatError(
    file,
    1,
    `not a trace in any form this reader knows: expected ${expectedForms()}; but the file starts with ${JSON.stringify(text.slice(0, 24))}`,
  );
}

/** The first line of a text (at most the whole of it). */
const firstLineOf = (text: string) => {
  const end = text.indexOf('\n');
  return end < 0 ? text : text.slice(0, end);
};

/** Parses a trace held in memory (JSONL or RMM CSV, told apart by the first line). */
export function parseTrace(text: string, file = '<input>', options: Pick<ReadTraceOptions, 'maxEvents'> = {}): ReadTrace {
  const parser = lineFormatOf(firstLineOf(text), file, text.length === 0).parser(file, maxTraceEvents(options.maxEvents));
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
 * Reads a trace file in any format of the map: gpumem's JSONL or RMM's CSV (read a chunk of lines
 * at a time into typed columns) or a PyTorch memory snapshot (read whole), told apart by their first
 * bytes; gzip-compressed or not (zstd too where this Node reads it). Throws {@link TraceFormatError}
 * for a malformed file, `TraceFileError` for a directory or a compression it cannot read, and the
 * file system's error when the file cannot be read.
 */
export async function readTrace(path: string, options: ReadTraceOptions = {}): Promise<ReadTrace> {
  const maxEvents = maxTraceEvents(options.maxEvents);
  const source = await openTraceFile(
    path,
    options.maxDecompressedBytes === undefined ? {} : { maxDecompressedBytes: options.maxDecompressedBytes },
  );
  try {
    const binary = byteFormats.find((f) => f.recognizes(source.head));
    if (binary) return binary.parse(await readAll(source, options.maxDecompressedBytes), path, { ...options, maxEvents });
    const parser = lineFormatOf(firstLineOf(source.head.toString('utf8', 0, 4096)), path, source.head.length === 0).parser(path, maxEvents);
    for await (const { firstLine, lines } of lineBatches(source.chunks, path)) {
      for (let i = 0; i < lines.length; i++) parser.line(lines[i]!, firstLine + i);
    }
    return parser.finish();
  } finally {
    source.close();
  }
}

/** The lines of a trace in `format`, without line breaks (see each format for what it keeps). */
export function traceLines(trace: AllocationTrace, format: TraceFileFormat): Generator<string> {
  return traceFormats[format].lines(trace);
}

/** The whole trace as one string (small traces; files go through {@link writeTrace}). */
export function serializeTrace(trace: AllocationTrace, format: TraceFileFormat): string {
  let out = '';
  for (const line of traceLines(trace, format)) out += `${line}\n`;
  return out;
}

/**
 * Writes `trace` to `path` in `format`, streaming a batch of lines at a time into the core's
 * OutputFile: the file appears whole when every line is written, or not at all (a full disk, a
 * device or a folder at `path`: an OutputFileError naming it, the previous file kept).
 */
export async function writeTrace(path: string, trace: AllocationTrace, format: TraceFileFormat): Promise<void> {
  const out = OutputFile.open(path);
  try {
    let batch = '';
    let count = 0;
    for (const line of traceLines(trace, format)) {
      batch += `${line}\n`;
      if (++count === 4096) {
        out.write(batch);
        batch = '';
        count = 0;
        // Lets timers and signals in between batches of a large trace.
        await new Promise<void>((done) => setImmediate(done));
      }
    }
    if (batch) out.write(batch);
    out.commit();
  } finally {
    out.discard();
  }
}
