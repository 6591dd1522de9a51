/**
 * The conformance suite catches a strategy that breaks stream order across streams: a TypeScript
 * sub-allocator sharing one arena across streams (fixtures/shared-arena-allocator.ts), which hands a
 * block freed on stream A to stream B while work queued on A still uses it. Every other case of the
 * suite passes on it (the defect was invisible before the cross-stream case); that case fails. The
 * real strategies pass the same case in conformance.test.ts. On the host the busy stream is a host
 * stream with a queued copy; on a GPU (skipped without one) a kernel that spins 300 ms and then
 * writes into the block.
 */
import * as vitest from 'vitest';
import { describe, expect, it } from 'vitest';
import { createAllocator } from '@gpumem/allocator-core';
import { describeConformance, type ConformanceOptions, type ConformanceTestApi } from '@gpumem/allocator-core/testing';
import '@gpumem/examples/arena';
import { SharedArenaAllocator } from './fixtures/shared-arena-allocator.js';
import { gpuAvailable, gpuTitle } from './gpu.js';

interface DeclaredCase {
  name: string;
  run: () => void;
}

interface Level {
  name: string;
  before: Array<() => void>;
  after: Array<() => void>;
}

/** The suite's cases for `options`, as functions that run one case with its hooks (and throw when it fails). */
function declaredCases(options: ConformanceOptions): DeclaredCase[] {
  const cases: DeclaredCase[] = [];
  const stack: Level[] = [];
  const describeFn = (name: string, fn: () => void) => {
    stack.push({ name, before: [], after: [] });
    fn();
    stack.pop();
  };
  const api: ConformanceTestApi = {
    describe: Object.assign(describeFn, { skipIf: (skip: boolean) => (skip ? () => undefined : describeFn) }),
    it: (name, fn) => {
      const levels = [...stack];
      cases.push({
        name: [...levels.map((l) => l.name), name].join(' > '),
        run: () => {
          for (const l of levels) for (const hook of l.before) hook();
          try {
            fn();
          } finally {
            for (const l of [...levels].reverse()) for (const hook of l.after) hook();
          }
        },
      });
    },
    expect: vitest.expect,
    beforeEach: (fn) => stack.at(-1)!.before.push(fn),
    afterEach: (fn) => stack.at(-1)!.after.push(fn),
  };
  describeConformance(api, options);
  return cases;
}

const crossStream = /never hands memory that work queued on one stream still uses to another stream/;

function failures(cases: DeclaredCase[]): Array<{ name: string; message: string }> {
  const failed: Array<{ name: string; message: string }> = [];
  for (const c of cases) {
    try {
      c.run();
    } catch (e) {
      failed.push({ name: c.name, message: e instanceof Error ? e.message : String(e) });
    }
  }
  return failed;
}

const sharedArenaCases: Array<['host' | 'cuda', boolean]> = [
  ['host', true],
  ['cuda', gpuAvailable],
];

describe.each(sharedArenaCases)(
  'the conformance suite and a strategy that shares one arena across streams, over %s memory',
  (upstream, runnable) => {
    it.skipIf(!runnable)(
      runnable
        ? 'fails it on the cross-stream case, and on that case only'
        : gpuTitle('fails it on the cross-stream case, and on that case only'),
      () => {
        const cases = declaredCases({ create: () => new SharedArenaAllocator(upstream) });
        expect(cases.filter((c) => crossStream.test(c.name))).toHaveLength(1);
        const failed = failures(cases);
        expect(failed.map((f) => f.name)).toEqual([cases.find((c) => crossStream.test(c.name))!.name]);
        expect(failed[0]!.message).toMatch(/expected 'reused while A busy' to be 'intact'/);
      },
    );

    it.skipIf(!runnable)(
      runnable
        ? 'passes a strategy that orders reuse across streams (the arena example over the same memory)'
        : gpuTitle('passes the arena example'),
      () => {
        const cases = declaredCases({ create: () => createAllocator('arena', { upstream }) });
        expect(failures(cases)).toEqual([]);
      },
    );
  },
);
