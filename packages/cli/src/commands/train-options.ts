/**
 * The train flags and the train() options they ask for, shared by `gpumem train`, `gpumem compare`
 * and `gpumem record`: the command line's own flags and each workload's (Workload.flags), the model
 * (the default when none is named), the options checked against the workload before any run, the
 * workload's CPU defaults without a GPU, and --devices.
 * @module
 */
import {
  asTrainOptions,
  commonDefaults,
  gcnDefaults,
  getWorkload,
  listWorkloads,
  mlpDefaults,
  optionNotTakenProblem,
  type TrainOptions,
  type WorkloadTrainOptions,
} from '@gpumem/gnn';
import { defaultWorkload, defaultWorkloadHelp, missingDataProblem } from '@gpumem/compare';
import { UsageError, type FlagSpec, type FlagValues } from './args.js';
import { stderrText } from '../terminal.js';

/** The flags that registered workloads declare for their own options (Workload.flags), prefixed in the help by the workload's name. */
function workloadFlags(): Record<string, FlagSpec> {
  return Object.fromEntries(
    listWorkloads().flatMap((w) =>
      Object.entries(w.flags ?? {}).map(([flag, { option: _option, ...spec }]) => [flag, { ...spec, help: `${w.name}: ${spec.help}` }]),
    ),
  );
}

/**
 * The flags of gpumem train that the command line declares itself: those more than one workload
 * takes, and what runs where; each workload's own come from its Workload.flags (workloadFlags()).
 */
export const commonTrainFlags: Record<string, FlagSpec> = {
  model: {
    type: 'string',
    choices: listWorkloads().map((w) => w.name),
    help: `the model (default ${defaultWorkloadHelp()}): ${listWorkloads()
      .map((w) => `${w.name}, ${w.description}`)
      .join('; ')}`,
  },
  allocator: { type: 'string', help: 'a registered allocator, NAME or NAME:key=value[:key=value] as in compare (default: pool)' },
  dataset: {
    type: 'string',
    choices: [...new Set(listWorkloads().flatMap((w) => w.datasets))],
    choiceAliases: Object.assign({}, ...listWorkloads().map((w) => w.datasetAliases ?? {})),
    help: listWorkloads()
      .map((w) => `${w.name}: ${w.datasets.map((d, i) => (i === 0 && w.datasets.length > 1 ? `${d} (default)` : d)).join(' or ')}`)
      .join('; '),
  },
  hidden: {
    type: 'int',
    min: 1,
    max: 65536,
    help: `width of each hidden layer (default ${mlpDefaults.hidden} mlp, ${gcnDefaults.hidden} gcn)`,
  },
  epochs: { type: 'int', min: 1, max: 100000, help: `epochs (default ${commonDefaults.epochs})` },
  lr: {
    type: 'number',
    min: 0,
    help: `learning rate (default ${listWorkloads()
      .map((w) => `${w.optimizer.lr} ${w.name} ${w.optimizer.name}`)
      .join(', ')})`,
  },
  seed: { type: 'int', min: 0, max: 2 ** 31 - 1, help: `random seed (default ${commonDefaults.seed})` },
  'layer-prefetch': {
    type: 'boolean',
    help: "trainer-inserted prefetch: each layer's operands to the device before it runs, activations that backward needs later to the host after forward and back one layer ahead (moves memory with uvm; nothing elsewhere)",
  },
  devices: {
    type: 'string',
    help: 'train on N devices, one process each (mlp: data parallel; gcn: the graph split by rows), or on the CUDA ordinals listed (e.g. 0,0: two ranks on one GPU, with --communicator host); strategies over host memory run N ranks on the host',
  },
  communicator: {
    type: 'string',
    choices: ['nccl', 'host'],
    help: "with --devices: 'nccl' (default on GPUs; libnccl.so.2, or GPUMEM_NCCL_LIB) or 'host' (shared memory; the default on the host)",
  },
  timeout: {
    type: 'int',
    min: 0,
    help: 'with --devices: a rank silent this many ms fails the run and stops every rank (default 600000; 0: none)',
  },
};

/** Every flag of gpumem train: the command line's, the workloads' own, and where the result goes. */
export const trainFlags: Record<string, FlagSpec> = {
  ...commonTrainFlags,
  ...workloadFlags(),
  json: { type: 'string', help: "write the result as JSON to this file ('-': to stdout, the table to stderr)" },
  help: { type: 'boolean', help: 'show this help' },
};

/** --devices as a number of ranks or a list of CUDA ordinals (undefined when absent). */
export function devicesFromFlags(command: string, flags: FlagValues): number | number[] | undefined {
  const raw = flags.devices as string | undefined;
  if (raw === undefined) return undefined;
  if (/^\s*\d+\s*$/.test(raw)) {
    const n = Number(raw);
    if (n >= 1 && n <= 1024) return n;
  } else if (/^\s*\d+(\s*,\s*\d+)+\s*$/.test(raw)) {
    return raw.split(',').map((d) => Number(d.trim()));
  }
  throw new UsageError(
    `gpumem ${command}: '--devices' must be a number of ranks from 1 to 1024 or a comma-separated list of CUDA ordinals (e.g. 0,1) (received '${raw}')`,
  );
}

/**
 * train() options whose flag is not the option's name in kebab case (`--hidden-layers` is
 * hiddenLayers), as the workloads' flags name them (WorkloadFlag.option: `--batch` sets batchSize).
 */
const optionOfFlag: Record<string, string> = Object.fromEntries(
  listWorkloads().flatMap((w) => Object.entries(w.flags ?? {}).flatMap(([flag, spec]) => (spec.option ? [[flag, spec.option]] : []))),
);

/** Flags that are not train() options (what is run where, and how the result is written). */
const notOptions = new Set(['allocator', 'devices', 'communicator', 'timeout', 'json', 'help']);

/** The train() option a flag sets: `--nano-batches` → nanoBatches. */
function optionOf(flag: string): string {
  return optionOfFlag[flag] ?? flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The flag that sets a train() option, as messages name it: nanoBatches → `--nano-batches`. */
function flagOf(option: string): string {
  const renamed = Object.entries(optionOfFlag).find(([, o]) => o === option);
  return `--${renamed ? renamed[0] : option.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/** The train() options that the train flags ask for (shared by train, compare and record); flags not given are left out (a workload refuses options it does not take). */
function trainOptionsFromFlags(flags: FlagValues): WorkloadTrainOptions {
  const options: Record<string, unknown> = {};
  for (const [flag, spec] of Object.entries(trainFlags)) {
    if (notOptions.has(flag) || !(flag in flags)) continue;
    options[optionOf(flag)] = spec.type === 'boolean' ? flags[flag] === true : flags[flag];
  }
  return asTrainOptions({ ...options, model: flags.model as TrainOptions['model'] });
}

/**
 * The workload's options checked against each other (exit 2 naming the flag), before any run
 * starts, so that compare refuses them too instead of failing in every child: options of another
 * workload (e.g. --checkpoint for the gcn), and what the workload finds wrong (Workload.optionProblem).
 */
function checkActivationFlags(command: string, o: WorkloadTrainOptions): void {
  const fail = (message: string) => {
    throw new UsageError(`gpumem ${command}: ${message}`);
  };
  const notTaken = optionNotTakenProblem(o, flagOf, (option) => flagOf(option).slice(2) in trainFlags);
  if (notTaken !== undefined) fail(notTaken);
  const problem = getWorkload(o.model).optionProblem(o, flagOf);
  if (problem !== undefined) fail(problem);
}

/**
 * --devices checked against the workload before any rank starts (a rank would fail on it only after
 * every rank was started): Workload.ranksProblem, e.g. the mlp splits each batch over the ranks,
 * the gcn the graph's rows.
 */
export function checkDevicesFlags(command: string, options: WorkloadTrainOptions, devices: number | number[] | undefined): void {
  if (devices === undefined) return;
  const ranks = typeof devices === 'number' ? devices : devices.length;
  const problem = getWorkload(options.model).ranksProblem(options, ranks, flagOf);
  if (problem !== undefined) throw new UsageError(`gpumem ${command}: ${problem}`);
}

/**
 * The model the flags name, or the default: the first registered workload whose data is here (the
 * mlp where MNIST is installed, else the gcn on a generated graph; said once on stderr, with how to
 * get the data). A workload named whose data is not here is a usage error before any run starts.
 */
function modelFromFlags(command: string, flags: FlagValues): string {
  if (flags.model === undefined) {
    const chosen = defaultWorkload();
    if (chosen.note) stderrText.write(`gpumem ${command}: ${chosen.note}\n`);
    return chosen.model;
  }
  const model = flags.model as string;
  const missing = missingDataProblem(model);
  if (missing !== undefined) throw new UsageError(`gpumem ${command}: '--model ${model}' ${missing}`);
  return model;
}

/**
 * train() options from the flags, with the workload's CPU defaults where there is no GPU (e.g. the
 * mlp on a subset of MNIST, the gcn on a 10,000-node random graph) unless the flags say otherwise (said on stderr).
 */
export function trainOptionsForHere(command: string, flags: FlagValues, gpu: boolean): WorkloadTrainOptions {
  const options = trainOptionsFromFlags({ ...flags, model: modelFromFlags(command, flags) });
  checkActivationFlags(command, options);
  if (gpu) return options;
  const host = getWorkload(options.model).hostDefaults(options, flagOf);
  if (!host) return options;
  stderrText.write(`gpumem ${command}: no CUDA device: ${host.note}\n`);
  return { ...options, ...host.options };
}
