/**
 * RMM's logging CSV, as `rmm::mr::logging_resource_adaptor` writes it: the header
 * `Thread,Time,Action,Pointer,Size,Stream`, then one row per event, e.g.
 * `140243462133568,14:03:21.123456,allocate,0x7f1e2c000000,1024,0x0`.
 * @module
 */
import type { LineTraceFormat } from './descriptor.js';
import { LineTraceParser, maxSafe } from './line-parser.js';
import type { AllocationTrace, TraceAction, TraceHeader } from './model.js';

/** RMM's CSV header line (logging_resource_adaptor::header()). */
export const rmmCsvHeader = 'Thread,Time,Action,Pointer,Size,Stream';

class RmmCsvParser extends LineTraceParser {
  // Times: the first event's time, and a day offset for logs that run past midnight.
  #base: [number, number] | undefined;
  #lastSeconds = 0;
  #dayNs = 0;

  constructor(file: string, maxEvents: number) {
    super(file, 'rmm-csv', maxEvents);
  }

  protected header(): TraceHeader {
    return { source: 'rmm-csv' };
  }

  protected readHeader(): void {
    // recognised by its header line: nothing more to read
  }

  protected readEvent(text: string, n: number): void {
    const fields = text.split(',').map((f) => f.trim());
    if (fields.length !== 6) {
      this.fail(
        n,
        `expected 6 comma-separated fields (${rmmCsvHeader}) but found ${fields.length}${fields.length < 6 ? ' (truncated line?)' : ''}`,
      );
    }
    const [thread, time, action, pointer, size, stream] = fields as [string, string, string, string, string, string];
    const act: TraceAction | undefined =
      action === 'allocate' ? 'alloc' : action === 'free' ? 'free' : action === 'allocate failure' ? 'oom' : undefined;
    if (act === undefined) this.fail(n, `Action must be one of allocate, free, allocate failure (received '${action}')`);
    if (!/^\d+$/.test(thread)) this.fail(n, `Thread must be a decimal thread id (received '${thread}')`);
    this.addEvent(
      n,
      this.#time(time, n),
      act,
      this.#hex(pointer, 'Pointer', n),
      this.#decimal(size, 'Size', n),
      this.#hex(stream, 'Stream', n),
      0,
      undefined,
      this.#decimal(thread, 'Thread', n),
    );
  }

  #decimal(text: string, name: string, n: number): number {
    if (!/^\d+$/.test(text)) this.fail(n, `${name} must be a non-negative decimal integer (received '${text}')`);
    const value = Number(text);
    if (value > maxSafe) this.fail(n, `${name} ${text} is larger than 2^53 - 1`);
    return value;
  }

  /** A pointer or stream as RMM prints them: `0x7f1e2c000000` (fmt), `7f1e2c000000` (printf %llx), `0x0`, `(nil)`. */
  #hex(text: string, name: string, n: number): number {
    if (text === '(nil)') return 0;
    const m = /^(?:0x)?([0-9a-fA-F]+)$/.exec(text);
    if (!m) this.fail(n, `${name} must be a hexadecimal address such as 0x7f1e2c000000 (received '${text}')`);
    const digits = m[1]!.replace(/^0+(?=.)/, '');
    const value = Number.parseInt(digits, 16);
    if (digits.length > 14 || value > maxSafe) this.fail(n, `${name} ${text} is larger than 2^53 - 1`);
    return value;
  }

  /** RMM's `HH:MM:SS.ffffff` (time of day), or seconds with a fraction; ns since the first event. */
  #time(text: string, n: number): number {
    let seconds: number;
    let fracNs: number;
    let timeOfDayForm = false;
    const tod = /^(\d{1,2}):(\d{2}):(\d{2})(?:[.:](\d{1,9}))?$/.exec(text);
    const plain = /^(\d{1,12})(?:\.(\d{1,9}))?$/.exec(text);
    if (tod) {
      const [h, m, s] = [Number(tod[1]), Number(tod[2]), Number(tod[3])];
      if (h > 23 || m > 59 || s > 60) this.fail(n, `Time '${text}' is not a valid time of day`);
      seconds = h * 3600 + m * 60 + s;
      fracNs = Number((tod[4] ?? '').padEnd(9, '0'));
      timeOfDayForm = true;
    } else if (plain) {
      seconds = Number(plain[1]);
      fracNs = Number((plain[2] ?? '').padEnd(9, '0'));
    } else {
      this.fail(n, `Time must be HH:MM:SS.ffffff (received '${text}')`);
    }
    if (this.#base === undefined) this.#base = [seconds, fracNs];
    else if (timeOfDayForm && seconds < this.#lastSeconds - 3600) this.#dayNs += 86_400e9; // past midnight
    this.#lastSeconds = seconds;
    const ns = (seconds - this.#base[0]) * 1e9 + (fracNs - this.#base[1]) + this.#dayNs;
    if (ns > maxSafe) this.fail(n, `Time '${text}' lies more than 2^53 ns (104 days) after the first event's`);
    return Math.max(0, ns);
  }
}

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
 * What RMM's columns hold: time to the microsecond (as a time of day from `header.createdAt`),
 * action, pointer, size, stream, thread; the header, tags and reserved bytes are dropped.
 */
function* rmmCsvLines(trace: AllocationTrace): Generator<string> {
  const created = trace.header.createdAt === undefined ? Number.NaN : Date.parse(trace.header.createdAt);
  const baseMs = Number.isFinite(created) ? created : Date.now();
  yield rmmCsvHeader;
  for (const e of trace.events) {
    yield `${e.thread ?? process.pid},${timeOfDay(baseMs, e.timeNs)},${rmmActions[e.action]},${hex(e.ptr)},${e.bytes},${hex(e.stream)}`;
  }
}

/** RMM's logging CSV. */
export const rmmCsv: LineTraceFormat = {
  kind: 'lines',
  name: 'rmm-csv',
  description: `an RMM logging CSV (first line '${rmmCsvHeader}')`,
  extensions: ['.csv'],
  recognizes: (firstLine) => firstLine.trim() === rmmCsvHeader,
  parser: (file, maxEvents) => new RmmCsvParser(file, maxEvents),
  lines: rmmCsvLines,
};
