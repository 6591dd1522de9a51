/**
 * `gpumem replay FILE`: replays an allocation trace (gpumem JSONL, RMM's logging CSV, a PyTorch
 * snapshot) through each allocator, in the native loop for a NativeAllocator, optionally as if
 * the device had a given size, and answers "which allocator for this program, and how much GPU does
 * it need": time per call, peak memory, fragmentation at the peak, driver calls, the minimum
 * capacity, and a recommendation. This module parses the flags, reads the trace and prints; the run,
 * its table, its JSON and its report are @gpumem/compare's (replayAllocators, formatReplayTable, ...).
 * @module
 */
import { deviceProperties, formatBytes, hasCudaDevice, writeOutputFile } from '@gpumem/allocator-core';
import {
  defaultAllocators,
  describeTrace,
  formatReplayTable,
  parseAllocatorList,
  renderHtmlReport,
  replayAllocators,
  replayJson,
  replayNotes,
  replayProgressLine,
  replayReport,
  specProblems,
  type AllocatorSpec,
  type DefaultAllocators,
} from '@gpumem/compare';
import { compileTrace, defaultCapacityResolution } from '@gpumem/trace';
import { flagHelp, oneFile, parseFlags, positiveSizeFlag, splitFileArgs, UsageError, type FlagAliases, type FlagSpec } from './args.js';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { checkAllocatorNames, refuseSpecProblems } from './allocator-flags.js';
import { loopFlag, loopOption } from './loop-flag.js';
import { readTraceOrExplain } from './read-trace-file.js';
import { stdoutText, stderrText } from '../terminal.js';

const replayFlags: Record<string, FlagSpec> = {
  allocators: { type: 'string', help: 'comma-separated allocator specs, NAME or NAME:key=value (default: every one that can run here)' },
  repeat: { type: 'int', min: 1, max: 10000, default: 5, help: 'timed passes over the trace; times are the median' },
  loop: loopFlag,
  capacity: { type: 'string', help: 'replay as if the device had SIZE bytes (e.g. 16GiB); also the cap of --min-capacity' },
  'min-capacity': { type: 'boolean', help: "find each allocator's smallest capacity with no out-of-memory (bisection)" },
  resolution: {
    type: 'string',
    help: `precision of --min-capacity (default ${formatBytes(defaultCapacityResolution).replace(/\.00 /, '')})`,
  },
  progress: {
    type: 'boolean',
    help: 'a line on stderr as each allocator finishes (the default with --min-capacity when stderr is a terminal)',
  },
  device: { type: 'int', min: 0, max: 1023, help: 'PyTorch snapshots: the device whose trace to replay (default: the first with events)' },
  report: { type: 'string', help: 'write an HTML report (table, memory timelines, recommendation) to this file' },
  json: { type: 'string', help: "write the trace summary and every result as JSON to this file ('-': to stdout, the rest to stderr)" },
  help: { type: 'boolean', help: 'show this help' },
};

/** Old flag names, accepted for one more release: compare and replay both say --repeat. */
const replayFlagAliases: FlagAliases = { repeats: 'repeat' };

export const replayUsage = `Usage: gpumem replay FILE [--allocators a,b:key=value,...] [--capacity SIZE] [--min-capacity]
                      [--resolution SIZE] [--progress] [--repeat N] [--report OUT.html] [--json OUT.json|-]

Replays an allocation trace (FILE; - is standard input) through each allocator: the same mallocs
and frees in the same order, on as many streams as the trace has, with no kernels in between, and
says which allocator suits the program. Native strategies run it in a native loop. Each timed pass starts with the allocator
trimmed and empty. The table shows, per allocator: the median time per call, peak allocated and
reserved bytes, the bytes unused at peak reserved (reserved minus allocated bytes when the strategy
reserved the most, from one extra tracked pass; not at the peak of allocated bytes), driver calls (allocations/frees), out-of-memory failures and,
at the first one, the largest free block and the reserved bytes nothing was allocated in.

--capacity SIZE replays as if the device had SIZE bytes: native strategies get the native limiting
layer under them (it caps what they take from the driver); strategies written in TypeScript get a
limiting adaptor between them and the allocators they create. A SIZE below the trace's largest
single request is an error.

--min-capacity finds, per allocator, the smallest capacity at which the whole trace replays with no
out-of-memory: bisection from the trace's peak live bytes (which no allocator can beat), doubling up
to the cap (--capacity, else the GPU's free memory, or the machine's memory for host strategies),
then halving to --resolution; one pass per probe. "> CAP" means it never fitted. A search can take
minutes: on a terminal (or with --progress), a line on stderr says when each allocator is done.

Under a limit on the address space (RLIMIT_AS: ulimit -v, prlimit --as) and with no --capacity,
strategies over host memory replay within what the limit leaves, less 512 MiB for the JavaScript
heap: past it the engine could not grow and the process would end. expandable reserves a virtual
range per stream (64 GiB on the host): under such a limit give it a smaller reserveBytes
(expandable:reserveBytes=1GiB). With no --capacity, each row that ran out of memory says why.

The run ends with a recommendation: the allocator needing the least memory, the one making the
fewest driver calls and the one with the fastest calls; for a PyTorch snapshot, PyTorch's caching
allocator (as recorded) is a row of its own and each pick says by how much it beats it. The report's
marks are these picks: strategies over host memory, those that spill to it (for memory) and the
recorded allocator are not ranked, so never marked.

FILE is a gpumem trace (JSONL, from \`gpumem record\`), a CSV log from RMM's logging_resource_adaptor
(Thread,Time,Action,Pointer,Size,Stream) or a PyTorch snapshot; the file itself tells them apart.
SIZE is a byte count, optionally with KiB, MiB, GiB or TiB.

${flagHelp(replayFlags, replayFlagAliases)}

Examples:
  gpumem replay mlp.jsonl
  gpumem replay mlp.jsonl --allocators pool,host --repeat 10
  gpumem replay snapshot.pickle --capacity 16GiB
  gpumem replay snapshot.pickle --min-capacity --report pick.html
  gpumem replay run.jsonl --allocators pool,pool:maxReservedBytes=1GiB,async:releaseThreshold=0 --min-capacity
  gpumem replay rmm_log.csv --allocators pool,async --json replay.json
  GPUMEM_PLUGINS=./examples/dist/arena/index.js gpumem replay mlp.jsonl --allocators arena,pool
`;

/** The allocators named by --allocators (each registered), parsed as specs with options. */
function namedAllocators(list: string): AllocatorSpec[] {
  let specs: AllocatorSpec[];
  try {
    specs = parseAllocatorList(list);
  } catch (e) {
    throw new UsageError(`gpumem replay: '--allocators': ${(e as Error).message}`);
  }
  // a strategy that needs a GPU is not refused here: its row says why it could not start
  checkAllocatorNames('replay', 'allocators', specs, hasCudaDevice(), false);
  return specs;
}

/**
 * Every registered allocator that can run here (host strategies included even on a GPU: a replay
 * runs no kernels, and their capacity is as meaningful as a device strategy's), and those skipped
 * for want of a GPU (also said on stderr).
 */
function replayDefaults(): DefaultAllocators {
  const defaults = defaultAllocators({ gpu: hasCudaDevice(), runsKernels: false });
  if (defaults.skipped.length > 0)
    stderrText.write(`gpumem replay: no CUDA device; skipping ${defaults.skipped.map((s) => s.label).join(', ')}\n`);
  return defaults;
}

export async function runReplay(argv: readonly string[], plugins: readonly string[] = []): Promise<number> {
  const { files, flags: flagArgs } = splitFileArgs(argv, replayFlags, replayFlagAliases);
  const flags = parseFlags(flagArgs, replayFlags, 'replay', replayFlagAliases);
  if (flags.help || files.includes('-h')) {
    stdoutText.write(replayUsage);
    return 0;
  }
  const file = oneFile(
    'replay',
    files,
    'trace FILE',
    'a trace FILE (gpumem JSONL, RMM CSV or a PyTorch snapshot), e.g. gpumem replay run.jsonl',
  );
  // Everything that can be wrong with the command line is found before any work.
  checkOutputFlags('replay', flags, ['report', 'json'], [['the trace FILE', file], ...pluginInputs(plugins, [flags.allocators])]);
  const capacityBytes = positiveSizeFlag('gpumem replay', flags.capacity, 'capacity');
  const resolution = positiveSizeFlag('gpumem replay', flags.resolution, 'resolution');
  if (resolution !== undefined && !flags['min-capacity'])
    throw new UsageError("gpumem replay: '--resolution' is the precision of '--min-capacity'; pass both");
  const named = flags.allocators !== undefined ? namedAllocators(flags.allocators as string) : undefined;
  if (named) {
    const limited = capacityBytes === undefined ? [] : named.filter((s) => s.options.limitBytes !== undefined);
    const conflicts = limited.map((s) => ({
      label: s.label,
      message: "its option limitBytes and '--capacity' both cap its memory; give one of them",
    }));
    refuseSpecProblems('replay', 'allocators', [...conflicts, ...specProblems(named)]);
  }
  const minCapacity = flags['min-capacity'] === true;
  const resolutionBytes = resolution ?? defaultCapacityResolution;
  // With the JSON on stdout (--json -), the table and every status line go to stderr.
  const jsonToStdout = isStdout(flags.json);
  const out = jsonToStdout ? stderrText : stdoutText;

  const trace = await readTraceOrExplain('replay', file, flags.device as number | undefined);
  if (trace === undefined) return 1;
  const compiled = compileTrace(trace);
  if (capacityBytes !== undefined && capacityBytes < compiled.largestRequestBytes) {
    throw new UsageError(
      `gpumem replay: '--capacity' ${formatBytes(capacityBytes)} is less than the trace's largest single request (${formatBytes(compiled.largestRequestBytes)}); no allocator could replay it`,
    );
  }
  const defaults = named ? undefined : replayDefaults();
  const specs = named ?? defaults!.specs;
  out.write(`${describeTrace(file, trace, compiled)}\n`);
  if (capacityBytes !== undefined) out.write(`  replayed as if the device had ${formatBytes(capacityBytes)}\n`);
  out.write('\n');

  const progress = flags.progress === true || (minCapacity && process.stderr.isTTY === true);
  const run = replayAllocators(trace, compiled, specs, {
    repeats: flags.repeat as number,
    ...loopOption(flags),
    ...(capacityBytes !== undefined && { capacityBytes }),
    minCapacity,
    resolutionBytes,
    skipped: defaults?.skipped ?? [],
    gpu: hasCudaDevice(),
    ...(progress && { onRow: (row, i, count) => stderrText.write(`gpumem replay: ${replayProgressLine(row, i, count)}\n`) }),
  });
  out.write(`${formatReplayTable(run.rows, run.baseline, compiled.traceOoms)}\n`);
  const notes = replayNotes(run.rows, run.baseline, { resolutionBytes, capacityBytes });
  if (notes.length > 0) out.write(`${notes.map((n) => `  ${n}`).join('\n')}\n`);
  const { advice } = run;
  if (advice.lines.length > 0)
    out.write(`\n${run.noneFinished !== undefined ? 'result' : 'recommendation'}:\n${advice.lines.map((l) => `  ${l}`).join('\n')}\n`);

  if (jsonToStdout) {
    process.stdout.write(replayJson(file, trace, compiled, run, capacityBytes));
  } else if (flags.json) {
    writeOutputFile(flags.json as string, replayJson(file, trace, compiled, run, capacityBytes));
    out.write(`wrote ${String(flags.json)}\n`);
  }
  if (flags.report) {
    const device = hasCudaDevice() ? `${deviceProperties(0).name} (cuda:0)` : 'host (no GPU)';
    writeOutputFile(flags.report as string, renderHtmlReport(replayReport(file, trace, compiled, run, { device, capacityBytes })));
    out.write(`wrote ${String(flags.report)} (open it in a browser)\n`);
  }
  return run.rows.some((r) => r.error !== undefined) ? 1 : 0;
}
