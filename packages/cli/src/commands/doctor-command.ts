/**
 * `gpumem doctor FILE`: "is this OOM real?". Reads a PyTorch memory snapshot or a gpumem trace,
 * takes a device capacity (given, recorded in the snapshot at its OOM, or the GPU's), and says
 * whether the program fits, runs out for fragmentation, or needs more live memory than the device
 * has, with the figures behind the verdict (see diagnoseOom of @gpumem/trace).
 * @module
 */
import { deviceProperties, formatBytes, hasCudaDevice, memoryInfo, strategyInfo } from '@gpumem/allocator-core';
import { defaultAllocators, formatTable, renderDoctorReport } from '@gpumem/compare';
import {
  diagnoseOom,
  readTrace,
  recordedCapacity,
  TraceFormatError,
  type DoctorStrategy,
  type DoctorVerdict,
  type ReadTrace,
  type ReplayLoop,
} from '@gpumem/trace';
import { flagHelp, parseFlags, positiveSizeFlag, splitFileArgs, UsageError, type FlagSpec } from './args.js';
import { checkOutputFlags, isStdout, writeOutput } from './output-paths.js';

const doctorFlags: Record<string, FlagSpec> = {
  capacity: {
    type: 'string',
    help: "the device's capacity, SIZE (e.g. 80GiB; default: the snapshot's, recorded at its OOM, else this GPU's total memory)",
  },
  resolution: { type: 'string', help: 'precision of the minimum-capacity searches, SIZE (default: the capacity / 1024, 4 KiB to 2 MiB)' },
  'skip-failed-requests': {
    type: 'boolean',
    help: 'leave out the requests that failed in the recording (default: replay each as an allocation freed at once)',
  },
  loop: {
    type: 'string',
    choices: ['auto', 'native', 'typescript'],
    default: 'auto',
    help: 'auto: native loop for native strategies, TypeScript for plug-ins',
  },
  device: { type: 'int', min: 0, max: 1023, help: 'PyTorch snapshots: the device whose history to read (default: the first with events)' },
  report: { type: 'string', help: 'write the verdict as an HTML page to this file' },
  json: { type: 'string', help: "write the verdict and its figures as JSON to this file ('-': to stdout, the rest to stderr)" },
  help: { type: 'boolean', help: 'show this help' },
};

export const doctorUsage = `Usage: gpumem doctor FILE [--capacity SIZE] [--resolution SIZE] [--skip-failed-requests]
                      [--report OUT.html] [--json OUT.json|-]

Is this OOM real? Reads FILE, a PyTorch memory snapshot (the pickle of
torch.cuda.memory._snapshot() or _dump_snapshot(), optionally gzip-compressed) or a gpumem trace
(JSONL, RMM CSV: what gpumem replay reads), and a device capacity, and gives one verdict:

  fits           PyTorch's default allocator fits in the capacity; names the strategy needing the
                 least, and its margin
  fragmentation  the live bytes fit, but PyTorch's default allocator needs more than the capacity;
                 names the strategy that fits, and in how much
  real           even the live bytes exceed the capacity: by how much, and what would bring them
                 down (tags or streams on the host, idle tags asleep, activation checkpointing),
                 with figures from the trace

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
--capacity. SIZE is a byte count, optionally with KiB, MiB, GiB or TiB.

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

/** Reads the trace; prints why and returns undefined when it cannot (exit 1). */
async function readOrExplain(file: string, device?: number): Promise<ReadTrace | undefined> {
  try {
    return await readTrace(file, device === undefined ? {} : { device });
  } catch (e) {
    if (e instanceof TraceFormatError) {
      process.stderr.write(`gpumem doctor: malformed trace: ${e.message}\n`);
      return undefined;
    }
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code === 'string') {
      process.stderr.write(`gpumem doctor: cannot read '${file}': ${err.code === 'ENOENT' ? 'no such file' : err.message}\n`);
      return undefined;
    }
    throw e;
  }
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

/** One row of the strategy table. */
function strategyCells(s: DoctorStrategy, capacityBytes: number): string[] {
  if (s.error !== undefined) return [s.label, s.memory, s.ranked ? 'yes' : 'no', 'failed', '-', '-', '-'];
  return [
    s.label,
    s.memory,
    s.ranked ? 'yes' : 'no',
    s.fits === undefined ? '-' : s.fits ? 'yes' : `no (${s.oomsAtCapacity} OOM${s.oomsAtCapacity === 1 ? '' : 's'})`,
    s.needBytes === undefined ? `> ${formatBytes(s.minCapacity?.capBytes ?? capacityBytes)}` : formatBytes(s.needBytes),
    s.needBytes === undefined ? '-' : formatBytes(capacityBytes - s.needBytes),
    s.minCapacity ? String(s.minCapacity.probes) : '-',
  ];
}

/** The verdict for the terminal. */
function verdictText(v: DoctorVerdict, capacitySource: string): string {
  const out: string[] = [];
  out.push(`capacity ${formatBytes(v.capacityBytes)} (${capacitySource})`, '');
  out.push(`verdict: ${v.kind}`, ...v.lines.map((l) => `  ${l}`), '');
  const rows = v.strategies.map((s) => strategyCells(s, v.capacityBytes));
  const pytorchInTable = v.strategies.some((s) => s.label === v.pytorch.label);
  if (!pytorchInTable) rows.push(strategyCells({ ...v.pytorch, label: `${v.pytorch.label} (PyTorch's default)` }, v.capacityBytes));
  out.push(formatTable(['strategy', 'memory', 'ranked', 'fits at capacity', 'needs', 'capacity left', 'probes'], rows));
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

export async function runDoctor(argv: readonly string[]): Promise<number> {
  const { files, flags: flagArgs } = splitFileArgs(argv, doctorFlags);
  const flags = parseFlags(flagArgs, doctorFlags, 'doctor');
  if (flags.help || files.includes('-h')) {
    process.stdout.write(doctorUsage);
    return 0;
  }
  if (files.length !== 1) {
    throw new UsageError(
      files.length === 0
        ? 'gpumem doctor: expected a FILE (a PyTorch memory snapshot or a gpumem trace), e.g. gpumem doctor oom.pickle'
        : `gpumem doctor: expected one FILE but received ${files.length}: ${files.join(' ')}`,
    );
  }
  const file = files[0]!;
  refuseNul('FILE', file);
  refuseNul("'--json'", flags.json);
  refuseNul("'--report'", flags.report);
  // Everything that can be wrong with the command line is found before any work.
  checkOutputFlags('doctor', flags, ['report', 'json'], [['the trace FILE', file]]);
  const givenCapacity = positiveSizeFlag('gpumem doctor', flags.capacity, 'capacity');
  const resolutionBytes = positiveSizeFlag('gpumem doctor', flags.resolution, 'resolution');
  const jsonToStdout = isStdout(flags.json);
  const out = jsonToStdout ? process.stderr : process.stdout;

  const trace = await readOrExplain(file, flags.device as number | undefined);
  if (trace === undefined) return 1;
  const capacity = capacityOf(givenCapacity, trace);
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
    process.stderr.write(
      `gpumem doctor: leaving out ${leftOut.join(', ')}: their memory is the driver's (cudaMalloc per call, managed memory, cudaMallocAsync's pool), whose rounding and caching a replay under a byte limit does not see\n`,
    );
  out.write(`trace ${file} (${trace.format}; ${originOf(trace)}), ${trace.events.length} events\n`);

  const verdict = diagnoseOom(trace, {
    capacityBytes: capacity.bytes,
    strategies: specs,
    ...(resolutionBytes !== undefined && { resolutionBytes }),
    hostTwins: true,
    failedRequests: flags['skip-failed-requests'] ? 'skip' : 'replay',
    ...(flags.loop !== 'auto' && { loop: flags.loop as ReplayLoop }),
  });
  out.write(verdictText(verdict, capacity.source));

  if (jsonToStdout) process.stdout.write(jsonOf(file, trace, capacity.source, verdict));
  else if (flags.json) {
    writeOutput(flags.json as string, jsonOf(file, trace, capacity.source, verdict));
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
    writeOutput(flags.report as string, html);
    out.write(`wrote ${String(flags.report)} (open it in a browser)\n`);
  }
  return 0;
}
