/**
 * Replays under a limit on the address space (RLIMIT_AS): the room the limit leaves, read from
 * /proc, and replays past it in a child process started under `prlimit --as`: strategies over host
 * memory count their out-of-memory failures and the process lives; expandable says why it cannot
 * reserve its range.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { addressSpaceRoom, engineHeadroomBytes, parseAddressSpace } from './address-space.js';
import { testTime } from '../../../tests/time-budget.js';

const GiB = 1024 ** 3;
const limitsOf = (soft: string) =>
  `Limit                     Soft Limit           Hard Limit           Units     \nMax stack size            8388608              unlimited            bytes     \nMax address space         ${soft}           unlimited            bytes     \n`;
const statusOf = (kB: number) => `Name:\tnode\nVmPeak:\t 1100000 kB\nVmSize:\t ${kB} kB\nVmRSS:\t   58392 kB\n`;

describe('parseAddressSpace', () => {
  it('gives the limit, what the process maps, and the rest less the headroom of the JavaScript engine', () => {
    expect(parseAddressSpace(limitsOf(String(3 * GiB)), statusOf(1024 * 1024))).toEqual({
      limitBytes: 3 * GiB,
      mappedBytes: GiB,
      roomBytes: 2 * GiB - engineHeadroomBytes,
    });
  });

  it('gives no room below zero when the process already maps nearly all it may', () => {
    expect(parseAddressSpace(limitsOf(String(GiB)), statusOf(1000 * 1024))?.roomBytes).toBe(0);
  });

  it('is undefined when the address space is unlimited or a line is missing', () => {
    expect(parseAddressSpace(limitsOf('unlimited'), statusOf(1024))).toBeUndefined();
    expect(parseAddressSpace('Limit Soft Hard Units\n', statusOf(1024))).toBeUndefined();
    expect(parseAddressSpace(limitsOf(String(GiB)), 'Name:\tnode\n')).toBeUndefined();
  });

  it('reads this process: unlimited here unless the test runs under a limit', () => {
    const room = addressSpaceRoom();
    if (process.platform !== 'linux') expect(room).toBeUndefined();
    else if (room) expect(room.mappedBytes).toBeGreaterThan(0);
  });
});

const hasPrlimit = process.platform === 'linux' && spawnSync('prlimit', ['--version']).status === 0;
const packageDir = fileURLToPath(new URL('..', import.meta.url));

// 24,000 live allocations of 128-224 KiB (4 GiB) replayed in a process limited to 3 GiB of address
// space. Uncapped, a strategy takes the last of it and V8, unable to grow its heap, ends the
// process (std::bad_alloc in its garbage collector, or "JavaScript heap out of memory").
const pastTheLimit = `
import '@gpumem/allocator-expandable';
import '@gpumem/allocator-pool';
import '@gpumem/allocator-pinned';
import { compileTrace, replayStrategy } from '@gpumem/trace';
const n = 24000;
const size = (i) => (128 + (i % 7) * 16) * 1024;
const events = [];
for (let i = 0; i < n; i++) events.push({ timeNs: i, action: 'alloc', ptr: i + 1, bytes: size(i), stream: 0, tag: 0 });
for (let i = 0; i < n; i++) events.push({ timeNs: n + i, action: 'free', ptr: i + 1, bytes: size(i), stream: 0, tag: 0 });
const compiled = compileTrace({ header: { source: 'test' }, events });
for (const name of process.argv.slice(1)) {
  const row = replayStrategy(compiled, { name, label: name }, { repeats: 1 });
  console.log(JSON.stringify({ name, error: row.error, ooms: row.result?.ooms, profileOoms: row.profile?.ooms, room: row.addressSpace, reason: row.profile?.firstOomReason }));
}
`;

describe.skipIf(!hasPrlimit)('replayStrategy past RLIMIT_AS', () => {
  it('replays strategies over host memory within the room the limit leaves, counting their out-of-memory failures', () => {
    const names = ['host', 'pool', 'pinned', 'pool'];
    const r = spawnSync('prlimit', [`--as=${3 * GiB}`, process.execPath, '--input-type=module', '-e', pastTheLimit, ...names], {
      cwd: packageDir,
      // glibc raises its mmap threshold past the first large block freed, and then keeps freed
      // blocks of 128-224 KiB mapped in its heaps: what a row leaves mapped (0.2-0.9 GiB, varying
      // from run to run) shrinks the room of the rows after it and of its own second pass, until a
      // native allocation outside the replay fails. A fixed threshold maps each such block on its
      // own and unmaps it at free, so each row starts from the same mapped size.
      env: { ...process.env, MALLOC_MMAP_THRESHOLD_: String(128 * 1024) },
      encoding: 'utf8',
      timeout: testTime(120_000),
    });
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as {
            name: string;
            error?: string;
            ooms: number;
            profileOoms: number;
            room?: { limitBytes: number; roomBytes: number };
            reason?: string;
          },
      );
    expect(rows.map((row) => row.name)).toEqual(names);
    for (const row of rows) {
      expect(row.error).toBeUndefined();
      expect(row.ooms).toBeGreaterThan(0);
      expect(row.profileOoms).toBeGreaterThan(0);
      expect(row.room?.limitBytes).toBe(3 * GiB);
      expect(row.room!.roomBytes).toBeLessThan(3 * GiB - engineHeadroomBytes);
      expect(row.reason).toMatch(/limit/);
    }
  });

  it('says why expandable cannot replay: the range it reserves for a stream, and the option that lowers it', () => {
    const r = spawnSync('prlimit', [`--as=${3 * GiB}`, process.execPath, '--input-type=module', '-e', pastTheLimit, 'expandable'], {
      cwd: packageDir,
      encoding: 'utf8',
      timeout: testTime(120_000),
    });
    expect(r.status, r.stderr).toBe(0);
    const row = JSON.parse(r.stdout.trim()) as { ooms: number; reason: string };
    expect(row.ooms).toBe(24000);
    expect(row.reason).toContain("could not reserve the stream's virtual range");
    expect(row.reason).toContain('every stream and tag reserves reserveBytes (64.00 GiB) of address space');
    expect(row.reason).toContain("this process's address space is limited to 3.00 GiB (RLIMIT_AS");
    expect(row.reason).toContain('lower the option reserveBytes');
  });
});
