/**
 * bench/soak as CI runs it: a short soak of the host strategies, through the script itself (as a
 * user runs it), checking its verdict and the figures in its JSON. The full run (10 million
 * operations per strategy, on a GPU) is recorded in bench/RESULTS.md.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../bench/soak/run.js', import.meta.url));

interface SoakRow {
  allocator: string;
  ops: number;
  mallocs: number;
  frees: number;
  drainFrees: number;
  crossStreamFrees: number;
  ooms: number;
  verdict: string;
  problems: string[];
  peakLiveBytes: number;
  maxReserved: number;
  reservedAt10: number;
  reservedAt100: number;
  reservedAfterTrim: number;
  afterDrain: { allocatedBytes: number; allocCount: number; freeCount: number };
  samples: Array<{ op: number; reservedBytes: number; allocatedBytes: number }>;
}

function soak(...args: string[]): { status: number | null; stdout: string; stderr: string; rows: SoakRow[] } {
  const out = join(mkdtempSync(join(tmpdir(), 'gpumem-soak-')), 'soak.json');
  const r = spawnSync(process.execPath, [script, ...args, '--out', out], { encoding: 'utf8' });
  let rows: SoakRow[] = [];
  try {
    rows = JSON.parse(readFileSync(out, 'utf8')).rows;
  } catch {
    // no JSON: the assertions on status and output say why
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, rows };
}

describe('bench/soak', () => {
  it('host and pool-host, 200,000 operations on one stream: bounded, nothing left allocated', () => {
    const r = soak('--ops', '200000', '--allocators', 'host,pool-host', '--streams', '1');
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^\| host +\| 200,000 .*\| bounded +\|$/m);
    expect(r.stdout).toMatch(/^\| pool-host +\| 200,000 .*\| bounded +\|$/m);
    expect(r.rows.map((row) => row.allocator)).toEqual(['host', 'pool-host']);
    for (const row of r.rows) {
      expect(row.verdict).toBe('bounded');
      expect(row.problems).toEqual([]);
      expect(row.ops).toBe(200_000);
      expect(row.mallocs + row.frees).toBe(200_000);
      expect(row.frees + row.drainFrees).toBe(row.mallocs);
      expect(row.ooms).toBe(0);
      expect(row.afterDrain.allocatedBytes).toBe(0);
      expect(row.afterDrain.allocCount).toBe(row.afterDrain.freeCount);
      expect(row.samples.length).toBe(1000);
      expect(row.maxReserved).toBeGreaterThanOrEqual(row.peakLiveBytes * 0.5);
      expect(row.reservedAfterTrim).toBe(0);
    }
    // the pool caches: it holds at least the live set at the end of the run, the host strategy exactly it
    const pool = r.rows[1]!;
    expect(pool.reservedAt100).toBeGreaterThanOrEqual(pool.samples.at(-1)!.allocatedBytes);
  });

  it('spreads operations over 4 streams and frees some on another stream than their own', () => {
    const r = soak('--ops', '100000', '--allocators', 'host');
    expect(r.status).toBe(0);
    const [row] = r.rows;
    expect(row!.verdict).toBe('bounded');
    expect(row!.crossStreamFrees).toBeGreaterThan(row!.frees * 0.1);
  });

  // Free neighbours freed on different streams merge (the merged block remembers their streams and
  // its next user waits on them), so the pieces of a segment come back together and large requests
  // do not keep growing new segments: before, this reserved about 12 GiB for a 1 GiB live set after
  // 2 million operations.
  it('pool-host over 4 streams stays bounded (free neighbours of different streams merge)', () => {
    const r = soak('--ops', '400000', '--allocators', 'pool-host');
    expect(r.status).toBe(0);
    const [row] = r.rows;
    expect(row!.verdict).toBe('bounded');
    expect(row!.problems).toEqual([]);
    expect(row!.crossStreamFrees).toBeGreaterThan(row!.frees * 0.1);
    expect(row!.maxReserved).toBeLessThan(row!.peakLiveBytes * 4);
    expect(row!.reservedAfterTrim).toBe(0);
  });

  it('bad flags exit 2 naming the flag', () => {
    const bad = spawnSync(process.execPath, [script, '--ops', 'many'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--ops needs a positive integer \(received 'many'\)/);
    const unknown = spawnSync(process.execPath, [script, '--allocators', 'nope'], { encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown allocator 'nope' for --allocators/);
  });
});
