/**
 * @gpumem/allocator-core/tools: benchmark loops, trace replay and GPU test kernels for native
 * allocators. They run natively (src/tools of the addon), with no JavaScript per call, and are kept
 * off the allocator classes so that production allocators carry no test or benchmark tooling.
 * Pointers are checked against the allocator's live allocations before any kernel launch.
 * @module
 */
import { translateNativeError } from './errors.js';
import { NativeAllocator, nativeResourceOf } from './native-allocator.js';
import { loadNative, type NativeReplay, type NativeResource, type NativeTiming } from './native.js';
import { Stream } from './stream.js';
import type { DevicePtr } from './types.js';
import { checkBytes, checkNonNegative, checkPointer } from './validate.js';

export type { NativeReplay, NativeReplayPass, NativeTiming } from './native.js';

/**
 * An allocation trace compiled for {@link replayNative}: one entry per operation in each array. An
 * allocation puts its pointer in a slot, a free takes it back out; slots are reused.
 */
export interface ReplayOps {
  /** 0: allocate, 1: free. */
  action: Uint8Array;
  /** The slot an allocation fills or a free empties. */
  slot: Uint32Array;
  /** Bytes to allocate; a free uses the size its slot was allocated with. */
  bytes: Float64Array;
  /** The native handle of the stream of each operation (0: the default stream). */
  stream: Float64Array;
  /** How many slots the program uses (the most allocations it holds at once, at least). */
  slots: number;
}

function native(allocator: NativeAllocator): NativeResource {
  if (!(allocator instanceof NativeAllocator)) {
    throw new TypeError(`Expected a native allocator for allocator but received ${describeValue(allocator)}`);
  }
  return nativeResourceOf(allocator);
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object (${Object.prototype.toString.call(value)})`;
  return `${String(value)} of type ${typeof value}`;
}

/** The stream's native handle, checked as the allocator's own calls check it. */
function streamHandle(allocator: NativeAllocator, stream: Stream | undefined): number {
  if (stream === undefined) return 0;
  if (!(stream instanceof Stream)) throw new TypeError(`Expected a Stream (or undefined) for stream but received ${describeValue(stream)}`);
  if (stream.destroyed) throw new TypeError('Expected a live Stream for stream but received a destroyed one');
  if (allocator.device.kind === 'cuda' && stream.device !== allocator.device && stream.handle !== 0) {
    throw new TypeError(`Expected a stream of ${allocator.device.id} for stream but received one of ${stream.device.id}`);
  }
  return stream.handle;
}

/** Runs `f` on the addon's tools, turning native errors into the allocator's typed errors. */
function run<T>(allocator: NativeAllocator, f: (resource: NativeResource) => T): T {
  const resource = native(allocator);
  try {
    return f(resource);
  } catch (e) {
    throw translateNativeError(e, allocator.name);
  }
}

/** Times malloc+free pairs of `bytes` in a native loop (no JavaScript per call). */
export function benchmarkPairs(allocator: NativeAllocator, bytes: number, iterations: number, repeats = 5, stream?: Stream): NativeTiming {
  checkBytes(bytes);
  checkBytes(iterations, 'iterations');
  checkBytes(repeats, 'repeats');
  const handle = streamHandle(allocator, stream);
  return run(allocator, (r) => loadNative().tools.benchPairs(r, bytes, iterations, repeats, handle));
}

/**
 * Replays a mixed-size trace in a native loop: allocate sizes[i] in order, keeping at most
 * `window` allocations live (oldest freed first). Returns ns per malloc+free pair.
 */
export function benchmarkTrace(allocator: NativeAllocator, sizes: Float64Array, window: number, repeats = 5, stream?: Stream): NativeTiming {
  checkBytes(window, 'window');
  checkBytes(repeats, 'repeats');
  for (const s of sizes) checkBytes(s, 'sizes[i]');
  const handle = streamHandle(allocator, stream);
  return run(allocator, (r) => loadNative().tools.benchTrace(r, sizes, window, repeats, handle));
}

/**
 * Runs a compiled allocation trace in a native loop, `repeats` times. Every pass starts with the
 * allocator trimmed and its peaks reset, times each call, counts out-of-memory failures (their
 * frees are skipped) and frees what the trace leaves live at its end, untimed. The program is
 * checked before anything is allocated (RangeError naming the operation). The allocator must hold
 * nothing else while it runs, or its peaks include that memory.
 */
export function replayNative(allocator: NativeAllocator, ops: ReplayOps, repeats = 1): NativeReplay {
  checkBytes(repeats, 'repeats');
  checkNonNegative(ops.slots, 'slots');
  const n = ops.action.length;
  for (const [name, array] of [['slot', ops.slot], ['bytes', ops.bytes], ['stream', ops.stream]] as const) {
    if (array.length !== n) throw new RangeError(`Expected ${name} to have ${n} elements (one per operation) but received ${array.length}`);
  }
  for (let i = 0; i < n; i++) {
    const b = ops.bytes[i]!;
    if (!Number.isSafeInteger(b) || b <= 0) throw new RangeError(`Expected positive integer for bytes[${i}] but received ${b}`);
  }
  return run(allocator, (r) => loadNative().tools.replay(r, ops.action, ops.slot, ops.bytes, ops.stream, ops.slots, repeats));
}

/** Fills `count` u32 values at `ptr` with `value`, on `stream` (a GPU kernel). */
export function fillU32(allocator: NativeAllocator, ptr: DevicePtr, count: number, value: number, stream?: Stream): void {
  checkPointer(ptr);
  checkNonNegative(count, 'count');
  checkNonNegative(value, 'value');
  const handle = streamHandle(allocator, stream);
  run(allocator, (r) => loadNative().tools.fillU32(r, ptr, count, value >>> 0, handle));
}

/**
 * Adds the sum of `count` u32 values at `ptr` into the u64 at `outPtr`, on `stream`, after
 * spinning `spinNs` nanoseconds on the GPU (to keep a stream busy in ordering tests).
 */
export function sumU32(
  allocator: NativeAllocator,
  ptr: DevicePtr,
  count: number,
  outPtr: DevicePtr,
  stream?: Stream,
  spinNs = 0,
): void {
  checkPointer(ptr);
  checkPointer(outPtr, 'outPtr');
  checkNonNegative(count, 'count');
  checkNonNegative(spinNs, 'spinNs');
  const handle = streamHandle(allocator, stream);
  run(allocator, (r) => loadNative().tools.sumU32(r, ptr, count, outPtr, handle, spinNs));
}
