import { fork, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { launchRanks, RankFailedError } from './launcher.js';
import { rankEnv, readRankEnv } from './protocol.js';
import { testTime } from '../../../tests/time-budget.js';

const entry = fileURLToPath(new URL('./fixtures/launch-rank.mjs', import.meta.url));
const launcherScript = fileURLToPath(new URL('./fixtures/launcher-process.mjs', import.meta.url));
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
  it("round-trips a rank's place and refuses a process the launcher did not start", () => {
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
    await expect(launchRanks({ entry, ranks: 2, backend: 'nccl', devices: [0, 0], payload: {} })).rejects.toThrow(
      /different CUDA device for each rank/,
    );
    await expect(launchRanks({ entry, ranks: 1, backend: 'nccl', devices: [-1], payload: {} })).rejects.toThrow(/NCCL runs on GPUs only/);
  });
});

describe.skipIf(needsBuild)(`launchRanks on the host communicator${needsBuild ? ` (skipped: ${needsBuild})` : ''}`, () => {
  it('runs every rank and returns their results in rank order', async () => {
    const reports: number[] = [];
    const out = await launchRanks<object, Out>({
      entry,
      ranks: 3,
      backend: 'host',
      payload: { rounds: 2, count: 3000 },
      onReport: (rank) => reports.push(rank),
    });
    // two all-reduces of 1 + 2 + 3: 6, then 18
    expect(out.map((o) => [o.rank, o.size, o.first, o.last])).toEqual([0, 1, 2].map((r) => [r, 3, 18, 18]));
    expect(reports.length).toBe(6);
  });

  for (const fail of ['throw', 'exit'] as const) {
    it(`stops every rank with a RankFailedError when one ${fail === 'throw' ? 'throws' : 'exits'}`, async () => {
      const err = await launchRanks({
        entry,
        ranks: 3,
        backend: 'host',
        payload: { rounds: 50, fail, failRank: 1 },
        timeoutMs: 60_000,
        graceMs: 5_000,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RankFailedError);
      const failed = err as RankFailedError;
      expect(failed.rank).toBe(1);
      expect(failed.message).toMatch(
        fail === 'throw'
          ? /rank 1 of 3 failed: RangeError: out of patience on purpose; every other rank was stopped/
          : /rank 1 of 3 failed: its process exited with code 3/,
      );
      // raised once every process has exited: the failed one, and the others stopped by the abort
      expect(failed.exits).toHaveLength(3);
      expect(failed.exits[1]).toEqual({ code: fail === 'throw' ? 1 : 3, signal: null });
      for (const exit of failed.exits) expect(exit.code !== null || exit.signal !== null).toBe(true);
    });
  }

  it('stops the group when a rank hangs: the silent rank, or the rank waiting for it, fails it within the timeout', async () => {
    const err = await launchRanks({
      entry,
      ranks: 2,
      backend: 'host',
      payload: { rounds: 5, fail: 'hang', failRank: 0 },
      timeoutMs: 1500,
      graceMs: 500,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RankFailedError);
    // whichever comes first: the launcher hears nothing from rank 0, or rank 1's collective times out
    expect((err as RankFailedError).message).toMatch(/rank 0 of 2 failed: sent nothing for 1500 ms|rank 1 of 2 failed: .*timed out/);
  });
});

/** True while `pid` is a running process (a zombie, waiting to be reaped, counts as gone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // the state follows the command name in parentheses: 'Z' zombie, 'X' dead
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return existsSync(`/proc/${pid}`);
  }
}

async function waitUntil(condition: () => boolean, ms: number): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return condition();
}

interface Started {
  launcher: number;
  ranks: number[];
  region: string;
}

/** Starts fixtures/launcher-process.mjs with `ranks` ranks; resolves once every rank has reported. */
function startLauncher(ranks: number): Promise<{ started: Started; exited: Promise<unknown> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [launcherScript, String(ranks)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((done) => child.on('exit', done));
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve({ started: JSON.parse(out.slice(0, out.indexOf('\n'))) as Started, exited });
    });
    child.on('exit', (code, signal) =>
      reject(new Error(`the launcher exited (${code ?? signal}) before its ranks started: ${err.trim()}`)),
    );
  });
}

const linux = process.platform === 'linux' ? '' : 'needs Linux (PR_SET_PDEATHSIG, /dev/shm)';
const cannotKill = needsBuild || linux;
describe.skipIf(cannotKill)(`killing the launcher${cannotKill ? ` (skipped: ${cannotKill})` : ''}`, () => {
  it('a rank whose launcher died before the rank could ask to die with it stops at once', async () => {
    // the launcher named in its environment (pid 1 here) is not its parent: as if it had died already
    const child = fork(entry, [], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      env: {
        ...process.env,
        ...rankEnv({ rank: 0, size: 1, device: -1, backend: 'host', timeoutMs: 0, hostRegion: '/gpumem-none', launcherPid: 1 }),
      },
    });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(err).toMatch(/its launcher \(pid 1\) is gone/);
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(
      `${signal} while the ranks start: the launcher removes its shared-memory region and stops its ranks`,
      async () => {
        for (let attempt = 0; attempt < 3; attempt++) {
          const child = spawn(process.execPath, [launcherScript, '3'], { stdio: ['ignore', 'ignore', 'pipe'] });
          const exited = new Promise<NodeJS.Signals | null>((done) => child.on('exit', (_code, s) => done(s)));
          const prefix = `gpumem-${child.pid}-`;
          const regions = () => readdirSync('/dev/shm').filter((f) => f.startsWith(prefix));
          // as soon as the region exists: before the ranks (new Node processes) could attach to it
          expect(await waitUntil(() => regions().length > 0, 10_000)).toBe(true);
          child.kill(signal);
          expect(await exited).toBe(signal);
          expect(regions()).toEqual([]);
        }
      },
      testTime(60_000),
    );
  }

  for (const signal of ['SIGKILL', 'SIGTERM', 'SIGINT'] as const) {
    it(
      `${signal} to the launcher's pid: no rank survives it, and its shared-memory region is gone`,
      async () => {
        const { started, exited } = await startLauncher(3);
        expect(started.ranks).toHaveLength(3);
        expect(started.region).toMatch(/^\/gpumem-/);
        try {
          expect(started.ranks.every(running)).toBe(true);
          process.kill(started.launcher, signal);
          await exited;
          // the kernel kills each rank when its parent dies; allow for a loaded machine
          const allGone = await waitUntil(() => !started.ranks.some(running), 10_000);
          expect(started.ranks.filter(running)).toEqual([]);
          expect(allGone).toBe(true);
          // the name went when the last rank attached; the memory with the last process mapping it
          expect(existsSync(`/dev/shm${started.region}`)).toBe(false);
        } finally {
          for (const pid of started.ranks) if (running(pid)) process.kill(pid, 'SIGKILL');
        }
      },
      testTime(30_000),
    );
  }
});
