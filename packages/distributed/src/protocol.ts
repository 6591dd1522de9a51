/**
 * What the launcher and its ranks say to each other: the environment a rank starts with, and the
 * messages on the IPC channel between them.
 * @module
 */
import type { CommBackend } from './communicator.js';

/** Parent → rank: the run's payload, once. */
export type ParentMessage = { type: 'start'; payload: unknown };

/** Rank → parent: progress for the caller, the result, or the error that stopped the rank. */
export type RankMessage =
  | { type: 'report'; message: unknown }
  | { type: 'result'; result: unknown }
  | { type: 'error'; name: string; message: string };

/** Where a rank is in the group, as the launcher tells it. */
export interface RankPlace {
  rank: number;
  size: number;
  /** A CUDA ordinal, or -1 for the host. */
  device: number;
  backend: CommBackend;
  /** A collective (host communicator) waiting longer throws; 0: no limit. */
  timeoutMs: number;
  /** NCCL's unique id, hex (backend 'nccl'). */
  ncclId?: string | undefined;
  /** The host communicator's shared region (backend 'host'). */
  hostRegion?: string | undefined;
  /** The launcher's pid: a rank whose parent is no longer this process stops (its launcher is gone). */
  launcherPid?: number | undefined;
}

const names = {
  rank: 'GPUMEM_RANK',
  size: 'GPUMEM_WORLD_SIZE',
  device: 'GPUMEM_RANK_DEVICE',
  backend: 'GPUMEM_COMM_BACKEND',
  timeoutMs: 'GPUMEM_COMM_TIMEOUT_MS',
  ncclId: 'GPUMEM_NCCL_ID',
  hostRegion: 'GPUMEM_HOST_COMM',
  launcherPid: 'GPUMEM_LAUNCHER_PID',
} as const;

/** The environment variables that tell a rank its place. */
export function rankEnv(place: RankPlace): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, name] of Object.entries(names)) {
    const value = place[key as keyof RankPlace];
    if (value !== undefined) env[name] = String(value);
  }
  return env;
}

/** The rank's place, read back from its environment; an Error when it was not started by the launcher. */
export function readRankEnv(env: NodeJS.ProcessEnv = process.env): RankPlace {
  const int = (name: string): number => {
    const v = Number(env[name]);
    if (env[name] === undefined || !Number.isSafeInteger(v))
      throw new Error(`${name} is not set to an integer: a rank must be started by launchRanks()`);
    return v;
  };
  const backend = env[names.backend];
  if (backend !== 'nccl' && backend !== 'host')
    throw new Error(`${names.backend} is not 'nccl' or 'host': a rank must be started by launchRanks()`);
  return {
    rank: int(names.rank),
    size: int(names.size),
    device: int(names.device),
    backend,
    timeoutMs: int(names.timeoutMs),
    ncclId: env[names.ncclId],
    hostRegion: env[names.hostRegion],
    launcherPid: env[names.launcherPid] === undefined ? undefined : int(names.launcherPid),
  };
}
