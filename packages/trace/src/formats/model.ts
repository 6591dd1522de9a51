/**
 * What every trace format reads into: the trace model (a header and its events) and the error a
 * malformed file raises. Imported by the format readers, the snapshot reader and replay alike, so
 * it imports none of them.
 * @module
 */
import type { AllocationAction, AllocationEvent } from '@gpumem/allocator-core';

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

/** The file forms a trace can be written in. */
export type TraceFileFormat = 'jsonl' | 'rmm-csv';

/** The forms {@link ReadTrace} comes from: the written forms, and PyTorch's memory snapshots. */
export type ReadTraceFormat = TraceFileFormat | 'torch-snapshot';

/**
 * A trace read from a file, with the form it was in. The events of a JSONL or CSV trace are held in
 * typed columns (about 45 bytes an event, see the package README); `events` is a read-only array
 * view of them that builds each event object when it is read.
 */
export interface ReadTrace extends AllocationTrace {
  format: ReadTraceFormat;
}

/** Options of `readTrace`. */
export interface ReadTraceOptions {
  /** PyTorch snapshots: the CUDA device whose history to read (default: the first with entries). */
  device?: number;
  /** Compressed files: the most bytes they may decompress to (default {@link maxDecompressedTraceBytes}). */
  maxDecompressedBytes?: number;
  /**
   * The most events the trace may hold (the readers' budget on decoded work; a snapshot's history
   * entries count, and its pickle may decode 16 values an event). Default: the environment variable
   * GPUMEM_TRACE_MAX_EVENTS, else 2^22. More is a `TraceBudgetError`.
   */
  maxEvents?: number;
}

/** What a compressed trace may decompress to by default: more is refused (a gzip bomb, or not a trace). */
export const maxDecompressedTraceBytes = 2 ** 31;

/** True when `data` starts with gzip's magic bytes (1f 8b). */
export function isGzip(data: Uint8Array): boolean {
  return data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b;
}

/** A malformed trace file: says which file, which line (1-based) and what is wrong with it. */
export class TraceFormatError extends Error {
  override readonly name = 'TraceFormatError';
  /** Also that of its subclasses (a pickle's, a snapshot's). */
  readonly code: string = 'GPUMEM_TRACE_FORMAT';
  constructor(
    /** The file (or the name given to parsed text). */
    readonly file: string,
    /** The 1-based line (0 for a pickle, which has none). */
    readonly line: number,
    /** What is wrong, without the location. */
    readonly reason: string,
  ) {
    super(`${file}:${line}: ${reason}`);
  }
}

/**
 * A path that cannot be read as a trace at all: a directory, a FIFO, a device or a socket, or a file
 * compressed in a form this reader does not decompress. Says which, and what to do. Carries a `code` as the file system's
 * errors do (`EISDIR`, `ERR_TRACE_COMPRESSION`), so callers that report unreadable files report these too.
 */
export class TraceFileError extends Error {
  override readonly name = 'TraceFileError';
  constructor(
    /** The path given. */
    readonly file: string,
    /**
     * `EISDIR` for a directory, `ERR_TRACE_NOT_FILE` for a FIFO, a device or a socket (or standard
     * input that is a terminal), `ERR_TRACE_COMPRESSION` for a compression this reader does not read.
     */
    readonly code: 'EISDIR' | 'ERR_TRACE_NOT_FILE' | 'ERR_TRACE_COMPRESSION',
    message: string,
  ) {
    super(message);
  }
}
