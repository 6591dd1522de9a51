/**
 * `gpumem replay`'s run and table (replay-run.ts, replay-table.ts, replay-json.ts): a small trace
 * replayed through host strategies (they run everywhere), a row that fails beside rows that finish,
 * and a run where none finishes.
 */
import { describe, expect, it } from 'vitest';
import '@gpumem/allocator-pool';
import { compileTrace, type ReadTrace, type TraceEvent } from '@gpumem/trace';
import { replayAllocators } from './replay-run.js';
import { formatReplayTable, replayNotes, replayProgressLine } from './replay-table.js';
import { replayJson } from './replay-json.js';
import { describeTrace } from './trace-description.js';
import { parseAllocatorSpec } from './spec.js';

const KiB = 1024;
let clock = 0;
const ev = (action: TraceEvent['action'], ptr: number, bytes: number): TraceEvent => {
  clock += 1_000_000;
  return { timeNs: clock, action, ptr, bytes, stream: 0, tag: 0 };
};
const trace = {
  format: 'gpumem',
  header: { source: 'test' },
  events: [ev('alloc', 1, 300 * KiB), ev('alloc', 2, 10 * KiB), ev('free', 2, 10 * KiB), ev('free', 1, 300 * KiB)],
} as unknown as ReadTrace;
const compiled = compileTrace(trace);
const settings = { repeats: 1, minCapacity: false, resolutionBytes: 64 * KiB, skipped: [], gpu: false };
// a registered strategy with an option it refuses: its row fails, the others stand
const failing = { ...parseAllocatorSpec('pool:upstream=host'), label: 'pool:broken', options: { upstream: 'nowhere' } };

describe('replayAllocators', () => {
  it('replays each allocator in turn, says each row as it is done, and recommends from the rows that finished', () => {
    const done: string[] = [];
    const run = replayAllocators(trace, compiled, [parseAllocatorSpec('host'), parseAllocatorSpec('pool:upstream=host'), failing], {
      ...settings,
      onRow: (row, i, count) => done.push(replayProgressLine(row, i, count)),
    });
    expect(run.rows.map((r) => r.label)).toEqual(['host', 'pool:upstream=host', 'pool:broken']);
    expect(run.rows[0]!.result?.calls).toBe(4);
    expect(run.rows[2]!.error).toBeDefined();
    expect(run.noneFinished).toBeUndefined();
    expect(run.baseline).toBeUndefined(); // not a PyTorch snapshot
    expect(done).toHaveLength(3);
    expect(done[0]).toMatch(/^\[1\/3\] host: replayed, [0-9.]+ s$/);
    expect(done[2]).toMatch(/^\[3\/3\] pool:broken: failed \(/);

    const table = formatReplayTable(run.rows, run.baseline, compiled.traceOoms);
    expect(table).toMatch(/^allocator +loop +calls/);
    expect(table).toMatch(/\npool:upstream=host +\S+ +4 /);
    expect(table).toMatch(/\npool:broken +failed/);
    const notes = replayNotes(run.rows, run.baseline, { resolutionBytes: settings.resolutionBytes });
    expect(notes.some((n) => n.startsWith('failed: pool:broken: '))).toBe(true);

    const json = JSON.parse(replayJson('t.jsonl', trace, compiled, run, undefined));
    expect(json.file).toBe('t.jsonl');
    expect(json.trace.events).toBe(4);
    expect(json.results.map((r: { allocator: string }) => r.allocator)).toEqual(['host', 'pool:upstream=host', 'pool:broken']);
    expect(json.results[0].profile.timeline).toBeUndefined(); // timelines go into the report only
    expect(json.recommendation).toEqual(run.advice.lines);
  });

  it('when no allocator finishes, the recommendation is one line saying why and the failures are not listed again', () => {
    const run = replayAllocators(trace, compiled, [failing], settings);
    expect(run.noneFinished).toMatch(/^no strategy could replay the trace: pool:broken: /);
    expect(run.advice.lines).toEqual([run.noneFinished]);
    expect(replayNotes(run.rows, run.baseline, { resolutionBytes: settings.resolutionBytes })).toEqual([]);
  });
});

describe('describeTrace', () => {
  it('names the file, its form and where it came from, and what it holds', () => {
    const text = describeTrace('t.jsonl', trace, compiled);
    expect(text).toMatch(
      /^trace t\.jsonl \(gpumem; test\)\n {2}4 events over 3\.0 ms: 2 allocs, 2 frees, 0 OOMs, 1 stream\(s\); peak allocated 310\.00 KiB/,
    );
  });
});
