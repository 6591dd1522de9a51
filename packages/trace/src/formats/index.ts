/**
 * The map of trace formats: each format is a file of this folder, and a line here. Adding a format
 * adds both; reading (`../format.ts`) tells formats apart with their `recognizes`, and its messages
 * name every format listed.
 * @module
 */
import type { TraceFormat } from './descriptor.js';
import { jsonl } from './jsonl.js';
import type { ReadTraceFormat } from './model.js';
import { rmmCsv } from './rmm-csv.js';
import { torchSnapshot } from './torch-snapshot.js';

/** Every format a trace is read from, by name. */
export const traceFormats = {
  jsonl,
  'rmm-csv': rmmCsv,
  'torch-snapshot': torchSnapshot,
} as const satisfies Record<ReadTraceFormat, TraceFormat>;
