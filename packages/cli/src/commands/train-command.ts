/**
 * `gpumem train`: one model on one allocator, with a progress bar and a summary table.
 * @module
 */
import { formatBytes, hasCudaDevice, writeOutputFile } from '@gpumem/allocator-core';
import {
  asTrainOptions,
  commonDefaults,
  gcnDefaults,
  getWorkload,
  hasWorkload,
  listWorkloads,
  mlpDefaults,
  optionNotTakenProblem,
  readEnvRendezvous,
  RendezvousEnvError,
  train,
  trainAsJobRank,
  trainDistributed,
  type TrainOptions,
  type EnvRendezvous,
  type TrainResult,
  type WorkloadTrainOptions,
} from '@gpumem/gnn';
import {
  builtInStrategyPackages,
  defaultWorkload,
  formatTable,
  mnistAvailable,
  mnistInstallHint,
  parseAllocatorSpec,
  specProblems,
  type AllocatorSpec,
} from '@gpumem/compare';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { checkAllocatorNames, refuseSpecProblems } from './allocator-flags.js';
import { flagHelp, parseFlags, ProgressBar, UsageError, type FlagSpec, type FlagValues } from './args.js';
import { stdoutText, stderrText } from '../terminal.js';

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
    help: `the model (default mlp where MNIST is installed, else gcn, which needs no download): ${listWorkloads()
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

export const trainUsage = `Usage: gpumem train [flags]

Trains a model on one allocator and prints a table per epoch: time, loss, accuracy, peak
allocated and reserved memory, and upstream (driver) calls. Without a GPU it runs on the host
with the CPU kernels.

${flagHelp(trainFlags)}

Examples:
  gpumem train --model mlp --allocator pool --epochs 3
  gpumem train --model mlp --allocator pool --epochs 3 --cuda-graph
  gpumem train --model mlp --allocator pool --batch 4096 --hidden-layers 8 --checkpoint 3 --nano-batches 4
  gpumem train --model mlp --allocator uvm --batch 4096 --layer-prefetch
  gpumem train --model gcn --allocator async --nodes 2000000 --aggregation scatter
  gpumem train --model gcn --dataset sbm --allocator host --epochs 50
  gpumem train --model gcn --nodes 50000000 --allocator tiered --row-blocks 50 --feature-dtype bf16
  gpumem train --model mlp --allocator host --train-subset 2000 --test-subset 500 --hidden 128
  gpumem train --model gcn --nodes 2000000 --allocator pool --devices 2
  gpumem train --model mlp --allocator pool --devices 2 --cuda-graph
  gpumem train --model gcn --dataset sbm --allocator host --devices 2
  torchrun --no-python --nproc-per-node 2 node packages/cli/dist/cli.js train --model mlp --allocator pool

Under torchrun, srun or mpirun (RANK and WORLD_SIZE, SLURM_PROCID and SLURM_NTASKS, or
OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE set, with MASTER_ADDR and MASTER_PORT) each process
is one rank of the run, on cuda:LOCAL_RANK; rank 0 prints the result (docs/multi-device.md).
`;

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
 * The `--allocator` flag as a name and options (the spec syntax compare takes; default 'pool'),
 * checked before any work: registered, able to run here and, unless `checkOptions` is false, its
 * options accepted (made once in this process; see specProblems).
 */
export function allocatorFromFlags(command: string, flags: FlagValues, gpu: boolean, checkOptions = true): AllocatorSpec {
  let spec: AllocatorSpec;
  try {
    spec = parseAllocatorSpec((flags.allocator as string | undefined) ?? 'pool');
  } catch (e) {
    throw new UsageError(`gpumem ${command}: '--allocator': ${(e as Error).message}`);
  }
  checkAllocatorNames(command, 'allocator', [spec], gpu);
  if (checkOptions) refuseSpecProblems(command, 'allocator', specProblems([spec]));
  return spec;
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
 * The model the flags name, or the default: the mlp where MNIST is installed, else the gcn on a
 * generated graph (said once on stderr, with how to get MNIST). The mlp named without MNIST is a
 * usage error before any run starts.
 */
function modelFromFlags(command: string, flags: FlagValues): string {
  if (flags.model === undefined) {
    const chosen = defaultWorkload();
    if (chosen.note) stderrText.write(`gpumem ${command}: ${chosen.note}\n`);
    return chosen.model;
  }
  if (flags.model === 'mlp' && !mnistAvailable())
    throw new UsageError(`gpumem ${command}: '--model mlp' trains on MNIST, which is not installed: ${mnistInstallHint}`);
  return flags.model as string;
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

/**
 * `gpumem train`. With --devices it trains over several ranks (asynchronously); each rank imports
 * the built-in strategy packages and `plugins`.
 */
export function runTrain(argv: readonly string[], plugins: readonly string[] = []): number | Promise<number> {
  const flags = parseFlags(argv, trainFlags, 'train');
  if (flags.help) {
    stdoutText.write(trainUsage);
    return 0;
  }
  checkOutputFlags('train', flags, ['json'], pluginInputs(plugins, [flags.allocator]));
  const gpu = hasCudaDevice();
  const devices = devicesFromFlags('train', flags);
  const job = jobFromEnv(devices);
  if (job) return runTrainAsJobRank(flags, gpu, job, plugins);
  // over several devices the options are checked in a process of its own: the launcher holds no allocator
  const spec = allocatorFromFlags('train', flags, gpu, devices === undefined);
  const bar = new ProgressBar();
  const options = trainOptionsForHere('train', flags, gpu);
  if (devices === undefined && (flags.communicator !== undefined || flags.timeout !== undefined)) {
    throw new UsageError(`gpumem train: '--${flags.communicator !== undefined ? 'communicator' : 'timeout'}' goes with '--devices'`);
  }
  checkDevicesFlags('train', options, devices);
  if (devices !== undefined) return runTrainDistributed(flags, spec, options, devices, plugins, bar);
  let result: TrainResult;
  try {
    result = train({
      ...options,
      allocator: spec.name,
      allocatorOptions: spec.options,
      onProgress: (p) => bar.update(`epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
    });
  } catch (e) {
    if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(`gpumem train: ${e.message}`);
    throw e;
  }
  writeResult(result, flags);
  return 0;
}

/** This process's place in a job that torchrun, srun or mpirun started, if it is one (then --devices is refused). */
function jobFromEnv(devices: number | number[] | undefined): EnvRendezvous | undefined {
  let job: EnvRendezvous | undefined;
  try {
    job = readEnvRendezvous();
  } catch (e) {
    if (e instanceof RendezvousEnvError) throw new UsageError(`gpumem train: ${e.message}`);
    throw e;
  }
  if (job && devices !== undefined) {
    throw new UsageError(
      `gpumem train: this process is rank ${job.rank} of ${job.size} of a ${job.source} job, and '--devices' would start ranks of its own: drop '--devices' (or set GPUMEM_RENDEZVOUS=none to ignore the job)`,
    );
  }
  return job;
}

/** `gpumem train` as one rank of an external job: every rank trains its part; rank 0 writes the result. */
async function runTrainAsJobRank(flags: FlagValues, gpu: boolean, job: EnvRendezvous, plugins: readonly string[]): Promise<number> {
  const spec = allocatorFromFlags('train', flags, gpu, false);
  const options = trainOptionsForHere('train', flags, gpu);
  checkDevicesFlags('train', options, job.size);
  refuseSpecProblems('train', 'allocator', specProblems([spec]));
  const bar = job.rank === 0 ? new ProgressBar() : undefined;
  let result: TrainResult | undefined;
  try {
    result = await trainAsJobRank(
      {
        ...options,
        allocator: spec.name,
        allocatorOptions: spec.options,
        ...(flags.communicator !== undefined ? { communicator: flags.communicator as 'nccl' | 'host' } : {}),
        ...(flags.timeout !== undefined ? { timeoutMs: flags.timeout as number } : {}),
        imports: [...builtInStrategyPackages, ...plugins],
        onProgress: (p) => bar?.update(`epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
      },
      job,
    );
  } catch (e) {
    if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(`gpumem train: ${e.message}`);
    throw e;
  }
  if (result) writeResult(result, flags);
  return 0;
}

/** The table on stdout, or on stderr when the JSON goes to stdout (`--json -`). */
function writeResult(result: TrainResult, flags: FlagValues): void {
  const json = `${JSON.stringify(result, null, 2)}\n`;
  if (isStdout(flags.json)) {
    stderrText.write(`${formatResult(result)}\n`);
    process.stdout.write(json);
    return;
  }
  stdoutText.write(`${formatResult(result)}\n`);
  if (flags.json) {
    writeOutputFile(flags.json as string, json);
    stdoutText.write(`wrote ${String(flags.json)}\n`);
  }
}

async function runTrainDistributed(
  flags: FlagValues,
  spec: AllocatorSpec,
  options: WorkloadTrainOptions,
  devices: number | number[],
  plugins: readonly string[],
  bar: ProgressBar,
): Promise<number> {
  refuseSpecProblems('train', 'allocator', specProblems([spec]));
  let result: TrainResult;
  try {
    result = await trainDistributed({
      ...options,
      allocator: spec.name,
      allocatorOptions: spec.options,
      devices,
      ...(flags.communicator !== undefined ? { communicator: flags.communicator as 'nccl' | 'host' } : {}),
      ...(flags.timeout !== undefined ? { timeoutMs: flags.timeout as number } : {}),
      imports: [...builtInStrategyPackages, ...plugins],
      onProgress: (p) => bar.update(`epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
    });
  } catch (e) {
    if (e instanceof RangeError || e instanceof TypeError) throw new UsageError(`gpumem train: ${e.message}`);
    throw e;
  }
  writeResult(result, flags);
  return 0;
}

function formatResult(r: TrainResult): string {
  const title = `${r.model} on ${r.dataset}, allocator '${r.allocator}' (${r.device}), ${r.parameters.toLocaleString('en-US')} parameters`;
  const table = formatTable(
    [
      'epoch',
      'time',
      'loss',
      'train acc',
      hasWorkload(r.model) ? getWorkload(r.model).evaluationLabel : 'accuracy',
      'peak allocated',
      'peak reserved',
      'upstream calls',
    ],
    r.epochs.map((e) => [
      String(e.epoch + 1),
      `${e.epochMs.toFixed(1)} ms`,
      e.loss.toFixed(4),
      `${(e.trainAccuracy * 100).toFixed(2)}%`,
      `${(e.accuracy * 100).toFixed(2)}%`,
      formatBytes(e.peakAllocatedBytes),
      formatBytes(e.peakReservedBytes),
      `${e.upstreamAllocCalls} / ${e.upstreamFreeCalls}`,
    ]),
  );
  if (!r.ranks) return `${title}\n${table}`;
  const ranks = formatTable(
    ['rank', 'device', 'mean epoch', 'peak allocated', 'peak reserved', 'remote rows read (fwd / bwd)'],
    r.ranks.map((k) => {
      const meanMs = k.epochs.reduce((a, e) => a + e.epochMs, 0) / Math.max(k.epochs.length, 1);
      return [
        String(k.rank),
        k.device,
        `${meanMs.toFixed(1)} ms`,
        formatBytes(Math.max(...k.epochs.map((e) => e.peakAllocatedBytes))),
        formatBytes(Math.max(...k.epochs.map((e) => e.peakReservedBytes))),
        k.remoteRows
          ? `${k.remoteRows.forward.toLocaleString('en-US')} / ${k.remoteRows.backward.toLocaleString('en-US')} of ${k.remoteRows.remote.toLocaleString('en-US')}`
          : '-',
      ];
    }),
  );
  return `${title}, ${r.ranks.length} ranks (${r.communicator ?? 'nccl'} communicator)\n${table}\nper rank (epoch time and peaks of each device):\n${ranks}`;
}
