import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { launchRanks, RankFailedError } from './launcher.js';
import { rankEnv, readRankEnv } from './protocol.js';

const entry = fileURLToPath(new URL('./fixtures/launch-rank.mjs', import.meta.url));
// The ranks run the built packages (as `gpumem train --devices` does), so the tests need a build.
const built = existsSync(fileURLToPath(new URL('../dist/index.js', import.meta.url)));
const needsBuild = built ? '' : 'packages/distributed is not built (npm run build): the ranks import the built package';

interface Out {
  rank: number;
  size: number;
  first: number;
  last: number;
}

describe('rank environment', () => {
  it('round-trips a rank\'s place and refuses a process the launcher did not start', () => {
    const place = { rank: 1, size: 3, device: -1, backend: 'host' as const, timeoutMs: 500, hostRegion: '/gpumem-x' };
    expect(readRankEnv(rankEnv(place))).toEqual({ ...place, ncclId: undefined });
    expect(() => readRankEnv({})).toThrow(/GPUMEM_COMM_BACKEND .*launchRanks/);
  });
});

describe('launchRanks argument checks', () => {
  it('refuses bad ranks, devices and backends before starting anything', async () => {
    await expect(launchRanks({ entry, ranks: 0, backend: 'host', payload: {} })).rejects.toThrow(RangeError);
    await expect(launchRanks({ entry, ranks: 2, backend: 'bogus' as never, payload: {} })).rejects.toThrow(/'nccl' or 'host'/);
    await expect(launchRanks({ entry, ranks: 2, backend: 'host', devices: [-1], payload: {} })).rejects.toThrow(/one device per rank/);
    await expect(launchRanks({ entry, ranks: 2, backend: 'nccl', devices: [0, 0], payload: {} })).rejects.toThrow(/different CUDA device for each rank/);
    await expect(launchRanks({ entry, ranks: 1, backend: 'nccl', devices: [-1], payload: {} })).rejects.toThrow(/NCCL runs on GPUs only/);
  });
});

describe.skipIf(needsBuild)(`launchRanks on the host communicator${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  it('runs every rank and returns their results in rank order', async () => {
    const reports: number[] = [];
    const out = await launchRanks<object, Out>({ entry, ranks: 3, backend: 'host', payload: { rounds: 2, count: 3000 }, onReport: (rank) => reports.push(rank) });
    // two all-reduces of 1 + 2 + 3: 6, then 18
    expect(out.map((o) => [o.rank, o.size, o.first, o.last])).toEqual([0, 1, 2].map((r) => [r, 3, 18, 18]));
    expect(reports.length).toBe(6);
  });

  for (const fail of ['throw', 'exit'] as const) {
    it(`stops every rank with a RankFailedError when one ${fail === 'throw' ? 'throws' : 'exits'}`, async () => {
      const t0 = performance.now();
      const err = await launchRanks({ entry, ranks: 3, backend: 'host', payload: { rounds: 50, fail, failRank: 1 }, timeoutMs: 60_000, graceMs: 5_000 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RankFailedError);
      const failed = err as RankFailedError;
      expect(failed.rank).toBe(1);
      expect(failed.message).toMatch(fail === 'throw' ? /rank 1 of 3 failed: RangeError: out of patience on purpose; every other rank was stopped/ : /rank 1 of 3 failed: its process exited with code 3/);
      // raised once every process has exited: the failed one, and the others stopped by the abort
      expect(failed.exits).toHaveLength(3);
      expect(failed.exits[1]).toEqual({ code: fail === 'throw' ? 1 : 3, signal: null });
      for (const exit of failed.exits) expect(exit.code !== null || exit.signal !== null).toBe(true);
      // the others stopped at their next collective (aborted region), well before the grace period
      expect(performance.now() - t0).toBeLessThan(20_000);
    });
  }

  it('stops the group when a rank hangs: the silent rank, or the rank waiting for it, fails it within the timeout', async () => {
    const t0 = performance.now();
    const err = await launchRanks({ entry, ranks: 2, backend: 'host', payload: { rounds: 5, fail: 'hang', failRank: 0 }, timeoutMs: 1500, graceMs: 500 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RankFailedError);
    // whichever comes first: the launcher hears nothing from rank 0, or rank 1's collective times out
    expect((err as RankFailedError).message).toMatch(/rank 0 of 2 failed: sent nothing for 1500 ms|rank 1 of 2 failed: .*timed out/);
    expect(performance.now() - t0).toBeLessThan(15_000); // the hung rank was killed
  });
});
