/**
 * The trace a command reads (replay, doctor), as a user gives it: `-` is standard input; a FIFO is
 * refused at once; a small file that decodes to millions of events ends in the readers' budget
 * error, exit 1, never a crash; a snapshot's impossible device_free is said in the snapshot's words.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';

// The built CLI, as a user runs it (npm ci builds it).
const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-inputs-'));
const snapshotFixture = (name: string) => fileURLToPath(new URL(`../../trace/src/snapshot/fixtures/${name}`, import.meta.url));
const zstdCompressSync: ((data: Uint8Array) => Buffer) | undefined = Reflect.get(zlib, 'zstdCompressSync');
const run = (args: string[], input?: Buffer) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 60_000 });

/** `{'segments': [], 'device_traces': [[entry] + count DUPs of it]}`, protocol 4. */
function dupBomb(count: number): Buffer {
  const str = (s: string) => Buffer.from([0x8c, s.length, ...Buffer.from(s)]);
  const entry = Buffer.concat([
    Buffer.from([0x7d, 0x28]),
    str('action'),
    str('alloc'),
    str('addr'),
    Buffer.from([0x4a, 0, 0x10, 0, 0]), // BININT 4096
    str('size'),
    Buffer.from([0x4b, 64]),
    Buffer.from([0x75]),
  ]);
  return Buffer.concat([
    Buffer.from([0x80, 4, 0x7d]),
    str('segments'),
    Buffer.from([0x5d, 0x73]),
    str('device_traces'),
    Buffer.from([0x5d, 0x5d, 0x28]),
    entry,
    Buffer.alloc(count, 0x32),
    Buffer.from([0x65, 0x61, 0x73, 0x2e]),
  ]);
}

describe('the trace a command reads', () => {
  it('replay and doctor read - from standard input', () => {
    const pickle = readFileSync(snapshotFixture('snapshot-p4.pickle.gz'));
    const doctor = run(['doctor', '-', '--capacity', '1GiB'], pickle);
    expect(doctor.stderr).not.toMatch(/cannot read/);
    expect(doctor.stdout).toMatch(/^trace - \(torch-snapshot/m);
    const replay = run(['replay', '-', '--allocators', 'host'], pickle);
    expect(replay.status).toBe(0);
    expect(replay.stdout).toMatch(/^trace - \(torch-snapshot/m);
  });

  it.skipIf(process.platform !== 'linux')('doctor refuses a FIFO at once, exit 1', () => {
    const fifo = join(dir, 'in.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const r = run(['doctor', fifo, '--capacity', '1GiB']);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`${fifo} is a named pipe (FIFO), not a regular file`);
  });

  it.skipIf(zstdCompressSync === undefined)(
    'replay and doctor end a 1 KB zstd pickle of 30 million DUPs in the budget error, exit 1 (Node without zstd: skipped)',
    () => {
      const file = join(dir, 'dups.pickle.zst');
      writeFileSync(file, zstdCompressSync!(dupBomb(30_000_000)));
      for (const args of [
        ['replay', file, '--allocators', 'host'],
        ['doctor', file, '--capacity', '1GiB'],
      ]) {
        const r = run(args);
        expect(r.status).toBe(1);
        expect(r.stderr).toMatch(
          new RegExp(
            `^gpumem ${args[0]}: trace past the readers' budget: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: byte \\d+ \\(DUP\\): `,
            'm',
          ),
        );
        expect(r.stderr).toContain('GPUMEM_TRACE_MAX_EVENTS=');
      }
    },
  );

  it('doctor says what is wrong with a snapshot whose device_free passes 2^53 - 1, in its own words', () => {
    const r = run(['doctor', snapshotFixture('free-max.pickle')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("device_traces[0][2]: 'device_free' is 9007199254740991 bytes");
    expect(r.stderr).not.toContain('capacityBytes');
  });
});
