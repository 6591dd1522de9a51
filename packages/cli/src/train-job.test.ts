/**
 * `gpumem train` as a rank of a job another launcher started: the built CLI run as torchrun runs it
 * (`torchrun --no-python ... node cli.js train`: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
 * MASTER_PORT), on the host over the host communicator over TCP. Two ranks give, to the bit, the
 * run of `--devices 2` (the built-in launcher, shared memory) for the data-parallel mlp and the
 * partitioned gcn; rank 0 prints the result, rank 1 nothing. Partial variables and `--devices`
 * inside a job are usage errors.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../distributed/src/free-port.testing.js';
import { testTime } from '../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

/** Only the variables this test sets say where a rank is (none leaks in from a job running the tests). */
const { RANK: _r, WORLD_SIZE: _w, LOCAL_RANK: _l, SLURM_PROCID: _s, OMPI_COMM_WORLD_RANK: _o, ...baseEnv } = process.env;

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runRank(args: string[], env: Record<string, string>): Promise<Out> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...baseEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function asJob(size: number, args: string[]): Promise<Out[]> {
  const port = await freePort();
  return Promise.all(
    Array.from({ length: size }, (_, rank) =>
      runRank(args, {
        RANK: String(rank),
        WORLD_SIZE: String(size),
        LOCAL_RANK: String(rank),
        LOCAL_WORLD_SIZE: String(size),
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: String(port),
      }),
    ),
  );
}

interface Epochs {
  communicator: string;
  epochs: { losses: number[]; accuracy: number }[];
  ranks: unknown[];
}

describe('gpumem train under torchrun (host ranks, TCP)', () => {
  it.each([
    ['mlp', ['--model', 'mlp', '--allocator', 'host', '--epochs', '1', '--train-subset', '512', '--test-subset', '128', '--hidden', '32']],
    ['gcn', ['--model', 'gcn', '--dataset', 'sbm', '--allocator', 'host', '--epochs', '2']],
  ])(
    'the %s over 2 ranks equals --devices 2 to the bit; rank 0 prints the result',
    async (_model, args) => {
      const job = await asJob(2, ['train', ...args, '--json', '-']);
      for (const r of job) expect(r.code, r.stderr).toBe(0);
      expect(job[1]!.stdout).toBe('');
      const external = JSON.parse(job[0]!.stdout) as Epochs;
      const launched = spawnSync(process.execPath, [cli, 'train', ...args, '--devices', '2', '--json', '-'], {
        encoding: 'utf8',
        env: baseEnv,
      });
      expect(launched.status, launched.stderr).toBe(0);
      const builtIn = JSON.parse(launched.stdout) as Epochs;
      expect(external.communicator).toBe('host');
      expect(external.ranks).toHaveLength(2);
      expect(external.epochs.map((e) => [e.losses, e.accuracy])).toEqual(builtIn.epochs.map((e) => [e.losses, e.accuracy]));
    },
    testTime(180_000),
  );

  it('partial variables, and --devices inside a job, are usage errors (exit 2)', () => {
    const partial = spawnSync(process.execPath, [cli, 'train', '--allocator', 'host'], {
      encoding: 'utf8',
      env: { ...baseEnv, RANK: '1' },
    });
    expect(partial.status).toBe(2);
    expect(partial.stderr).toMatch(/gpumem train: RANK is set but WORLD_SIZE is not/);
    const job = { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '29999' };
    const devices = spawnSync(process.execPath, [cli, 'train', '--allocator', 'host', '--devices', '2'], {
      encoding: 'utf8',
      env: { ...baseEnv, ...job },
    });
    expect(devices.status).toBe(2);
    expect(devices.stderr).toMatch(/this process is rank 1 of 2 of a torchrun job, and '--devices' would start ranks of its own/);
  });

  it('numbers of the job are decimal digits, each refused under its own name (exit 2)', () => {
    const job = { RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '29999' };
    for (const [env, message] of [
      [{ WORLD_SIZE: '1e9' }, "gpumem train: WORLD_SIZE must be a decimal integer from 1 to 65536 (torchrun) but is '1e9'"],
      [{ MASTER_PORT: '0x7000' }, "gpumem train: MASTER_PORT must be a decimal port from 1 to 65535 but is '0x7000'"],
      [{ MASTER_PORT: ' 29555 ' }, "gpumem train: MASTER_PORT must be a decimal port from 1 to 65535 but is ' 29555 '"],
    ] as const) {
      const r = spawnSync(process.execPath, [cli, 'train', '--allocator', 'host'], {
        encoding: 'utf8',
        env: { ...baseEnv, ...job, ...env },
      });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr.trim()).toBe(message);
    }
  });
});
