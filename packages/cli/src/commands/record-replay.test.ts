import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readTable } from '../../../compare/src/text-table.testing.js';

// The built CLI, as a user runs it (npm ci builds it).
const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const arena = fileURLToPath(new URL('../../../../examples/dist/arena/index.js', import.meta.url));
const rmmSample = fileURLToPath(new URL('../../../trace/src/fixtures/rmm-sample.csv', import.meta.url));
const run = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-trace-'));
const tiny = ['--model', 'mlp', '--train-subset', '256', '--test-subset', '128', '--hidden', '32'];

/** The data rows of the replay table, by allocator. */
function tableRows(stdout: string): Map<string, string[]> {
  return readTable(stdout).rows;
}

describe('gpumem record', () => {
  it('writes a JSONL trace of a training run, and replay reproduces its peak allocated exactly', () => {
    const file = join(dir, 'host.jsonl');
    const r = run(['record', '--out', file, '--allocator', 'host', ...tiny]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /recorded \d+ events \(\d+ allocs, \d+ frees, 0 OOMs\) on 'host' \(host\), 1 epoch\(s\) of mlp on mnist; peak allocated /,
    );
    expect(r.stdout).toContain(`wrote ${file} (jsonl)`);
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    const header = JSON.parse(lines[0]!);
    expect(header).toMatchObject({ format: 'gpumem-trace', version: 1, source: 'gpumem record', allocator: 'host', device: 'host' });
    expect(header.workload).toMatchObject({ model: 'mlp', hidden: 32, 'train-subset': 256 });
    expect(header.eventCount).toBe(lines.length - 1);
    const recordedPeak = /peak allocated ([\d.]+ \w+)/.exec(r.stdout)![1]!;

    const json = join(dir, 'replay.json');
    const rp = run(['replay', file, '--allocators', 'host,pool', '--repeat', '2', '--json', json]);
    expect(rp.status, rp.stderr).toBe(0);
    expect(readTable(rp.stdout).header).toEqual([
      'allocator',
      'loop',
      'calls',
      'ns/alloc',
      'ns/free',
      'peak allocated',
      'peak reserved',
      'unused at peak reserved',
      'driver allocs/frees',
      'OOMs',
      'unmatched frees',
    ]);
    const rows = tableRows(rp.stdout);
    expect([...rows.keys()]).toEqual(['host', 'pool']);
    for (const cells of rows.values()) {
      expect(cells[1]).toBe('native');
      expect(cells[5]).toBe(recordedPeak);
    }
    const out = JSON.parse(readFileSync(json, 'utf8'));
    expect(out.trace).toMatchObject({ format: 'jsonl', events: lines.length - 1, unmatchedFrees: 0 });
    for (const row of out.results) expect(row.result.peakAllocatedBytes).toBe(out.trace.peakAllocatedBytes);
    expect(out.results[0].result.peakReservedBytes).toBe(out.trace.peakReservedBytes); // host over host: reserved as recorded
  });

  it("writes RMM's CSV form, chosen by the extension, which replay reads back", () => {
    const file = join(dir, 'host.csv');
    const r = run(['record', '--out', file, '--allocator', 'pool', ...tiny]);
    expect(r.status, r.stderr).toBe(0);
    const text = readFileSync(file, 'utf8');
    expect(text.split('\n')[0]).toBe('Thread,Time,Action,Pointer,Size,Stream');
    expect(text.split('\n')[1]).toMatch(/^\d+,\d{2}:\d{2}:\d{2}\.\d{6},allocate,0x[0-9a-f]+,\d+,0x[0-9a-f]+$/);
    const rp = run(['replay', file, '--allocators', 'pool', '--repeat', '1']);
    expect(rp.status, rp.stderr).toBe(0);
    expect(rp.stdout).toMatch(/\(rmm-csv; rmm-csv\)/);
  });

  it('warns on stderr when the ring dropped events, and offers --capacity', () => {
    const file = join(dir, 'small.jsonl');
    const r = run(['record', '--out', file, '--allocator', 'host', '--capacity', '100', ...tiny]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/held 100 events and dropped the \d+ oldest; the trace starts mid-run .*--capacity \d+/);
    expect(JSON.parse(readFileSync(file, 'utf8').split('\n')[0]!).droppedEvents).toBeGreaterThan(0);
    const rp = run(['replay', file, '--allocators', 'host', '--repeat', '1']);
    expect(rp.status, rp.stderr).toBe(0);
    expect(rp.stdout).toMatch(/the recorder dropped \d+ older events/);
    expect(Number(tableRows(rp.stdout).get('host')!.at(-1))).toBeGreaterThanOrEqual(0);
  });

  it('--help has examples; bad flags name the flag and the accepted values, exit 2', () => {
    const help = run(['record', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/Usage: gpumem record --out FILE/);
    expect(help.stdout).toMatch(/Examples:\n {2}gpumem record --out/);
    expect(help.stdout).toMatch(/--model mlp\|gcn/); // the train flags too
    const noOut = run(['record', '--allocator', 'host']);
    expect(noOut.status).toBe(2);
    expect(noOut.stderr).toMatch(/'--out' is required/);
    const badFormat = run(['record', '--out', join(dir, 'x.jsonl'), '--format', 'parquet']);
    expect(badFormat.status).toBe(2);
    expect(badFormat.stderr).toMatch(/'--format' must be one of jsonl, rmm-csv \(received 'parquet'\)/);
    const noExt = run(['record', '--out', join(dir, 'trace.txt'), '--allocator', 'host']);
    expect(noExt.status).toBe(2);
    expect(noExt.stderr).toMatch(/pass '--format' \(one of jsonl, rmm-csv\)/);
    const badCapacity = run(['record', '--out', join(dir, 'x.jsonl'), '--capacity', '0']);
    expect(badCapacity.status).toBe(2);
    expect(badCapacity.stderr).toMatch(/'--capacity' must be at least 1/);
    const badDir = run(['record', '--out', join(dir, 'no-such-dir', 'x.jsonl'), '--allocator', 'host']);
    expect(badDir.status).toBe(2);
    expect(badDir.stderr).toMatch(/'--out' .*no-such-dir.*: the folder .* does not exist/);
    const badAllocator = run(['record', '--out', join(dir, 'x.jsonl'), '--allocator', 'slab']);
    expect(badAllocator.status).toBe(2);
    expect(badAllocator.stderr).toMatch(/'--allocator'.*registered: .*host/);
  });
});

describe('gpumem replay', () => {
  it("replays RMM's sample log through every allocator that can run here, plug-ins included", () => {
    const r = run(['replay', rmmSample, '--repeat', '2'], { GPUMEM_PLUGINS: arena });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/48 events over [\d.]+ ms: 24 allocs, 23 frees, 1 OOMs, 2 stream\(s\); peak allocated/);
    expect(r.stdout).toMatch(/1 allocations live at the end/);
    const rows = tableRows(r.stdout);
    expect(rows.get('host')?.[1]).toBe('native');
    expect(rows.get('pool')?.[1]).toBe('native');
    expect(rows.get('arena')?.[1]).toBe('typescript');
    const peaks = new Set([...rows.values()].map((c) => c[5]));
    expect(peaks.size).toBe(1); // every strategy sees the same requests
  });

  it('an allocator that fails is a row with its error, and the others go on', () => {
    const r = run(['replay', rmmSample, '--allocators', 'arena,host', '--loop', 'native', '--repeat', '1'], { GPUMEM_PLUGINS: arena });
    expect(r.status).toBe(1);
    const rows = tableRows(r.stdout);
    expect(rows.get('arena')?.[1]).toBe('failed');
    // the error under the table, not in it
    expect(
      rows
        .get('arena')
        ?.slice(2)
        .every((c) => c === ''),
    ).toBe(true);
    expect(r.stdout).toMatch(/^ {2}failed: arena: TypeError: Expected a native strategy/m);
    expect(rows.get('host')?.[1]).toBe('native');
  });

  it('--help has examples; bad flags and arguments exit 2 naming them', () => {
    const help = run(['replay', '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/Usage: gpumem replay FILE/);
    expect(help.stdout).toMatch(/Examples:\n {2}gpumem replay /);
    const none = run(['replay']);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/expected a trace FILE/);
    const two = run(['replay', 'a.jsonl', 'b.jsonl']);
    expect(two.status).toBe(2);
    expect(two.stderr).toMatch(/expected one trace FILE but received 2/);
    const unknown = run(['replay', rmmSample, '--allocator', 'pool']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe('gpumem replay: unknown flag --allocator (did you mean --allocators?)\nsee gpumem replay --help\n');
    const badName = run(['replay', rmmSample, '--allocators', 'pool,slab']);
    expect(badName.status).toBe(2);
    expect(badName.stderr).toMatch(/'--allocators' names 'slab', which is not registered \(registered: .*host.*pool/);
    const badRepeats = run(['replay', rmmSample, '--repeat', 'many']);
    expect(badRepeats.status).toBe(2);
    expect(badRepeats.stderr).toMatch(/'--repeat' must be an integer \(received 'many'\)/);
    const badLoop = run(['replay', rmmSample, '--loop', 'wasm']);
    expect(badLoop.status).toBe(2);
    expect(badLoop.stderr).toMatch(/'--loop' must be one of auto, native, typescript/);
  });

  it('a malformed or missing file is a clear error naming the file and line, exit 1', () => {
    const bad = join(dir, 'bad.csv');
    writeFileSync(bad, 'Thread,Time,Action,Pointer,Size,Stream\n1,14:03:21.100012,allocate,0x100,-1,0x0\n');
    const r = run(['replay', bad, '--allocators', 'host']);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`gpumem replay: malformed trace: ${bad}:2: Size must be a non-negative decimal integer (received '-1')\n`);
    expect(r.stdout).toBe('');
    const missing = run(['replay', join(dir, 'nope.jsonl'), '--allocators', 'host']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/cannot read '.*nope\.jsonl': no such file/);
  });
});
