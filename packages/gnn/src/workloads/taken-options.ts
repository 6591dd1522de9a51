/**
 * Which train() options a run takes: those every workload takes (CommonTrainOptions) and those its
 * workload declares (Workload.options). Any other option that is set (not undefined) is refused
 * before anything is allocated, by train(), trainDistributed() and the command line alike, naming
 * the option, the workload and what it takes, so that an option meant for another workload, or
 * misspelt, is never silently ignored.
 * @module
 */
import type { CommonTrainOptions } from '../training/train-types.js';
import { getWorkload, listWorkloads, type AnyWorkload } from './registry.js';
import type { OptionNames } from './workload.js';

/** The options every workload takes, one entry each (the type keeps it complete). */
const commonOptions: { readonly [K in keyof CommonTrainOptions]-?: true } = {
  model: true,
  dataset: true,
  allocator: true,
  allocatorOptions: true,
  epochs: true,
  lr: true,
  seed: true,
  devices: true,
  communicator: true,
  timeoutMs: true,
  onProgress: true,
  tagAllocations: true,
  onStep: true,
};

/** Thrown by train() and trainDistributed() for an option that the workload trained does not take. */
export class OptionNotTakenError extends RangeError {
  override readonly name = 'OptionNotTakenError';
  readonly code = 'GPUMEM_OPTION_NOT_TAKEN';
  constructor(
    message: string,
    /** The option refused, as train() names it. */
    readonly option: string,
    /** The workload trained (train()'s `model`). */
    readonly model: string,
    /** The options the workload takes beyond those every workload takes. */
    readonly takes: readonly string[],
  ) {
    super(message);
  }
}

/** The options `workload` takes beyond those every workload takes, in its declaration's order. */
function takenOptions(workload: AnyWorkload): string[] {
  return Object.keys(workload.options);
}

/** True when `option` is one that every workload takes. */
function isCommonOption(option: string): boolean {
  return Object.hasOwn(commonOptions, option);
}

/** The first option set in `o` that its workload does not take, or undefined. */
function firstNotTaken(o: { model: string }): { option: string; workload: AnyWorkload } | undefined {
  const workload = getWorkload(o.model);
  for (const [option, value] of Object.entries(o)) {
    if (value === undefined || isCommonOption(option) || Object.hasOwn(workload.options, option)) continue;
    return { option, workload };
  }
  return undefined;
}

/** "the mlp", "the mlp and the gcn". */
function workloadList(names: readonly string[]): string {
  const the = names.map((n) => `the ${n}`);
  return the.length <= 1 ? (the[0] ?? '') : `${the.slice(0, -1).join(', ')} and ${the.at(-1)}`;
}

function problemOf(option: string, workload: AnyWorkload, name: OptionNames, listed: (option: string) => boolean): string {
  const model = workload.name;
  const hint = workload.optionHints?.[option];
  const owners = listWorkloads()
    .filter((w) => w.name !== model && Object.hasOwn(w.options, option))
    .map((w) => w.name);
  const why =
    hint !== undefined
      ? `'${name(option)}' does not apply to the ${model}: ${hint.replace(/'(\w+)'/g, (_, n: string) => `'${name(n)}'`)}`
      : owners.length > 0
        ? `'${name(option)}' applies to ${workloadList(owners)} only (received ${name('model')} ${model})`
        : `'${name(option)}' is an option of no workload (received ${name('model')} ${model})`;
  const takes = takenOptions(workload).filter(listed).map(name);
  return takes.length > 0
    ? `${why}; besides the options of every workload, the ${model} takes ${takes.join(', ')}`
    : `${why}; the ${model} takes the options of every workload only`;
}

/**
 * The first option set in `o` that its workload does not take, as a problem naming options through
 * `name` (a command line: its flags), or undefined when there is none. `listed` picks which of the
 * workload's own options the message lists (a command line: those it has flags for).
 */
export function optionNotTakenProblem(
  o: { model: string },
  name: OptionNames = (option) => option,
  listed: (option: string) => boolean = () => true,
): string | undefined {
  const found = firstNotTaken(o);
  return found && problemOf(found.option, found.workload, name, listed);
}

/** Throws {@link OptionNotTakenError} for the first option set in `o` that its workload does not take. */
export function checkOptionsTaken(o: { model: string }): void {
  const found = firstNotTaken(o);
  if (!found) return;
  const { option, workload } = found;
  throw new OptionNotTakenError(
    `Expected only options that the ${workload.name} takes: ${problemOf(
      option,
      workload,
      (n) => n,
      () => true,
    )}`,
    option,
    workload.name,
    takenOptions(workload),
  );
}
