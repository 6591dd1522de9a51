/**
 * Whether this process is a rank of a job that another launcher started, read from the variables
 * that launcher sets: torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT), SLURM's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and Open MPI's mpirun
 * (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK). srun and mpirun say
 * nothing of where rank 0 listens: MASTER_ADDR and MASTER_PORT must be exported to every rank.
 * GPUMEM_MASTER_ADDR / GPUMEM_MASTER_PORT take precedence over them (torchrun's own agent may
 * already serve a store on MASTER_PORT: with TORCHELASTIC_USE_AGENT_STORE=True the default port is
 * MASTER_PORT + 1). GPUMEM_RENDEZVOUS=none turns the detection off. A job of one process is no job.
 * Every number is read strictly (decimal digits, nothing else) and reported under its own name.
 * @module
 */
import { escapeTerminal } from '@gpumem/allocator-core';

/** Which convention the variables followed. */
export type RendezvousSource = 'torchrun' | 'slurm' | 'mpi';

/** This process's place in a job started by another launcher, and where rank 0 listens. */
export interface EnvRendezvous {
  rank: number;
  size: number;
  /** The rank among the job's processes on this node: its GPU is cuda:localRank. */
  localRank: number;
  /** How many of the job's processes run on this node, where the launcher says. */
  localSize?: number | undefined;
  /** Where rank 0's store listens (a host name or an address). */
  masterAddr: string;
  masterPort: number;
  source: RendezvousSource;
}

/** The variables of a job are there, but not all of them, or they contradict each other. */
export class RendezvousEnvError extends Error {
  override readonly name = 'RendezvousEnvError';
  readonly code = 'GPUMEM_RENDEZVOUS_ENV';
}

/** The variables each convention uses, in the order they are looked for. */
const conventions: ReadonlyArray<{ source: RendezvousSource; rank: string; size: string; localRank: string; localSize?: string }> = [
  { source: 'torchrun', rank: 'RANK', size: 'WORLD_SIZE', localRank: 'LOCAL_RANK', localSize: 'LOCAL_WORLD_SIZE' },
  { source: 'slurm', rank: 'SLURM_PROCID', size: 'SLURM_NTASKS', localRank: 'SLURM_LOCALID', localSize: 'SLURM_NTASKS_PER_NODE' },
  {
    source: 'mpi',
    rank: 'OMPI_COMM_WORLD_RANK',
    size: 'OMPI_COMM_WORLD_SIZE',
    localRank: 'OMPI_COMM_WORLD_LOCAL_RANK',
    localSize: 'OMPI_COMM_WORLD_LOCAL_SIZE',
  },
];

/** The most ranks a job may have (the TCP store's bound). */
const maxWorldSize = 65536;

/**
 * A decimal integer written as the launchers write one: digits only. Hex (0x7000), exponents (1e3),
 * signs, fractions and spaces are refused, not read as some other number.
 */
function decimal(raw: string): number | undefined {
  return /^[0-9]{1,9}$/.test(raw) ? Number(raw) : undefined;
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number, source: RendezvousSource): number {
  const value = decimal(env[name]!);
  if (value === undefined || value < min || value > max)
    throw new RendezvousEnvError(`${name} must be a decimal integer from ${min} to ${max} (${source}) but is ${quote(env[name]!)}`);
  return value;
}

/** A variable's value in a message: quoted, control characters escaped, cut to 64 characters. */
function quote(raw: string): string {
  return `'${escapeTerminal(raw.length > 64 ? `${raw.slice(0, 64)}...` : raw)}'`;
}

/**
 * This process's place in a job launched by torchrun, srun or mpirun, from `env`; undefined when
 * none of their variables are set, the job has one process, or GPUMEM_RENDEZVOUS=none. Throws
 * {@link RendezvousEnvError} for partial or contradictory variables (RANK without WORLD_SIZE,
 * rank >= size, no MASTER_ADDR under srun or mpirun, a port out of range).
 */
export function readEnvRendezvous(env: NodeJS.ProcessEnv = process.env): EnvRendezvous | undefined {
  if (env.GPUMEM_RENDEZVOUS === 'none') return undefined;
  const c = conventions.find((k) => env[k.rank] !== undefined || env[k.size] !== undefined);
  if (!c) return undefined;
  for (const [have, lack] of [
    [c.rank, c.size],
    [c.size, c.rank],
  ] as const) {
    if (env[lack] === undefined)
      throw new RendezvousEnvError(`${have} is set but ${lack} is not: both say a rank's place in a ${c.source} job`);
  }
  const size = integer(env, c.size, 1, maxWorldSize, c.source);
  const rank = integer(env, c.rank, 0, maxWorldSize - 1, c.source);
  if (rank >= size) throw new RendezvousEnvError(`${c.rank} (${rank}) must be below ${c.size} (${size})`);
  if (size === 1) return undefined;
  const localSize =
    c.localSize !== undefined && env[c.localSize] !== undefined ? integer(env, c.localSize, 1, maxWorldSize, c.source) : undefined;
  let localRank = 0;
  if (env[c.localRank] !== undefined) localRank = integer(env, c.localRank, 0, maxWorldSize - 1, c.source);
  else if (c.source === 'torchrun')
    throw new RendezvousEnvError(`RANK and WORLD_SIZE are set but LOCAL_RANK is not: torchrun sets all three`);
  if (localRank >= size) throw new RendezvousEnvError(`${c.localRank} (${localRank}) must be below ${c.size} (${size})`);
  if (localSize !== undefined && localRank >= localSize)
    throw new RendezvousEnvError(`${c.localRank} (${localRank}) must be below ${c.localSize} (${localSize})`);

  const addrName = env.GPUMEM_MASTER_ADDR !== undefined ? 'GPUMEM_MASTER_ADDR' : 'MASTER_ADDR';
  const masterAddr = env[addrName]?.trim();
  if (!masterAddr) {
    throw new RendezvousEnvError(
      `${c.source === 'torchrun' ? 'torchrun sets MASTER_ADDR, but it' : `${c.rank} says this is a rank of a ${c.source} job, but MASTER_ADDR`} is not set: export MASTER_ADDR (the host of rank 0) and MASTER_PORT (a free port there) to every rank`,
    );
  }
  let masterPort: number;
  if (env.GPUMEM_MASTER_PORT !== undefined) masterPort = port(env, 'GPUMEM_MASTER_PORT');
  else if (env.MASTER_PORT !== undefined) {
    // torchrun's agent serves its own store on MASTER_PORT when it shares it with the workers
    masterPort = port(env, 'MASTER_PORT') + (c.source === 'torchrun' && env.TORCHELASTIC_USE_AGENT_STORE === 'True' ? 1 : 0);
    if (masterPort > 65535)
      throw new RendezvousEnvError('MASTER_PORT + 1 is past 65535: set GPUMEM_MASTER_PORT to a free port on the host of rank 0');
  } else {
    throw new RendezvousEnvError(`MASTER_ADDR is set but MASTER_PORT is not: export a free port on the host of rank 0 to every rank`);
  }
  return { rank, size, localRank, localSize, masterAddr, masterPort, source: c.source };
}

function port(env: NodeJS.ProcessEnv, name: string): number {
  const value = decimal(env[name]!);
  if (value === undefined || value < 1 || value > 65535)
    throw new RendezvousEnvError(`${name} must be a decimal port from 1 to 65535 but is ${quote(env[name]!)}`);
  return value;
}
