/**
 * What a trace format provides to the map of formats (`./index.ts`): how to tell it from its first
 * bytes, how to read it, and for the forms gpumem writes, how to write it. A line format is read a
 * line at a time; a byte format (a pickle) whole.
 * @module
 */
import type { LineTraceParser } from './line-parser.js';
import type { AllocationTrace, ReadTrace, ReadTraceFormat, ReadTraceOptions, TraceFileFormat } from './model.js';

/** A format of one header line, then one event per line. */
export interface LineTraceFormat {
  readonly kind: 'lines';
  readonly name: TraceFileFormat;
  /** How messages name it and its first line. */
  readonly description: string;
  /** File name endings that imply it (lower case). */
  readonly extensions: readonly string[];
  /** True when a file whose first line is `firstLine` (without BOM and line break) is in this form. */
  recognizes(firstLine: string): boolean;
  /** A parser for one file, holding at most `maxEvents` events (the readers' budget). */
  parser(file: string, maxEvents: number): LineTraceParser;
  /** The lines of `trace` in this form, without line breaks. */
  lines(trace: AllocationTrace): Generator<string>;
}

/** A binary format, read whole. */
export interface ByteTraceFormat {
  readonly kind: 'bytes';
  readonly name: ReadTraceFormat;
  /** How messages name it. */
  readonly description: string;
  /** True when content starting with `head` is in this form. */
  recognizes(head: Uint8Array): boolean;
  /** Reads the whole content. */
  parse(data: Buffer, file: string, options: ReadTraceOptions): ReadTrace;
}

export type TraceFormat = LineTraceFormat | ByteTraceFormat;
