/**
 * Allocator specs checked before any run: each spec that carries options (or whose strategy cannot
 * be made without them, e.g. 'plugin') is made once and disposed, so a bad option fails the command
 * at once instead of when that allocator's turn comes. Only argument errors (TypeError, RangeError,
 * which the strategies throw for options they refuse) count; a failure of the machine (no CUDA
 * device, out of memory) is left for the run itself to report.
 * @module
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createAllocator, hasAllocator, strategyInfo } from '@gpumem/allocator-core';
import type { AllocatorSpec } from './spec.js';

/** A spec the strategy refused, and why. */
export interface SpecProblem {
  label: string;
  message: string;
}

/** True when making the allocator can tell something about the spec: it has options, or its strategy needs some. */
function worthChecking(spec: AllocatorSpec): boolean {
  return hasAllocator(spec.name) && (Object.keys(spec.options).length > 0 || strategyInfo(spec.name).requiresOptions);
}

/** Makes and disposes each spec's allocator in this process; returns the specs whose options were refused. */
export function specProblems(specs: readonly AllocatorSpec[]): SpecProblem[] {
  const problems: SpecProblem[] = [];
  for (const spec of specs.filter(worthChecking)) {
    try {
      createAllocator(spec.name, spec.options).dispose();
    } catch (e) {
      if (e instanceof TypeError || e instanceof RangeError) problems.push({ label: spec.label, message: e.message });
    }
  }
  return problems;
}

const childPath = fileURLToPath(new URL('./child.js', import.meta.url));

/** A request for the child process: check these specs (after importing the plug-ins) instead of running one. */
export interface CheckRequest {
  check: AllocatorSpec[];
  plugins: string[];
}

/**
 * {@link specProblems} in a child process of its own (importing `plugins` first), so that this
 * process makes no allocator (and holds no CUDA context) while the runs' processes work.
 */
export function specProblemsInChild(specs: readonly AllocatorSpec[], plugins: readonly string[] = []): Promise<SpecProblem[]> {
  const request: CheckRequest = { check: specs.filter(worthChecking), plugins: [...plugins] };
  if (request.check.length === 0) return Promise.resolve([]);
  return new Promise((resolve, reject) => {
    const child = fork(childPath, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced' });
    let problems: SpecProblem[] | undefined;
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-2000);
    });
    child.on('message', (m: { type: 'checked'; problems: SpecProblem[] }) => {
      if (m.type === 'checked') problems = m.problems;
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (problems) resolve(problems);
      else reject(new Error(`the process checking the allocator specs exited with code ${code}: ${stderr.trim()}`));
    });
    child.send(request);
  });
}
