/**
 * The host communicator over TCP (./tcp-communicator) between real processes on 127.0.0.1, each
 * started as torchrun starts one (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and
 * joining with joinJob (fixtures/tcp-rank.mjs, on the built package): allReduce gives the f32 sum
 * in rank order on every rank, bit for bit, allGather and broadcast what they should; a rank killed
 * mid-run (SIGKILL: no goodbye) stops every other rank with "rank R of N left the job (connection
 * closed)", rank 0 included (they have no collective timeout: a rank that missed it would hang); a rank that never arrives makes
 * rank 0 name it after the join timeout, and the others say rank 0 gave up.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from './free-port.testing.js';
import { addonCandidates } from '@gpumem/allocator-core';
import { rankValues } from './fixtures/rank-values.mjs';
import { testTime } from '../../../tests/time-budget.js';

const rankScript = fileURLToPath(new URL('./fixtures/tcp-rank.mjs', import.meta.url));
const addon = addonCandidates().find((p) => existsSync(p));
const built = existsSync(fileURLToPath(new URL('../dist/tcp-comm-worker.js', import.meta.url)));
const needsBuild = built ? '' : 'packages/distributed is not built (npm run build): the ranks import the built package';

interface Rank {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  /** Resolves with the exit code and what the rank wrote on stderr. */
  exit: Promise<{ code: number | null; stderr: string }>;
}

/** Starts rank `rank` of `size` as torchrun would, with `job` for the fixture. */
function startRank(rank: number, size: number, port: number, job: Record<string, unknown>): Rank {
  const child = spawn(process.execPath, [rankScript, JSON.stringify(job)], {
    env: {
      ...process.env,
      ...(addon ? { GPUMEM_ADDON: addon } : {}),
      RANK: String(rank),
      WORLD_SIZE: String(size),
      LOCAL_RANK: String(rank),
      LOCAL_WORLD_SIZE: String(size),
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(port),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let out = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    const parts = out.split('\n');
    out = parts.pop()!;
    for (const p of parts) if (p.trim()) lines.push(JSON.parse(p) as Record<string, unknown>);
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
  return { child, lines, exit };
}

const decode = (b64: unknown) => {
  const bytes = Buffer.from(b64 as string, 'base64');
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
};
const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('hex');

async function until(check: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!check()) {
    if (performance.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const errorOf = (r: Rank) => (r.lines.find((l) => 'error' in l)?.error as { name: string; message: string } | undefined) ?? undefined;

describe.skipIf(needsBuild)(`host communicator over TCP between processes${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  it(
    'allReduce (the sum in rank order, bit-identical on every rank), allGather and broadcast over 3 ranks',
    async () => {
      const port = await freePort();
      const count = 3000;
      const ranks = [0, 1, 2].map((r) => startRank(r, 3, port, { scenario: 'collectives', count, timeoutMs: 30_000 }));
      const exits = await Promise.all(ranks.map((r) => r.exit));
      for (const e of exits) expect(e.code, e.stderr).toBe(0);
      const sum = rankValues(0, count);
      for (let r = 1; r < 3; r++) {
        const v = rankValues(r, count);
        for (let i = 0; i < count; i++) sum[i] = Math.fround(sum[i]! + v[i]!);
      }
      const gathered = new Float32Array(3 * count);
      for (let r = 0; r < 3; r++) gathered.set(rankValues(r, count), r * count);
      for (const r of ranks) {
        const out = r.lines.at(-1)!;
        expect(bits(decode(out.allReduce))).toBe(bits(sum));
        expect(bits(decode(out.allGather))).toBe(bits(gathered));
        expect(bits(decode(out.broadcast))).toBe(bits(rankValues(2, count)));
      }
    },
    testTime(30_000),
  );

  for (const victim of [2, 0]) {
    it(
      `a rank killed mid-run (rank ${victim} of 4, SIGKILL) stops every other rank, saying which left`,
      async () => {
        const port = await freePort();
        const ranks = [0, 1, 2, 3].map((r) => startRank(r, 4, port, { scenario: 'loop', count: 256, roundDelayMs: 5 }));
        try {
          await until(() => ranks.every((r) => r.lines.length >= 3), 30_000);
          ranks[victim]!.child.kill('SIGKILL');
          const others = ranks.filter((_, r) => r !== victim);
          const exits = await Promise.all(others.map((r) => r.exit));
          for (const [i, e] of exits.entries()) {
            expect(e.code, e.stderr).toBe(1);
            const error = errorOf(others[i]!);
            expect(error?.name).toBe('CommAbortedError');
            expect(error?.message).toMatch(
              new RegExp(`^aborted: rank ${victim} of 4 left the job \\(connection closed\\)( during all-reduce of 256 elements)?$`),
            );
          }
        } finally {
          for (const r of ranks) r.child.kill('SIGKILL');
        }
      },
      testTime(60_000),
    );
  }

  it('a rank that never arrives: rank 0 names it after the join timeout, the others say rank 0 gave up', async () => {
    const port = await freePort();
    const ranks = [0, 1, 2].map((r) => startRank(r, 4, port, { scenario: 'collectives', count: 4, joinTimeoutMs: 5000 }));
    const exits = await Promise.all(ranks.map((r) => r.exit));
    for (const e of exits) expect(e.code).toBe(1);
    const waited = `rank 0 waited 5 s for rank 3 of 4 at 127.0.0.1:${port} (the rendezvous)`;
    expect(errorOf(ranks[0]!)).toEqual({ name: 'RendezvousError', message: waited });
    for (const r of [1, 2])
      expect(errorOf(ranks[r]!)).toEqual({ name: 'RendezvousError', message: `rank 0 at 127.0.0.1:${port} refused rank ${r}: ${waited}` });
  });
});
