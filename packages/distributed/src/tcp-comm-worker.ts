/**
 * The TCP communicator's thread: it holds the group's connections (a {@link TcpStore} of its own,
 * rank 0 listening on a free port) and runs the exchanges the rank's thread asks for, while that
 * thread waits (see tcp-communicator.ts). Sums are taken on rank 0 in rank order, in f32, so every
 * rank gets the same bits, as from the shared-memory host communicator. Each answer goes back on
 * the reply port, then the signal word is set to 1 and notified.
 * @module
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { TcpStore } from './tcp-store.js';

/** What the rank's thread gives the worker when it starts it. */
export interface TcpCommWorkerData {
  rank: number;
  size: number;
  host: string;
  /** Rank 0's port; 0 on rank 0 (a free one, posted back as `{ t: 'listening', port }`). */
  port: number;
  joinTimeoutMs: number;
  token: string | undefined;
  /** Int32Array over it: [0] is set to 1 and notified when an answer is on `replies`. */
  signal: SharedArrayBuffer;
  replies: MessagePort;
}

/** The rank's thread asks for a collective (its f32 bytes), an abort, or the end. */
export type TcpCommRequest =
  | { t: 'allReduce' | 'allGather'; count: number; body: Uint8Array; timeoutMs: number }
  | { t: 'broadcast'; count: number; root: number; body: Uint8Array; timeoutMs: number }
  | { t: 'abort'; reason: string }
  | { t: 'close' };

/** The answer: the collective's result bytes, or the error that stopped it. */
export type TcpCommReply = { ok: true; body: Uint8Array } | { ok: false; name: string; message: string };

/** The words the messages use for the collectives. */
const words = { allReduce: 'all-reduce', allGather: 'all-gather', broadcast: 'broadcast' } as const;

/** `bytes` as f32, copied where they do not start on a 4-byte boundary. */
function f32(bytes: Uint8Array): Float32Array {
  const aligned = bytes.byteOffset % 4 === 0 ? bytes : new Uint8Array(bytes); // a copy (Buffer's slice() is a view)
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
}

function sumInRankOrder(bodies: Uint8Array[]): Uint8Array {
  const out = f32(bodies[0]!).slice();
  for (let r = 1; r < bodies.length; r++) {
    const v = f32(bodies[r]!);
    if (v.length !== out.length) throw new RangeError(`rank ${r} sent ${v.length} elements, rank 0 ${out.length}`);
    for (let i = 0; i < out.length; i++) out[i]! += v[i]!;
  }
  return new Uint8Array(out.buffer);
}

function concatenate(bodies: Uint8Array[]): Uint8Array {
  return Buffer.concat(bodies);
}

const data = workerData as TcpCommWorkerData;
const signal = new Int32Array(data.signal);
const port = parentPort!;

function answer(reply: TcpCommReply): void {
  data.replies.postMessage(reply, reply.ok ? [reply.body.buffer as ArrayBuffer] : []);
  Atomics.store(signal, 0, 1);
  Atomics.notify(signal, 0);
}

function failed(e: unknown): TcpCommReply {
  const err = e instanceof Error ? e : new Error(String(e));
  return { ok: false, name: err.name, message: err.message };
}

/** The result as bytes of a buffer of their own (transferred to the rank's thread). */
const own = (bytes: Uint8Array) => (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : new Uint8Array(bytes));

let store: TcpStore | undefined;
try {
  store = await TcpStore.join({
    rank: data.rank,
    size: data.size,
    host: data.host,
    port: data.port,
    joinTimeoutMs: data.joinTimeoutMs,
    token: data.token,
    purpose: 'the host communicator',
    onListening: (listening) => port.postMessage({ t: 'listening', port: listening }),
  });
  port.postMessage({ t: 'ready' });
} catch (e) {
  port.postMessage({ t: 'error', ...failed(e) });
}

if (store) {
  const group = store;
  port.on('message', (request: TcpCommRequest) => {
    if (request.t === 'close') {
      void group.close().then(() => {
        answer({ ok: true, body: new Uint8Array(0) });
        port.close();
      });
      return;
    }
    if (request.t === 'abort') {
      void group.abort(request.reason).then(() => answer({ ok: true, body: new Uint8Array(0) }));
      return;
    }
    const label = `${words[request.t]} of ${request.count} elements${request.t === 'broadcast' ? ` from rank ${request.root}` : ''}`;
    const combine =
      request.t === 'broadcast'
        ? (bodies: Uint8Array[]) => bodies[request.root]!
        : request.t === 'allReduce'
          ? sumInRankOrder
          : concatenate;
    group.exchange(label, request.body, combine, request.timeoutMs).then(
      (result) => answer({ ok: true, body: own(result) }),
      (e: unknown) => answer(failed(e)),
    );
  });
}
