/**
 * `gpumem replay FILE`: replays an allocation trace (gpumem JSONL, RMM's logging CSV, a PyTorch
 * snapshot) through each allocator, natively where the strategy is native, optionally as if the
 * device had a given size, and answers "which allocator for this program, and how much GPU does it
 * need": time per call, peak memory, fragmentation at the peak, driver calls, the minimum capacity,
 * and a recommendation.
 * @module
 */
import { deviceProperties, formatBytes, hasCudaDevice, writeOutputFile } from '@gpumem/allocator-core';
import {
  defaultAllocators,
  formatTable,
  parseAllocatorList,
  renderHtmlReport,
  replayToCompareResult,
  minCapacityText,
  specProblems,
  type AllocatorSpec,
  type DefaultAllocators,
} from '@gpumem/compare';
import { readTrace, TraceBudgetError, TraceFormatError, type ReadTrace } from '@gpumem/trace';
import {
  compileTrace,
  defaultCapacityResolution,
  engineHeadroomBytes,
  peakByTag,
  pytorchBaseline,
  recommendStrategy,
  replayStrategy,
  type Advice,
  type CompiledTrace,
  type RecordedBaseline,
  type ReplayLoop,
  type SkippedStrategy,
  type StrategyReplay,
} from '@gpumem/trace';
import { flagHelp, parseFlags, positiveSizeFlag, splitFileArgs, UsageError, type FlagAliases, type FlagSpec } from './args.js';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { checkAllocatorNames, refuseSpecProblems } from './allocator-flags.js';
import { stdoutText, stderrText } from '../terminal.js';

const replayFlags: Record<string, FlagSpec> = {
  allocators: { type: 'string', help: 'comma-separated allocator specs, NAME or NAME:key=value (default: every one that can run here)' },
  repeat: { type: 'int', min: 1, max: 10000, default: 5, help: 'timed passes over the trace; times are the median' },
  loop: {
    type: 'string',
    choices: ['auto', 'native', 'typescript'],
    default: 'auto',
    help: 'auto: native loop for native strategies, TypeScript for plug-ins',
  },
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

/** What a run of the command does for each allocator. */
interface RunSettings {
  repeats: number;
  loop: ReplayLoop | undefined;
  capacityBytes: number | undefined;
  minCapacity: boolean;
  resolutionBytes: number;
}

function formatNs(ns: number): string {
  return ns >= 10_000 ? `${(ns / 1000).toFixed(1)} µs` : `${ns.toFixed(0)} ns`;
}

function withShare(bytes: number, of: number): string {
  return `${formatBytes(bytes)}${of > 0 ? ` (${((100 * bytes) / of).toFixed(1)}%)` : ''}`;
}

/** The results table; the OOM columns when some row ran out of memory, the search's when it ran. */
function formatReplayTable(rows: readonly StrategyReplay[], baseline?: RecordedBaseline, traceOoms = 0): string {
  const showOom = rows.some((r) => (r.profile?.ooms ?? 0) > 0);
  const showMin = rows.some((r) => r.minCapacity !== undefined);
  const header = [
    'allocator',
    'loop',
    'calls',
    'ns/alloc',
    'ns/free',
    'peak allocated',
    'peak reserved',
    'unused at peak reserved',
    'driver allocs/frees',
    'OOMs',
  ];
  if (showOom) header.push('largest free at OOM', 'unallocated at OOM');
  if (showMin) header.push('min capacity', 'probes');
  header.push('unmatched frees');
  const body = rows.map((row) => {
    // the error itself goes under the table (see failureLines): a long message would widen every row
    if (row.error !== undefined || !row.result || !row.profile) return [row.label, 'failed'];
    const r = row.result;
    const p = row.profile;
    const cells = [
      row.label,
      r.loop,
      String(r.calls),
      formatNs(r.nsPerAlloc),
      formatNs(r.nsPerFree),
      formatBytes(r.peakAllocatedBytes),
      formatBytes(r.peakReservedBytes),
      withShare(p.fragmentationAtPeakBytes, p.reservedAtPeakBytes),
      `${p.driverAllocs}/${p.driverFrees}`,
      String(r.ooms),
    ];
    if (showOom) {
      const first = p.oomSnapshots[0];
      cells.push(
        first === undefined ? '-' : first.largestFreeBlock === undefined ? 'not reported' : formatBytes(first.largestFreeBlock),
        first === undefined ? '-' : formatBytes(first.unallocatedReservedBytes),
      );
    }
    if (showMin)
      cells.push(row.minCapacity ? minCapacityText(row.minCapacity) : '-', row.minCapacity ? String(row.minCapacity.probes) : '-');
    cells.push(String(r.unmatchedFrees));
    return cells;
  });
  if (baseline) {
    const cells = [
      baseline.label,
      'recorded',
      '-',
      '-',
      '-',
      formatBytes(baseline.peakAllocatedBytes),
      formatBytes(baseline.peakReservedBytes),
      withShare(baseline.fragmentationAtPeakBytes, baseline.fragmentationAtPeakBytes + baseline.allocatedAtPeakBytes),
      `${baseline.driverAllocs}/${baseline.driverFrees}`,
      String(traceOoms),
    ];
    if (showOom) cells.push('-', '-');
    if (showMin) cells.push(`${formatBytes(baseline.peakReservedBytes)} (recorded)`, '-');
    cells.push('-');
    body.push(cells);
  }
  return formatTable(header, body);
}

/** The allocators that failed, grouped by their error: `cuda and async: InvalidStateError: ...`. */
function failuresByError(rows: readonly StrategyReplay[]): string[] {
  const byError = new Map<string, string[]>();
  for (const r of rows.filter((r) => r.error !== undefined || !r.result || !r.profile)) {
    const error = r.error ?? 'no result';
    byError.set(error, [...(byError.get(error) ?? []), r.label]);
  }
  return [...byError].map(
    ([error, labels]) => `${labels.length > 1 ? `${labels.slice(0, -1).join(', ')} and ${labels.at(-1)}` : labels[0]}: ${error}`,
  );
}

/** Under the table, the allocators that failed and why (a long error would widen every row of it). */
function failureLines(rows: readonly StrategyReplay[]): string[] {
  return failuresByError(rows).map((f) => `failed: ${f}`);
}

/** When no allocator finished, what happened, in one line (the recommendation has nothing to pick from). */
function noneFinishedLine(rows: readonly StrategyReplay[]): string | undefined {
  if (rows.length === 0 || rows.some((r) => r.error === undefined && r.result && r.profile)) return undefined;
  return `no strategy could replay the trace: ${failuresByError(rows).join('; ')}`;
}

/** Notes under the table: what a mark or a limit means. */
function tableNotes(rows: readonly StrategyReplay[], baseline: RecordedBaseline | undefined, resolutionBytes: number): string[] {
  const notes: string[] = [];
  if (rows.some((r) => r.minCapacity)) {
    notes.push(
      `min capacity: no out-of-memory at or above it, to within ${formatBytes(resolutionBytes)}; "> CAP": out of memory even at the cap`,
    );
    if (baseline)
      notes.push(
        `${baseline.label}: the program ran in what it reserved, so its min capacity is its recorded peak reserved (not searched)`,
      );
  }
  for (const r of rows) {
    if (r.limit === 'outer-limit') {
      notes.push(
        `${r.label}: creates no allocator through the registry, so the capacity caps the bytes it hands out, not what it reserves`,
      );
    }
    if (r.result && r.profile && r.profile.reservedAtPeakBytes !== r.result.peakReservedBytes) {
      notes.push(
        `${r.label}: unused at peak reserved is measured in the tracked pass, whose peak reserved was ${formatBytes(r.profile.reservedAtPeakBytes)}`,
      );
    }
    const range = r.result?.peakReservedRange;
    if (range && range[0] !== range[1])
      notes.push(
        `${r.label}: peak reserved ranged ${formatBytes(range[0])}–${formatBytes(range[1])} over ${r.result!.repeats} passes (the table gives the highest)`,
      );
    const min = r.minCapacity?.bytesRange;
    if (min && min[0] !== min[1])
      notes.push(
        `${r.label}: min capacity ranged ${formatBytes(min[0])}–${formatBytes(min[1])} over ${r.minCapacity!.searches} searches (the table gives the largest)`,
      );
  }
  if (baseline?.peakAllocatedNote) notes.push(`${baseline.label}: ${baseline.peakAllocatedNote}`);
  return notes;
}

/**
 * Why a row ran out of memory when no --capacity says why: the address-space limit it was
 * replayed within, and the strategy's own reason for its first failure (an expandable range that
 * could not be reserved, for one).
 */
function outOfMemoryNotes(rows: readonly StrategyReplay[], capacityBytes: number | undefined): string[] {
  if (capacityBytes !== undefined) return [];
  const notes: string[] = [];
  for (const r of rows) {
    const room = r.addressSpace;
    if (room) {
      notes.push(
        `${r.label}: replayed within ${formatBytes(room.roomBytes)}: the address space is limited to ${formatBytes(room.limitBytes)} (RLIMIT_AS), the process maps ${formatBytes(room.mappedBytes)} and ${formatBytes(engineHeadroomBytes)} stay free for the JavaScript heap`,
      );
    }
    const reason = r.profile?.firstOomReason;
    if (reason !== undefined) notes.push(`${r.label}: the first out of memory: ${reason}`);
  }
  return notes;
}

/** One allocator done, for --progress: `gpumem replay: [2/6] pool: min capacity 1.25 GiB (14 probes), 3.2 s`. */
function progressLine(row: StrategyReplay, index: number, count: number): string {
  const what =
    row.error !== undefined
      ? `failed (${row.error})`
      : row.minCapacity
        ? `min capacity ${minCapacityText(row.minCapacity)} (${row.minCapacity.probes} probe${row.minCapacity.probes === 1 ? '' : 's'})`
        : 'replayed';
  const seconds = row.wallMs !== undefined ? `, ${(row.wallMs / 1000).toFixed(1)} s` : '';
  return `gpumem replay: [${index + 1}/${count}] ${row.label}: ${what}${seconds}`;
}

/** The recommendation from the rows that finished (and PyTorch's recorded row, when there is one). */
function recommend(
  rows: readonly StrategyReplay[],
  baseline: RecordedBaseline | undefined,
  s: RunSettings,
  skipped: readonly SkippedStrategy[],
): Advice {
  return recommendStrategy(rows, {
    minCapacity: s.minCapacity,
    ...(s.capacityBytes !== undefined && { capacityBytes: s.capacityBytes }),
    ...(baseline && { baseline }),
    skipped,
    gpu: hasCudaDevice(),
  });
}

/** Where the trace came from, in a few words. */
function originOf(trace: ReadTrace): string {
  const h = trace.header;
  return [h.source, h.allocator && `allocator '${h.allocator}'`, h.device, h.createdAt].filter(Boolean).join(', ');
}

/** What the trace holds, in one line. */
function traceSummary(trace: ReadTrace, c: CompiledTrace): string {
  const durationMs = trace.events.length > 0 ? (trace.events[trace.events.length - 1]!.timeNs - trace.events[0]!.timeNs) / 1e6 : 0;
  return (
    `${trace.events.length} events over ${durationMs.toFixed(1)} ms: ${c.allocs} allocs, ${c.frees} frees, ${c.traceOoms} OOMs, ` +
    `${c.streamIds.length} stream(s); peak allocated ${formatBytes(c.peakAllocatedBytes)}` +
    (c.peakReservedBytes !== undefined ? `, peak reserved ${formatBytes(c.peakReservedBytes)} (as recorded)` : '')
  );
}

/** A line about the trace: what it holds and where it came from. */
function describeTrace(file: string, trace: ReadTrace, c: CompiledTrace): string {
  const h = trace.header;
  const lines = [`trace ${file} (${trace.format}; ${originOf(trace)})`, `  ${traceSummary(trace, c)}`];
  const notes = [
    c.unmatchedFrees > 0 && `${c.unmatchedFrees} frees of pointers the trace never allocated (skipped)`,
    c.liveAtEnd > 0 && `${c.liveAtEnd} allocations live at the end (freed after each pass)`,
    c.zeroByteEvents > 0 && `${c.zeroByteEvents} zero-byte events (skipped)`,
    c.sizeMismatches > 0 && `${c.sizeMismatches} frees with a size other than their allocation's (replayed with the allocation's)`,
    h.droppedEvents !== undefined && h.droppedEvents > 0 && `the recorder dropped ${h.droppedEvents} older events`,
  ].filter(Boolean);
  if (notes.length > 0) lines.push(`  ${notes.join('; ')}`);
  const byTag = peakByTag(c);
  if (byTag.length > 0) {
    const shown = byTag
      .slice(0, 5)
      .map((p) => `${p.tag} ${formatBytes(p.bytes)} (${((100 * p.bytes) / c.peakAllocatedBytes).toFixed(0)}%)`);
    lines.push(`  at its peak, by where it was allocated: ${shown.join(', ')}${byTag.length > 5 ? `, ${byTag.length - 5} more` : ''}`);
  }
  return lines.join('\n');
}

/** Reads the trace; prints why and returns undefined when it cannot (exit 1). */
async function readOrExplain(file: string, device?: number): Promise<ReadTrace | undefined> {
  try {
    return await readTrace(file, device === undefined ? {} : { device });
  } catch (e) {
    if (e instanceof TraceFormatError) {
      const what = e instanceof TraceBudgetError ? "trace past the readers' budget" : 'malformed trace';
      stderrText.write(`gpumem replay: ${what}: ${e.message}\n`);
      return undefined;
    }
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code === 'string') {
      stderrText.write(`gpumem replay: cannot read '${file}': ${err.code === 'ENOENT' ? 'no such file' : err.message}\n`);
      return undefined;
    }
    throw e;
  }
}

/** The results as JSON: the timelines left out (they go into --report). */
function jsonOf(
  file: string,
  trace: ReadTrace,
  compiled: CompiledTrace,
  rows: readonly StrategyReplay[],
  baseline: RecordedBaseline | undefined,
  advice: Advice,
  s: RunSettings,
): string {
  const { events: _events, ...rest } = trace;
  const summary = {
    ...rest,
    events: trace.events.length,
    ...Object.fromEntries(Object.entries(compiled).filter(([, v]) => typeof v === 'number')),
  };
  delete (summary as { pytorch?: unknown }).pytorch;
  const results = rows.map(({ label, profile, ...row }) => {
    if (!profile) return { allocator: label, ...row };
    const { timeline: _timeline, ...p } = profile;
    return { allocator: label, ...row, profile: p };
  });
  const recorded = baseline && (({ reservedTimeline: _t, ...p }) => p)(baseline);
  return `${JSON.stringify(
    {
      file,
      trace: summary,
      ...(s.capacityBytes !== undefined && { capacityBytes: s.capacityBytes }),
      results,
      ...(recorded && { recorded }),
      recommendation: advice.lines,
      ...(advice.skipped.length > 0 && { skipped: advice.skipped }),
      ...(advice.notRanked.length > 0 && { notRanked: advice.notRanked }),
      ...(compiled.tagNames && { peakByTag: peakByTag(compiled) }),
    },
    null,
    2,
  )}\n`;
}

export async function runReplay(argv: readonly string[], plugins: readonly string[] = []): Promise<number> {
  const { files, flags: flagArgs } = splitFileArgs(argv, replayFlags, replayFlagAliases);
  const flags = parseFlags(flagArgs, replayFlags, 'replay', replayFlagAliases);
  if (flags.help || files.includes('-h')) {
    stdoutText.write(replayUsage);
    return 0;
  }
  if (files.length !== 1) {
    throw new UsageError(
      files.length === 0
        ? `gpumem replay: expected a trace FILE (gpumem JSONL, RMM CSV or a PyTorch snapshot), e.g. gpumem replay run.jsonl`
        : `gpumem replay: expected one trace FILE but received ${files.length}: ${files.join(' ')}`,
    );
  }
  const file = files[0]!;
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
  const settings: RunSettings = {
    repeats: flags.repeat as number,
    loop: flags.loop === 'auto' ? undefined : (flags.loop as ReplayLoop),
    capacityBytes,
    minCapacity: flags['min-capacity'] === true,
    resolutionBytes: resolution ?? defaultCapacityResolution,
  };
  // With the JSON on stdout (--json -), the table and every status line go to stderr.
  const jsonToStdout = isStdout(flags.json);
  const out = jsonToStdout ? stderrText : stdoutText;

  const trace = await readOrExplain(file, flags.device as number | undefined);
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

  const baseline = pytorchBaseline(trace, compiled);
  const progress = flags.progress === true || (settings.minCapacity && process.stderr.isTTY === true);
  const rows = specs.map((spec, i) => {
    const row = replayStrategy(compiled, spec, settings);
    if (progress) stderrText.write(`${progressLine(row, i, specs.length)}\n`);
    return row;
  });
  out.write(`${formatReplayTable(rows, baseline, compiled.traceOoms)}\n`);
  const noneFinished = noneFinishedLine(rows);
  // when none finished, the result below says why, once
  const notes = [
    ...tableNotes(rows, baseline, settings.resolutionBytes),
    ...outOfMemoryNotes(rows, capacityBytes),
    ...(noneFinished === undefined ? failureLines(rows) : []),
  ];
  if (notes.length > 0) out.write(`${notes.map((n) => `  ${n}`).join('\n')}\n`);
  const advice: Advice =
    noneFinished !== undefined
      ? { ...recommend(rows, baseline, settings, defaults?.skipped ?? []), lines: [noneFinished] }
      : recommend(rows, baseline, settings, defaults?.skipped ?? []);
  if (advice.lines.length > 0)
    out.write(`\n${noneFinished !== undefined ? 'result' : 'recommendation'}:\n${advice.lines.map((l) => `  ${l}`).join('\n')}\n`);

  if (jsonToStdout) {
    process.stdout.write(jsonOf(file, trace, compiled, rows, baseline, advice, settings));
  } else if (flags.json) {
    writeOutputFile(flags.json as string, jsonOf(file, trace, compiled, rows, baseline, advice, settings));
    out.write(`wrote ${String(flags.json)}\n`);
  }
  if (flags.report) {
    const result = replayToCompareResult({
      file,
      format: trace.format,
      origin: originOf(trace),
      summary: traceSummary(trace, compiled),
      compiled,
      rows,
      ...(baseline && { baseline }),
      device: hasCudaDevice() ? `${deviceProperties(0).name} (cuda:0)` : 'host (no GPU)',
      ...(capacityBytes !== undefined && { capacityBytes }),
      advice,
    });
    writeOutputFile(flags.report as string, renderHtmlReport(result));
    out.write(`wrote ${String(flags.report)} (open it in a browser)\n`);
  }
  return rows.some((r) => r.error !== undefined) ? 1 : 0;
}
