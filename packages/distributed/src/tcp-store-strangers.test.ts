/**
 * What a process that is not a rank can do to the TCP store (./tcp-store), and what a rank's setup
 * does when the job fails under it: a stranger's frame past the greeting bound is cut off before
 * its bytes are kept (with a token set, the token is checked before anything else), strangers past
 * the cap drop the oldest, a silent process that took a rank's place is named by the setup's
 * timeout, a peer's words reach the terminal escaped, and a store abort during the host
 * communicator's setup ends rank 0's wait at once; the setup's waits take the collectives'
 * timeout where it is shorter than the join timeout.
 */
import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { CommAbortedError } from './communicator.js';
import { encodeFrame, FrameReader, maxGreetingBytes } from './frames.js';
import { freePort } from './free-port.testing.js';
import { exchangeNcclId, joinJob } from './job.js';
import { connectTcpCommunicator } from './tcp-communicator.js';
import { RendezvousError, TcpStore } from './tcp-store.js';

/** A raw connection to 127.0.0.1:port, once connected. */
function rawClient(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.on('error', reject);
  });
}

const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));

/** Rank 0 of a job of `size`, listening; resolves with its port once it listens, and the join in progress. */
async function rankZero(size: number, extra: { token?: string; joinTimeoutMs?: number } = {}) {
  let listening!: (port: number) => void;
  const port = new Promise<number>((resolve) => (listening = resolve));
  const joining = TcpStore.join({ rank: 0, size, host: '127.0.0.1', port: 0, joinTimeoutMs: 20_000, onListening: listening, ...extra });
  joining.catch(() => undefined);
  return { port: await port, joining };
}

describe('TcpStore and strangers', () => {
  it("cuts off a stranger's 4 GiB length prefix before keeping what follows, and the job still forms (token set)", async () => {
    const { port, joining } = await rankZero(2, { token: 'secret' });
    const stranger = await rawClient(port);
    stranger.on('error', () => undefined);
    const head = Buffer.alloc(8);
    head.writeUInt32LE(0xffff_fff0, 0);
    head.writeUInt32LE(16, 4);
    stranger.write(head);
    // rank 0 closes the connection on the prefix alone: the body it announces is never asked for
    await closed(stranger);
    expect(stranger.destroyed).toBe(true);
    const one = await TcpStore.join({ rank: 1, size: 2, host: '127.0.0.1', port, joinTimeoutMs: 5000, token: 'secret' });
    const zero = await joining;
    await Promise.all([zero.barrier(), one.barrier()]);
    await Promise.all([zero.close(), one.close()]);
  });

  it('checks the token first: a hello with another token learns nothing of the job', async () => {
    const { port, joining } = await rankZero(2, { token: 'secret' });
    const stranger = await rawClient(port);
    const reader = new FrameReader();
    const answer = new Promise<Record<string, unknown>>((resolve) =>
      stranger.on('data', (chunk: Buffer) => {
        const frame = reader.drain(chunk)[0];
        if (frame) resolve(frame.header);
      }),
    );
    stranger.write(encodeFrame({ t: 'hello', rank: 7, size: 99, token: 'guess' }));
    expect(await answer).toEqual({ t: 'refuse', reason: "a rank's GPUMEM_RENDEZVOUS_TOKEN differs from rank 0's" });
    stranger.destroy();
    const one = await TcpStore.join({ rank: 1, size: 2, host: '127.0.0.1', port, token: 'secret' });
    await Promise.all([(await joining).close(), one.close()]);
  });

  it('drops a process that says hello as a missing rank and then keeps talking before the job starts; the rank it claimed can join', async () => {
    const { port, joining } = await rankZero(3);
    const chatty = await rawClient(port);
    chatty.on('error', () => undefined);
    chatty.write(encodeFrame({ t: 'hello', rank: 1, size: 3 }));
    await new Promise((r) => setTimeout(r, 100));
    // a rank sends nothing between its hello and the welcome: these would pile up on rank 0
    for (let i = 0; i < 100; i++) chatty.write(encodeFrame({ t: 'put', seq: i, label: 'flood' }, new Uint8Array(4096)));
    await closed(chatty);
    const o = { size: 3, host: '127.0.0.1', port, joinTimeoutMs: 5000 };
    const ranks = await Promise.all([joining, TcpStore.join({ ...o, rank: 1 }), TcpStore.join({ ...o, rank: 2 })]);
    await Promise.all(ranks.map((r) => r.barrier()));
    await Promise.all(ranks.map((r) => r.close()));
  });

  it('keeps at most 64 connections waiting to say hello: past that the oldest goes, and a rank still joins', async () => {
    const { port, joining } = await rankZero(2);
    const silent: Socket[] = [];
    for (let i = 0; i < 80; i++) {
      const s = await rawClient(port);
      s.on('error', () => undefined);
      silent.push(s);
    }
    // the 16 oldest were dropped to make room for the newest
    await Promise.all(silent.slice(0, 16).map(closed));
    expect(silent.slice(0, 16).every((s) => s.destroyed)).toBe(true);
    expect(silent.slice(16).filter((s) => s.destroyed)).toEqual([]);
    const one = await TcpStore.join({ rank: 1, size: 2, host: '127.0.0.1', port, joinTimeoutMs: 5000 });
    const zero = await joining;
    // once the job has formed, rank 0 lets go of every stranger
    await Promise.all(silent.map(closed));
    await Promise.all([zero.close(), one.close()]);
  });

  it("names a silent process that took a rank's place when NCCL's id is sent within the setup's timeout", async () => {
    const { port, joining } = await rankZero(2);
    const impostor = await rawClient(port);
    impostor.on('error', () => undefined);
    impostor.write(encodeFrame({ t: 'hello', rank: 1, size: 2 }));
    const zero = await joining;
    const e = await exchangeNcclId(zero, () => new Uint8Array(128), 500).catch((x: unknown) => x as Error);
    expect(e).toBeInstanceOf(CommAbortedError);
    expect((e as Error).message).toBe("aborted: rank 0 waited 0.5 s in NCCL's unique id for rank 1 of 2");
    impostor.destroy();
    await zero.close();
  });

  it("refuses a bound-breaking answer from whatever listens on rank 0's port, and escapes a refusal's words", async () => {
    const replies: Buffer[] = [];
    const server = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.write(replies.shift()!);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const huge = Buffer.alloc(8);
    huge.writeUInt32LE(maxGreetingBytes + 1, 0);
    huge.writeUInt32LE(4, 4);
    replies.push(huge, encodeFrame({ t: 'refuse', reason: 'go away\u001b]52;c;ZWNobyBoaQ==\u0007\u001b[2J\u202e' }));
    const o = { rank: 1, size: 2, host: '127.0.0.1', port, joinTimeoutMs: 3000 };
    const first = await TcpStore.join(o).catch((x: unknown) => x as Error);
    expect(first).toBeInstanceOf(RendezvousError);
    expect((first as Error).message).toBe(
      `rank 1 of 2: 127.0.0.1:${port} does not answer as rank 0 of a gpumem job (a message of 8193 bytes, past the bound of 8192 bytes)`,
    );
    const second = await TcpStore.join(o).catch((x: unknown) => x as Error);
    expect((second as Error).message).toBe(
      `rank 0 at 127.0.0.1:${port} refused rank 1: go away\\x1b]52;c;ZWNobyBoaQ==\\x07\\x1b[2J\\u202e`,
    );
    server.close();
  });

  it("escapes a peer's abort text before it becomes this rank's error", async () => {
    const { port, joining } = await rankZero(2);
    const one = await TcpStore.join({ rank: 1, size: 2, host: '127.0.0.1', port });
    const zero = await joining;
    const waiting = zero.barrier('the barrier');
    await one.abort('\u001b[2Jcleared\u009b');
    const e = await waiting.catch((x: unknown) => x as Error);
    expect((e as Error).message).toBe('aborted: rank 1 failed: \\x1b[2Jcleared\\x9b');
    await Promise.all([zero.close(), one.close()]);
  });

  it("a job's setup waits no longer than the collectives' timeout when that is shorter than the join timeout", async () => {
    const port = await freePort();
    const rendezvous = { rank: 0, size: 2, localRank: 0, masterAddr: '127.0.0.1', masterPort: port, source: 'torchrun' as const };
    const e = await joinJob(rendezvous, { backend: 'host', timeoutMs: 700 }).catch((x: unknown) => x as Error);
    expect(e).toBeInstanceOf(RendezvousError);
    expect((e as Error).message).toBe(`rank 0 waited 0.7 s for rank 1 of 2 at 127.0.0.1:${port} (the rendezvous)`);
  });

  it("ends rank 0's host communicator setup at once when a rank aborts the job's store", async () => {
    const { port, joining } = await rankZero(2, { joinTimeoutMs: 600_000 });
    const one = await TcpStore.join({ rank: 1, size: 2, host: '127.0.0.1', port });
    const zero = await joining;
    // rank 1 hears where rank 0's communicator thread listens, then fails instead of connecting to it:
    // rank 0 would wait for that connection up to its 10-minute join timeout
    const setup = connectTcpCommunicator(zero, { joinTimeoutMs: 600_000 });
    await one.broadcast('the host communicator address', undefined);
    await one.abort('out of memory while loading the model');
    const e = await setup.catch((x: unknown) => x as Error);
    expect(e).toBeInstanceOf(CommAbortedError);
    expect((e as Error).message).toBe('aborted: rank 1 failed: out of memory while loading the model');
    await Promise.all([zero.close(), one.close()]);
  });
});
