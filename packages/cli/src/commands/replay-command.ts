/**
 * `gpumem replay FILE`: replays an allocation trace (gpumem JSONL or RMM's logging CSV) through
 * each allocator, natively where the strategy is native, and compares time per call, peak memory
 * and fragmentation.
 * @module
 */
import { writeFileSync } from 'node:fs';
import { createAllocator, formatBytes, hasAllocator, hasCudaDevice, listAllocators, memoryInfo, type Allocator } from '@gpumem/allocator-core';
import { readTrace, TraceFormatError, type ReadTrace } from '@gpumem/trace';
import { compileTrace, replayTrace, type CompiledTrace, type ReplayLoop, type ReplayResult } from '@gpumem/trace';
import { flagHelp, formatTable, parseFlags, UsageError, type FlagSpec } from './args.js';

export const replayFlags: Record<string, FlagSpec> = {
  allocators: { type: 'string', help: 'comma-separated registered allocators (default: every one that can run here)' },
  repeats: { type: 'int', min: 1, max: 10000, default: 5, help: 'passes over the trace; times are the median' },
  loop: { type: 'string', choices: ['auto', 'native', 'typescript'], default: 'auto', help: 'auto: native loop for native strategies, TypeScript for plug-ins' },
  json: { type: 'string', help: 'write the trace summary and every result as JSON to this file' },
  help: { type: 'boolean', help: 'show this help' },
};

export const replayUsage = `Usage: gpumem replay FILE [--allocators a,b,...] [--repeats N] [--json OUT]

Replays an allocation trace through each allocator: the same mallocs and frees in the same order,
on as many streams (on a GPU; on the host, one), with no kernels in between. Native strategies
run it in a native loop. Each pass starts with the allocator trimmed and empty; the table shows
the median time per call over the passes, the peak allocated and reserved bytes, fragmentation
(1 - peak allocated / peak reserved), out-of-memory failures, and frees of pointers the trace never
allocated (skipped: a trace from a ring buffer can start mid-run).

FILE is a gpumem trace (JSONL, from \`gpumem record\`) or a CSV log from RMM's
logging_resource_adaptor (Thread,Time,Action,Pointer,Size,Stream); the first line tells them apart.

${flagHelp(replayFlags)}

Examples:
  gpumem replay mlp.jsonl
  gpumem replay mlp.jsonl --allocators pool,host --repeats 10
  gpumem replay rmm_log.csv --allocators pool,async --json replay.json
  GPUMEM_PLUGINS=./examples/dist/arena/index.js gpumem replay mlp.jsonl --allocators arena,pool
`;

/** Splits the arguments into the one positional FILE and the flags. */
function splitArgs(argv: readonly string[]): { files: string[]; flags: string[] } {
  const files: string[] = [];
  const flags: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--') {
      files.push(arg);
      continue;
    }
    flags.push(arg);
    const spec = replayFlags[arg.slice(2)];
    if (spec && spec.type !== 'boolean' && !arg.includes('=') && i + 1 < argv.length) flags.push(argv[++i]!);
  }
  return { files, flags };
}

/** The allocators to replay through: the ones named (each must be registered), or every one that can run here. */
function chooseAllocators(list: string | undefined): string[] {
  const registered = listAllocators();
  if (list === undefined) {
    const gpu = hasCudaDevice();
    const skipped = registered.filter((s) => s.requiresCuda && !gpu).map((s) => s.name);
    if (skipped.length > 0) process.stderr.write(`gpumem replay: no CUDA device; skipping ${skipped.join(', ')}\n`);
    return registered.filter((s) => !s.requiresCuda || gpu).map((s) => s.name);
  }
  const names = list.split(',').map((s) => s.trim()).filter(Boolean);
  const accepted = registered.map((s) => s.name).join(', ');
  if (names.length === 0) throw new UsageError(`gpumem replay: '--allocators' needs at least one name (accepted: ${accepted})`);
  for (const name of names) {
    if (!hasAllocator(name)) throw new UsageError(`gpumem replay: '--allocators' names '${name}', which is not registered (accepted: ${accepted})`);
  }
  return [...new Set(names)];
}

/** One row: a result, or the error that stopped that allocator. */
export type ReplayRow = { allocator: string; result: ReplayResult } | { allocator: string; error: string };

function replayOne(name: string, compiled: CompiledTrace, repeats: number, loop: ReplayLoop | undefined): ReplayRow {
  let allocator: Allocator | undefined;
  try {
    if (name === 'uvm' && hasCudaDevice()) {
      // Managed memory can oversubscribe the GPU; a replay never asks for more than the card has free.
      const { freeBytes } = memoryInfo(0);
      if (compiled.peakAllocatedBytes > freeBytes) {
        return { allocator: name, error: `the trace's peak (${formatBytes(compiled.peakAllocatedBytes)}) is more than the GPU's free memory (${formatBytes(freeBytes)}); replaying it through managed memory would oversubscribe the GPU` };
      }
    }
    allocator = createAllocator(name, {});
    return { allocator: name, result: replayTrace(compiled, allocator, { repeats, ...(loop !== undefined && { loop }) }) };
  } catch (e) {
    return { allocator: name, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
  } finally {
    allocator?.dispose();
  }
}

function formatNs(ns: number): string {
  return ns >= 10_000 ? `${(ns / 1000).toFixed(1)} µs` : `${ns.toFixed(0)} ns`;
}

/** The results table. */
export function formatReplayTable(rows: readonly ReplayRow[]): string {
  return formatTable(
    ['allocator', 'loop', 'calls', 'ns/alloc', 'ns/free', 'peak allocated', 'peak reserved', 'fragmentation', 'OOMs', 'unmatched frees'],
    rows.map((row) => {
      if ('error' in row) return [row.allocator, 'failed', row.error];
      const r = row.result;
      return [
        r.allocator,
        r.loop,
        String(r.calls),
        formatNs(r.nsPerAlloc),
        formatNs(r.nsPerFree),
        formatBytes(r.peakAllocatedBytes),
        formatBytes(r.peakReservedBytes),
        `${(r.fragmentation * 100).toFixed(1)}%`,
        String(r.ooms),
        String(r.unmatchedFrees),
      ];
    }),
  );
}

/** A line about the trace: what it holds and where it came from. */
function describeTrace(file: string, trace: ReadTrace, c: CompiledTrace): string {
  const h = trace.header;
  const origin = [h.source, h.allocator && `allocator '${h.allocator}'`, h.device, h.createdAt].filter(Boolean).join(', ');
  const durationMs = trace.events.length > 0 ? (trace.events[trace.events.length - 1]!.timeNs - trace.events[0]!.timeNs) / 1e6 : 0;
  const lines = [
    `trace ${file} (${trace.format}; ${origin})`,
    `  ${trace.events.length} events over ${durationMs.toFixed(1)} ms: ${c.allocs} allocs, ${c.frees} frees, ${c.traceOoms} OOMs, ` +
      `${c.streamIds.length} stream(s); peak allocated ${formatBytes(c.peakAllocatedBytes)}` +
      (c.peakReservedBytes !== undefined ? `, peak reserved ${formatBytes(c.peakReservedBytes)} (as recorded)` : ''),
  ];
  const notes = [
    c.unmatchedFrees > 0 && `${c.unmatchedFrees} frees of pointers the trace never allocated (skipped)`,
    c.liveAtEnd > 0 && `${c.liveAtEnd} allocations live at the end (freed after each pass)`,
    c.zeroByteEvents > 0 && `${c.zeroByteEvents} zero-byte events (skipped)`,
    c.sizeMismatches > 0 && `${c.sizeMismatches} frees with a size other than their allocation's (replayed with the allocation's)`,
    h.droppedEvents !== undefined && h.droppedEvents > 0 && `the recorder dropped ${h.droppedEvents} older events`,
  ].filter(Boolean);
  if (notes.length > 0) lines.push(`  ${notes.join('; ')}`);
  return lines.join('\n');
}

export async function runReplay(argv: readonly string[]): Promise<number> {
  const { files, flags: flagArgs } = splitArgs(argv);
  const flags = parseFlags(flagArgs, replayFlags, 'replay');
  if (flags.help || files.includes('-h')) {
    process.stdout.write(replayUsage);
    return 0;
  }
  if (files.length !== 1) {
    throw new UsageError(
      files.length === 0
        ? `gpumem replay: expected a trace FILE (gpumem JSONL or RMM CSV), e.g. gpumem replay run.jsonl`
        : `gpumem replay: expected one trace FILE but received ${files.length}: ${files.join(' ')}`,
    );
  }
  const file = files[0]!;
  const names = chooseAllocators(flags.allocators as string | undefined);
  const loop = flags.loop === 'auto' ? undefined : (flags.loop as ReplayLoop);
  let trace: ReadTrace;
  try {
    trace = await readTrace(file);
  } catch (e) {
    if (e instanceof TraceFormatError) {
      process.stderr.write(`gpumem replay: malformed trace: ${e.message}\n`);
      return 1;
    }
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code === 'string') {
      process.stderr.write(`gpumem replay: cannot read '${file}': ${err.code === 'ENOENT' ? 'no such file' : err.message}\n`);
      return 1;
    }
    throw e;
  }
  const compiled = compileTrace(trace);
  process.stdout.write(`${describeTrace(file, trace, compiled)}\n\n`);
  const rows = names.map((name) => replayOne(name, compiled, flags.repeats as number, loop));
  process.stdout.write(`${formatReplayTable(rows)}\n`);
  if (flags.json) {
    const { events: _events, ...rest } = trace;
    const summary = { ...rest, events: trace.events.length, ...Object.fromEntries(Object.entries(compiled).filter(([, v]) => typeof v === 'number')) };
    writeFileSync(flags.json as string, `${JSON.stringify({ file, trace: summary, results: rows }, null, 2)}\n`);
    process.stdout.write(`wrote ${String(flags.json)}\n`);
  }
  return rows.some((r) => 'error' in r) ? 1 : 0;
}
