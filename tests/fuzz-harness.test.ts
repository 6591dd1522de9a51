/**
 * The trace fuzzer's harness (scripts/fuzz/harness.mjs) classifies what it sees: a sound trace is
 * ok, the reader's typed error is typed, and an untyped error, an unsound trace, a crash, a hang, a
 * heap out of memory, resident memory past its allowance or an error thrown after the read returned
 * is a defect. Checked with a stub reader in real child processes, as the fuzzer runs the real one.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classify, defaultLimits, type FuzzCase, type FuzzResult, rssAllowance, runCases } from '../scripts/fuzz/harness.mjs';
import { testTime } from './time-budget.js';

const MiB = 2 ** 20;
const dir = mkdtempSync(join(tmpdir(), 'gpumem-fuzz-harness-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A reader whose behaviour is the content of the file it is given. */
const stub = `
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
export class StubFormatError extends Error {}
export const typedErrors = [StubFormatError];
const event = { timeNs: 0, action: 'alloc', ptr: 4096, bytes: 64, stream: 0, tag: 0 };
const trace = (events) => ({ format: 'stub', header: { source: 'stub' }, events });
let held;
export async function read(path) {
  switch (readFileSync(path, 'utf8')) {
    case 'ok': return trace([event]);
    case 'typed': throw new StubFormatError('malformed at line 2');
    case 'untyped': throw new TypeError("Cannot read properties of undefined (reading 'size')");
    case 'stack': { const f = (n) => f(n + 1) + 1; return f(0); }
    case 'unsound': return trace([event, { ...event, timeNs: 2 ** 70 }]);
    case 'hang': for (;;) {}
    case 'abort': process.abort();
    case 'heap': { const a = []; for (;;) a.push(new Array(4e6).fill(1.5)); }
    case 'grow': held = Buffer.alloc(64 * 2 ** 20, 1); return trace([event]);
    case 'runaway': { const all = []; for (;;) { all.push(Buffer.alloc(16 * 2 ** 20, 1)); await sleep(5); } }
    case 'late': setTimeout(() => { throw new RangeError('a stream failed after the read'); }, 0); return trace([event]);
  }
}`;
const readerPath = join(dir, 'stub-reader.mjs');
writeFileSync(readerPath, stub);

// the hang is found at the timeout; a busy machine must not make a trivial read look like one
const limits = { ...defaultLimits, timeoutMs: testTime(3000), timeoutPerMiBMs: 0, heapMb: 32, rssSlackBytes: 32 * MiB };

/** Runs cases whose content names the stub's behaviour; returns each behaviour's result. */
async function run(behaviours: string[]): Promise<Map<string, FuzzResult>> {
  const cases: FuzzCase[] = behaviours.map((b, index) => ({
    index,
    format: 'stub',
    seed: b,
    mutation: 'none',
    bytes: Buffer.from(b),
    contentBytes: b.length,
    values: 0,
  }));
  const results = new Map<string, FuzzResult>();
  await runCases(() => cases.shift(), {
    readerPath,
    dir,
    jobs: 2,
    limits,
    onResult: (c, r) => {
      expect(results.has(c.seed), `${c.seed} reported twice`).toBe(false);
      results.set(c.seed, r);
    },
  });
  return results;
}

describe('the trace fuzzer classifies outcomes', () => {
  it('a sound trace is ok, the typed error typed; an untyped error, a stack overflow and an unsound trace are defects', async () => {
    const r = await run(['ok', 'typed', 'untyped', 'stack', 'unsound']);
    expect(r.get('ok')).toMatchObject({ outcome: 'ok', detail: '1 events' });
    expect(r.get('typed')).toMatchObject({ outcome: 'typed', detail: 'StubFormatError: malformed at line 2' });
    expect(r.get('untyped')).toMatchObject({ outcome: 'defect', detail: expect.stringMatching(/^untyped error: TypeError: Cannot read/) });
    expect(r.get('stack')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^untyped error: RangeError: Maximum call stack/),
    });
    expect(r.get('unsound')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^unsound trace: event 1: timeNs .* not a non-negative safe integer/),
    });
  });

  it('a hang, an abort, a heap out of memory, memory past the allowance and a late error are defects, and a fresh child reads on', async () => {
    const r = await run(['hang', 'abort', 'heap', 'grow', 'runaway', 'late', 'ok']);
    expect(r.get('hang')).toMatchObject({ outcome: 'defect', detail: `timeout: still reading after ${limits.timeoutMs} ms` });
    expect(r.get('abort')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^crash: the process ended \(signal SIGABRT\)/),
    });
    expect(r.get('heap')).toMatchObject({ outcome: 'defect', detail: expect.stringMatching(/^crash: .*heap out of memory/i) });
    expect(r.get('grow')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^memory: the resident set grew by \d+ MiB, past the 32 MiB allowed \(ok\)/),
    });
    expect(r.get('runaway')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^memory: resident set \d+ MiB past \d+ MiB, killed/),
    });
    expect(r.get('late')).toMatchObject({
      outcome: 'defect',
      detail: expect.stringMatching(/^crash: .*RangeError: a stream failed after the read/),
    });
    expect(r.get('ok')?.outcome).toBe('ok');
  });

  it('the allowance grows with the content and with the values a pickle may hold', () => {
    expect(rssAllowance(0, 0)).toBe(defaultLimits.rssSlackBytes);
    expect(rssAllowance(100 * MiB, 0)).toBe(defaultLimits.rssSlackBytes + 125 * MiB);
    expect(rssAllowance(MiB, MiB)).toBe(defaultLimits.rssSlackBytes + 1.25 * MiB + 16 * MiB);
    // a reply within the allowance is what it says; past it, a defect whatever it says
    const reply = { outcome: 'typed' as const, name: 'TraceFormatError', detail: 'bad', startRssBytes: 50 * MiB, peakRssBytes: 150 * MiB };
    expect(classify(reply, 100 * MiB).outcome).toBe('typed');
    expect(classify(reply, 99 * MiB)).toEqual({
      outcome: 'defect',
      detail: 'memory: the resident set grew by 100 MiB, past the 99 MiB allowed (typed TraceFormatError)',
    });
  });

  it('a worker may hold at most 1 GiB at any time, whatever a case is allowed', () => {
    expect(defaultLimits.maxRssBytes).toBe(1024 * MiB);
    const reply = { outcome: 'ok' as const, events: 1, startRssBytes: 900 * MiB, peakRssBytes: 1100 * MiB };
    expect(classify(reply, 4096 * MiB)).toEqual({
      outcome: 'defect',
      detail: 'memory: the resident set peaked at 1100 MiB, past the 1024 MiB a worker may hold',
    });
    expect(classify(reply, 4096 * MiB, 2048 * MiB).outcome).toBe('ok');
  });
});
