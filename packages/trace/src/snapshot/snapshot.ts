/**
 * PyTorch's own memory snapshots as traces: the file `torch.cuda.memory._dump_snapshot()` writes
 * after `torch.cuda.memory._record_memory_history()`, a pickle of
 * `{'segments': [...], 'device_traces': [[entry, ...] per device], 'allocator_settings': {...}, ...}`
 * (torch/csrc/cuda/Module.cpp, `_cuda_memorySnapshot`), optionally gzip-compressed.
 *
 * One device's history becomes the trace: `alloc` → alloc, `free_completed` → free (when the memory
 * was really given back; a `free_requested` only marks it pending), `oom` → oom. The segment
 * entries (`segment_alloc`/`segment_free`, and `segment_map`/`segment_unmap` of expandable segments)
 * give what PyTorch's caching allocator reserved over time; the `segments` list, its state when the
 * snapshot was taken, anchors that timeline (reserved before the history began = reserved at the end
 * minus what the history added), so it stays right when a full ring buffer dropped the start.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { kMaxLength } from 'node:buffer';
import { gunzipSync } from 'node:zlib';
import { maxTraceEvents, minSnapshotBytesPerEntry } from '../formats/budget.js';
import {
  isGzip,
  maxDecompressedTraceBytes,
  TraceFormatError,
  type ReadTrace,
  type TraceEvent,
  type TraceHeader,
} from '../formats/model.js';
import { pickleToJson, pickleTypeName, unpickle, type PickleDict, type PickleFormatError, type PickleValue } from './unpickle.js';

/** A snapshot that is not what PyTorch writes: names the file and where in the snapshot (`device_traces[0][12]`). */
export class SnapshotFormatError extends TraceFormatError {
  constructor(
    file: string,
    /** Where in the snapshot ('device_traces[0][12]', 'segments[3]', 'gzip'), or '' for the whole file. */
    readonly where: string,
    reason: string,
    /** False when `reason` already names the file: the message is then the reason alone. */
    located = true,
  ) {
    // A snapshot has no lines: `line` stays 0 and the message names the place in the snapshot instead.
    super(file, 0, reason);
    this.message = !located ? reason : where ? `${file}: ${where}: ${reason}` : `${file}: ${reason}`;
  }
}

/** Options of {@link readSnapshot} and {@link parseSnapshot}. */
export interface SnapshotOptions {
  /** The CUDA device whose history to read (an index into `device_traces`); default: the first with entries. */
  device?: number;
  /** Gzip-compressed snapshots: the most bytes they may decompress to (default {@link maxDecompressedTraceBytes}). */
  maxDecompressedBytes?: number;
  /**
   * Snapshots recorded with stacks: the most distinct allocation frames kept as tags (default
   * {@link defaultMaxFrameTags}); the frames that allocated the fewest bytes share the tag 'other'.
   */
  maxFrameTags?: number;
  /** The most history entries the device may hold (the readers' budget; default: see `maxTraceEvents`). */
  maxEvents?: number;
}

/** The most distinct allocation frames a snapshot's events are tagged with, by default. */
export const defaultMaxFrameTags = 12;

/** The tag of allocations with no user frame, or whose frame is not among the kept ones. */
export const otherFrameTag = 'other';

/**
 * A frame of PyTorch itself or of the Python runtime, not the user's: files under a `torch/`
 * folder, frozen and built-in modules (`<frozen runpy>`, `<string>`), the standard library (a
 * `pythonX.Y/` folder outside `site-packages/`), and native frames (`??`, C and C++ sources and
 * shared objects), which snapshots recorded with `context='all'` hold.
 */
export function isInternalFrame(filename: string): boolean {
  const f = filename.replaceAll('\\', '/');
  if (f === '' || f === '??' || f.startsWith('<')) return true;
  if (/(^|\/)torch\//.test(f)) return true;
  if (/\.(c|cc|cpp|cxx|cu|h|hpp|cuh|so)(\.\d+)*$/.test(f)) return true;
  return /(^|\/)python\d+(\.\d+)?\//.test(f) && !f.includes('/site-packages/') && !f.includes('/dist-packages/');
}

/** What the snapshot says about PyTorch's caching allocator on the device: the recorded baseline of a replay. */
export interface PytorchSnapshotSummary {
  /** Reserved bytes over the trace's time (ns since its first entry): a point at the start, then after every segment entry. */
  reservedTimeline: { timeNs: number[]; reservedBytes: number[] };
  peakReservedBytes: number;
  /**
   * The most bytes allocated at once, counting allocations made before the history began (from the
   * final segments). A block counts until its `free_completed`, when PyTorch could hand it out
   * again (a block freed on a stream whose work still uses it waits for that work), as the replay
   * counts it.
   */
  peakAllocatedBytes: number;
  /**
   * The same, with a block counted only until its `free_requested` (the program's free), as
   * `torch.cuda.max_memory_allocated()` counts it; lower when frees wait for stream work.
   */
  peakAllocatedAtFreeRequestBytes: number;
  /** Driver allocations: `segment_alloc` (cudaMalloc) and `segment_map` (expandable segments) entries. */
  segmentAllocs: number;
  /** Driver frees: `segment_free` (cudaFree) and `segment_unmap` entries. */
  segmentFrees: number;
}

/** What the snapshot reader adds to the header. */
export interface SnapshotDetails {
  /** The device read (an index into `device_traces`). */
  device: number;
  /** Trace entries of that device, of every action. */
  entries: number;
  /** Entries by action ('alloc', 'free_requested', ..., and any action this reader does not know, ignored). */
  actions: Record<string, number>;
  /** Frees whose `free_completed` came after other allocator entries (memory held pending stream work, record_stream). */
  deferredFrees: number;
  /** `free_requested` entries still without their `free_completed` at the end: no free event was emitted for them. */
  pendingFreesAtEnd: number;
  /** `free_completed` entries of addresses the history never allocated (allocated before it began): kept as frees. */
  freesBeforeHistory: number;
  /** Reserved bytes when the history began (segments allocated before it). */
  reservedBeforeHistoryBytes: number;
  /** Bytes allocated when the history began (live allocations made before it, at least). */
  allocatedBeforeHistoryBytes: number;
  /**
   * The `max_entries` the history was probably recorded with, set only when the device's entry count
   * is a round number (a multiple of 1000, or a power of two from 1024): a full ring buffer, so the
   * history likely starts mid-run. A heuristic: a history can end on a round count by chance, and a
   * full ring of any other size goes unnoticed.
   */
  maxEntriesHint?: number;
  /** True when entries had no `time_us` (PyTorch before 2.1): times are then the entry's index, in µs. */
  timesFromOrder?: boolean;
  /**
   * The history's first `oom` entry that carries `device_free` (the driver's free bytes when the
   * request failed, after PyTorch freed its cache and retried): with what PyTorch still reserved
   * then, the memory its allocator could have had on that device.
   */
  firstOom?: SnapshotOom;
  /** `allocator_settings` of the snapshot (PYTORCH_CUDA_ALLOC_CONF and what it set), as plain JSON values. */
  allocatorSettings?: Record<string, unknown>;
  /**
   * Snapshots recorded with stacks: distinct user frames that allocated (`file:line:function`, the
   * innermost frame outside PyTorch and the Python runtime), before the most distinct were kept as
   * tags (the header's `tags`).
   */
  allocationFrames?: number;
}

/** One out-of-memory entry of a snapshot's history. */
export interface SnapshotOom {
  /** On the trace's clock (ns since its first entry). */
  timeNs: number;
  requestedBytes: number;
  /** `device_free`: what the driver had free (cudaMemGetInfo) when the request failed. */
  deviceFreeBytes: number;
  /** What PyTorch's caching allocator reserved then (the segments of the history, and those before it). */
  reservedBytes: number;
}

/** A trace's header, as read from a snapshot. */
export interface SnapshotHeader extends TraceHeader {
  source: 'torch-snapshot';
  /** 'cuda:N'. */
  device: string;
  snapshot: SnapshotDetails;
}

/** A trace read from a PyTorch memory snapshot. */
export interface SnapshotTrace extends ReadTrace {
  format: 'torch-snapshot';
  header: SnapshotHeader;
  /** The devices whose history holds entries (indices into `device_traces`). */
  devices: number[];
  /** PyTorch's caching allocator on the device read, as recorded. */
  pytorch: PytorchSnapshotSummary;
}

/** The label of PyTorch's allocator in headers. */
const pytorchAllocator = 'pytorch-cuda-caching';

const noHistory = (file: string, hint = '') =>
  new SnapshotFormatError(
    file,
    '',
    `no allocation history in ${file}${hint}: call torch.cuda.memory._record_memory_history() before running the program, then _dump_snapshot()`,
    false,
  );

/** Gunzips `data`, refusing more than `cap` bytes out. */
function gunzip(data: Uint8Array, file: string, cap: number): Buffer {
  try {
    return gunzipSync(data, { maxOutputLength: Math.min(cap, kMaxLength) });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ERR_BUFFER_TOO_LARGE') throw new SnapshotFormatError(file, 'gzip', `decompresses to more than ${cap} bytes`);
    throw new SnapshotFormatError(file, 'gzip', `not a valid gzip stream (${err.message})`);
  }
}

/** The longest file or function name a frame label keeps: real ones are far shorter. */
const maxFrameNameChars = 512;

/** `text`, or its last maxFrameNameChars characters after an ellipsis (a path's end names the file). */
function clip(text: string): string {
  return text.length <= maxFrameNameChars ? text : `…${text.slice(text.length - maxFrameNameChars + 1)}`;
}

/** Turns an unpickled snapshot into a trace of one device. */
class SnapshotReader {
  /** List items this reader may still visit: shared references must not multiply the work past the file's size. */
  #budget: number;

  /** The decoded pickle's size in bytes. */
  readonly #size: number;

  /** The user frame of each frames list seen (lists are shared between entries with one traceback). */
  readonly #frameOf = new Map<PickleValue[], string | undefined>();

  /**
   * The label of each frame dict seen: a pickle may memoize one frame and put it in many lists, so
   * a frame is looked at and its label built once, never once per list.
   */
  readonly #labelOf = new Map<PickleDict, string | null>(); // null: not a user frame

  constructor(
    readonly file: string,
    size: number,
    readonly maxFrameTags = defaultMaxFrameTags,
  ) {
    this.#budget = size + 1024;
    this.#size = size;
  }

  /** The innermost user frame of an entry's `frames` (innermost first), as `file:line:function`. */
  userFrame(e: PickleDict, at: string): string | undefined {
    const frames = e.get('frames');
    if (!Array.isArray(frames) || frames.length === 0) return undefined;
    if (this.#frameOf.has(frames)) return this.#frameOf.get(frames);
    let found: string | undefined;
    for (const f of this.list(frames, `${at}.frames`)) {
      if (!(f instanceof Map)) continue;
      let label = this.#labelOf.get(f);
      if (label === undefined) {
        const filename = f.get('filename');
        const line = f.get('line');
        const name = f.get('name');
        label =
          typeof filename !== 'string' || isInternalFrame(filename)
            ? null
            : `${clip(filename)}:${typeof line === 'number' ? line : '?'}:${typeof name === 'string' ? clip(name) : '?'}`;
        this.#labelOf.set(f, label);
      }
      if (label === null) continue;
      found = label;
      break;
    }
    this.#frameOf.set(frames, found);
    return found;
  }

  fail(where: string, reason: string): never {
    throw new SnapshotFormatError(this.file, where, reason);
  }

  /** `value` as a list whose items are about to be visited. */
  list(value: PickleValue | undefined, where: string): PickleValue[] {
    if (!Array.isArray(value)) this.fail(where, `expected a list, found ${pickleTypeName(value)}`);
    this.#budget -= value.length;
    if (this.#budget < 0) this.fail(where, 'holds more items than a file of this size can (the same list referenced many times?)');
    return value as PickleValue[];
  }

  dict(value: PickleValue | undefined, where: string): PickleDict {
    if (!(value instanceof Map)) this.fail(where, `expected a dict, found ${pickleTypeName(value)}`);
    return value;
  }

  /** An integer field, non-negative and at most 2^53 - 1 (addresses, sizes, streams). */
  count(d: PickleDict, key: string, where: string, fallback?: number): number {
    const v = d.get(key);
    if (v === undefined && fallback !== undefined) return fallback;
    if (v === undefined) this.fail(where, `the entry has no '${key}'`);
    if (typeof v === 'bigint') this.fail(where, `'${key}' is ${v}, beyond 2^53 - 1`);
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(where, `'${key}' must be an int, found ${pickleTypeName(v)}`);
    if (v < 0) this.fail(where, `'${key}' must not be negative (found ${v})`);
    return v;
  }

  read(root: PickleValue, wanted: number | undefined): SnapshotTrace {
    const file = this.file;
    if (Array.isArray(root)) throw noHistory(file, ' (it holds a list, as torch.cuda.memory_snapshot() returns: segments only)');
    if (!(root instanceof Map)) {
      this.fail(
        '',
        `not a PyTorch memory snapshot: the pickle holds ${pickleTypeName(root)}, expected a dict with 'segments' and 'device_traces'`,
      );
    }
    const segmentsValue = root.get('segments');
    const tracesValue = root.get('device_traces');
    if (segmentsValue === undefined && tracesValue === undefined) {
      this.fail('', "not a PyTorch memory snapshot: the dict has neither 'segments' nor 'device_traces'");
    }
    const traces = tracesValue === undefined || tracesValue === null ? [] : this.list(tracesValue, 'device_traces');
    const perDevice = traces.map((t, i) => {
      if (!Array.isArray(t)) this.fail(`device_traces[${i}]`, `expected a list of entries, found ${pickleTypeName(t)}`);
      return t;
    });
    const devices = perDevice.flatMap((t, i) => (t.length > 0 ? [i] : []));
    if (devices.length === 0) throw noHistory(file);
    let device = devices[0]!;
    if (wanted !== undefined) {
      if (!Number.isInteger(wanted) || wanted < 0) throw new RangeError(`device must be a non-negative integer (received ${wanted})`);
      if (!devices.includes(wanted)) {
        this.fail('', `device ${wanted} has no allocation history in this snapshot; devices with entries: ${devices.join(', ')}`);
      }
      device = wanted;
    }
    const where = `device_traces[${device}]`;
    const history = perDevice[device]!;
    // Each entry becomes an event of some 150 bytes: a history denser than PyTorch writes is one entry
    // referenced many times, which would multiply the file into memory.
    if (history.length * minSnapshotBytesPerEntry > this.#size + 1024) {
      this.fail(
        where,
        `${history.length} entries in ${this.#size} bytes of pickle, more than one per ${minSnapshotBytesPerEntry} bytes: ` +
          'entries referenced many times over (PyTorch writes each entry, some 50 bytes, once), which this reader refuses',
      );
    }
    const entries = this.list(history, where).map((e, i) => this.dict(e, `${where}[${i}]`));

    // Times: µs since the epoch in PyTorch >= 2.1; without them, the entry's index stands in.
    const timed = entries.every((e) => e.has('time_us'));
    const timeUs = (e: PickleDict, i: number): number => {
      const v = e.get('time_us');
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
        this.fail(`${where}[${i}]`, `'time_us' must be a non-negative number, found ${pickleTypeName(v)}`);
      return v;
    };
    const t0 = timed && entries.length > 0 ? timeUs(entries[0]!, 0) : 0;

    const events: TraceEvent[] = [];
    const reservedAtEvent: number[] = []; // net segment bytes after each event, before the baseline is known
    const timeline: { timeNs: number[]; net: number[] } = { timeNs: [], net: [] };
    const actions: Record<string, number> = {};
    const pending = new Map<number, number>(); // address -> index of its free_requested
    const live = new Map<number, number>(); // address -> allocations of it the history holds
    let lastNs = 0;
    let net = 0;
    let minNet = 0;
    let liveNet = 0;
    let minLive = 0;
    let maxLive = 0;
    let requestedNet = 0; // liveNet with frees counted at free_requested, as max_memory_allocated() does
    let maxRequested = 0;
    let segmentAllocs = 0;
    let segmentFrees = 0;
    const frameOfEvent = new Map<number, string>(); // event index -> its allocation's user frame
    const frameBytes = new Map<string, number>(); // user frame -> bytes it allocated
    let deferredFrees = 0;
    let freesBeforeHistory = 0;
    let firstOom: { event: number; deviceFreeBytes: number; where: string } | undefined;

    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      const at = `${where}[${i}]`;
      const action = e.get('action');
      if (typeof action !== 'string') this.fail(at, `'action' must be a str, found ${pickleTypeName(action)}`);
      // defineProperty: an action named '__proto__' stays an ordinary key.
      if (!Object.hasOwn(actions, action))
        Object.defineProperty(actions, action, { value: 0, enumerable: true, writable: true, configurable: true });
      actions[action]!++;
      // Non-decreasing: an entry never goes before the one recorded ahead of it.
      const relativeNs = timed ? Math.round((timeUs(e, i) - t0) * 1000) : i * 1000;
      if (relativeNs > Number.MAX_SAFE_INTEGER) this.fail(at, `'time_us' lies more than 2^53 ns (104 days) after the first entry's`);
      const timeNs = Math.max(lastNs, relativeNs);
      lastNs = timeNs;
      const emit = (event: TraceEvent) => {
        events.push(event);
        reservedAtEvent.push(net);
      };
      switch (action) {
        case 'alloc': {
          const ptr = this.count(e, 'addr', at);
          const bytes = this.count(e, 'size', at);
          if (ptr === 0 && bytes > 0) this.fail(at, `an allocation of ${bytes} bytes has a null address`);
          live.set(ptr, (live.get(ptr) ?? 0) + 1);
          const frame = this.userFrame(e, at);
          if (frame !== undefined) {
            frameOfEvent.set(events.length, frame);
            frameBytes.set(frame, (frameBytes.get(frame) ?? 0) + bytes);
          }
          liveNet += bytes;
          maxLive = Math.max(maxLive, liveNet);
          requestedNet += bytes;
          maxRequested = Math.max(maxRequested, requestedNet);
          emit({ timeNs, action: 'alloc', ptr, bytes, stream: this.count(e, 'stream', at, 0), tag: 0 });
          break;
        }
        case 'free_requested': {
          const ptr = this.count(e, 'addr', at);
          if (!pending.has(ptr)) requestedNet -= this.count(e, 'size', at, 0);
          pending.set(ptr, i);
          break;
        }
        case 'free_completed': {
          const ptr = this.count(e, 'addr', at);
          const bytes = this.count(e, 'size', at);
          if (ptr === 0 && bytes > 0) this.fail(at, `a free of ${bytes} bytes has a null address`);
          const requested = pending.get(ptr);
          if (requested !== undefined) {
            pending.delete(ptr);
            if (i - requested > 1) deferredFrees++;
          } else {
            requestedNet -= bytes; // completed with no request seen (it came before the history)
          }
          const n = live.get(ptr) ?? 0;
          if (n === 0) freesBeforeHistory++;
          else if (n === 1) live.delete(ptr);
          else live.set(ptr, n - 1);
          liveNet -= bytes;
          minLive = Math.min(minLive, liveNet);
          emit({ timeNs, action: 'free', ptr, bytes, stream: this.count(e, 'stream', at, 0), tag: 0 });
          break;
        }
        case 'oom':
          if (firstOom === undefined && e.has('device_free'))
            firstOom = { event: events.length, deviceFreeBytes: this.count(e, 'device_free', at), where: at };
          emit({ timeNs, action: 'oom', ptr: 0, bytes: this.count(e, 'size', at), stream: this.count(e, 'stream', at, 0), tag: 0 });
          break;
        case 'segment_alloc':
        case 'segment_map':
        case 'segment_free':
        case 'segment_unmap': {
          const bytes = this.count(e, 'size', at);
          const grows = action === 'segment_alloc' || action === 'segment_map';
          net += grows ? bytes : -bytes;
          minNet = Math.min(minNet, net);
          if (grows) segmentAllocs++;
          else segmentFrees++;
          timeline.timeNs.push(timeNs);
          timeline.net.push(net);
          break;
        }
        default:
          break; // 'snapshot' markers, and actions of later PyTorch versions: counted, not replayed
      }
    }

    // The allocator's state when the snapshot was taken: reserved and live bytes on this device.
    let finalReserved: number | undefined;
    let finalLive: number | undefined;
    if (segmentsValue !== undefined && segmentsValue !== null) {
      finalReserved = 0;
      finalLive = 0;
      const segments = this.list(segmentsValue, 'segments');
      for (let s = 0; s < segments.length; s++) {
        const at = `segments[${s}]`;
        const seg = this.dict(segments[s], at);
        if (this.count(seg, 'device', at, device) !== device) continue;
        finalReserved += this.count(seg, 'total_size', at);
        const blocks = seg.get('blocks');
        if (blocks === undefined) continue;
        const list = this.list(blocks, `${at}.blocks`);
        for (let b = 0; b < list.length; b++) {
          const bat = `${at}.blocks[${b}]`;
          const block = this.dict(list[b], bat);
          const state = block.get('state');
          // A pending free is still live here: its free event comes at free_completed.
          if (state === 'active_allocated' || state === 'active_pending_free') {
            finalLive += this.count(block, 'requested_size', bat, this.count(block, 'size', bat));
          }
        }
      }
    }
    const reservedBefore = Math.max(finalReserved === undefined ? 0 : finalReserved - net, -minNet);
    const allocatedBefore = Math.max(finalLive === undefined ? 0 : finalLive - liveNet, -minLive, 0);
    for (let k = 0; k < events.length; k++) events[k]!.reservedBytes = reservedBefore + reservedAtEvent[k]!;
    const reservedTimeline = {
      timeNs: [0, ...timeline.timeNs],
      reservedBytes: [reservedBefore, ...timeline.net.map((v) => reservedBefore + v)],
    };

    const details: SnapshotDetails = {
      device,
      entries: entries.length,
      actions,
      deferredFrees,
      pendingFreesAtEnd: pending.size,
      freesBeforeHistory,
      reservedBeforeHistoryBytes: reservedBefore,
      allocatedBeforeHistoryBytes: allocatedBefore,
    };
    const n = entries.length;
    if (n >= 1000 && (n % 1000 === 0 || (n >= 1024 && (n & (n - 1)) === 0))) details.maxEntriesHint = n;
    if (!timed) details.timesFromOrder = true;
    if (firstOom !== undefined) {
      const e = events[firstOom.event]!;
      // What the allocator could have had: PyTorch's reserve then, and what the driver still had free.
      if ((e.reservedBytes ?? reservedBefore) + firstOom.deviceFreeBytes > Number.MAX_SAFE_INTEGER) {
        this.fail(
          firstOom.where,
          `'device_free' is ${firstOom.deviceFreeBytes} bytes: with the ${e.reservedBytes ?? reservedBefore} bytes PyTorch reserved then, more than 2^53 - 1 bytes of device memory, which no device has (a corrupt snapshot)`,
        );
      }
      details.firstOom = {
        timeNs: e.timeNs,
        requestedBytes: e.bytes,
        deviceFreeBytes: firstOom.deviceFreeBytes,
        reservedBytes: e.reservedBytes ?? reservedBefore,
      };
    }
    const settings = root.get('allocator_settings');
    if (settings instanceof Map) details.allocatorSettings = pickleToJson(settings) as Record<string, unknown>;

    const header: SnapshotHeader = { source: 'torch-snapshot', allocator: pytorchAllocator, device: `cuda:${device}`, snapshot: details };
    if (frameBytes.size > 0) {
      details.allocationFrames = frameBytes.size;
      header.tags = tagByFrame(events, frameOfEvent, frameBytes, this.maxFrameTags);
    }
    // time_us is µs since the Unix epoch: a start between 2015 and 2100 is taken as the recording's date.
    if (timed && t0 > Date.UTC(2015, 0) * 1000 && t0 < Date.UTC(2100, 0) * 1000) header.createdAt = new Date(t0 / 1000).toISOString();

    return {
      format: 'torch-snapshot',
      header,
      events,
      devices,
      pytorch: {
        reservedTimeline,
        peakReservedBytes: peak(reservedTimeline.reservedBytes),
        peakAllocatedBytes: allocatedBefore + maxLive,
        peakAllocatedAtFreeRequestBytes: allocatedBefore + maxRequested,
        segmentAllocs,
        segmentFrees,
      },
    };
  }
}

/**
 * Tags the events by the user frame of their allocation: the `maxTags` frames that allocated the
 * most bytes get a tag each (1, 2, ... in that order), every other allocation tag 0 ('other'); a
 * free takes its allocation's tag. Returns the tag names (`tags[tag]`).
 */
function tagByFrame(
  events: TraceEvent[],
  frameOfEvent: ReadonlyMap<number, string>,
  frameBytes: ReadonlyMap<string, number>,
  maxTags: number,
): string[] {
  const kept = [...frameBytes]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, maxTags)
    .map(([frame]) => frame);
  const tagOf = new Map(kept.map((frame, k) => [frame, k + 1]));
  const liveTag = new Map<number, number[]>(); // address -> tags of its live allocations, oldest first
  for (let k = 0; k < events.length; k++) {
    const e = events[k]!;
    if (e.action === 'alloc') {
      const frame = frameOfEvent.get(k);
      e.tag = frame === undefined ? 0 : (tagOf.get(frame) ?? 0);
      const queue = liveTag.get(e.ptr);
      if (queue) queue.push(e.tag);
      else liveTag.set(e.ptr, [e.tag]);
    } else if (e.action === 'free') {
      const queue = liveTag.get(e.ptr);
      e.tag = queue?.shift() ?? 0;
      if (queue && queue.length === 0) liveTag.delete(e.ptr);
    }
  }
  return [otherFrameTag, ...kept];
}

function peak(values: readonly number[]): number {
  let m = 0;
  for (const v of values) if (v > m) m = v;
  return m;
}

/**
 * Reads a PyTorch memory snapshot held in memory (a pickle, or a gzip-compressed one). Throws
 * {@link TraceFormatError} (a {@link PickleFormatError} naming the byte offset, or a
 * {@link SnapshotFormatError} naming the place in the snapshot) for anything malformed, for a
 * snapshot recorded without history, and for a device without entries.
 */
export function parseSnapshot(data: Uint8Array, file = '<input>', options: SnapshotOptions = {}): SnapshotTrace {
  const bytes = isGzip(data) ? gunzip(data, file, options.maxDecompressedBytes ?? maxDecompressedTraceBytes) : data;
  const maxEvents = maxTraceEvents(options.maxEvents);
  const root = unpickle(bytes, file, { maxEvents });
  const maxFrameTags = options.maxFrameTags ?? defaultMaxFrameTags;
  if (!Number.isSafeInteger(maxFrameTags) || maxFrameTags < 0)
    throw new RangeError(`Expected a non-negative integer for maxFrameTags but received ${String(maxFrameTags)}`);
  return new SnapshotReader(file, bytes.length, maxFrameTags).read(root, options.device);
}

/**
 * Reads a PyTorch memory snapshot file (`torch.cuda.memory._dump_snapshot()`'s pickle, optionally
 * gzip-compressed) as a trace of one device. Throws {@link TraceFormatError} for a malformed file,
 * and the file system's error when it cannot be read.
 */
export async function readSnapshot(path: string, options: SnapshotOptions = {}): Promise<SnapshotTrace> {
  return parseSnapshot(await readFile(path), path, options);
}
