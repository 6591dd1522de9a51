/**
 * Traces whose doctor verdicts are known, shared by the doctor's tests (packages/trace) and the
 * CLI's (packages/cli): rows of [action, ptr, bytes, tag]. Left out of the build and the tarball.
 * @module
 */
import type { TraceEvent } from './format.js';

const MiB = 1024 * 1024;

export type CaseRow = [TraceEvent['action'], number, number, number?];

/**
 * 20 MiB allocated and freed (the pool keeps its 20 MiB segment), five 4 MiB blocks carved from it,
 * every other one freed (4 MiB holes), then 8 MiB: no hole fits and the segment is not free, so the
 * pool needs 28 MiB, and PyTorch's allocator (its twin, `caching`), whose segment for a request under
 * 10 MiB is 20 MiB, 40 MiB; expandable segments give the holes' memory back and need 24 MiB. Live
 * peak: 20 MiB.
 */
export const fragmentingRows: CaseRow[] = [
  ['alloc', 1, 20 * MiB],
  ['free', 1, 20 * MiB],
  ...[0, 1, 2, 3, 4].map((i): CaseRow => ['alloc', 10 + i, 4 * MiB]),
  ...[0, 2, 4].map((i): CaseRow => ['free', 10 + i, 4 * MiB]),
  ['alloc', 20, 8 * MiB],
];

/** Weights (12 MiB) and optimizer state (4 MiB) standing, then a step of three 3 MiB activations: live peak 25 MiB. */
export const trainingRows: CaseRow[] = [
  ['alloc', 1, 12 * MiB, 1],
  ['alloc', 2, 4 * MiB, 2],
  ['alloc', 3, 3 * MiB, 3],
  ['alloc', 4, 3 * MiB, 3],
  ['alloc', 5, 3 * MiB, 3],
  ['free', 5, 3 * MiB, 3],
  ['free', 4, 3 * MiB, 3],
  ['free', 3, 3 * MiB, 3],
];

/** The tag names of trainingRows, by tag id. */
export const trainingTags = ['other', 'weights', 'optimizer', 'activations'];
