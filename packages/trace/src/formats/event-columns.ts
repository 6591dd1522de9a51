/**
 * The events of a trace read from a file, held in typed columns instead of one object per event:
 * about 45 bytes an event (action 1, time 8, pointer 8, size 8, stream 8, tag 4, reserved bytes 8;
 * thread ids 8 more where the file has them), where an array of event objects took ~300.
 * @module
 */
import type { TraceAction, TraceEvent } from './model.js';

/** Events per chunk: columns grow a chunk at a time, never by copying what they hold. */
const chunkShift = 16;
const chunkSize = 1 << chunkShift;
const chunkMask = chunkSize - 1;

const actionCodes: Record<TraceAction, number> = { alloc: 0, free: 1, oom: 2 };
const actionNames: readonly TraceAction[] = ['alloc', 'free', 'oom'];

/** One chunk of every column. Optional fields are NaN where an event has none. */
interface Chunk {
  action: Uint8Array;
  timeNs: Float64Array;
  ptr: Float64Array;
  bytes: Float64Array;
  stream: Float64Array;
  tag: Uint32Array;
  /** Allocated when the first event with reserved bytes (or a thread) arrives. */
  reservedBytes?: Float64Array;
  thread?: Float64Array;
}

const nanColumn = (capacity: number) => new Float64Array(capacity).fill(Number.NaN);

/** A chunk of `capacity` events: the first starts small (a trace of a few events stays small) and doubles up to a full chunk. */
function newChunk(capacity: number): Chunk {
  return {
    action: new Uint8Array(capacity),
    timeNs: new Float64Array(capacity),
    ptr: new Float64Array(capacity),
    bytes: new Float64Array(capacity),
    stream: new Float64Array(capacity),
    tag: new Uint32Array(capacity),
  };
}

/** `c` with twice the capacity, its events copied. */
function grown(c: Chunk): Chunk {
  const capacity = Math.min(chunkSize, c.action.length * 2);
  const g = newChunk(capacity);
  g.action.set(c.action);
  g.timeNs.set(c.timeNs);
  g.ptr.set(c.ptr);
  g.bytes.set(c.bytes);
  g.stream.set(c.stream);
  g.tag.set(c.tag);
  if (c.reservedBytes) {
    g.reservedBytes = nanColumn(capacity);
    g.reservedBytes.set(c.reservedBytes);
  }
  if (c.thread) {
    g.thread = nanColumn(capacity);
    g.thread.set(c.thread);
  }
  return g;
}

/** Trace events in typed columns, appended one at a time. */
export class TraceEventColumns {
  readonly #chunks: Chunk[] = [];
  #length = 0;

  /** Events held. */
  get length(): number {
    return this.#length;
  }

  /** Appends an event (its fields already checked: non-negative safe integers, a 32-bit tag). */
  push(
    timeNs: number,
    action: TraceAction,
    ptr: number,
    bytes: number,
    stream: number,
    tag: number,
    reservedBytes?: number,
    thread?: number,
  ): void {
    const at = this.#length & chunkMask;
    if (at === 0) this.#chunks.push(newChunk(this.#chunks.length === 0 ? 1024 : chunkSize));
    const last = this.#chunks.length - 1;
    let c = this.#chunks[last]!;
    if (at >= c.action.length) {
      c = grown(c);
      this.#chunks[last] = c;
    }
    const capacity = c.action.length;
    c.action[at] = actionCodes[action];
    c.timeNs[at] = timeNs;
    c.ptr[at] = ptr;
    c.bytes[at] = bytes;
    c.stream[at] = stream;
    c.tag[at] = tag;
    if (reservedBytes !== undefined) {
      c.reservedBytes ??= nanColumn(capacity);
      c.reservedBytes[at] = reservedBytes;
    }
    if (thread !== undefined) {
      c.thread ??= nanColumn(capacity);
      c.thread[at] = thread;
    }
    this.#length++;
  }

  /** Event `i` as an object (a new one on every call). */
  at(i: number): TraceEvent {
    const c = this.#chunks[i >>> chunkShift]!;
    const at = i & chunkMask;
    const event: TraceEvent = {
      timeNs: c.timeNs[at]!,
      action: actionNames[c.action[at]!]!,
      ptr: c.ptr[at]!,
      bytes: c.bytes[at]!,
      stream: c.stream[at]!,
      tag: c.tag[at]!,
    };
    const reserved = c.reservedBytes?.[at];
    if (reserved !== undefined && !Number.isNaN(reserved)) event.reservedBytes = reserved;
    const thread = c.thread?.[at];
    if (thread !== undefined && !Number.isNaN(thread)) event.thread = thread;
    return event;
  }

  *[Symbol.iterator](): Generator<TraceEvent> {
    for (let i = 0; i < this.#length; i++) yield this.at(i);
  }

  /**
   * A read-only array view of the events: indexing, `length`, iteration and the array methods work
   * as on an array of event objects (each read builds the object); writing throws a TypeError.
   */
  asArray(): TraceEvent[] {
    return new Proxy<TraceEvent[]>([], new EventArrayHandler(this));
  }
}

/** The index a property key names, when it is a canonical array index below `length`. */
function indexOf(key: string | symbol, length: number): number | undefined {
  if (typeof key !== 'string' || key.length === 0) return undefined;
  const first = key.charCodeAt(0);
  if (first < 48 || first > 57) return undefined;
  const i = Number(key);
  return Number.isInteger(i) && i < length && String(i) === key ? i : undefined;
}

const readOnly = (): never => {
  throw new TypeError('the events of a trace read from a file are read-only (copy them with [...trace.events] to change them)');
};

/** The proxy handler of {@link TraceEventColumns.asArray}: answers for an empty array target. */
class EventArrayHandler implements ProxyHandler<TraceEvent[]> {
  constructor(readonly columns: TraceEventColumns) {}

  get(target: TraceEvent[], key: string | symbol, receiver: unknown): unknown {
    if (key === 'length') return this.columns.length;
    if (key === Symbol.iterator) return () => this.columns[Symbol.iterator]();
    const i = indexOf(key, this.columns.length);
    if (i !== undefined) return this.columns.at(i);
    return Reflect.get(target, key, receiver);
  }

  has(target: TraceEvent[], key: string | symbol): boolean {
    return indexOf(key, this.columns.length) !== undefined || Reflect.has(target, key);
  }

  ownKeys(target: TraceEvent[]): (string | symbol)[] {
    const keys: (string | symbol)[] = [];
    for (let i = 0; i < this.columns.length; i++) keys.push(String(i));
    return [...keys, ...Reflect.ownKeys(target)];
  }

  getOwnPropertyDescriptor(target: TraceEvent[], key: string | symbol): PropertyDescriptor | undefined {
    if (key === 'length') return { value: this.columns.length, writable: true, enumerable: false, configurable: false };
    const i = indexOf(key, this.columns.length);
    if (i !== undefined) return { value: this.columns.at(i), writable: false, enumerable: true, configurable: true };
    return Reflect.getOwnPropertyDescriptor(target, key);
  }

  set = readOnly;
  defineProperty = readOnly;
  deleteProperty = readOnly;
}
