/**
 * The allocator flags (`--allocator`, `--allocators`) checked before any work: every name
 * registered (a slip gets "did you mean"), every strategy able to run here where the command
 * cannot run it otherwise, and every spec's options accepted by its strategy. Each failure is a
 * usage error (exit 2) of one form: `gpumem <command>: '--flag' ...`.
 * @module
 */
import { listAllocators, strategyInfo } from '@gpumem/allocator-core';
import type { AllocatorSpec, SpecProblem } from '@gpumem/compare';
import { didYouMean, seeHelp, UsageError } from './args.js';

/**
 * Throws naming the first spec whose strategy is not registered (with the closest registered name)
 * or, when `needsGpuHere` is false, needs a CUDA device that is not here.
 */
export function checkAllocatorNames(
  command: string,
  flag: string,
  specs: readonly AllocatorSpec[],
  gpu: boolean,
  needsGpuHere = true,
): void {
  const registered = listAllocators().map((a) => a.name);
  for (const s of specs) {
    if (!registered.includes(s.name)) {
      throw new UsageError(
        `gpumem ${command}: '--${flag}' names '${s.name}', which is not registered${didYouMean(s.name, registered)} (registered: ${registered.join(', ')}; more with --plugin or GPUMEM_PLUGINS)\n${seeHelp(command)}`,
      );
    }
    if (needsGpuHere && !gpu && strategyInfo(s.name).requiresCuda) {
      const hostOnes = listAllocators()
        .filter((a) => !a.requiresCuda && !a.requiresOptions)
        .map((a) => a.name);
      throw new UsageError(
        `gpumem ${command}: '--${flag}' names '${s.name}', which needs a CUDA device, and none is available here (these run on the host: ${hostOnes.join(', ')})`,
      );
    }
  }
}

/** Throws listing every spec whose options its strategy refused (see specProblems). */
export function refuseSpecProblems(command: string, flag: string, problems: readonly SpecProblem[]): void {
  if (problems.length === 0) return;
  const lines = problems.map((p) => `  ${p.label}: ${p.message}`);
  throw new UsageError(
    `gpumem ${command}: '--${flag}': ${problems.length === 1 ? 'an allocator spec was' : `${problems.length} allocator specs were`} refused:\n${lines.join('\n')}`,
  );
}
