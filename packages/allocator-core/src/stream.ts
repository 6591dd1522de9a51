/**
 * Streams and events. On a GPU a Stream is a non-blocking cudaStream_t; over host memory it is a
 * key that keeps free lists apart, so stream-aware strategies behave the same on machines with no GPU.
 * Work on a host stream runs at once, except work a test queues on it (the conformance suite's
 * stream-order check), which runs when the stream is reached: synchronize(), an event recorded
 * behind it being waited on, or synchronizeDevice(hostDevice).
 * @module
 */
import { hostDevice, hostQueues, type Device } from './device.js';
import { InvalidStateError, nativeCall } from './errors.js';
import { loadNative } from './native.js';
import { processShared, shareClass } from './process-shared.js';

/** Host stream handles, unique across the copies of the core in the process (they key free lists). */
const hostStreams = processShared('host-streams', 1, () => ({ next: 1 }));

/** Throws a TypeError unless `device` is a Device (cudaDevice(i) or hostDevice). */
function checkDevice(device: unknown): asserts device is Device {
  const d = device as Partial<Device> | null;
  const ok = d !== null && typeof d === 'object' && (d.kind === 'cuda' || d.kind === 'host') && Number.isInteger(d.index);
  if (!ok) {
    const got =
      device === null
        ? 'null'
        : typeof device === 'object'
          ? 'an object that is not a Device'
          : `${String(device)} of type ${typeof device}`;
    throw new TypeError(`Expected a Device (cudaDevice(i) or hostDevice) for device but received ${got}`);
  }
}

/** An ordered queue of work on a device. */
export class Stream {
  #handle: number;
  readonly #owned: boolean;

  private constructor(
    /** The device the stream belongs to. */
    readonly device: Device,
    handle: number,
    owned: boolean,
  ) {
    this.#handle = handle;
    this.#owned = owned;
  }

  /** A new stream on `device` (a CUDA device, or the host). */
  static create(device: Device): Stream {
    checkDevice(device);
    if (device.kind === 'host') return new Stream(device, hostStreams.next++, true);
    return new Stream(
      device,
      nativeCall('createStream', () => loadNative().createStream(device.index)),
      true,
    );
  }

  /** The default stream of `device` (CUDA's legacy default stream; handle 0). */
  static default(device: Device = hostDevice): Stream {
    return new Stream(device, 0, false);
  }

  /** The native handle (cudaStream_t as a number; 0 for the default stream). */
  get handle(): number {
    if (this.#handle < 0) throw new InvalidStateError('this stream has been destroyed');
    return this.#handle;
  }

  get destroyed(): boolean {
    return this.#handle < 0;
  }

  /** Waits for all work queued on the stream. */
  synchronize(): void {
    if (this.device.kind === 'cuda') nativeCall('synchronizeStream', () => loadNative().synchronizeStream(this.handle));
    else hostQueues()?.synchronizeHostStream(this.handle);
  }

  /**
   * Destroys a stream made by create(). The default stream cannot be destroyed. On a GPU this first
   * waits for the work queued on the stream, then tells the native resources that key state by
   * stream (the pool's per-stream free lists) to forget it: memory they cache for it stays usable on
   * other streams. Destroy streams that an allocator has used through this method only.
   */
  destroy(): void {
    if (this.#handle < 0 || !this.#owned) return;
    if (this.device.kind === 'cuda') nativeCall('destroyStream', () => loadNative().destroyStream(this.#handle));
    else this.synchronize();
    this.#handle = -1;
  }
}
// A plug-in's copy of the core takes the application's streams, and the other way round.
shareClass(Stream, 'Stream', 1);

/** A CUDA event with timing, for ordering and measuring work on streams. */
export class CudaEvent {
  #handle: number;
  private constructor(
    readonly device: Device,
    handle: number,
  ) {
    this.#handle = handle;
  }

  static create(device: Device): CudaEvent {
    if (device.kind !== 'cuda') throw new TypeError(`Expected a CUDA device for device but received '${device.id}'`);
    return new CudaEvent(
      device,
      nativeCall('createEvent', () => loadNative().createEvent(device.index)),
    );
  }

  private get handle(): number {
    if (this.#handle < 0) throw new InvalidStateError('this event has been destroyed');
    return this.#handle;
  }

  record(stream: Stream): void {
    nativeCall('recordEvent', () => loadNative().recordEvent(this.handle, stream.handle));
  }
  synchronize(): void {
    nativeCall('synchronizeEvent', () => loadNative().synchronizeEvent(this.handle));
  }
  /** True once the work before the last record() has finished. */
  query(): boolean {
    return nativeCall('queryEvent', () => loadNative().queryEvent(this.handle));
  }
  /** Milliseconds from this event to `end` (both recorded and complete). */
  elapsedMs(end: CudaEvent): number {
    return nativeCall('elapsedMs', () => loadNative().elapsedMs(this.handle, end.handle));
  }
  destroy(): void {
    if (this.#handle < 0) return;
    nativeCall('destroyEvent', () => loadNative().destroyEvent(this.#handle));
    this.#handle = -1;
  }
}

/**
 * A CUDA Graph: the work `record` queues on a stream, captured once and replayed with one launch.
 * Kernel arguments (pointers included) are fixed at capture: memory the captured work uses must
 * stay allocated, and at the same addresses, for as long as the graph is replayed.
 */
export class CudaGraph {
  #handle: number;
  private constructor(
    readonly stream: Stream,
    handle: number,
  ) {
    this.#handle = handle;
  }

  /**
   * Captures the work `record` queues on `stream` (a non-default CUDA stream). Calls made inside
   * must only queue work: anything that synchronises the stream or the device fails the capture.
   */
  static capture(stream: Stream, record: () => void): CudaGraph {
    if (stream.device.kind !== 'cuda') throw new TypeError(`Expected a CUDA stream for stream but received one of ${stream.device.id}`);
    const native = loadNative();
    native.beginCapture(stream.handle);
    let failure: unknown;
    try {
      record();
    } catch (e) {
      failure = e;
    }
    let handle = 0;
    try {
      handle = native.endCapture(stream.handle);
    } catch (e) {
      failure ??= e;
    }
    if (failure !== undefined) {
      if (handle) native.destroyGraph(handle);
      throw failure;
    }
    return new CudaGraph(stream, handle);
  }

  /** Replays the graph on its stream. */
  launch(): void {
    if (this.#handle === 0) throw new InvalidStateError('this CUDA graph has been destroyed');
    nativeCall('launchGraph', () => loadNative().launchGraph(this.#handle, this.stream.handle));
  }

  destroy(): void {
    if (this.#handle === 0) return;
    nativeCall('destroyGraph', () => loadNative().destroyGraph(this.#handle));
    this.#handle = 0;
  }
}
