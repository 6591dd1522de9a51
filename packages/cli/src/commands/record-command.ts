/**
 * `gpumem record`: trains a model on one allocator with allocation tracking on, and writes every
 * malloc and free of the run as a trace (JSONL, or RMM's logging CSV).
 * @module
 */
import {
  createTrackedAllocator,
  formatBytes,
  writeOutputFile,
  hasCudaDevice,
  type TrackedAllocator,
  type TrackingEvent,
} from '@gpumem/allocator-core';
import { train, type TrainResult } from '@gpumem/gnn';
import { allocationTags } from '@gpumem/gnn';
import { formatFromPath, traceFileFormats, writeTrace, type AllocationTrace, type TraceFileFormat } from '@gpumem/trace';
import { compileTrace, traceFromEvents } from '@gpumem/trace';
import { flagHelp, parseFlags, ProgressBar, refusedAsUsage, UsageError, type FlagSpec, type FlagValues } from './args.js';
import { allocatorFromFlags } from './train-command.js';
import { trainFlags, trainOptionsForHere } from './train-options.js';
import { checkOutputFlags, isStdout, pluginInputs } from './output-paths.js';
import { stdoutText, stderrText } from '../terminal.js';

/** Events the tracking ring holds by default (about 48 MiB). */
const defaultCapacity = 1 << 20;

const ownFlags: Record<string, FlagSpec> = {
  out: { type: 'string', help: 'the trace file to write (required)' },
  format: { type: 'string', choices: traceFileFormats, help: 'jsonl or rmm-csv (default: from the extension of --out: .jsonl, .csv)' },
  capacity: {
    type: 'int',
    min: 1,
    max: 2 ** 28,
    default: defaultCapacity,
    help: 'events the tracking ring buffer holds; older ones are dropped past it',
  },
};

const recordFlags: Record<string, FlagSpec> = { ...ownFlags, ...trainFlags };

export const recordUsage = `Usage: gpumem record --out FILE [--format jsonl|rmm-csv] [--capacity N] [train flags]

Runs \`gpumem train\` on one allocator with allocation tracking on, and writes the run's
allocation trace: every malloc and free with its time, size, pointer and stream. JSONL keeps
everything (a header with the allocator, device and workload, then one event per line); rmm-csv
is the CSV that RMM's logging_resource_adaptor writes (Thread,Time,Action,Pointer,Size,Stream).
Replay it with \`gpumem replay FILE\`.

${flagHelp(recordFlags)}

Examples:
  gpumem record --out mlp.jsonl --model mlp --allocator pool --epochs 1
  gpumem record --out mlp.csv --model mlp --allocator host --train-subset 2000 --hidden 128
  gpumem record --out gcn.jsonl --format jsonl --model gcn --dataset sbm --allocator pool --capacity 4000000
`;

/** The workload, as the trace header records it: the flags given, defaults filled in. */
function workloadOf(flags: FlagValues): Record<string, unknown> {
  const skip = new Set(['out', 'format', 'capacity', 'json', 'help']);
  return Object.fromEntries(Object.entries(flags).filter(([k, v]) => !skip.has(k) && v !== undefined));
}

export async function runRecord(argv: readonly string[], plugins: readonly string[] = []): Promise<number> {
  const flags = parseFlags(argv, recordFlags, 'record');
  if (flags.help) {
    stdoutText.write(recordUsage);
    return 0;
  }
  const out = flags.out as string | undefined;
  if (out === undefined || out === '')
    throw new UsageError(`gpumem record: '--out' is required: the trace file to write (e.g. --out run.jsonl)`);
  const format = (flags.format as TraceFileFormat | undefined) ?? formatFromPath(out);
  if (format === undefined) {
    throw new UsageError(
      `gpumem record: cannot tell the format from '${out}'; pass '--format' (one of ${traceFileFormats.join(', ')}) or name the file .jsonl or .csv`,
    );
  }
  checkOutputFlags('record', flags, ['out', 'json'], pluginInputs(plugins, [flags.allocator]));
  if (isStdout(out))
    throw new UsageError(`gpumem record: '--out' must be a file (a trace can be large); '--json -' sends the training result to stdout`);
  const gpu = hasCudaDevice();
  const spec = allocatorFromFlags('record', flags, gpu);
  const name = spec.name;
  const capacity = flags.capacity as number;
  let tracked: TrackedAllocator;
  try {
    tracked = createTrackedAllocator(name, spec.options, capacity);
  } catch (e) {
    refusedAsUsage(e, "gpumem record: '--allocator'");
  }
  const { allocator } = tracked;
  const createdAt = new Date().toISOString();
  const bar = new ProgressBar();
  let result: TrainResult;
  let events: TrackingEvent[];
  let dropped: number;
  try {
    const options = trainOptionsForHere('record', flags, gpu);
    try {
      result = train({
        ...options,
        allocator,
        tagAllocations: tracked.setTag,
        onProgress: (p) => bar.update(`epoch ${p.epoch + 1}/${p.epochs}`, p.step, p.steps),
      });
    } catch (e) {
      refusedAsUsage(e, 'gpumem record');
    }
    ({ events, dropped } = tracked.events());
  } finally {
    allocator.dispose();
  }
  const header: AllocationTrace['header'] = {
    source: 'gpumem record',
    allocator: spec.label,
    device: allocator.device.id,
    createdAt,
    workload: workloadOf(flags),
    tags: [...allocationTags],
  };
  if (dropped > 0) header.droppedEvents = dropped;
  const trace = traceFromEvents(events, header);
  await writeTrace(out, trace, format);
  const c = compileTrace(trace);
  // With the JSON on stdout (--json -), every status line goes to stderr.
  const status = isStdout(flags.json) ? stderrText : stdoutText;
  status.write(
    `recorded ${trace.events.length} events (${c.allocs} allocs, ${c.frees} frees, ${c.traceOoms} OOMs) on '${name}' (${allocator.device.id}), ` +
      `${result.epochs.length} epoch(s) of ${result.model} on ${result.dataset}; peak allocated ${formatBytes(c.peakAllocatedBytes)}` +
      (c.peakReservedBytes !== undefined ? `, peak reserved ${formatBytes(c.peakReservedBytes)}` : '') +
      `\nwrote ${out} (${format})\n`,
  );
  if (dropped > 0) {
    const needed = 2 ** Math.ceil(Math.log2(events.length + dropped));
    stderrText.write(
      `gpumem record: warning: the tracking ring held ${capacity} events and dropped the ${dropped} oldest; the trace starts mid-run ` +
        `(replay skips frees of allocations it never saw). Record the whole run with --capacity ${needed}\n`,
    );
  }
  const json = `${JSON.stringify(result, null, 2)}\n`;
  if (isStdout(flags.json)) {
    process.stdout.write(json);
  } else if (flags.json) {
    writeOutputFile(flags.json as string, json);
    status.write(`wrote ${String(flags.json)}\n`);
  }
  return 0;
}
