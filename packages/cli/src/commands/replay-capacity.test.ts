/**
 * `gpumem replay` as a tool to pick an allocator: --capacity, --min-capacity, --report, and the
 * checks made before any work. Spawns the built CLI (build first: npx tsc -b tsconfig.json), on
 * 'host' and 'pool' over host memory, with a trace whose answers are known.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hasCudaDevice } from '@gpumem/allocator-core';
import { readTable } from '../../../compare/src/text-table.testing.js';
import { testTime } from '../../../../tests/time-budget.js';

const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const run = (args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-capacity-'));

const KiB = 1024;
const MiB = 1024 * KiB;
// Peak live 3 MiB + 1.5 MiB + 200 KiB (host's minimum); the pool takes 4 + 2 + 2 MiB of segments.
const events: [string, number, number][] = [
  ['alloc', 0xa, 3 * MiB],
  ['alloc', 0xb, 100 * KiB],
  ['alloc', 0xc, 1.5 * MiB],
  ['free', 0xb, 100 * KiB],
  ['alloc', 0xd, 200 * KiB],
  ['free', 0xa, 3 * MiB],
  ['free', 0xc, 1.5 * MiB],
  ['free', 0xd, 200 * KiB],
];
const traceFile = join(dir, 'known.jsonl');
writeFileSync(
  traceFile,
  [
    JSON.stringify({ format: 'gpumem-trace', version: 1, source: 'test', eventCount: events.length }),
    ...events.map(([action, ptr, bytes], i) => JSON.stringify({ timeNs: i * 1000, action, ptr, bytes, stream: 0, tag: 0 })),
  ]
    .map((line) => `${line}\n`)
    .join(''),
);

/** The data rows of the replay table, by allocator. */
function tableRows(stdout: string): Map<string, string[]> {
  const { header, rows } = readTable(stdout);
  rows.set('#header', header);
  return rows;
}

const gpu = hasCudaDevice();
const cell = (rows: Map<string, string[]>, allocator: string, column: string) => rows.get(allocator)![rows.get('#header')!.indexOf(column)];

describe('gpumem replay --capacity', () => {
  it('replays as if the device had that much memory; an OOM shows the largest free block and idle reserved bytes', () => {
    const r = run(['replay', traceFile, '--allocators', 'host,pool:upstream=host', '--repeat', '1', '--capacity', '6MiB']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('replayed as if the device had 6.00 MiB');
    const rows = tableRows(r.stdout);
    expect(cell(rows, 'host', 'OOMs')).toBe('0');
    expect(cell(rows, 'pool:upstream=host', 'OOMs')).toBe('1'); // C's 2 MiB segment does not fit next to 4 + 2 MiB
    expect(cell(rows, 'pool:upstream=host', 'largest free at OOM')).toBe('1.90 MiB');
    expect(cell(rows, 'pool:upstream=host', 'unallocated at OOM')).toBe('2.90 MiB');
    expect(cell(rows, 'host', 'largest free at OOM')).toBe('-');
    // host keeps host memory: not ranked; the device strategy ran out of memory (on a GPU, a pool
    // over host memory keeps host memory too)
    if (gpu) {
      expect(r.stdout).toMatch(/recommendation:\n {2}Least memory: no strategy that keeps its memory on the device was replayed\./);
      expect(r.stdout).toContain('  Not ranked: host and pool:upstream=host keep their memory in host memory, not on the GPU.');
    } else {
      expect(r.stdout).toMatch(
        /recommendation:\n {2}No strategy that uses the device replayed the whole trace without running out of memory at 6\.00 MiB/,
      );
      expect(r.stdout).toContain('  Not ranked: host keeps its memory in host memory, not on the GPU.');
    }
  });

  it('a capacity below the largest single request is an error before anything is allocated (exit 2)', () => {
    const r = run(['replay', traceFile, '--allocators', 'host', '--capacity', '2MiB']);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      "gpumem replay: '--capacity' 2.00 MiB is less than the trace's largest single request (3.00 MiB); no allocator could replay it\n",
    );
    expect(r.stdout).toBe('');
    const bad = run(['replay', traceFile, '--capacity', '16GB']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/for '--capacity' but received '16GB'/);
    const zero = run(['replay', traceFile, '--capacity', '0']);
    expect(zero.status).toBe(2);
    expect(zero.stderr).toMatch(/'--capacity' must be more than 0 bytes/);
  });
});

describe('gpumem replay --min-capacity', () => {
  it("finds each allocator's smallest capacity, counts the probes, and recommends", () => {
    const json = join(dir, 'min.json');
    const r = run([
      'replay',
      traceFile,
      '--allocators',
      'host,pool:upstream=host',
      '--repeat',
      '1',
      '--min-capacity',
      '--resolution',
      '1',
      '--json',
      json,
    ]);
    expect(r.status, r.stderr).toBe(0);
    const rows = tableRows(r.stdout);
    expect(cell(rows, 'host', 'min capacity')).toBe('4.70 MiB');
    expect(cell(rows, 'host', 'probes')).toBe('1'); // the lower bound fits
    expect(cell(rows, 'pool:upstream=host', 'min capacity')).toBe('8.00 MiB');
    expect(Number(cell(rows, 'pool:upstream=host', 'probes'))).toBeGreaterThan(2);
    // host's 4.70 MiB is host memory: not ranked (on a GPU, neither is a pool over host memory)
    if (!gpu) expect(r.stdout).toContain('Least memory: pool:upstream=host needs 8.00 MiB.');
    if (!gpu) expect(r.stdout).toMatch(/Fewest driver calls: pool:upstream=host, 3 calls\./);
    const out = JSON.parse(readFileSync(json, 'utf8'));
    expect(out.results[0].minCapacity).toMatchObject({ bytes: 3 * MiB + 1.5 * MiB + 200 * KiB, atLowerBound: true, probes: 1 });
    expect(out.results[1].minCapacity).toMatchObject({ bytes: 8 * MiB, failedBytes: 8 * MiB - 1 });
    expect(out.results[1].profile).toMatchObject({
      driverAllocs: 3,
      fragmentationAtPeakBytes: 8 * MiB - (3 * MiB + 100 * KiB + 1.5 * MiB),
    });
    if (!gpu) expect(out.recommendation[0]).toBe('Least memory: pool:upstream=host needs 8.00 MiB.');
    expect(out.notRanked[0]).toEqual({ label: 'host', reason: 'keeps its memory in host memory, not on the GPU' });
  });

  it('says "> CAP" when an allocator never fits under --capacity', () => {
    const r = run(['replay', traceFile, '--allocators', 'pool:upstream=host', '--repeat', '1', '--min-capacity', '--capacity', '6MiB']);
    expect(r.status, r.stderr).toBe(0);
    expect(cell(tableRows(r.stdout), 'pool:upstream=host', 'min capacity')).toBe('> 6.00 MiB');
    // on a GPU a pool over host memory keeps host memory, and is not ranked
    expect(r.stdout).toMatch(
      gpu
        ? /no strategy that keeps its memory on the device was replayed/
        : /no strategy replayed the trace without running out of memory under the search's cap/,
    );
  });
});

describe('gpumem replay --progress', () => {
  it('says on stderr when each allocator is done: its minimum capacity, probes and time', () => {
    const r = run(['replay', traceFile, '--allocators', 'host,pool:upstream=host', '--repeat', '1', '--min-capacity', '--progress']);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('gpumem replay: ['));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^gpumem replay: \[1\/2\] host: min capacity 4\.70 MiB \(1 probe\), \d+\.\d s$/);
    expect(lines[1]).toMatch(/^gpumem replay: \[2\/2\] pool:upstream=host: min capacity 8\.00 MiB \(\d+ probes\), \d+\.\d s$/);
    expect(r.stdout).not.toContain('gpumem replay: ['); // the table's stream stays clean
  });

  it.skipIf(process.platform !== 'linux' || spawnSync('script', ['--version']).status !== 0)(
    'is on by default with --min-capacity when stderr is a terminal',
    () => {
      // script(1) runs the command on a pseudo-terminal; the table goes to /dev/null, stderr to the terminal
      const command = [process.execPath, cli, 'replay', traceFile, '--allocators', 'host', '--repeat', '1', '--min-capacity']
        .map((a) => `'${a}'`)
        .join(' ');
      const r = spawnSync('script', ['-qec', `${command} >/dev/null`, '/dev/null'], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/gpumem replay: \[1\/1\] host: min capacity 4\.70 MiB \(1 probe\)/);
    },
  );

  it('is off when stderr is not a terminal and --progress is not given', () => {
    const r = run(['replay', traceFile, '--allocators', 'host', '--repeat', '1', '--min-capacity']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('gpumem replay: [');
  });
});

const hasPrlimit = process.platform === 'linux' && spawnSync('prlimit', ['--version']).status === 0;

describe.skipIf(!hasPrlimit || gpu)('gpumem replay under an address-space limit (RLIMIT_AS)', () => {
  const limited = (args: string[]) =>
    spawnSync('prlimit', [`--as=${3 * 1024 * MiB}`, process.execPath, cli, ...args], { encoding: 'utf8', timeout: testTime(120_000) });

  it('says why expandable runs out of memory, and the option that lowers the range it reserves', () => {
    const r = limited(['replay', traceFile, '--allocators', 'expandable,expandable:reserveBytes=64MiB,pool', '--repeat', '1']);
    expect(r.status, r.stderr).toBe(0);
    const rows = tableRows(r.stdout);
    expect(cell(rows, 'expandable', 'OOMs')).toBe('4'); // every allocation: its 64 GiB range cannot be reserved
    expect(cell(rows, 'expandable:reserveBytes=64MiB', 'OOMs')).toBe('0');
    expect(cell(rows, 'pool', 'OOMs')).toBe('0');
    const note = r.stdout.split('\n').find((l) => l.startsWith('  expandable: the first out of memory:'));
    expect(note).toContain("could not reserve the stream's virtual range");
    expect(note).toContain('every stream and tag reserves reserveBytes (64.00 GiB) of address space');
    expect(note).toContain("this process's address space is limited to 3.00 GiB (RLIMIT_AS: ulimit -v, prlimit --as)");
    expect(note).toContain('lower the option reserveBytes');
    expect(r.stdout).toMatch(/ {2}pool: replayed within [\d.]+ [MG]iB: the address space is limited to 3\.00 GiB \(RLIMIT_AS\)/);
  });
});

describe('gpumem replay --report', () => {
  it('writes an HTML report with the table, the timelines and the recommendation', () => {
    const report = join(dir, 'pick.html');
    const r = run(['replay', traceFile, '--allocators', 'host,pool', '--repeat', '1', '--min-capacity', '--report', report]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`wrote ${report}`);
    const html = readFileSync(report, 'utf8');
    expect(html).toContain('<title>gpumem replay: ');
    expect(html).toContain('class="recommendation"');
    expect(html).toContain('Min capacity');
    expect(html).toContain('id="timeline-1"');
  });
});

describe('gpumem replay: checks before any work', () => {
  it('an unwritable --report or --json is exit 2 naming the flag, before the trace is read', () => {
    const missing = join(dir, 'no-such-trace.jsonl');
    const report = run(['replay', missing, '--report', join(dir, 'no-such-dir', 'r.html')]);
    expect(report.status).toBe(2);
    expect(report.stderr).toMatch(/^gpumem replay: '--report' .*no-such-dir.*does not exist\n$/);
    const json = run(['replay', missing, '--json', dir]);
    expect(json.status).toBe(2);
    expect(json.stderr).toMatch(/^gpumem replay: '--json' .*: is a folder; give a file name\n$/);
    expect(existsSync(join(dir, 'no-such-dir'))).toBe(false);
  });

  it('a missing trace is the only message: nothing about skipped allocators first', () => {
    const r = run(['replay', join(dir, 'missing.jsonl')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^gpumem replay: cannot read '.*missing\.jsonl': no such file\n$/);
    expect(r.stdout).toBe('');
  });

  it('--resolution needs --min-capacity; bad specs are named', () => {
    const res = run(['replay', traceFile, '--resolution', '1MiB']);
    expect(res.status).toBe(2);
    expect(res.stderr).toMatch(/'--resolution' is the precision of '--min-capacity'/);
    const spec = run(['replay', traceFile, '--allocators', 'pool:maxReservedBytes']);
    expect(spec.status).toBe(2);
    expect(spec.stderr).toMatch(/'--allocators': Expected key=value/);
    const both = run(['replay', traceFile, '--allocators', 'host:limitBytes=8MiB', '--capacity', '8MiB', '--repeat', '1']);
    expect(both.status).toBe(2); // before any work
    expect(both.stdout).toBe('');
    expect(both.stderr).toMatch(/host:limitBytes=8MiB: its option limitBytes and '--capacity' both cap its memory/);
  });
});

describe('gpumem replay of a two-stream PyTorch snapshot recorded with stacks', () => {
  const snapshot = fileURLToPath(new URL('../../../trace/src/snapshot/fixtures/two-streams.pickle.gz', import.meta.url));

  it('ranks only device strategies for memory, says which were not replayed or not ranked, and explains the recorded row', () => {
    const json = join(dir, 'snapshot.json');
    const r = run(['replay', snapshot, '--repeat', '1', '--json', json]);
    expect(r.status, r.stderr).toBe(0);
    const least = /Least memory: (.*?) (peaks|peak) at/.exec(r.stdout);
    expect(least, r.stdout).not.toBeNull();
    for (const label of least![1]!.split(/, | and /)) expect(['pool', 'expandable', 'cuda', 'async', 'uvm']).toContain(label);
    expect(r.stdout).toContain('Not ranked: host and pinned keep their memory in host memory, not on the GPU.');
    expect(r.stdout).toMatch(/Not ranked for memory: tiered holds what does not fit on the device in host memory/);
    if (!gpu) expect(r.stdout).toContain('Caveat: not replayed, so not compared: cuda, uvm and async (no CUDA device).');
    expect(r.stdout).toMatch(
      /PyTorch caching allocator \(recorded\): peak allocated counts a block until its free completed .*max_memory_allocated\(\) stops counting at the free call \(free_requested\): 415\.03 MiB/,
    );
    expect(r.stdout).toMatch(/at its peak, by where it was allocated: .*\/home\/user\/model\.py:31:attention/);
    const out = JSON.parse(readFileSync(json, 'utf8'));
    if (!gpu) expect(out.skipped.map((s: { label: string }) => s.label)).toEqual(['cuda', 'uvm', 'async']);
    expect(out.notRanked.map((s: { label: string }) => s.label).sort()).toEqual(['host', 'pinned', 'tiered']);
    expect(out.peakByTag.reduce((sum: number, p: { bytes: number }) => sum + p.bytes, 0)).toBe(out.trace.peakAllocatedBytes);
    expect(out.recorded.peakAllocatedAtFreeRequestBytes).toBe(435_192_355);
  });

  it.skipIf(gpu)('gives the same numbers run after run on the host', () => {
    const numbers = () => {
      const json = join(dir, 'again.json');
      const r = run(['replay', snapshot, '--repeat', '2', '--min-capacity', '--allocators', 'pool,pinned,expandable', '--json', json]);
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(readFileSync(json, 'utf8'));
      return out.results.map(
        (x: {
          result: { peakReservedBytes: number; peakReservedRange: number[] };
          profile: { fragmentationAtPeakBytes: number; reservedAtPeakBytes: number };
          minCapacity: { bytes: number };
        }) => [
          x.result.peakReservedBytes,
          x.result.peakReservedRange,
          x.profile.reservedAtPeakBytes,
          x.profile.fragmentationAtPeakBytes,
          x.minCapacity.bytes,
        ],
      );
    };
    const first = numbers();
    for (const row of first) expect(row[2]).toBe(row[0]); // fragmentation measured at the peak the table shows
    expect(numbers()).toEqual(first);
    expect(numbers()).toEqual(first);
  });
});
