/**
 * `gpumem doctor FILE`: "is this OOM real?". Reads a PyTorch memory snapshot or a gpumem trace,
 * takes a device capacity (given, recorded in the snapshot at its OOM, or the GPU's), and says
 * whether the program fits, runs out for fragmentation, or needs more live memory than the device
 * has, with the figures behind the verdict (see diagnoseOom of @gpumem/trace).
 * @module
 */
import { deviceProperties, formatBytes, hasCudaDevice, memoryInfo, parseSize, strategyInfo, writeOutputFile } from '@gpumem/allocator-core';
import { defaultAllocators, formatTable, renderDoctorReport } from '@gpumem/compare';
import {
  defaultOutsideMemory,
  defaultPytorchModelError,
  diagnoseOom,
  recordedCapacity,
  type DoctorStrategy,
  type DoctorVerdict,
  type OutsideMemory,
  type ReadTrace,
} from '@gpumem/trace';
import { flagHelp, oneFile, parseFlags, positiveSizeFlag, splitFileArgs, UsageError, type FlagSpec } from './args.js';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { loopFlag, loopOption } from './loop-flag.js';
import { readTraceOrExplain } from './read-trace-file.js';
import { stdoutText, stderrText } from '../terminal.js';

const doctorFlags: Record<string, FlagSpec> = {
  capacity: {
    type: 'string',
    help: "the device's capacity, SIZE (e.g. 80GiB; default: the snapshot's, recorded at its OOM, else this GPU's total memory)",
  },
  outside: {
    type: 'string',
    help: "device memory outside the allocator (CUDA context, cuBLAS workspaces, NCCL, the driver's reserve), SIZE or LOW..HIGH (default: 150MiB..250MiB, measured on H200s, PyTorch 2.11; 0 when the capacity is the snapshot's own, which has it taken off already)",
  },
  'model-error': {
    type: 'number',
    min: 0,
    max: 0.5,
    help: `the relative error of the model of PyTorch's allocator, e.g. 0.004 for ±0.4% (default ${defaultPytorchModelError}, and 4 MiB at the least; measured on H200s, PyTorch 2.11)`,
  },
  resolution: { type: 'string', help: 'precision of the minimum-capacity searches, SIZE (default: the capacity / 1024, 4 KiB to 2 MiB)' },
  'skip-failed-requests': {
    type: 'boolean',
    help: 'leave out the requests that failed in the recording (default: replay each as an allocation freed at once)',
  },
  loop: loopFlag,
  device: { type: 'int', min: 0, max: 1023, help: 'PyTorch snapshots: the device whose history to read (default: the first with events)' },
  report: { type: 'string', help: 'write the verdict as an HTML page to this file' },
  json: { type: 'string', help: "write the verdict and its figures as JSON to this file ('-': to stdout, the rest to stderr)" },
  help: { type: 'boolean', help: 'show this help' },
};

export const doctorUsage = `Usage: gpumem doctor FILE [--capacity SIZE] [--outside SIZE|LOW..HIGH] [--model-error FRACTION]
                      [--resolution SIZE] [--skip-failed-requests] [--report OUT.html] [--json OUT.json|-]

Is this OOM real? Reads FILE, a PyTorch memory snapshot (the pickle of
torch.cuda.memory._snapshot() or _dump_snapshot(), optionally gzip- or zstd-compressed) or a gpumem
trace (JSONL, RMM CSV: what gpumem replay reads; FILE - is standard input), and a device capacity,
and gives one verdict:

  fits           PyTorch's default allocator fits in the capacity; names the strategy needing the
                 least, and its margin
  fragmentation  the live bytes fit, but PyTorch's default allocator needs more than the capacity;
                 names the strategy that fits, and in how much
  real           even the live bytes exceed the capacity: by how much, and what would bring them
                 down (tags or streams on the host, idle tags asleep, activation checkpointing),
                 with figures from the trace
  too-close      the capacity lies inside the band of the need that decides (the live bytes, else
                 PyTorch's default): too close to call, with the band and the margin in bytes

Each need has a band: the device memory the program needs is the allocator's need, give or take
the model's error (PyTorch's model: ±0.4%, 4 MiB at the least; gpumem's strategies: 0, their
replay runs their own code), plus the memory outside the allocator (--outside: 0-250 MiB by
default, measured on H200s, PyTorch 2.11). Measure it on your machine to narrow the band.

The live bytes' peak (a block counts until its free completed) is a floor no allocator goes under.
Each strategy with logic of its own is replayed at the capacity and its minimum capacity searched (as
gpumem replay --min-capacity does) on its host twin, the same logic over host memory, on a GPU as
without one: the same verdict on any machine, and no device memory taken. Those that keep their
memory on the device are ranked, those over host memory or spilling to it are listed. The driver's
own (cuda, uvm, async) are left out: a replay under a byte limit counts what they ask for, not the
driver's rounding or pool, so cudaMalloc per call would read as needing only the live bytes.
PyTorch's default caching allocator is modelled by
the pool strategy, which, like it, frees its cached segments and retries when a request fails; the
peak a snapshot recorded, with no limit, is not its need.

The capacity: --capacity, else the snapshot's own (at its first out-of-memory entry, what PyTorch
reserved plus what the device had free), else this GPU's total memory; with none of these, give
--capacity. SIZE is a byte count, optionally with KiB, MiB, GiB or TiB (16.5GiB: fractions are rounded down
to whole bytes).

Exit status: 0 with a verdict (whichever it is: the JSON's verdict.kind says which), 1 when the
file cannot be read, 2 for bad usage.

${flagHelp(doctorFlags)}

In PyTorch, record a snapshot at the OOM (docs/traces.md); under set_per_process_memory_fraction,
pass the allowed bytes (device_alloc) as --capacity:
  torch.cuda.memory._record_memory_history(max_entries=100000)
  def oom_observer(device, alloc, device_alloc, device_free):
      pickle.dump(torch.cuda.memory._snapshot(), open("oom.pickle", "wb"))
  torch._C._cuda_attach_out_of_memory_observer(oom_observer)

Examples:
  gpumem doctor oom.pickle
  gpumem doctor oom.pickle --capacity 40GiB --report doctor.html
  gpumem doctor run.jsonl --capacity 16GiB --json -
`;

/** Refuses a path holding a NUL byte, which no file system takes. */
function refuseNul(what: string, path: unknown): void {
  if (typeof path === 'string' && path.includes('\0'))
    throw new UsageError(`gpumem doctor: ${what} ${JSON.stringify(path)} holds a NUL byte; no file can have that name`);
}

/** Where the trace came from, in a few words. */
function originOf(trace: ReadTrace): string {
  const h = trace.header;
  return [h.source, h.allocator && `allocator '${h.allocator}'`, h.device, h.createdAt].filter(Boolean).join(', ');
}

/** The capacity to judge against, and where it came from; a UsageError when there is none. */
function capacityOf(given: number | undefined, trace: ReadTrace): { bytes: number; source: string } {
  if (given !== undefined) return { bytes: given, source: '--capacity' };
  const recorded = recordedCapacity(trace);
  if (recorded !== undefined) return recorded;
  if (hasCudaDevice()) return { bytes: memoryInfo(0).totalBytes, source: `the total memory of ${deviceProperties(0).name} (cuda:0)` };
  throw new UsageError(
    "gpumem doctor: no capacity to judge against: the trace records none (a PyTorch snapshot taken at an OOM does) and there is no CUDA device here; give '--capacity SIZE', e.g. --capacity 80GiB",
  );
}

/** `--outside SIZE` or `--outside LOW..HIGH`: the memory outside the allocator; a UsageError for anything else. */
function parseOutside(value: unknown): OutsideMemory | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  const parts = text.split('..');
  let low: number;
  let high: number;
  try {
    if (parts.length > 2) throw new RangeError(`Expected SIZE or LOW..HIGH for '--outside' but received '${text}'`);
    low = parseSize(parts[0]!, "'--outside'");
    high = parts.length === 2 ? parseSize(parts[1]!, "'--outside'") : low;
  } catch (e) {
    throw new UsageError(`gpumem doctor: ${(e as Error).message}`);
  }
  if (low > high) throw new UsageError(`gpumem doctor: '--outside ${text}': LOW must be at most HIGH`);
  return { lowBytes: low, highBytes: high, source: `--outside ${text}` };
}

/** One row of the strategy table. */
function strategyCells(s: DoctorStrategy, capacityBytes: number): string[] {
  if (s.error !== undefined) return [s.label, s.memory, s.ranked ? 'yes' : 'no', 'failed', '-', '-', '-', '-'];
  return [
    s.label,
    s.memory,
    s.ranked ? 'yes' : 'no',
    s.call === undefined ? '-' : s.call === 'too-close' ? 'too close' : s.call === 'fits' ? 'yes' : 'no',
    s.needBytes === undefined ? `> ${formatBytes(s.minCapacity?.capBytes ?? capacityBytes)}` : formatBytes(s.needBytes),
    s.band === undefined ? '-' : `${formatBytes(s.band.lowBytes)} - ${formatBytes(s.band.highBytes)}`,
    s.needBytes === undefined ? '-' : formatBytes(capacityBytes - s.needBytes),
    s.minCapacity ? String(s.minCapacity.probes) : '-',
  ];
}

/** The verdict for the terminal. */
function verdictText(v: DoctorVerdict, capacitySource: string): string {
  const out: string[] = [];
  out.push(`capacity ${formatBytes(v.capacityBytes)} (${capacitySource})`, '');
  const d = v.decision;
  out.push(
    `verdict: ${v.kind === 'too-close' ? 'too-close (too close to call)' : v.kind}`,
    ...v.lines.map((l) => `  ${l}`),
    `  decided by ${d.label}: band ${formatBytes(d.band.lowBytes)} to ${formatBytes(d.band.highBytes)} ` +
      `(need ${formatBytes(d.band.needBytes)}, outside the allocator ${formatBytes(d.band.outsideLowBytes)} to ${formatBytes(d.band.outsideHighBytes)}, model error ±${formatBytes(d.band.modelErrorBytes)}), ` +
      `capacity ${d.marginBytes >= 0 ? `${formatBytes(d.marginBytes)} above` : `${formatBytes(-d.marginBytes)} below`} its middle`,
    '',
  );
  const rows = v.strategies.map((s) => strategyCells(s, v.capacityBytes));
  const pytorchInTable = v.strategies.some((s) => s.label === v.pytorch.label);
  if (!pytorchInTable) rows.push(strategyCells({ ...v.pytorch, label: `${v.pytorch.label} (PyTorch's default)` }, v.capacityBytes));
  out.push(formatTable(['strategy', 'memory', 'ranked', 'fits', 'needs', 'device band', 'capacity left', 'probes'], rows));
  out.push('', 'notes:', ...v.notes.map((n) => `  ${n}`));
  return `${out.join('\n')}\n`;
}

/** The verdict and where it came from, as JSON. */
function jsonOf(file: string, trace: ReadTrace, capacitySource: string, v: DoctorVerdict): string {
  return `${JSON.stringify(
    { file, trace: { format: trace.format, origin: originOf(trace), events: trace.events.length }, capacitySource, verdict: v },
    null,
    2,
  )}\n`;
}

export async function runDoctor(argv: readonly string[], plugins: readonly string[] = []): Promise<number> {
  const { files, flags: flagArgs } = splitFileArgs(argv, doctorFlags);
  const flags = parseFlags(flagArgs, doctorFlags, 'doctor');
  if (flags.help || files.includes('-h')) {
    stdoutText.write(doctorUsage);
    return 0;
  }
  const file = oneFile('doctor', files, 'FILE', 'a FILE (a PyTorch memory snapshot or a gpumem trace), e.g. gpumem doctor oom.pickle');
  refuseNul('FILE', file);
  refuseNul("'--json'", flags.json);
  refuseNul("'--report'", flags.report);
  // Everything that can be wrong with the command line is found before any work.
  checkOutputFlags('doctor', flags, ['report', 'json'], [['the trace FILE', file], ...pluginInputs(plugins)]);
  const givenCapacity = positiveSizeFlag('gpumem doctor', flags.capacity, 'capacity');
  const resolutionBytes = positiveSizeFlag('gpumem doctor', flags.resolution, 'resolution');
  const givenOutside = parseOutside(flags.outside);
  const jsonToStdout = isStdout(flags.json);
  const out = jsonToStdout ? stderrText : stdoutText;

  const trace = await readTraceOrExplain('doctor', file, flags.device as number | undefined);
  if (trace === undefined) return 1;
  const capacity = capacityOf(givenCapacity, trace);
  // The snapshot's capacity is what the allocator could have had: the memory outside it is taken off already.
  const outside =
    givenOutside ??
    (givenCapacity === undefined && recordedCapacity(trace) !== undefined
      ? { lowBytes: 0, highBytes: 0, source: `none counted: the capacity is ${capacity.source}, what the allocator could have had` }
      : defaultOutsideMemory);
  const gpu = hasCudaDevice();
  // Only strategies with logic of their own are judged, on any machine alike: those whose memory is
  // the driver's (a registry flag: they need CUDA, having no host twin) are left out, since a replay
  // under a byte limit counts what they ask for, not the driver's rounding or its pool: cudaMalloc
  // per call would read as needing the live bytes. The others replay on their host twins on a GPU
  // too: the same verdict on any machine, no device memory taken, and no wait on the driver for a
  // trace whose failed request was tens of GiB.
  const defaults = defaultAllocators({ gpu, runsKernels: false });
  const specs = defaults.specs.filter((s) => !strategyInfo(s.name).requiresCuda);
  const leftOut = [...defaults.skipped.map((s) => s.label), ...defaults.specs.filter((s) => !specs.includes(s)).map((s) => s.label)];
  if (leftOut.length > 0)
    stderrText.write(
      `gpumem doctor: leaving out ${leftOut.join(', ')}: their memory is the driver's (cudaMalloc per call, managed memory, cudaMallocAsync's pool), whose rounding and caching a replay under a byte limit does not see\n`,
    );
  out.write(`trace ${file} (${trace.format}; ${originOf(trace)}), ${trace.events.length} events\n`);

  const verdict = diagnoseOom(trace, {
    capacityBytes: capacity.bytes,
    strategies: specs,
    ...(resolutionBytes !== undefined && { resolutionBytes }),
    hostTwins: true,
    outside,
    ...(flags['model-error'] !== undefined && { pytorchModelError: flags['model-error'] as number }),
    failedRequests: flags['skip-failed-requests'] ? 'skip' : 'replay',
    ...loopOption(flags),
  });
  out.write(verdictText(verdict, capacity.source));

  if (jsonToStdout) process.stdout.write(jsonOf(file, trace, capacity.source, verdict));
  else if (flags.json) {
    writeOutputFile(flags.json as string, jsonOf(file, trace, capacity.source, verdict));
    out.write(`wrote ${String(flags.json)}\n`);
  }
  if (flags.report) {
    const html = renderDoctorReport(verdict, {
      file,
      format: trace.format,
      origin: originOf(trace),
      capacitySource: capacity.source,
      device: 'the host twins of the strategies (their logic over host memory): the same verdict on any machine',
      ...(trace.header.createdAt !== undefined && { createdAt: trace.header.createdAt }),
    });
    writeOutputFile(flags.report as string, html);
    out.write(`wrote ${String(flags.report)} (open it in a browser)\n`);
  }
  return 0;
}
