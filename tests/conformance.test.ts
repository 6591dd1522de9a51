/**
 * One conformance suite over every registered allocator (plug-ins included): the same behaviour
 * is required of each. The suite itself is exported (`@gpumem/allocator-core/testing`) so that a
 * plug-in's author runs exactly this on their strategy. Strategies that need a GPU are skipped,
 * with the reason in their title, where there is none. The sleep cases run for the strategies with
 * the registry's sleep flag, with the case's options plus a small limitBytes or backupLimitBytes
 * where a case needs one.
 */
import * as vitest from 'vitest';
import { describeConformance } from '@gpumem/allocator-core/testing';
import { allocatorCases, make } from './allocators.js';
import { noGpuReason } from './gpu.js';

for (const c of allocatorCases()) {
  describeConformance(vitest, {
    label: c.label,
    name: c.name,
    create: () => make(c),
    createWith: (extra) => make({ ...c, options: { ...c.options, ...extra } }),
    smallDevice: c.smallDevice,
    oversizeBytes: c.oversizeBytes,
    skip: c.runnable ? false : noGpuReason,
  });
}
