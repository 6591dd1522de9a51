/**
 * The launcher: one child process per rank, each told its rank, device and communicator (NCCL's
 * unique id, made here, or the host communicator's shared region, made here), sent the same
 * payload, and heard until it sends its result. When a rank fails (it reports an error, exits
 * without a result, or stays silent past the timeout) the group is stopped: the host
 * communicator's region is marked aborted, so ranks waiting in a collective throw at once, and
 * every rank still running after a grace period is killed (a rank blocked in a NCCL collective
 * whose peer is gone cannot return by itself). Process exit frees each rank's memory. The launch
 * then fails with a RankFailedError naming the first rank that failed and why.
 *
 * Nothing outlives the launcher: each rank asks the kernel to kill it when the launcher dies
 * (whatever kills the launcher, SIGKILL included; see {@link runAsRank}), and the host
 * communicator's region loses its name as soon as every rank has attached, so the kernel frees it
 * with the last process that maps it.
 * @module
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CommBackend } from './communicator.js';
import { createHostCommRegion, type HostCommRegion } from './host-comm.js';
import { ncclUniqueId } from './nccl.js';
import { rankEnv, type RankMessage, type ParentMessage } from './protocol.js';

export interface LaunchOptions<P> {
  /** The module each rank runs: a built .js file that calls {@link runAsRank}. */
  entry: string | URL;
  /** How many ranks (processes). */
  ranks: number;
  backend: CommBackend;
  /**
   * The device of each rank: a CUDA ordinal, or -1 for the host. Default: rank r on cuda:r for
   * 'nccl', the host for 'host'.
   */
  devices?: readonly number[];
  /** Sent to every rank (structured-clone serialisable). */
  payload: P;
  /**
   * A rank silent for this long (no progress, no result) fails the group, and a host-communicator
   * collective waiting this long throws. Default 600,000 ms (10 minutes); 0: no limit.
   */
  timeoutMs?: number;
  /** After a rank fails, how long the others get to stop before they are killed. Default 3,000 ms. */
  graceMs?: number;
  /** Host communicator: bytes of each rank's slot in the shared region (default: the region's own). */
  slotBytes?: number;
  /** Called with every message a rank sends with {@link RankContext.report}. */
  onReport?: (rank: number, message: unknown) => void;
  /** Extra environment for the ranks. */
  env?: Record<string, string>;
}

/** The launch failed: `rank` failed first, for `reason`; the others were stopped. */
export class RankFailedError extends Error {
  readonly code = 'GPUMEM_RANK_FAILED';
  /**
   * How every rank's process ended (code, or the signal that killed it), in rank order: the error is
   * raised only once all of them have exited, so their device memory has been given back.
   */
  exits: Array<{ code: number | null; signal: NodeJS.Signals | null }> = [];

  constructor(
    readonly rank: number,
    readonly reason: string,
    readonly ranks: number,
  ) {
    super(`rank ${rank} of ${ranks} failed: ${reason}${ranks > 1 ? '; every other rank was stopped' : ''}`);
    this.name = 'RankFailedError';
  }
}

const defaultTimeoutMs = 600_000;
const defaultGraceMs = 3_000;

function checkDevices(devices: readonly number[], ranks: number, backend: CommBackend): void {
  if (devices.length !== ranks) throw new RangeError(`Expected one device per rank (${ranks}) for devices but received ${devices.length}`);
  for (const d of devices) {
    if (!Number.isSafeInteger(d) || d < -1)
      throw new RangeError(`Expected CUDA ordinals or -1 (the host) for devices but received ${String(d)}`);
  }
  if (backend === 'nccl') {
    if (devices.some((d) => d < 0))
      throw new RangeError("Expected a CUDA device for every rank with the 'nccl' backend: NCCL runs on GPUs only");
    if (new Set(devices).size !== devices.length) {
      throw new RangeError(
        `Expected a different CUDA device for each rank with the 'nccl' backend (NCCL refuses two ranks on one GPU) but received ${devices.join(', ')}`,
      );
    }
  }
}

/** A built module next to this one, or in the package's dist/ when running from sources. */
export function builtModule(relative: string, base: string | URL): string {
  const here = fileURLToPath(new URL(relative, base));
  if (existsSync(here)) return here;
  const built = fileURLToPath(new URL(`../dist/${relative.replace(/^\.\//, '')}`, base));
  if (existsSync(built)) return built;
  throw new Error(`Cannot find ${relative} at ${here} or ${built}: build the packages first (npm run build)`);
}

/** The signals after which the launcher cleans up before it ends (SIGKILL cannot be caught). */
const stopSignals: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Runs `ranks` processes of `entry` and resolves with their results, in rank order. */
export function launchRanks<P, R>(o: LaunchOptions<P>): Promise<R[]> {
  const { ranks, backend } = o;
  if (!Number.isSafeInteger(ranks) || ranks < 1)
    return Promise.reject(new RangeError(`Expected positive integer for ranks but received ${String(ranks)}`));
  if (backend !== 'nccl' && backend !== 'host')
    return Promise.reject(new RangeError(`Expected 'nccl' or 'host' for backend but received ${String(backend)}`));
  const devices = o.devices ?? Array.from({ length: ranks }, (_, r) => (backend === 'nccl' ? r : -1));
  const timeoutMs = o.timeoutMs ?? defaultTimeoutMs;
  const graceMs = o.graceMs ?? defaultGraceMs;
  try {
    checkDevices(devices, ranks, backend);
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0)
      throw new RangeError(`Expected non-negative integer for timeoutMs but received ${String(timeoutMs)}`);
    if (!Number.isSafeInteger(graceMs) || graceMs < 0)
      throw new RangeError(`Expected non-negative integer for graceMs but received ${String(graceMs)}`);
  } catch (e) {
    return Promise.reject(e);
  }
  const entry = typeof o.entry === 'string' ? o.entry : fileURLToPath(o.entry);
  // Killed by a signal, the launcher stops its ranks and removes the shared region first: a region
  // is unlinked by the ranks only once all of them attached, so a launcher stopped while they start
  // would leave its name in /dev/shm. Then the signal is raised again, to end the process as it would
  // have (where the application has no handler of its own for it). Installed before the region is
  // made: a signal that comes while it is made must not take the default action and leave it.
  const children: ChildProcess[] = [];
  const exited = new Array<boolean>(ranks).fill(false);
  let region: HostCommRegion | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    for (const [r, child] of children.entries()) if (!exited[r]) child.kill(signal);
    region?.dispose();
    detachSignals();
    process.kill(process.pid, signal);
  };
  const detachSignals = () => {
    for (const signal of stopSignals) process.removeListener(signal, onSignal);
  };
  for (const signal of stopSignals) process.on(signal, onSignal);
  // made before any rank starts: the unique id (NCCL), or the shared region (host)
  let ncclId: string | undefined;
  try {
    region =
      backend === 'host'
        ? createHostCommRegion({ ranks, unlinkWhenAttached: true, ...(o.slotBytes ? { slotBytes: o.slotBytes } : {}) })
        : undefined;
    ncclId = backend === 'nccl' ? Buffer.from(ncclUniqueId()).toString('hex') : undefined;
  } catch (e) {
    detachSignals();
    region?.dispose();
    return Promise.reject(e);
  }

  return new Promise<R[]>((resolve, reject) => {
    const results = new Array<R | undefined>(ranks);
    const done = new Array<boolean>(ranks).fill(false);
    const exits = new Array<{ code: number | null; signal: NodeJS.Signals | null }>(ranks);
    const heard = new Array<number>(ranks).fill(performance.now());
    const stderr = new Array<string>(ranks).fill('');
    let failure: RankFailedError | undefined;
    let killTimer: NodeJS.Timeout | undefined;

    const finish = () => {
      if (!exited.every(Boolean)) return;
      detachSignals();
      clearInterval(watch);
      if (killTimer) clearTimeout(killTimer);
      region?.dispose();
      if (failure) {
        failure.exits = exits;
        reject(failure);
      } else resolve(results as R[]);
    };
    const fail = (rank: number, reason: string) => {
      if (failure) return;
      failure = new RankFailedError(rank, reason, ranks);
      region?.abort(rank, reason);
      // ranks in a host collective stop at once; the others (NCCL, compute) are killed after the grace
      killTimer = setTimeout(() => {
        for (const [r, child] of children.entries()) if (!exited[r]) child.kill('SIGKILL');
      }, graceMs);
    };
    const watch = setInterval(
      () => {
        if (timeoutMs === 0 || failure) return;
        const now = performance.now();
        for (let r = 0; r < ranks; r++) {
          if (!done[r] && !exited[r] && now - heard[r]! > timeoutMs)
            fail(r, `sent nothing for ${timeoutMs} ms (stalled, or waiting for a rank that is gone)`);
        }
      },
      Math.min(1000, Math.max(50, timeoutMs / 10)),
    );

    for (let rank = 0; rank < ranks; rank++) {
      const env = {
        ...process.env,
        ...o.env,
        ...rankEnv({
          rank,
          size: ranks,
          device: devices[rank]!,
          backend,
          timeoutMs,
          ncclId,
          hostRegion: region?.name,
          launcherPid: process.pid,
        }),
      };
      const child = fork(entry, [], { stdio: ['ignore', 'inherit', 'pipe', 'ipc'], serialization: 'advanced', env });
      children.push(child);
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        stderr[rank] = (stderr[rank] + chunk).slice(-4000);
      });
      child.on('message', (m: RankMessage) => {
        heard[rank] = performance.now();
        if (m.type === 'report') o.onReport?.(rank, m.message);
        else if (m.type === 'result') {
          results[rank] = m.result as R;
          done[rank] = true;
        } else if (m.type === 'error') {
          // a rank stopped by the group's abort names the rank that caused it: the failure is that rank's
          const cause = /^(?:CommAbortedError: )?aborted: rank (\d+) failed: ([\s\S]*)$/.exec(m.message);
          if (cause) fail(Number(cause[1]), cause[2]!);
          else fail(rank, m.message);
        }
      });
      child.on('error', (e) => fail(rank, `could not start its process: ${e.message}`));
      child.on('exit', (code, signal) => {
        exited[rank] = true;
        exits[rank] = { code, signal };
        if (!done[rank] && !failure) {
          const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
          const detail = stderr[rank]!.trim().split('\n').slice(-3).join(' | ');
          fail(rank, `its process ${how} before sending a result${detail ? `: ${detail}` : ''}`);
        }
        finish();
      });
      child.send({ type: 'start', payload: o.payload } satisfies ParentMessage);
    }
  });
}
