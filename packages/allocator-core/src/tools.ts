/**
 * @gpumem/allocator-core/tools: benchmark loops, trace replay and GPU test kernels for native
 * allocators. They run natively (src/tools of the addon), with no JavaScript per call, and are kept
 * off the allocator classes so that production allocators carry no test or benchmark tooling.
 * Pointers are checked against the allocator's live allocations before any kernel launch.
 * @module
 */
import { deviceCount, deviceStatus, type Device } from './device.js';
import { InvalidStateError, translateNativeError } from './errors.js';
import { NativeAllocator, nativeResourceOf } from './native-allocator.js';
import { loadNative, nativeAddonPart, type NativeReplay, type NativeResource, type NativeTiming } from './native.js';
import { median } from './numbers.js';
import { Stream } from './stream.js';
import type { DevicePtr } from './types.js';
import { checkBytes, checkNonNegative, checkPointer } from './validate.js';

export type { NativeReplay, NativeReplayPass, NativeTiming } from './native.js';
export { seededRandom, xorshift32 } from './random.js';

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
export function benchmarkTrace(
  allocator: NativeAllocator,
  sizes: Float64Array,
  window: number,
  repeats = 5,
  stream?: Stream,
): NativeTiming {
  checkBytes(window, 'window');
  checkBytes(repeats, 'repeats');
  for (const s of sizes) checkBytes(s, 'sizes[i]');
  const handle = streamHandle(allocator, stream);
  return run(allocator, (r) => loadNative().tools.benchTrace(r, sizes, window, repeats, handle));
}

/** How {@link replayNative} runs. */
export interface NativeReplayOptions {
  /**
   * End each pass at its first out-of-memory (its `ooms` is then 0 or 1, `stopped` true): for a
   * caller that only asks whether the trace fits, so that a trace whose requests nearly all fail
   * costs one failure rather than one per request. Default false: every failure is counted.
   */
  stopAtFirstOom?: boolean;
}

/**
 * Runs a compiled allocation trace in a native loop, `repeats` times. Every pass starts with the
 * allocator trimmed and its peaks reset, times each call, counts out-of-memory failures (their
 * frees are skipped; or the pass ends at the first, with `stopAtFirstOom`) and frees what the trace
 * leaves live at its end, untimed. The program is checked before anything is allocated (RangeError
 * naming the operation). The allocator must hold nothing else while it runs, or its peaks include
 * that memory.
 */
export function replayNative(allocator: NativeAllocator, ops: ReplayOps, repeats = 1, options: NativeReplayOptions = {}): NativeReplay {
  checkBytes(repeats, 'repeats');
  const stopAtFirstOom = options.stopAtFirstOom ?? false;
  if (typeof stopAtFirstOom !== 'boolean')
    throw new TypeError(`Expected a boolean for stopAtFirstOom but received ${describeValue(stopAtFirstOom)}`);
  checkNonNegative(ops.slots, 'slots');
  const n = ops.action.length;
  for (const [name, array] of [
    ['slot', ops.slot],
    ['bytes', ops.bytes],
    ['stream', ops.stream],
  ] as const) {
    if (array.length !== n) throw new RangeError(`Expected ${name} to have ${n} elements (one per operation) but received ${array.length}`);
  }
  for (let i = 0; i < n; i++) {
    const b = ops.bytes[i]!;
    if (!Number.isSafeInteger(b) || b <= 0) throw new RangeError(`Expected positive integer for bytes[${i}] but received ${b}`);
  }
  return run(allocator, (r) =>
    loadNative().tools.replay(r, ops.action, ops.slot, ops.bytes, ops.stream, ops.slots, repeats, stopAtFirstOom),
  );
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
 * Fills `count` u32 values at `ptr` with `value` from a kernel on `device` (normally another GPU
 * than the allocator's: the kernel writes over the peer path the `peerAccess` option opened), and
 * waits for it. Memory the device cannot reach makes the kernel fault, which breaks the CUDA context
 * of the process: use it only on memory the device was given access to.
 */
export function peerFillU32(allocator: NativeAllocator, ptr: DevicePtr, count: number, value: number, device: Device): void {
  checkPointer(ptr);
  checkNonNegative(count, 'count');
  checkNonNegative(value, 'value');
  if (device === null || typeof device !== 'object' || device.kind !== 'cuda') {
    throw new TypeError(`Expected a CUDA device (cudaDevice(i)) for device but received ${describeValue(device)}`);
  }
  run(allocator, (r) => loadNative().tools.peerFillU32(r, ptr, count, value >>> 0, device.index));
}

/**
 * Adds the sum of `count` u32 values at `ptr` into the u64 at `outPtr`, on `stream`, after
 * spinning `spinNs` nanoseconds on the GPU (to keep a stream busy in ordering tests).
 */
export function sumU32(allocator: NativeAllocator, ptr: DevicePtr, count: number, outPtr: DevicePtr, stream?: Stream, spinNs = 0): void {
  checkPointer(ptr);
  checkPointer(outPtr, 'outPtr');
  checkNonNegative(count, 'count');
  checkNonNegative(spinNs, 'spinNs');
  const handle = streamHandle(allocator, stream);
  run(allocator, (r) => loadNative().tools.sumU32(r, ptr, count, outPtr, handle, spinNs));
}

/** What the addon's host-link benchmark is given (every field checked by `linkBenchmark`). */
export interface NativeLinkBenchOptions {
  device: number;
  bytes: number;
  repetitions: number;
  blocksPerSm: number[];
  threadsPerBlock: number;
}

/** One figure of the host-link benchmark: `bytes` moved `gbps.length` times. */
export interface NativeLinkMeasurement {
  /** zero-copy-read, zero-copy-write, h2d-copy, d2h-copy, managed-prefetch, managed-fault-read or device-read. */
  kind: string;
  /** Kernels: blocks per multiprocessor (the grid is this times the multiprocessors); 0 for copies and prefetch. */
  blocksPerSm: number;
  /** Blocks launched; 0 for copies and prefetch. */
  grid: number;
  bytes: number;
  /** GB/s (10^9 bytes per second) of each repetition, in order. */
  gbps: number[];
}

/** The host-link benchmark's result (native/include/gpumem/link_bench.hpp). */
export interface NativeLinkBench {
  device: number;
  deviceName: string;
  multiprocessors: number;
  threadsPerBlock: number;
  repetitions: number;
  /** The buffer size asked for, and the one used (bounded by half the host's available and half the device's free memory). */
  requestedBytes: number;
  bytes: number;
  hostAvailableBytes: number;
  deviceFreeBytes: number;
  measurements: NativeLinkMeasurement[];
  /** Measurements not made on this device, each with the reason. */
  skipped: string[];
}

/** The part of the addon that only the host-link benchmark calls (the core's allocators never do). */
interface LinkBenchNative {
  tools: { linkBench(options: NativeLinkBenchOptions): NativeLinkBench };
}

/** Options of `linkBenchmark`. */
export interface LinkBenchmarkOptions {
  /** CUDA device ordinal (default 0). */
  device?: number;
  /**
   * Bytes moved by each measurement (default 1 GiB, at least 4096). Bounded for safety: at most half
   * the host's MemAvailable (the pinned buffer) and half the device's free memory (the device and the
   * managed buffer, never both at once); the result says what was used.
   */
  bytes?: number;
  /** Timed repetitions of each measurement, after one untimed warm-up where there is one (default 5, at most 1000). */
  repetitions?: number;
  /** Grid sizes of the kernels, in blocks per multiprocessor (default [2, 4, 8, 16]). */
  blocksPerSm?: number[];
  /** Threads per block of the kernels (default 512; a multiple of 32 up to 1024). */
  threadsPerBlock?: number;
}

/** One figure of `linkBenchmark`, with its summary. */
export interface LinkMeasurement extends NativeLinkMeasurement {
  medianGbps: number;
  minGbps: number;
  maxGbps: number;
}

/** The result of `linkBenchmark`: the device, the sizes used and every figure. */
export interface LinkBenchmark extends Omit<NativeLinkBench, 'measurements'> {
  measurements: LinkMeasurement[];
}

const linkOptionKeys = ['device', 'bytes', 'repetitions', 'blocksPerSm', 'threadsPerBlock'];

function checkIntegerIn(value: unknown, lo: number, hi: number, name: string): asserts value is number {
  const message = `Expected an integer from ${lo} to ${hi} for ${name} but received ${typeof value === 'number' ? value : `${String(value)} of type ${typeof value}`}`;
  if (typeof value !== 'number') throw new TypeError(message);
  if (!Number.isInteger(value) || value < lo || value > hi) throw new RangeError(message);
}

/**
 * The host-link benchmark (bench/link), on one GPU: a kernel reading and writing mapped pinned host
 * memory in place (at each grid size), cudaMemcpyAsync host-to-device and device-to-host from pinned
 * memory, cudaMemPrefetchAsync of managed memory to the device, a kernel reading managed memory whose
 * pages are on the host (faulting them in; the pages are touched on the host again before every
 * repetition), and the read kernel on device memory for reference. GB/s are 10^9 bytes per second.
 * Throws {@link InvalidStateError} where there is no CUDA device, saying why.
 */
export function linkBenchmark(options: LinkBenchmarkOptions = {}): LinkBenchmark {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Expected an options object for options but received ${options === null ? 'null' : typeof options}`);
  }
  for (const key of Object.keys(options)) {
    if (!linkOptionKeys.includes(key))
      throw new TypeError(`Unknown option '${key}' for linkBenchmark; expected one of: ${linkOptionKeys.join(', ')}`);
  }
  const device = options.device ?? 0;
  const bytes = options.bytes ?? 2 ** 30;
  const repetitions = options.repetitions ?? 5;
  const blocksPerSm = options.blocksPerSm ?? [2, 4, 8, 16];
  const threadsPerBlock = options.threadsPerBlock ?? 512;
  checkNonNegative(device, 'device');
  checkBytes(bytes, 'bytes');
  if (bytes < 4096) throw new RangeError(`Expected at least 4096 for bytes but received ${bytes}`);
  checkIntegerIn(repetitions, 1, 1000, 'repetitions');
  if (!Array.isArray(blocksPerSm) || blocksPerSm.length === 0) {
    throw new TypeError(
      `Expected a non-empty array of integers for blocksPerSm but received ${Array.isArray(blocksPerSm) ? 'an empty array' : typeof blocksPerSm}`,
    );
  }
  blocksPerSm.forEach((b, i) => {
    checkIntegerIn(b, 1, 1024, `blocksPerSm[${i}]`);
  });
  checkIntegerIn(threadsPerBlock, 32, 1024, 'threadsPerBlock');
  if (threadsPerBlock % 32 !== 0) throw new RangeError(`Expected a multiple of 32 for threadsPerBlock but received ${threadsPerBlock}`);
  const count = deviceCount();
  if (count === 0) throw new InvalidStateError(`linkBenchmark needs a CUDA device: ${deviceStatus()}`);
  if (device >= count) throw new RangeError(`Expected a CUDA device index below ${count} for device but received ${device}`);
  let result: NativeLinkBench;
  try {
    result = nativeAddonPart<LinkBenchNative>('linkBenchmark', ['tools']).tools.linkBench({
      device,
      bytes,
      repetitions,
      blocksPerSm: [...blocksPerSm],
      threadsPerBlock,
    });
  } catch (e) {
    throw translateNativeError(e, 'linkBenchmark');
  }
  return {
    ...result,
    measurements: result.measurements.map((m) => ({
      ...m,
      medianGbps: median(m.gbps),
      minGbps: Math.min(...m.gbps),
      maxGbps: Math.max(...m.gbps),
    })),
  };
}
