/**
 * The TCP store: how the ranks of a job started by another launcher (torchrun, srun, mpirun) find
 * each other and exchange what they need. Rank 0 listens on MASTER_ADDR:MASTER_PORT, the others
 * connect (retrying until the join timeout) and say their rank; once every rank is in, rank 0 stops
 * listening. Every exchange goes through rank 0: each rank puts a body, rank 0 combines them in
 * rank order and sends the result to all (a barrier, a broadcast such as NCCL's unique id, a gather
 * of results, or the TCP communicator's collectives).
 *
 * Failures end the group on every rank with {@link CommAbortedError}: a rank whose connection
 * closes without saying goodbye (its process died) is reported by rank 0 to the others at once
 * ("rank 2 of 4 left the job (connection closed) during all-reduce"); rank 0's own connection
 * closing tells the others the same of rank 0; a rank's abort(reason) reaches all; an exchange that
 * waits past its timeout names the ranks that never came. Joining past the join timeout throws a
 * {@link RendezvousError} naming who never arrived.
 *
 * Trust: without a token there is no authentication, as in torchrun's c10d store. Any process that
 * reaches the port while the job is forming can join as a missing rank, and rank 0's bodies (NCCL's
 * unique id) go to it in clear. Run jobs on a private network. A shared token
 * (GPUMEM_RENDEZVOUS_TOKEN, the same on every rank) is checked first, in a connection's hello: a
 * guard against a stray job on the same port, not against someone who can read the traffic.
 * Whoever connects, rank 0 holds little for it until the job starts: a frame before then is
 * bounded by {@link maxGreetingBytes} (8 KiB) and checked before its bytes are kept, a connection
 * that sends more than its hello before the welcome is dropped (its place freed), at most
 * maxStrangers connections wait to be admitted at once (a new one past that drops the
 * oldest), and each must say hello within greetingMs (or the join timeout, when shorter).
 * Admitted ranks' frames are bounded by 4 GiB. A peer's words (an abort's reason, a refusal) are
 * shown with control characters escaped and cut to maxPeerTextChars characters.
 * @module
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, connect as netConnect, type Socket } from 'node:net';
import { escapeTerminal } from '@gpumem/allocator-core';
import { CommAbortedError } from './communicator.js';
import { encodeFrame, FrameReader, maxFrameBytes, maxGreetingBytes, type Frame } from './frames.js';

export interface TcpStoreOptions {
  rank: number;
  size: number;
  /** Where rank 0 listens: a host name or address of rank 0's host. */
  host: string;
  /** Rank 0's port; 0 on rank 0 picks a free one ({@link TcpStore.port} says which). */
  port: number;
  /** How long joining may take, on every rank (default 60,000 ms). */
  joinTimeoutMs?: number;
  /** Checked first when a rank joins: every rank must give the same, at most 1,024 bytes (default: none). */
  token?: string | undefined;
  /** What the store is for, in error messages (default 'the rendezvous'). */
  purpose?: string;
  /** Rank 0: called with the port once it listens, before the other ranks have joined. */
  onListening?: (port: number) => void;
}

/** The ranks could not form the job: a rank never arrived, rank 0 could not be reached or refused a rank. */
export class RendezvousError extends Error {
  override readonly name = 'RendezvousError';
  readonly code = 'GPUMEM_RENDEZVOUS';
}

/** {@link TcpStore.join}'s options, checked, with their defaults in place: what both sides of joining work from. */
type Join = Required<Pick<TcpStoreOptions, 'rank' | 'size' | 'host' | 'port' | 'joinTimeoutMs' | 'purpose'>> &
  Pick<TcpStoreOptions, 'token' | 'onListening'>;

const defaultJoinTimeoutMs = 60_000;
const retryMs = 200;
/** A rank waiting for rank 0's answer gives up this long after rank 0 would have (it names the missing ranks). */
const answerSlackMs = 2_000;
const empty = new Uint8Array(0);
/** Connections that have not said hello yet, at most, on rank 0 (a rank says it at once). */
const maxStrangers = 64;
/** How long a connection may stay silent before rank 0 drops it (a rank says hello at once). */
const greetingMs = 10_000;
/** A token's bound: its hello must fit in a greeting. */
const maxTokenBytes = 1024;
/** A peer's text (an abort's reason, a refusal) is cut to this many characters. */
const maxPeerTextChars = 2000;
/** Rank lists longer than this are cut, so that a refusal naming them fits in a greeting. */
const maxListedRanks = 16;

const seconds = (ms: number) => `${ms % 1000 === 0 ? ms / 1000 : (ms / 1000).toFixed(1)} s`;
const rankList = (ranks: number[]) =>
  `rank${ranks.length > 1 ? 's' : ''} ${ranks.slice(0, maxListedRanks).join(', ')}${ranks.length > maxListedRanks ? ` and ${ranks.length - maxListedRanks} more` : ''}`;

/** A peer's words, safe to show: control characters escaped, cut to maxPeerTextChars. */
function peerText(value: unknown): string {
  const text = String(value);
  return escapeTerminal(text.length > maxPeerTextChars ? `${text.slice(0, maxPeerTextChars)}...` : text);
}

function checkInteger(value: unknown, name: string, min: number, max: number): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const error = typeof value === 'number' ? RangeError : TypeError;
    throw new error(
      `Expected an integer in [${min}, ${max}] for ${name} but received ${String(value)}${typeof value === 'number' ? '' : ` of type ${typeof value}`}`,
    );
  }
}

/** An exchange in progress on rank 0: the bodies and labels put so far, by rank. */
interface Gathering {
  label?: string;
  bodies: (Uint8Array | undefined)[];
  labels: (string | undefined)[];
  arrived: number;
  combine?: (bodies: Uint8Array[]) => Uint8Array;
  resolve?: (reply: Uint8Array) => void;
  reject?: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

/** What joining leaves: the connections (rank 0: one per rank; others: rank 0's), their readers, and the frames already read. */
interface Joined {
  port: number;
  peers: (Socket | undefined)[];
  readers: FrameReader[];
  pending: Frame[][];
}

/** A rank's wait for rank 0's answer. */
interface Waiting {
  label: string;
  resolve: (reply: Uint8Array) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

export class TcpStore {
  readonly rank: number;
  readonly size: number;
  readonly host: string;
  /** The port rank 0 listens on (the one picked when 0 was asked for). */
  readonly port: number;
  /** Rank 0: every other rank's connection; others: [rank 0's]. */
  #peers: (Socket | undefined)[];
  /** Ranks that said goodbye: their connection closing is no failure. */
  #gone = new Set<number>();
  #seq = 0;
  #failure: CommAbortedError | undefined;
  #closed = false;
  #gatherings = new Map<number, Gathering>();
  #waiting = new Map<number, Waiting>();
  #failureListeners: ((e: CommAbortedError) => void)[] = [];

  private constructor(o: Pick<TcpStoreOptions, 'rank' | 'size' | 'host' | 'port'>, peers: (Socket | undefined)[]) {
    this.rank = o.rank;
    this.size = o.size;
    this.host = o.host;
    this.port = o.port;
    this.#peers = peers;
  }

  /** Joins the job as `rank`: rank 0 listens and waits for every other rank; the others connect to it. */
  static async join(options: TcpStoreOptions): Promise<TcpStore> {
    if (options === null || typeof options !== 'object') throw new TypeError('Expected an options object for TcpStore.join');
    const { rank, size, host, port, joinTimeoutMs = defaultJoinTimeoutMs, token, purpose = 'the rendezvous', onListening } = options;
    checkInteger(size, 'size', 1, 65536);
    checkInteger(rank, 'rank', 0, size - 1);
    checkInteger(port, 'port', rank === 0 ? 0 : 1, 65535);
    checkInteger(joinTimeoutMs, 'joinTimeoutMs', 1, 2 ** 31 - 1);
    if (typeof host !== 'string' || host === '')
      throw new TypeError(`Expected a host name or address for host but received ${String(host)}`);
    if (token !== undefined && typeof token !== 'string') throw new TypeError(`Expected a string for token but received ${typeof token}`);
    if (token !== undefined && Buffer.byteLength(token) > maxTokenBytes)
      throw new RangeError(`Expected a token of at most ${maxTokenBytes} bytes but received ${Buffer.byteLength(token)} bytes`);
    const join: Join = { rank, size, host, port, joinTimeoutMs, token, purpose, onListening };
    const joined = rank === 0 ? await serve(join) : await reach(join);
    const store = new TcpStore({ rank, size, host, port: joined.port }, joined.peers);
    store.#listen(joined);
    return store;
  }

  /** Hears the peers' messages (and those that came with the welcome). */
  #listen({ peers, readers, pending }: Joined): void {
    for (const [i, socket] of peers.entries()) {
      if (!socket) continue;
      const from = this.rank === 0 ? i : 0;
      const reader = readers[i]!;
      reader.limit = maxFrameBytes;
      socket.removeAllListeners('data');
      socket.removeAllListeners('close');
      socket.removeAllListeners('error');
      socket.on('data', (chunk: Buffer) => {
        let frames: Frame[];
        try {
          frames = reader.drain(chunk);
        } catch (e) {
          this.#fail(
            new CommAbortedError(
              `aborted: rank ${from} of ${this.size} sent something that is not a store message (${(e as Error).message})`,
            ),
          );
          socket.destroy();
          return;
        }
        for (const f of frames) this.#receive(from, f);
      });
      socket.on('error', () => undefined); // 'close' follows and says it
      socket.on('close', () => this.#peerClosed(from));
      for (const f of pending[i] ?? []) this.#receive(from, f);
    }
  }

  /**
   * Every rank puts `body`; rank 0 combines the bodies (in rank order) with its `combine` and every
   * rank resolves with the result. `label` names the exchange in errors and must be the same on
   * every rank. A wait past `timeoutMs` (0: none) stops the group naming the ranks that did not come.
   */
  exchange(label: string, body: Uint8Array, combine: (bodies: Uint8Array[]) => Uint8Array, timeoutMs = 0): Promise<Uint8Array> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closed) return Promise.reject(new CommAbortedError(`aborted: ${label} after this rank closed its store`));
    const seq = ++this.#seq;
    if (this.rank === 0) {
      return new Promise((resolve, reject) => {
        const g = this.#gathering(seq);
        g.label = label;
        g.combine = combine;
        g.resolve = resolve;
        g.reject = reject;
        g.bodies[0] = body;
        g.labels[0] = label;
        g.arrived++;
        if (timeoutMs > 0) {
          g.timer = setTimeout(() => {
            const missing = g.bodies.flatMap((b, r) => (b === undefined ? [r] : []));
            this.#fail(
              new CommAbortedError(`aborted: rank 0 waited ${seconds(timeoutMs)} in ${label} for ${rankList(missing)} of ${this.size}`),
            );
          }, timeoutMs);
        }
        this.#complete(seq);
      });
    }
    return new Promise((resolve, reject) => {
      const w: Waiting = { label, resolve, reject };
      if (timeoutMs > 0) {
        w.timer = setTimeout(() => {
          this.#fail(
            new CommAbortedError(
              `aborted: rank ${this.rank} of ${this.size} waited ${seconds(timeoutMs + answerSlackMs)} in ${label} for rank 0 at ${this.host}:${this.port} to answer`,
            ),
          );
        }, timeoutMs + answerSlackMs);
      }
      this.#waiting.set(seq, w);
      void this.#send(0, { t: 'put', seq, label }, body);
    });
  }

  /** Resolves once every rank has called it. */
  async barrier(label = 'a barrier', timeoutMs = 0): Promise<void> {
    await this.exchange(label, empty, () => empty, timeoutMs);
  }

  /** Rank 0's `body` on every rank (the others' `body` is ignored). */
  broadcast(label: string, body: Uint8Array | undefined, timeoutMs = 0): Promise<Uint8Array> {
    return this.exchange(label, this.rank === 0 ? (body ?? empty) : empty, (bodies) => bodies[0]!, timeoutMs);
  }

  /** Every rank's `body`, in rank order, on rank 0; undefined on the others (they resolve once rank 0 has all). */
  async gather(label: string, body: Uint8Array, timeoutMs = 0): Promise<Uint8Array[] | undefined> {
    let all: Uint8Array[] | undefined;
    await this.exchange(
      label,
      body,
      (bodies) => {
        all = bodies;
        return empty;
      },
      timeoutMs,
    );
    return all;
  }

  /**
   * Stops the group in this rank's name: every rank's exchange in progress or next one throws
   * CommAbortedError "aborted: rank R failed: <reason>".
   */
  async abort(reason: string): Promise<void> {
    if (this.#failure || this.#closed) return;
    const message = `aborted: rank ${this.rank} failed: ${reason}`;
    const sent = this.rank !== 0 ? this.#send(0, { t: 'abort', message }) : Promise.resolve();
    this.#fail(new CommAbortedError(message));
    await Promise.race([sent, this.#allClosed()]);
  }

  /** Resolves when every connection has closed, or after a second (a timer that keeps the process alive until then). */
  #allClosed(): Promise<void> {
    const open = this.#peers.filter((s): s is Socket => s !== undefined && !s.closed);
    return new Promise((resolve) => {
      let left = open.length;
      if (left === 0) return resolve();
      const timer = setTimeout(resolve, 1000);
      for (const s of open) {
        s.once('close', () => {
          if (--left === 0) {
            clearTimeout(timer);
            resolve();
          }
        });
      }
    });
  }

  /** Called once with the error that stops the group, whoever stopped it. */
  onFailure(listener: (e: CommAbortedError) => void): void {
    if (this.#failure) listener(this.#failure);
    else this.#failureListeners.push(listener);
  }

  /** The error that stopped the group, if it was stopped. */
  get failure(): CommAbortedError | undefined {
    return this.#failure;
  }

  /**
   * Says goodbye to the peers (so that closing is no failure) and closes the connections; resolves
   * once they are closed (at most a second). Idempotent.
   */
  close(): Promise<void> {
    if (this.#closed) return this.#allClosed();
    this.#closed = true;
    for (const [i, socket] of this.#peers.entries()) {
      if (!socket || socket.destroyed) continue;
      if (!this.#failure) socket.write(encodeFrame({ t: 'bye', rank: this.rank }));
      socket.end();
      this.#gone.add(this.rank === 0 ? i : 0);
    }
    const closed = new CommAbortedError(`aborted: rank ${this.rank} closed its store`);
    for (const w of this.#waiting.values()) {
      clearTimeout(w.timer);
      w.reject(closed);
    }
    this.#waiting.clear();
    for (const g of this.#gatherings.values()) clearTimeout(g.timer);
    return this.#allClosed();
  }

  #gathering(seq: number): Gathering {
    let g = this.#gatherings.get(seq);
    if (!g) {
      g = { bodies: new Array(this.size).fill(undefined), labels: new Array(this.size).fill(undefined), arrived: 0 };
      this.#gatherings.set(seq, g);
    }
    return g;
  }

  /** Resolves once the frame is handed to the kernel (or at once when the connection is gone). */
  #send(to: number, header: { t: string; [key: string]: unknown }, body?: Uint8Array): Promise<void> {
    const socket = this.#peers[to];
    if (!socket || socket.destroyed || socket.writableEnded) return Promise.resolve();
    return new Promise((resolve) => socket.write(encodeFrame(header, body), () => resolve()));
  }

  /** Rank 0: when every rank has put its body for `seq`, the combined result goes to all. */
  #complete(seq: number): void {
    const g = this.#gatherings.get(seq);
    if (!g || g.arrived < this.size || !g.resolve) return;
    this.#gatherings.delete(seq);
    clearTimeout(g.timer);
    const odd = g.labels.flatMap((l, r) => (l !== g.label ? [`rank ${r} in ${l}`] : []));
    if (odd.length > 0) {
      this.#fail(new CommAbortedError(`aborted: the ranks are in different exchanges: rank 0 in ${g.label}, ${odd.join(', ')}`));
      g.reject!(this.#failure!);
      return;
    }
    let reply: Uint8Array;
    try {
      reply = g.combine!(g.bodies as Uint8Array[]);
    } catch (e) {
      this.#fail(new CommAbortedError(`aborted: rank 0 could not combine ${g.label}: ${(e as Error).message}`));
      g.reject!(this.#failure!);
      return;
    }
    for (let r = 1; r < this.size; r++) void this.#send(r, { t: 'reply', seq }, reply);
    g.resolve(reply);
  }

  #receive(from: number, { header, body }: Frame): void {
    switch (header.t) {
      case 'put': {
        if (this.rank !== 0 || typeof header.seq !== 'number' || typeof header.label !== 'string') return;
        const g = this.#gathering(header.seq);
        if (g.bodies[from] === undefined) g.arrived++;
        g.bodies[from] = body;
        g.labels[from] = header.label;
        this.#complete(header.seq);
        return;
      }
      case 'reply': {
        const w = this.#waiting.get(header.seq as number);
        if (!w) return;
        this.#waiting.delete(header.seq as number);
        clearTimeout(w.timer);
        w.resolve(body);
        return;
      }
      case 'abort':
        this.#fail(new CommAbortedError(typeof header.message === 'string' ? peerText(header.message) : `aborted by rank ${from}`));
        return;
      case 'bye':
        this.#gone.add(from);
        return;
      default:
        return;
    }
  }

  #peerClosed(from: number): void {
    if (this.#closed || this.#failure) return;
    if (this.#gone.has(from)) {
      // rank 0 is gone for good: what still waits for it cannot end
      if (this.rank !== 0 && this.#waiting.size > 0)
        this.#fail(new CommAbortedError(`aborted: rank 0 of ${this.size} closed its store${this.#during()}`));
      return;
    }
    this.#fail(new CommAbortedError(`aborted: rank ${from} of ${this.size} left the job (connection closed)${this.#during()}`));
  }

  /** " during <label>" of the oldest exchange this rank is in, or nothing. */
  #during(): string {
    const labels =
      this.rank === 0
        ? [...this.#gatherings.values()].map((g) => g.label ?? g.labels.find((l) => l))
        : [...this.#waiting.values()].map((w) => w.label);
    const label = labels.find((l) => l !== undefined);
    return label ? ` during ${label}` : '';
  }

  /** Stops the group with `e`: every wait rejects, rank 0 tells the others, the connections close. */
  #fail(e: CommAbortedError): void {
    if (this.#failure) return;
    this.#failure = e;
    if (this.rank === 0) for (let r = 1; r < this.size; r++) if (!this.#gone.has(r)) void this.#send(r, { t: 'abort', message: e.message });
    for (const w of this.#waiting.values()) {
      clearTimeout(w.timer);
      w.reject(e);
    }
    this.#waiting.clear();
    for (const g of this.#gatherings.values()) {
      clearTimeout(g.timer);
      g.reject?.(e);
    }
    this.#gatherings.clear();
    for (const socket of this.#peers) {
      socket?.end();
      socket?.unref();
    }
    for (const listener of this.#failureListeners.splice(0)) listener(e);
  }
}

function tokenMatches(expected: string | undefined, given: unknown): boolean {
  if (expected === undefined) return given === undefined || given === null;
  if (typeof given !== 'string') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.byteLength === b.byteLength && timingSafeEqual(a, b);
}

/** Rank 0's side of joining: listen, admit each rank once, and start the job when all are in. */
function serve({ size, host, port, joinTimeoutMs, token, purpose, onListening }: Join): Promise<Joined> {
  return new Promise((resolve, reject) => {
    const peers = new Array<Socket | undefined>(size).fill(undefined);
    const readers = new Array<FrameReader>(size);
    const pending: Frame[][] = Array.from({ length: size }, () => []);
    /** Connections not admitted yet, oldest first, each with the timer that drops it if it stays silent. */
    const strangers = new Map<Socket, NodeJS.Timeout>();
    const forget = (socket: Socket) => {
      clearTimeout(strangers.get(socket));
      strangers.delete(socket);
    };
    const dropStranger = (socket: Socket) => {
      forget(socket);
      socket.destroy();
    };
    let joined = 1;
    let done = false;
    const server = createServer({ noDelay: true });
    const where = () => `${host}:${(server.address() as { port: number } | null)?.port ?? port}`;
    const finish = (e?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      server.close();
      for (const s of [...strangers.keys()]) dropStranger(s);
      if (e) {
        for (const s of peers) if (s) s.end(encodeFrame({ t: 'refuse', reason: e.message }));
        reject(e);
        return;
      }
      const actualPort = (server.address() as { port: number } | null)?.port ?? port;
      for (const s of peers) s?.write(encodeFrame({ t: 'welcome' }));
      resolve({ port: actualPort, peers, readers, pending });
    };
    const timer = setTimeout(() => {
      const missing = peers.flatMap((s, r) => (r > 0 && !s ? [r] : []));
      finish(new RendezvousError(`rank 0 waited ${seconds(joinTimeoutMs)} for ${rankList(missing)} of ${size} at ${where()} (${purpose})`));
    }, joinTimeoutMs);
    server.on('error', (e: NodeJS.ErrnoException) => {
      const hint =
        e.code === 'EADDRINUSE'
          ? ': the port is taken; choose another MASTER_PORT (or GPUMEM_MASTER_PORT)'
          : e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND'
            ? `: it is not an address of this host; MASTER_ADDR (or GPUMEM_MASTER_ADDR) must name the host of rank 0`
            : '';
      finish(new RendezvousError(`rank 0 cannot listen on ${host}:${port} for ${purpose} (${e.code ?? e.message})${hint}`));
    });
    server.on('connection', (socket) => {
      if (done) return void socket.destroy();
      // past the cap, the oldest stranger goes: a rank says hello at once, so it is never the oldest for long
      if (strangers.size >= maxStrangers) dropStranger(strangers.keys().next().value!);
      const reader = new FrameReader(maxGreetingBytes);
      // a connection that says nothing (or not enough) is dropped: no wait of the job hangs on it
      const silent = setTimeout(() => dropStranger(socket), Math.min(greetingMs, joinTimeoutMs));
      silent.unref();
      strangers.set(socket, silent);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 10_000);
      let refused = false;
      const refuse = (reason: string) => {
        refused = true;
        socket.pause();
        forget(socket);
        socket.end(encodeFrame({ t: 'refuse', reason }));
        setTimeout(() => socket.destroy(), 1000).unref();
      };
      socket.on('error', () => undefined);
      socket.on('close', () => {
        forget(socket);
        const r = peers.indexOf(socket);
        if (r > 0 && !done) {
          // a rank that joined and left before the job started: its place is free again
          peers[r] = undefined;
          joined--;
        }
      });
      socket.on('data', (chunk: Buffer) => {
        if (refused) return;
        const r = peers.indexOf(socket);
        try {
          if (r > 0) {
            // a rank says nothing between its hello and the welcome: whatever does is no rank, and its place is free again
            if (!done) return void socket.destroy();
            reader.limit = maxFrameBytes; // welcomed: its frames are the job's
            pending[r]!.push(...reader.drain(chunk));
            return;
          }
          reader.push(chunk);
          const hello = reader.next();
          if (!hello) return;
          const h = hello.header;
          if (h.t !== 'hello') return refuse('expected a hello from a rank');
          // with a token, nothing else of the hello is looked at before it matches
          if (token !== undefined && !tokenMatches(token, h.token)) return refuse(`a rank's GPUMEM_RENDEZVOUS_TOKEN differs from rank 0's`);
          if (typeof h.rank !== 'number' || typeof h.size !== 'number') return refuse('expected a hello from a rank');
          if (h.size !== size) return refuse(`rank ${h.rank} says the job has ${h.size} ranks, rank 0 says ${size}`);
          if (!Number.isSafeInteger(h.rank) || h.rank < 1 || h.rank >= size)
            return refuse(`rank ${h.rank} is not a rank from 1 to ${size - 1}`);
          if (!tokenMatches(token, h.token)) return refuse(`rank ${h.rank} gave a GPUMEM_RENDEZVOUS_TOKEN, rank 0 has none`);
          if (peers[h.rank]) return refuse(`rank ${h.rank} has joined already (two processes with the same rank?)`);
          // more than the hello in its first bytes: no rank sends that
          if (reader.next()) return void socket.destroy();
          forget(socket);
          peers[h.rank] = socket;
          readers[h.rank] = reader; // still bounded by the greeting's size until the job starts (#listen)
          if (++joined === size) finish();
        } catch {
          // not a store message, or past its bound: nothing more of it is kept
          socket.destroy();
        }
      });
    });
    server.listen({ host, port }, () => {
      onListening?.((server.address() as { port: number }).port);
      if (size === 1) finish();
    });
  });
}

/** A rank's side of joining: connect to rank 0 (retrying while it is not there yet), say who it is, wait for the start. */
function reach({ rank, size, host, port, joinTimeoutMs, token, purpose }: Join): Promise<Joined> {
  const deadline = performance.now() + joinTimeoutMs;
  const where = `${host}:${port}`;
  return new Promise((resolve, reject) => {
    let last = '';
    const attempt = () => {
      if (performance.now() >= deadline) {
        reject(
          new RendezvousError(
            `rank ${rank} of ${size} could not reach rank 0 at ${where} within ${seconds(joinTimeoutMs)} (${purpose}; last: ${last})`,
          ),
        );
        return;
      }
      const socket = netConnect({ host, port, noDelay: true });
      // until rank 0 welcomes it, what answers on the port is a stranger too
      const reader = new FrameReader(maxGreetingBytes);
      const pending: Frame[] = [];
      let connected = false;
      let settled = false;
      // Once connected, a rank waits a little longer than rank 0 does, so that rank 0, which knows who is missing, says it first.
      const timer = setTimeout(
        () => {
          settled = true;
          socket.destroy();
          reject(
            new RendezvousError(
              connected
                ? `rank ${rank} of ${size} reached rank 0 at ${where}, but the job did not start within ${seconds(joinTimeoutMs)} (${purpose})`
                : `rank ${rank} of ${size} could not reach rank 0 at ${where} within ${seconds(joinTimeoutMs)} (${purpose}; last: connection attempt timed out)`,
            ),
          );
        },
        Math.max(1, deadline + answerSlackMs - performance.now()),
      );
      socket.on('connect', () => {
        connected = true;
        socket.setKeepAlive(true, 10_000);
        socket.write(encodeFrame({ t: 'hello', rank, size, ...(token !== undefined ? { token } : {}) }));
      });
      socket.on('data', (chunk: Buffer) => {
        if (settled) return;
        try {
          reader.push(chunk);
          for (let f = reader.next(); f; f = reader.next()) {
            if (f.header.t === 'refuse') {
              settled = true;
              clearTimeout(timer);
              socket.destroy();
              reject(new RendezvousError(`rank 0 at ${where} refused rank ${rank}: ${peerText(f.header.reason)}`));
              return;
            }
            if (f.header.t === 'welcome') {
              settled = true;
              clearTimeout(timer);
              // rank 0 is who it says: what follows the welcome is the job's (a broadcast may be large)
              reader.limit = maxFrameBytes;
              for (let g = reader.next(); g; g = reader.next()) pending.push(g);
              resolve({ port, peers: [socket], readers: [reader], pending: [pending] });
              return;
            }
          }
        } catch (e) {
          settled = true;
          clearTimeout(timer);
          socket.destroy();
          reject(
            new RendezvousError(`rank ${rank} of ${size}: ${where} does not answer as rank 0 of a gpumem job (${(e as Error).message})`),
          );
        }
      });
      socket.on('error', (e: NodeJS.ErrnoException) => {
        last = `${e.code ?? e.message}`;
      });
      socket.on('close', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (connected) {
          reject(
            new RendezvousError(`rank 0 at ${where} closed the connection before the job started (rank ${rank} of ${size}, ${purpose})`),
          );
          return;
        }
        setTimeout(attempt, retryMs); // rank 0 is not listening yet
      });
    };
    attempt();
  });
}
