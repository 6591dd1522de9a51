/**
 * What the line formats (JSONL, RMM's CSV) share: a header line, then one event per line, checked
 * field by field, appended to typed columns; blank lines are skipped, up to a limit.
 * @module
 */
import { raiseBudgetHint, TraceBudgetError } from './budget.js';
import { TraceEventColumns } from './event-columns.js';
import { preview } from './json-preview.js';
import { TraceFormatError, type ReadTrace, type TraceAction, type TraceFileFormat, type TraceHeader } from './model.js';

/** Blank lines a trace may hold: a file of more is not a trace (and would take long to find so). */
export const maxBlankTraceLines = 1 << 20;

/** The largest integer a field may hold. */
export const maxSafe = Number.MAX_SAFE_INTEGER;

/** Turns the lines of a trace file into a trace: one line at a time, the first being the header. */
export abstract class LineTraceParser {
  readonly #columns = new TraceEventColumns();
  #headerRead = false;
  #blankLines = 0;
  #lastLine = 0;

  constructor(
    readonly file: string,
    readonly format: TraceFileFormat,
    /** The most events the trace may hold (the readers' budget on decoded work). */
    readonly maxEvents: number,
  ) {}

  fail(line: number, reason: string): never {
    throw new TraceFormatError(this.file, line, reason);
  }

  /** Feeds line `n` (1-based, without its line break). */
  line(raw: string, n: number): void {
    this.#lastLine = n;
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!this.#headerRead) {
      this.readHeader(n === 1 && text.startsWith('\uFEFF') ? text.slice(1) : text, n);
      this.#headerRead = true;
      return;
    }
    if (text.length === 0 || text.trim() === '') {
      if (++this.#blankLines > maxBlankTraceLines) this.fail(n, `more than ${maxBlankTraceLines} blank lines: not a trace file`);
      return;
    }
    this.readEvent(text, n);
  }

  /** The trace, once every line has been fed. */
  finish(): ReadTrace {
    return { format: this.format, header: this.header(), events: this.#columns.asArray() };
  }

  /** Events read so far. */
  protected get eventCount(): number {
    return this.#columns.length;
  }

  /** The last line fed. */
  protected get lastLine(): number {
    return this.#lastLine;
  }

  /** Reads the first line. */
  protected abstract readHeader(text: string, n: number): void;
  /** Reads an event line (not blank), adding the event with {@link addEvent}. */
  protected abstract readEvent(text: string, n: number): void;
  /** The header read. */
  protected abstract header(): TraceHeader;

  /** Checks an event's fields against each other and appends it. */
  protected addEvent(
    n: number,
    timeNs: number,
    action: TraceAction,
    ptr: number,
    bytes: number,
    stream: number,
    tag: number,
    reservedBytes?: number,
    thread?: number,
  ): void {
    if (ptr === 0 && bytes > 0 && action !== 'oom')
      this.fail(n, `${action === 'alloc' ? 'an allocation' : 'a free'} of ${bytes} bytes has a null pointer`);
    if (this.#columns.length >= this.maxEvents) {
      throw new TraceBudgetError(
        this.file,
        n,
        `${this.file}:${n}`,
        `more than ${this.maxEvents} events, past the readers' budget on decoded work; ${raiseBudgetHint(this.maxEvents)}`,
        this.maxEvents,
      );
    }
    this.#columns.push(timeNs, action, ptr, bytes, stream, tag, reservedBytes, thread);
  }

  /** A non-negative integer no larger than 2^53 - 1. */
  protected count(value: unknown, name: string, n: number, what = 'field'): number {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > maxSafe) {
      const why = typeof value === 'number' && Number.isInteger(value) && value > maxSafe ? ' (larger than 2^53 - 1)' : '';
      this.fail(n, `${what} "${name}" must be a non-negative integer up to 2^53 - 1 (received ${preview(value)})${why}`);
    }
    return value;
  }
}
