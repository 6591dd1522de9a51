/**
 * The workload registry: each workload registers itself under its name (train()'s `model`); the
 * trainer, the comparison and the command line look workloads up by name. Small on purpose, and it
 * rejects duplicates. It lives on globalThis, as the allocator registry does, so that a workload
 * registered by another copy of this module is found too.
 * @module
 */
import type { Allocator } from '@gpumem/allocator-core';
import type { TrainOptions, TrainOptionsBag, WorkloadTrainOptions } from '../training/train-types.js';
import type { Workload } from './workload.js';

const registryKey = Symbol.for('gpumem.gnn.workloads');
/** A registered workload of any option type, as the registry hands it out (each workload checks its own options). */
// biome-ignore lint/suspicious/noExplicitAny: workloads of every option type share the map; each one checks its own options
export type AnyWorkload = Workload<any, any>;
const globalScope = globalThis as typeof globalThis & { [registryKey]?: Map<string, AnyWorkload> };
globalScope[registryKey] ??= new Map<string, AnyWorkload>();
const workloads = globalScope[registryKey];

/** Registers a workload under its name; a name taken already throws. */
// biome-ignore lint/suspicious/noExplicitAny: see AnyWorkload
export function registerWorkload<O extends Workload<any, any>>(workload: O): void {
  const { name } = workload;
  if (typeof name !== 'string' || !/^[a-z][a-z0-9-]*$/.test(name)) {
    throw new TypeError(`Expected a name of lower-case letters, digits and '-' for workload.name but received ${JSON.stringify(name)}`);
  }
  if (workloads.has(name)) throw new Error(`A workload named '${name}' is already registered`);
  for (const method of ['optionProblem', 'ranksProblem', 'hostDefaults', 'describe', 'shape', 'estimate', 'prepare'] as const) {
    if (typeof workload[method] !== 'function')
      throw new TypeError(`Expected a function for workload.${method} of '${name}' but received ${typeof workload[method]}`);
  }
  if (typeof workload.trainsOn !== 'string' || workload.trainsOn === '')
    throw new TypeError(
      `Expected a few words saying what it trains on for workload.trainsOn of '${name}' but received ${JSON.stringify(workload.trainsOn)}`,
    );
  const { data } = workload as { data?: { available?: unknown; installHint?: unknown } };
  if (data !== undefined && (typeof data?.available !== 'function' || typeof data.installHint !== 'string'))
    throw new TypeError(`Expected { available(), installHint } for workload.data of '${name}' but received ${String(data)}`);
  const { options } = workload as { options?: unknown };
  if (typeof options !== 'object' || options === null)
    throw new TypeError(`Expected an object of the options it takes for workload.options of '${name}' but received ${String(options)}`);
  for (const [flag, spec] of Object.entries(workload.flags ?? {})) {
    const option = spec.option ?? flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (!Object.hasOwn(options, option))
      throw new TypeError(`Expected workload.options of '${name}' to declare '${option}', the option of its flag '--${flag}'`);
  }
  workloads.set(name, workload);
}

/** The workload registered under `name` (train()'s `model`); a RangeError naming the registered ones otherwise. */
export function getWorkload(name: string): AnyWorkload {
  const workload = workloads.get(name);
  if (!workload)
    throw new RangeError(
      `Expected a registered workload (${listWorkloads()
        .map((w) => `'${w.name}'`)
        .join(', ')}) for model but received ${JSON.stringify(name)}`,
    );
  return workload;
}

/** True when a workload is registered under `name`. */
export function hasWorkload(name: string): boolean {
  return workloads.has(name);
}

/** Every registered workload, in the order they registered. */
export function listWorkloads(): AnyWorkload[] {
  return [...workloads.values()];
}

/**
 * train()'s options from every workload's options in one object (a command line's flags): the
 * model must be registered; the workload refuses, when trained, the options that are not its own.
 * Without an allocator, the options wait for one (WorkloadTrainOptions).
 */
export function asTrainOptions(bag: TrainOptionsBag & { allocator: Allocator | string }): TrainOptions;
export function asTrainOptions(bag: TrainOptionsBag): WorkloadTrainOptions;
export function asTrainOptions(bag: TrainOptionsBag): WorkloadTrainOptions {
  getWorkload(bag.model);
  return bag as WorkloadTrainOptions;
}
