/**
 * The TCP store (./tcp-store), its ranks in this process on 127.0.0.1: joining with rank 0 started
 * last, barriers, broadcasts and gathers in rank order, NCCL's unique id going from rank 0 to all;
 * and its failures, each with the message that says who: a rank that never arrives, a rank refused
 * (token, duplicate), rank 0 out of reach, an abort, an exchange past its timeout. (A rank whose
 * process dies: tcp-communicator.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { freePort } from './free-port.testing.js';
import { CommAbortedError } from './communicator.js';
import { exchangeNcclId } from './job.js';
import { RendezvousError, TcpStore, type TcpStoreOptions } from './tcp-store.js';

/** Every rank of a job of `size` joined (rank 0 last, so the others retry until it listens). */
async function group(size: number, extra: Partial<TcpStoreOptions> = {}): Promise<TcpStore[]> {
  const port = await freePort();
  const others = Array.from({ length: size - 1 }, (_, i) =>
    TcpStore.join({ rank: i + 1, size, host: '127.0.0.1', port, joinTimeoutMs: 10_000, ...extra }),
  );
  await new Promise((r) => setTimeout(r, 300));
  const zero = TcpStore.join({ rank: 0, size, host: '127.0.0.1', port, joinTimeoutMs: 10_000, ...extra });
  return Promise.all([zero, ...others]);
}

const text = (s: string) => new Uint8Array(Buffer.from(s));
const closeAll = (stores: TcpStore[]) => Promise.all(stores.map((s) => s.close()));

describe('TcpStore', () => {
  it('joins 4 ranks, and barriers, broadcasts and gathers reach every rank in rank order', async () => {
    const stores = await group(4);
    expect(stores.map((s) => [s.rank, s.size])).toEqual([0, 1, 2, 3].map((r) => [r, 4]));
    await Promise.all(stores.map((s) => s.barrier()));
    const got = await Promise.all(stores.map((s) => s.broadcast('greeting', s.rank === 0 ? text('hello from 0') : text('ignored'))));
    for (const g of got) expect(Buffer.from(g).toString()).toBe('hello from 0');
    const gathered = await Promise.all(stores.map((s) => s.gather('results', text(`r${s.rank}`))));
    expect(gathered[0]!.map((b) => Buffer.from(b).toString())).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(gathered.slice(1)).toEqual([undefined, undefined, undefined]);
    // a large body (8 MiB) crosses in many chunks
    const big = new Uint8Array(8 << 20).map((_, i) => i % 251);
    const echoed = await Promise.all(stores.map((s) => s.broadcast('big', big)));
    for (const e of echoed) expect(Buffer.compare(Buffer.from(e), Buffer.from(big))).toBe(0);
    await closeAll(stores);
  });

  it("exchanges NCCL's unique id: made on rank 0 only, the same 128 bytes on every rank", async () => {
    const stores = await group(3);
    const id = new Uint8Array(128).map((_, i) => (i * 7 + 3) % 256);
    const made: number[] = [];
    const ids = await Promise.all(
      stores.map((s) =>
        exchangeNcclId(s, () => {
          made.push(s.rank);
          return id;
        }),
      ),
    );
    expect(made).toEqual([0]);
    for (const got of ids) expect([...got]).toEqual([...id]);
    await expect(exchangeNcclId(stores[0]!, () => new Uint8Array(12))).rejects.toThrow(/128-byte unique id but received 12 bytes/);
    await closeAll(stores);
  });

  it('rank 0 names the ranks that never arrived; a waiting rank says rank 0 gave up', async () => {
    const port = await freePort();
    const o = { size: 4, host: '127.0.0.1', port, joinTimeoutMs: 800 };
    const results = await Promise.allSettled([TcpStore.join({ ...o, rank: 0 }), TcpStore.join({ ...o, rank: 1, joinTimeoutMs: 5000 })]);
    const [zero, one] = results.map((r) => (r.status === 'rejected' ? (r.reason as Error) : undefined));
    expect(zero).toBeInstanceOf(RendezvousError);
    expect(zero!.message).toBe(`rank 0 waited 0.8 s for ranks 2, 3 of 4 at 127.0.0.1:${port} (the rendezvous)`);
    expect(one!.message).toMatch(
      new RegExp(`^rank 0 at 127\\.0\\.0\\.1:${port} refused rank 1: rank 0 waited 0\\.8 s for ranks 2, 3 of 4`),
    );
  });

  it('a rank that cannot reach rank 0 gives up after its join timeout, saying where it looked', async () => {
    const port = await freePort();
    const e = await TcpStore.join({ rank: 2, size: 3, host: '127.0.0.1', port, joinTimeoutMs: 700 }).catch((x: unknown) => x as Error);
    expect(e).toBeInstanceOf(RendezvousError);
    expect((e as Error).message).toBe(
      `rank 2 of 3 could not reach rank 0 at 127.0.0.1:${port} within 0.7 s (the rendezvous; last: ECONNREFUSED)`,
    );
  });

  it('refuses a rank with another token, and a second process with the same rank', async () => {
    const port = await freePort();
    const o = { size: 3, host: '127.0.0.1', port, joinTimeoutMs: 3000 };
    const zero = TcpStore.join({ ...o, rank: 0, token: 'secret' });
    await new Promise((r) => setTimeout(r, 100));
    const stranger = await TcpStore.join({ ...o, rank: 1, token: 'guess' }).catch((x: unknown) => x as Error);
    expect((stranger as Error).message).toBe(
      `rank 0 at 127.0.0.1:${port} refused rank 1: a rank's GPUMEM_RENDEZVOUS_TOKEN differs from rank 0's`,
    );
    const one = TcpStore.join({ ...o, rank: 1, token: 'secret' });
    await new Promise((r) => setTimeout(r, 200));
    const twin = await TcpStore.join({ ...o, rank: 1, token: 'secret' }).catch((x: unknown) => x as Error);
    expect((twin as Error).message).toMatch(/refused rank 1: rank 1 has joined already/);
    const stores = await Promise.all([zero, one, TcpStore.join({ ...o, rank: 2, token: 'secret' })]);
    await closeAll(stores);
  });

  it("a rank's abort stops the others' exchanges with its reason, and every later one", async () => {
    const stores = await group(3);
    const waiting = [stores[0]!.barrier('the last barrier'), stores[1]!.barrier('the last barrier')];
    await stores[2]!.abort('loss became NaN');
    const errors = await Promise.all(
      waiting.map((p) =>
        p.then(
          () => new Error('resolved'),
          (e: unknown) => e as Error,
        ),
      ),
    );
    for (const e of errors) {
      expect(e).toBeInstanceOf(CommAbortedError);
      expect(e.message).toBe('aborted: rank 2 failed: loss became NaN');
    }
    await expect(stores[1]!.broadcast('after', undefined)).rejects.toThrow('aborted: rank 2 failed: loss became NaN');
    await closeAll(stores);
  });

  it('an exchange waiting past its timeout names the ranks that did not come, on every rank', async () => {
    const stores = await group(3);
    const waiting = [stores[0]!.barrier('a slow barrier', 500), stores[1]!.barrier('a slow barrier', 500)];
    const errors = await Promise.all(
      waiting.map((p) =>
        p.then(
          () => new Error('resolved'),
          (e: unknown) => e as Error,
        ),
      ),
    );
    for (const e of errors) expect(e.message).toBe('aborted: rank 0 waited 0.5 s in a slow barrier for rank 2 of 3');
    await expect(stores[2]!.barrier('a slow barrier')).rejects.toThrow('aborted: rank 0 waited 0.5 s in a slow barrier for rank 2 of 3');
    await closeAll(stores);
  });

  it('checks its arguments', async () => {
    await expect(TcpStore.join({ rank: 3, size: 3, host: '127.0.0.1', port: 1 })).rejects.toThrow(RangeError);
    await expect(TcpStore.join({ rank: 1, size: 3, host: '127.0.0.1', port: 0 })).rejects.toThrow(/for port/);
    await expect(TcpStore.join({ rank: 0, size: 2, host: '', port: 0 })).rejects.toThrow(TypeError);
  });
});
