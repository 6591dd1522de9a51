/**
 * Reading a rank's place from torchrun's, srun's and mpirun's variables (./env-rendezvous): each
 * convention, where rank 0 listens (GPUMEM_MASTER_* first; MASTER_PORT + 1 when torchrun's agent
 * serves its own store there), no job (nothing set, one process, GPUMEM_RENDEZVOUS=none), and a
 * clear RendezvousEnvError for partial or contradictory variables.
 */
import { describe, expect, it } from 'vitest';
import { readEnvRendezvous, RendezvousEnvError } from './env-rendezvous.js';

const master = { MASTER_ADDR: '10.0.0.1', MASTER_PORT: '29500' };

describe('readEnvRendezvous', () => {
  it("reads torchrun's variables", () => {
    expect(readEnvRendezvous({ RANK: '5', WORLD_SIZE: '8', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '4', ...master })).toEqual({
      rank: 5,
      size: 8,
      localRank: 1,
      localSize: 4,
      masterAddr: '10.0.0.1',
      masterPort: 29500,
      source: 'torchrun',
    });
  });

  it("reads srun's and mpirun's variables, with MASTER_ADDR and MASTER_PORT exported to them", () => {
    expect(readEnvRendezvous({ SLURM_PROCID: '3', SLURM_NTASKS: '4', SLURM_LOCALID: '1', ...master })).toMatchObject({
      rank: 3,
      size: 4,
      localRank: 1,
      source: 'slurm',
    });
    expect(
      readEnvRendezvous({
        OMPI_COMM_WORLD_RANK: '2',
        OMPI_COMM_WORLD_SIZE: '3',
        OMPI_COMM_WORLD_LOCAL_RANK: '0',
        OMPI_COMM_WORLD_LOCAL_SIZE: '1',
        ...master,
      }),
    ).toEqual({ rank: 2, size: 3, localRank: 0, localSize: 1, masterAddr: '10.0.0.1', masterPort: 29500, source: 'mpi' });
    // torchrun inside an srun step: torchrun's variables say the rank
    expect(
      readEnvRendezvous({ SLURM_PROCID: '0', SLURM_NTASKS: '2', RANK: '3', WORLD_SIZE: '4', LOCAL_RANK: '3', ...master })?.source,
    ).toBe('torchrun');
  });

  it('takes GPUMEM_MASTER_ADDR/PORT first, and MASTER_PORT + 1 where torchrun shares its agent store', () => {
    const job = { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', ...master };
    expect(readEnvRendezvous({ ...job, TORCHELASTIC_USE_AGENT_STORE: 'True' })?.masterPort).toBe(29501);
    expect(readEnvRendezvous({ ...job, TORCHELASTIC_USE_AGENT_STORE: 'False' })?.masterPort).toBe(29500);
    expect(
      readEnvRendezvous({ ...job, GPUMEM_MASTER_ADDR: 'node7', GPUMEM_MASTER_PORT: '40000', TORCHELASTIC_USE_AGENT_STORE: 'True' }),
    ).toMatchObject({
      masterAddr: 'node7',
      masterPort: 40000,
    });
  });

  it('is no job when nothing is set, when the job has one process, or with GPUMEM_RENDEZVOUS=none', () => {
    expect(readEnvRendezvous({})).toBeUndefined();
    expect(readEnvRendezvous({ RANK: '0', WORLD_SIZE: '1', LOCAL_RANK: '0' })).toBeUndefined();
    expect(readEnvRendezvous({ RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', ...master, GPUMEM_RENDEZVOUS: 'none' })).toBeUndefined();
  });

  it.each([
    [{ RANK: '1' }, "RANK is set but WORLD_SIZE is not: both say a rank's place in a torchrun job"],
    [{ WORLD_SIZE: '4' }, "WORLD_SIZE is set but RANK is not: both say a rank's place in a torchrun job"],
    [{ RANK: '4', WORLD_SIZE: '4', LOCAL_RANK: '0', ...master }, 'RANK (4) must be below WORLD_SIZE (4)'],
    [{ RANK: 'one', WORLD_SIZE: '4' }, "RANK must be a decimal integer from 0 to 65535 (torchrun) but is 'one'"],
    // numbers are digits only: no hex, exponent, sign, fraction or space is read as another number
    [{ RANK: '0', WORLD_SIZE: '1e9', LOCAL_RANK: '0' }, "WORLD_SIZE must be a decimal integer from 1 to 65536 (torchrun) but is '1e9'"],
    [
      { RANK: '0', WORLD_SIZE: '100000', LOCAL_RANK: '0' },
      "WORLD_SIZE must be a decimal integer from 1 to 65536 (torchrun) but is '100000'",
    ],
    [{ RANK: ' 1', WORLD_SIZE: '2', LOCAL_RANK: '0' }, "RANK must be a decimal integer from 0 to 65535 (torchrun) but is ' 1'"],
    [{ RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '0x1' }, "LOCAL_RANK must be a decimal integer from 0 to 65535 (torchrun) but is '0x1'"],
    [
      { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2.0' },
      "LOCAL_WORLD_SIZE must be a decimal integer from 1 to 65536 (torchrun) but is '2.0'",
    ],
    [{ SLURM_PROCID: '-1', SLURM_NTASKS: '2' }, "SLURM_PROCID must be a decimal integer from 0 to 65535 (slurm) but is '-1'"],
    // a value is shown with its control characters escaped
    [{ RANK: '\u001b[2J', WORLD_SIZE: '2' }, "RANK must be a decimal integer from 0 to 65535 (torchrun) but is '\\x1b[2J'"],
    [{ RANK: '1', WORLD_SIZE: '2', ...master }, 'RANK and WORLD_SIZE are set but LOCAL_RANK is not: torchrun sets all three'],
    [
      { RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '2', LOCAL_WORLD_SIZE: '2', ...master },
      'LOCAL_RANK (2) must be below LOCAL_WORLD_SIZE (2)',
    ],
    [
      { SLURM_PROCID: '1', SLURM_NTASKS: '2', SLURM_LOCALID: '1' },
      'SLURM_PROCID says this is a rank of a slurm job, but MASTER_ADDR is not set: export MASTER_ADDR (the host of rank 0) and MASTER_PORT (a free port there) to every rank',
    ],
    [
      { OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '2', MASTER_ADDR: 'n1' },
      'MASTER_ADDR is set but MASTER_PORT is not: export a free port on the host of rank 0 to every rank',
    ],
    [
      { RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0', MASTER_ADDR: 'n1', MASTER_PORT: '70000' },
      "MASTER_PORT must be a decimal port from 1 to 65535 but is '70000'",
    ],
    ...['0x7000', '1e3', ' 29555 ', '29555.0', '+29555', '', '0'].map((p): [NodeJS.ProcessEnv, string] => [
      { RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0', MASTER_ADDR: 'n1', MASTER_PORT: p },
      `MASTER_PORT must be a decimal port from 1 to 65535 but is '${p}'`,
    ]),
    [
      { RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0', MASTER_ADDR: 'n1', MASTER_PORT: '29500', GPUMEM_MASTER_PORT: '4e4' },
      "GPUMEM_MASTER_PORT must be a decimal port from 1 to 65535 but is '4e4'",
    ],
  ])('refuses partial or contradictory variables: %j', (env, message) => {
    expect(() => readEnvRendezvous(env)).toThrow(RendezvousEnvError);
    expect(() => readEnvRendezvous(env)).toThrow(message);
  });
});
