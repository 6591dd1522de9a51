/**
 * Timing of collectives: a communicator that times each call it forwards (CUDA events around it
 * on its stream, or the host clock for host buffers), and a measurement of a communicator's own
 * all-gather bandwidth, so that what a trainer's exchange achieves can be set against what the
 * communicator can do on the same devices in the same run. Bandwidths follow nccl-tests: algorithm
 * bandwidth = bytes gathered / time; bus bandwidth = that x (ranks - 1) / ranks for an all-gather
 * and x 2 (ranks - 1) / ranks for an all-reduce.
 * @module
 */
import { CudaEvent, type Device, type DevicePtr, type Stream } from '@gpumem/allocator-core';
import type { Communicator } from './communicator.js';

export type CollectiveKind = 'allReduce' | 'allGather' | 'broadcast';

/** Calls of one kind since the last drain: how many, the bytes each rank ends with, milliseconds. */
export interface CollectiveTime {
  calls: number;
  bytes: number;
  ms: number;
}

export type CollectiveTimes = Partial<Record<CollectiveKind, CollectiveTime>>;

/** Bus bandwidth (GB/s) of `bytes` gathered (or reduced) in `ms` over `ranks`, as nccl-tests reports it. */
export function busBandwidth(kind: CollectiveKind, bytes: number, ms: number, ranks: number): number {
  if (ms <= 0) return 0;
  const factor = kind === 'allReduce' ? (2 * (ranks - 1)) / ranks : kind === 'allGather' ? (ranks - 1) / ranks : 1;
  return (bytes / (ms * 1e6)) * factor;
}

interface Pending {
  kind: CollectiveKind;
  bytes: number;
  start?: CudaEvent;
  end?: CudaEvent;
  ms?: number;
}

/** A communicator that times every collective; drain() (after the stream has been synchronised) returns the times. */
export class TimedCommunicator implements Communicator {
  readonly #pending: Pending[] = [];
  readonly #free: CudaEvent[] = [];

  constructor(
    readonly inner: Communicator,
    readonly device: Device,
  ) {}

  get backend() {
    return this.inner.backend;
  }
  get rank() {
    return this.inner.rank;
  }
  get size() {
    return this.inner.size;
  }
  get capturable() {
    return false; // events around a captured call would not time its replays
  }

  #event(): CudaEvent {
    return this.#free.pop() ?? CudaEvent.create(this.device);
  }

  #timed(kind: CollectiveKind, bytes: number, stream: Stream, call: () => void): void {
    if (this.device.kind !== 'cuda') {
      const t0 = performance.now();
      call();
      this.#pending.push({ kind, bytes, ms: performance.now() - t0 });
      return;
    }
    const start = this.#event();
    const end = this.#event();
    start.record(stream);
    call();
    end.record(stream);
    this.#pending.push({ kind, bytes, start, end });
  }

  allReduce(buffer: DevicePtr, count: number, stream: Stream): void {
    this.#timed('allReduce', count * 4, stream, () => this.inner.allReduce(buffer, count, stream));
  }
  allGather(send: DevicePtr, recv: DevicePtr, count: number, stream: Stream): void {
    this.#timed('allGather', count * 4 * this.size, stream, () => this.inner.allGather(send, recv, count, stream));
  }
  broadcast(buffer: DevicePtr, count: number, root: number, stream: Stream): void {
    this.#timed('broadcast', count * 4, stream, () => this.inner.broadcast(buffer, count, root, stream));
  }
  abort(reason: string): void {
    this.inner.abort(reason);
  }

  /** The times of the calls since the last drain, by kind; waits for their end events. */
  drain(): CollectiveTimes {
    const out: CollectiveTimes = {};
    for (const p of this.#pending.splice(0)) {
      let ms = p.ms ?? 0;
      if (p.start && p.end) {
        p.end.synchronize();
        ms = p.start.elapsedMs(p.end);
        this.#free.push(p.start, p.end);
      }
      const t = out[p.kind] ?? { calls: 0, bytes: 0, ms: 0 };
      out[p.kind] = t;
      t.calls++;
      t.bytes += p.bytes;
      t.ms += ms;
    }
    return out;
  }

  dispose(): void {
    this.drain();
    for (const e of this.#free.splice(0)) e.destroy();
    this.inner.dispose();
  }
}

/** One all-gather size measured on its own: bytes each rank ends with, the median time, bandwidths. */
export interface AllGatherBench {
  bytes: number;
  repeats: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** GB/s: bytes / time. */
  algBandwidth: number;
  /** GB/s, nccl-tests' bus bandwidth: algBandwidth x (ranks - 1) / ranks. */
  busBandwidth: number;
}

/**
 * The communicator's own all-gather at `bytes` per rank at the end (rounded down to whole floats
 * per rank), on a buffer from `malloc`, after `warmup` untimed calls: each call timed on its own,
 * synchronised, every rank taking part.
 */
export function measureAllGather(
  comm: Communicator,
  stream: Stream,
  malloc: (bytes: number) => { ptr: DevicePtr; free(): void },
  bytes: number,
  repeats = 20,
  warmup = 3,
): AllGatherBench {
  const count = Math.max(1, Math.floor(bytes / 4 / comm.size));
  const total = count * 4 * comm.size;
  const buffer = malloc(total);
  const times: number[] = [];
  try {
    for (let i = 0; i < warmup + repeats; i++) {
      stream.synchronize();
      const t0 = performance.now();
      comm.allGather(buffer.ptr + comm.rank * count * 4, buffer.ptr, count, stream);
      stream.synchronize();
      if (i >= warmup) times.push(performance.now() - t0);
    }
  } finally {
    buffer.free();
  }
  times.sort((a, b) => a - b);
  const medianMs = times[Math.floor(times.length / 2)]!;
  return {
    bytes: total,
    repeats,
    medianMs,
    minMs: times[0]!,
    maxMs: times[times.length - 1]!,
    algBandwidth: total / (medianMs * 1e6),
    busBandwidth: busBandwidth('allGather', total, medianMs, comm.size),
  };
}
