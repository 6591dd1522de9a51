/**
 * The readers' budget on decoded work, one for every format and compression: the events a trace
 * may hold (a JSONL or CSV event line, a snapshot's history entry), the values a pickle may decode
 * (every push, memo references and DUPs included), and the items one pickle container may hold. A
 * small file can decode to far more than it holds (a compressed file of one line repeated, a pickle
 * that references one entry millions of times); the budget ends it with a {@link TraceBudgetError}
 * before memory runs out, and says how to raise it for a real trace that large.
 * @module
 */
import { TraceFormatError } from './model.js';

/** The environment variable that sets the most events a trace may hold (a positive integer). */
export const maxTraceEventsVariable = 'GPUMEM_TRACE_MAX_EVENTS';

/**
 * The most events a trace may hold by default: 2^22 (4,194,304), twelve times the longest history of
 * the real workloads in bench/traces (gpt2_generate's 342,577 snapshot entries). Read, a JSONL event
 * takes about 45 bytes and a snapshot's about 150; a replay about 320.
 */
export const defaultMaxTraceEvents = 2 ** 22;

/**
 * Values a pickle may decode per event of the budget: PyTorch's snapshots decode about 15 per history
 * entry (its keys, values, frames and memo references; 5.1 million for gpt2_generate's 342,577).
 */
export const pickleValuesPerEvent = 16;

/**
 * Decoded bytes a snapshot's history entry takes at least: PyTorch writes about 50 (its dict of
 * action, address, size, stream, time and frames). A history denser than this is one entry
 * referenced many times (DUP, BINGET), which costs a byte or two of the file for an event of memory.
 */
export const minSnapshotBytesPerEntry = 16;

/** Decoded work past the readers' budget: names the file, the limit, and how to raise it. */
export class TraceBudgetError extends TraceFormatError {
  /** As the file system's errors carry one: callers that report unreadable files report these too. */
  override readonly code = 'ERR_TRACE_BUDGET';
  constructor(
    file: string,
    /** The 1-based line (0 for a pickle). */
    line: number,
    /** Where in the file, for the message: `file:line`, `file: byte N (OPCODE)` or `file: device_traces[0]`. */
    location: string,
    reason: string,
    /** The limit passed. */
    readonly limit: number,
  ) {
    super(file, line, reason);
    this.message = `${location}: ${reason}`;
  }
}

/** How to raise the budget, for messages. */
export function raiseBudgetHint(maxEvents: number): string {
  return `a real trace this large reads with ${maxTraceEventsVariable}=${Math.min(maxEvents * 4, Number.MAX_SAFE_INTEGER)} (or readTrace's maxEvents option) and memory to match`;
}

/**
 * The most events a trace may hold: `maxEvents` when given, else {@link maxTraceEventsVariable} when
 * set, else {@link defaultMaxTraceEvents}. A value that is not a positive safe integer is a RangeError
 * naming where it came from.
 */
export function maxTraceEvents(maxEvents?: number, env: NodeJS.ProcessEnv = process.env): number {
  if (maxEvents !== undefined) {
    if (!Number.isSafeInteger(maxEvents) || maxEvents < 1)
      throw new RangeError(`Expected a positive integer for maxEvents but received ${String(maxEvents)}`);
    return maxEvents;
  }
  const text = env[maxTraceEventsVariable];
  if (text === undefined || text === '') return defaultMaxTraceEvents;
  const n = /^[1-9][0-9]*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n)) {
    throw new RangeError(
      `${maxTraceEventsVariable} must be a positive integer (events a trace may hold; default ${defaultMaxTraceEvents}), but it is ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return n;
}
