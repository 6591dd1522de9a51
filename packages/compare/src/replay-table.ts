/**
 * `gpumem replay`'s table for the terminal: a row per allocator (time per call, peak memory, unused
 * bytes at peak reserved, driver calls, out-of-memory failures and, when searched, the minimum
 * capacity), the recorded allocator's row, the notes under it and a progress line per allocator.
 * The HTML report draws the same results through from-replay.ts.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import { engineHeadroomBytes, type RecordedBaseline, type StrategyReplay } from '@gpumem/trace';
import { minCapacityText } from './from-replay.js';
import { formatTable } from './text-table.js';

function formatNs(ns: number): string {
  return ns >= 10_000 ? `${(ns / 1000).toFixed(1)} µs` : `${ns.toFixed(0)} ns`;
}

function withShare(bytes: number, of: number): string {
  return `${formatBytes(bytes)}${of > 0 ? ` (${((100 * bytes) / of).toFixed(1)}%)` : ''}`;
}

/** The results table; the OOM columns when some row ran out of memory, the search's when it ran. */
export function formatReplayTable(rows: readonly StrategyReplay[], baseline?: RecordedBaseline, traceOoms = 0): string {
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
export function noneFinishedLine(rows: readonly StrategyReplay[]): string | undefined {
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

/**
 * The lines under the table: what a mark or a limit means, why rows ran out of memory when no
 * capacity says why, and the allocators that failed and why (unless none finished: the result then
 * says why, once).
 */
export function replayNotes(
  rows: readonly StrategyReplay[],
  baseline: RecordedBaseline | undefined,
  o: { resolutionBytes: number; capacityBytes?: number | undefined },
): string[] {
  return [
    ...tableNotes(rows, baseline, o.resolutionBytes),
    ...outOfMemoryNotes(rows, o.capacityBytes),
    ...(noneFinishedLine(rows) === undefined ? failureLines(rows) : []),
  ];
}

/** One allocator done, for a progress line: `[2/6] pool: min capacity 1.25 GiB (14 probes), 3.2 s`. */
export function replayProgressLine(row: StrategyReplay, index: number, count: number): string {
  const what =
    row.error !== undefined
      ? `failed (${row.error})`
      : row.minCapacity
        ? `min capacity ${minCapacityText(row.minCapacity)} (${row.minCapacity.probes} probe${row.minCapacity.probes === 1 ? '' : 's'})`
        : 'replayed';
  const seconds = row.wallMs !== undefined ? `, ${(row.wallMs / 1000).toFixed(1)} s` : '';
  return `[${index + 1}/${count}] ${row.label}: ${what}${seconds}`;
}
