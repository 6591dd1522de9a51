/**
 * gpumem's own trace format: the first line is a header object
 * (`{"format":"gpumem-trace","version":1,"source":...}`), then one event object per line. Events
 * carry a `tag`, an index into the header's `tags` (the trainer's phases, or the Python frames
 * libgpumem_torch recorded), whose names may repeat (one tag then).
 * @module
 */
import type { LineTraceFormat } from './descriptor.js';
import { LineTraceParser } from './line-parser.js';
import { maxHeaderDepth, nestingDepth, preview } from './json-preview.js';
import type { AllocationTrace, TraceHeader } from './model.js';

/** The JSONL header's format marker and the version this code writes and reads. */
export const traceFormatMarker = 'gpumem-trace';
export const traceFormatVersion = 1;

const expectedHeader = `expected a gpumem trace header ({"format":"${traceFormatMarker}","version":${traceFormatVersion},...})`;

class JsonlParser extends LineTraceParser {
  #header: TraceHeader = { source: 'unknown' };
  #expected: number | undefined;
  /** When the header's tags repeat a name: each tag's index among the distinct names. */
  #tagOf: Uint32Array | undefined;

  constructor(file: string, maxEvents: number) {
    super(file, 'jsonl', maxEvents);
  }

  protected header(): TraceHeader {
    return this.#header;
  }

  override finish() {
    const events = this.eventCount;
    if (this.#expected !== undefined && this.#expected !== events) {
      this.fail(
        this.lastLine + 1,
        `the header announces ${this.#expected} events but the file holds ${events}${events < this.#expected ? ' (truncated?)' : ''}`,
      );
    }
    return super.finish();
  }

  protected readHeader(text: string, n: number): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.fail(n, `${expectedHeader} but the header is not valid JSON (${(e as Error).message})`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      this.fail(n, `${expectedHeader} but received ${preview(value)}`);
    const h = value as Record<string, unknown>;
    if (h.format !== traceFormatMarker) this.fail(n, `${expectedHeader} but "format" is ${preview(h.format)}`);
    if (h.version !== traceFormatVersion) {
      const newer = typeof h.version === 'number' && h.version > traceFormatVersion;
      this.fail(
        n,
        `trace version ${preview(h.version)} ${newer ? 'is newer than this reader' : 'is not supported'}; this reader reads version ${traceFormatVersion}`,
      );
    }
    const str = (key: string): string | undefined => {
      const v = h[key];
      if (v === undefined) return undefined;
      if (typeof v !== 'string') this.fail(n, `header field "${key}" must be a string (received ${preview(v)})`);
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
        this.fail(n, `header field "workload" must be an object (received ${preview(h.workload)})`);
      }
      if (nestingDepth(h.workload) > maxHeaderDepth) {
        this.fail(n, `header field "workload" nests deeper than ${maxHeaderDepth} levels: not a workload description`);
      }
      header.workload = h.workload as Record<string, unknown>;
    }
    if (h.tags !== undefined) {
      if (!Array.isArray(h.tags) || h.tags.some((t) => typeof t !== 'string')) {
        this.fail(n, `header field "tags" must be an array of strings (received ${preview(h.tags)})`);
      }
      header.tags = this.mergeTags(h.tags as string[]);
    }
    if (h.droppedEvents !== undefined) header.droppedEvents = this.count(h.droppedEvents, 'droppedEvents', n, 'header field');
    if (h.eventCount !== undefined) this.#expected = this.count(h.eventCount, 'eventCount', n, 'header field');
    this.#header = header;
  }

  /**
   * Tags that share a name are one tag: a trace recorded with Python frames names only the frames
   * that allocated the most, every other tag is "other" (and a tag past the list reads as its last
   * name, "other", as replay takes it). Returns the distinct names, first appearance first.
   */
  private mergeTags(tags: string[]): string[] {
    const indexOf = new Map<string, number>();
    for (const name of tags) if (!indexOf.has(name)) indexOf.set(name, indexOf.size);
    if (indexOf.size === tags.length) return tags;
    this.#tagOf = Uint32Array.from(tags, (name) => indexOf.get(name)!);
    return [...indexOf.keys()];
  }

  protected readEvent(text: string, n: number): void {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      this.fail(n, `not a JSON event object (${(e as Error).message}); truncated line?`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      this.fail(n, `expected a JSON event object but received ${text.slice(0, 80)}`);
    const o = value as Record<string, unknown>;
    if (o.action !== 'alloc' && o.action !== 'free' && o.action !== 'oom') {
      this.fail(n, `"action" must be one of "alloc", "free", "oom" (received ${preview(o.action)})`);
    }
    for (const key of ['timeNs', 'ptr', 'bytes'] as const) if (o[key] === undefined) this.fail(n, `the event has no "${key}" field`);
    const tag = o.tag === undefined ? 0 : this.count(o.tag, 'tag', n);
    if (tag > 0xffffffff) this.fail(n, `"tag" must fit in 32 bits (received ${tag})`);
    const tagOf = this.#tagOf;
    this.addEvent(
      n,
      this.count(o.timeNs, 'timeNs', n),
      o.action,
      this.count(o.ptr, 'ptr', n),
      this.count(o.bytes, 'bytes', n),
      o.stream === undefined ? 0 : this.count(o.stream, 'stream', n),
      tagOf === undefined ? tag : tagOf[Math.min(tag, tagOf.length - 1)]!,
      o.reservedBytes === undefined ? undefined : this.count(o.reservedBytes, 'reservedBytes', n),
      o.thread === undefined ? undefined : this.count(o.thread, 'thread', n),
    );
  }
}

function* jsonlLines(trace: AllocationTrace): Generator<string> {
  yield JSON.stringify({ format: traceFormatMarker, version: traceFormatVersion, ...trace.header, eventCount: trace.events.length });
  for (const e of trace.events) {
    const line: Record<string, number | string> = {
      timeNs: e.timeNs,
      action: e.action,
      ptr: e.ptr,
      bytes: e.bytes,
      stream: e.stream,
      tag: e.tag,
    };
    if (e.reservedBytes !== undefined) line.reservedBytes = e.reservedBytes;
    if (e.thread !== undefined) line.thread = e.thread;
    yield JSON.stringify(line);
  }
}

/** gpumem's JSONL: keeps every field of the header and the events. */
export const jsonl: LineTraceFormat = {
  kind: 'lines',
  name: 'jsonl',
  description: `a gpumem JSONL trace (first line {"format":"${traceFormatMarker}","version":${traceFormatVersion},...})`,
  extensions: ['.jsonl', '.ndjson'],
  recognizes: (firstLine) => firstLine.trimStart().startsWith('{'),
  parser: (file, maxEvents) => new JsonlParser(file, maxEvents),
  lines: jsonlLines,
};
