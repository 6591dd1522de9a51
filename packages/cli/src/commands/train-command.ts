/**
 * `gpumem train`: one model on one allocator, with a progress bar and a summary table.
 * @module
 */
import { formatBytes, hasCudaDevice, writeOutputFile } from '@gpumem/allocator-core';
import {
  getWorkload,
  hasWorkload,
  readEnvRendezvous,
  RendezvousEnvError,
  train,
  trainAsJobRank,
  trainDistributed,
  type EnvRendezvous,
  type Progress,
  type TrainResult,
  type WorkloadTrainOptions,
} from '@gpumem/gnn';
import { builtInStrategyPackages, formatTable, parseAllocatorSpec, specProblems, type AllocatorSpec } from '@gpumem/compare';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { checkAllocatorNames, refuseSpecProblems } from './allocator-flags.js';
import { flagHelp, parseFlags, ProgressBar, refusedAsUsage, UsageError, type FlagValues } from './args.js';
import { checkDevicesFlags, devicesFromFlags, trainFlags, trainOptionsForHere } from './train-options.js';
import { stdoutText, stderrText } from '../terminal.js';

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
    result = train(runOptions(options, spec, bar));
  } catch (e) {
    refusedAsUsage(e, 'gpumem train');
  }
  writeResult(result, flags);
  return 0;
}

/** The options every way of training takes from the command: the workload's, the allocator, progress on `bar`. */
function runOptions(options: WorkloadTrainOptions, spec: AllocatorSpec, bar: ProgressBar | undefined) {
  return {
    ...options,
    allocator: spec.name,
    allocatorOptions: spec.options,
    onProgress: (p: Progress) => bar?.update(`epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
  };
}

/** What training over several ranks adds: the communicator, the collectives' timeout, the packages each rank imports. */
function rankOptions(flags: FlagValues, plugins: readonly string[]) {
  return {
    ...(flags.communicator !== undefined ? { communicator: flags.communicator as 'nccl' | 'host' } : {}),
    ...(flags.timeout !== undefined ? { timeoutMs: flags.timeout as number } : {}),
    imports: [...builtInStrategyPackages, ...plugins],
  };
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
    result = await trainAsJobRank({ ...runOptions(options, spec, bar), ...rankOptions(flags, plugins) }, job);
  } catch (e) {
    refusedAsUsage(e, 'gpumem train');
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
    result = await trainDistributed({ ...runOptions(options, spec, bar), devices, ...rankOptions(flags, plugins) });
  } catch (e) {
    refusedAsUsage(e, 'gpumem train');
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
