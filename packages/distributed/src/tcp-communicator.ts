/**
 * The host communicator over TCP: the 'host' backend for ranks that a launcher of another kind
 * started (torchrun, srun, mpirun), on one machine or several. A thread of the rank's own holds the
 * connections (tcp-comm-worker.ts); a collective copies the buffer to the host (the addon's
 * staging: host memory, or device memory after the stream's queued work), hands the bytes to that
 * thread and waits for the answer on a shared word (Atomics.wait), so the collectives keep the
 * {@link Communicator}'s synchronous contract. Every exchange goes through rank 0, which sums in
 * rank order: all ranks get the same bits, the same as from the shared-memory communicator.
 *
 * The group's address is agreed on the job's rendezvous store: rank 0's thread listens on a free
 * port of the store's host and rank 0 broadcasts it. A rank that dies closes its connections, so
 * the others' collectives throw CommAbortedError ("rank 2 of 4 left the job (connection closed)
 * during all-reduce of ...") as soon as rank 0 hears of it: within a second on one network.
 * @module
 */
import { receiveMessageOnPort, MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { hostDevice, type Device } from '@gpumem/allocator-core';
import { commNative, type CommNative, type NativeComm } from './comm-native.js';
import { CommAbortedError, type Communicator } from './communicator.js';
import { builtModule } from './launcher.js';
import { NativeCommunicator } from './native-communicator.js';
import type { TcpStore } from './tcp-store.js';
import type { TcpCommReply, TcpCommRequest, TcpCommWorkerData } from './tcp-comm-worker.js';

export interface TcpCommunicatorOptions {
  /** Where the buffers live: hostDevice (default) or a CUDA device (staged through the host). */
  device?: Device;
  /** The longest a collective waits for the other ranks before the group is stopped; 0 (default): no limit. */
  timeoutMs?: number;
  /** How long the ranks may take to connect, each wait of it (default 60,000 ms). */
  joinTimeoutMs?: number;
  /** Checked when a rank connects; the same on every rank (default: GPUMEM_RENDEZVOUS_TOKEN). */
  token?: string | undefined;
}

/** How long the rank's thread waits for its communicator thread past the collective's own timeout. */
const workerSlackMs = 10_000;

/** The collectives over the communicator thread, in the addon's shape (NativeCommunicator checks the arguments). */
class TcpTransport implements NativeComm {
  readonly #worker: Worker;
  readonly #replies: MessagePort;
  readonly #signal: Int32Array;
  readonly #native: Pick<CommNative, 'commStageOut' | 'commStageIn'>;
  #closed = false;

  constructor(
    worker: Worker,
    replies: MessagePort,
    signal: Int32Array,
    readonly rank: number,
    readonly size: number,
    readonly device: number,
    readonly timeoutMs: number,
  ) {
    this.#worker = worker;
    this.#replies = replies;
    this.#signal = signal;
    this.#native = commNative();
  }

  allReduce(ptr: number, count: number, stream: number): void {
    const out = this.#call({ t: 'allReduce', count, body: this.#stageOut(ptr, count, stream), timeoutMs: this.timeoutMs }, 'allReduce');
    this.#stageIn(ptr, out, stream);
  }

  allGather(send: number, recv: number, count: number, stream: number): void {
    const out = this.#call({ t: 'allGather', count, body: this.#stageOut(send, count, stream), timeoutMs: this.timeoutMs }, 'allGather');
    this.#stageIn(recv, out, stream);
  }

  broadcast(ptr: number, count: number, root: number, stream: number): void {
    const body = this.rank === root ? this.#stageOut(ptr, count, stream) : new Uint8Array(0);
    const out = this.#call({ t: 'broadcast', count, root, body, timeoutMs: this.timeoutMs }, 'broadcast');
    if (this.rank !== root) this.#stageIn(ptr, out, stream);
  }

  abort(reason: string): void {
    this.#call({ t: 'abort', reason }, 'abort', true);
  }

  destroy(): void {
    if (this.#closed) return;
    try {
      this.#call({ t: 'close' }, 'dispose', true);
    } catch {
      // the group is stopped: there is nothing left to close gracefully
    }
    this.#closed = true;
    this.#replies.close();
    void this.#worker.terminate();
  }

  #stageOut(ptr: number, count: number, stream: number): Uint8Array {
    const values = new Float32Array(count);
    this.#native.commStageOut(ptr, this.device, stream, values);
    return new Uint8Array(values.buffer);
  }

  #stageIn(ptr: number, bytes: Uint8Array, stream: number): void {
    this.#native.commStageIn(ptr, this.device, stream, new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
  }

  /** Hands `request` to the communicator thread and waits for its answer. */
  #call(request: TcpCommRequest, what: string, lenient = false): Uint8Array {
    if (this.#closed) throw new CommAbortedError(`aborted: ${what} after this rank's communicator was disposed`);
    Atomics.store(this.#signal, 0, 0);
    this.#worker.postMessage(request, 'body' in request ? [request.body.buffer as ArrayBuffer] : []);
    const limit = this.timeoutMs > 0 && !lenient ? this.timeoutMs + workerSlackMs : lenient ? workerSlackMs : Infinity;
    const start = performance.now();
    while (Atomics.load(this.#signal, 0) === 0) {
      const left = limit - (performance.now() - start);
      if (left <= 0) {
        if (lenient) return new Uint8Array(0);
        throw new CommAbortedError(`aborted: rank ${this.rank}'s communicator thread did not answer ${what} within ${limit} ms`);
      }
      Atomics.wait(this.#signal, 0, 0, Math.min(left, 1000));
    }
    const reply = receiveMessageOnPort(this.#replies)?.message as TcpCommReply | undefined;
    if (!reply) throw new CommAbortedError(`aborted: rank ${this.rank}'s communicator thread gave no answer to ${what}`);
    if (reply.ok) return reply.body;
    throw reply.name === 'CommAbortedError' ? new CommAbortedError(reply.message) : new Error(reply.message);
  }
}

/**
 * This rank's host communicator over TCP, for the job whose rendezvous is `store`: every rank of
 * the store calls it (the same options), and it resolves once all are connected. Backend 'host',
 * not capturable.
 */
export async function connectTcpCommunicator(store: TcpStore, options: TcpCommunicatorOptions = {}): Promise<Communicator> {
  if (options === null || typeof options !== 'object') throw new TypeError('Expected an options object for connectTcpCommunicator');
  const { device = hostDevice, timeoutMs = 0, joinTimeoutMs = 60_000, token = process.env.GPUMEM_RENDEZVOUS_TOKEN } = options;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0)
    throw new RangeError(`Expected an integer >= 0 for timeoutMs but received ${String(timeoutMs)}`);
  const d = device as Partial<Device> | null;
  if (d === null || typeof d !== 'object' || (d.kind !== 'host' && d.kind !== 'cuda') || !Number.isInteger(d.index)) {
    throw new TypeError('Expected a Device (cudaDevice(i) or hostDevice) for device');
  }
  const { rank, size } = store;
  const start = (port: number) => {
    const signal = new SharedArrayBuffer(4);
    const { port1, port2 } = new MessageChannel();
    const workerData: TcpCommWorkerData = { rank, size, host: store.host, port, joinTimeoutMs, token, signal, replies: port2 };
    const worker = new Worker(builtModule('./tcp-comm-worker.js', import.meta.url), { workerData, transferList: [port2] });
    worker.unref();
    return { worker, signal: new Int32Array(signal), replies: port1 };
  };
  /** The worker's next message of `type`, or its error. */
  const next = <T>(worker: Worker, type: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const onMessage = (m: { t: string; name?: string; message?: string }) => {
        if (m.t === type) {
          cleanup();
          resolve(m as T);
        } else if (m.t === 'error') {
          cleanup();
          const e = new Error(m.message);
          e.name = m.name ?? 'Error';
          reject(e);
        }
      };
      const onError = (e: Error) => {
        cleanup();
        reject(e);
      };
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
    });

  // the job's store failing (a rank aborted or left) ends every wait here at once, not at the join timeout
  const storeFailed = new Promise<never>((_, reject) => store.onFailure(reject));
  storeFailed.catch(() => undefined);
  let started: ReturnType<typeof start> | undefined;
  const untilStoreFails = <T>(p: Promise<T>): Promise<T> => Promise.race([p, storeFailed]);
  try {
    if (rank === 0) {
      started = start(0);
      const ready = next(started.worker, 'ready');
      ready.catch(() => undefined); // awaited below; a listen error arrives on `listening` first
      const { port } = await untilStoreFails(next<{ port: number }>(started.worker, 'listening'));
      await store.broadcast('the host communicator address', Buffer.from(JSON.stringify({ port })), joinTimeoutMs);
      await untilStoreFails(ready);
    } else {
      const address = await store.broadcast('the host communicator address', undefined, joinTimeoutMs);
      const { port } = JSON.parse(Buffer.from(address).toString('utf8')) as { port: number };
      started = start(port);
      await untilStoreFails(next(started.worker, 'ready'));
    }
  } catch (e) {
    void started?.worker.terminate();
    throw e;
  }
  const transport = new TcpTransport(
    started.worker,
    started.replies,
    started.signal,
    rank,
    size,
    device.kind === 'host' ? -1 : device.index,
    timeoutMs,
  );
  return new NativeCommunicator(transport, 'host', rank, size, false, device);
}
