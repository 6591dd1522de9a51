/**
 * A replayed trace described in words, for the terminal, the JSON and the HTML report: where it
 * came from, what it holds, and what the replay could not take as it was (unmatched frees, events
 * the recorder dropped, the bytes by tag at its peak).
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import { peakByTag, type CompiledTrace, type ReadTrace } from '@gpumem/trace';

/** Where the trace came from, in a few words. */
export function originOf(trace: ReadTrace): string {
  const h = trace.header;
  return [h.source, h.allocator && `allocator '${h.allocator}'`, h.device, h.createdAt].filter(Boolean).join(', ');
}

/** What the trace holds, in one line. */
export function traceSummary(trace: ReadTrace, c: CompiledTrace): string {
  const durationMs = trace.events.length > 0 ? (trace.events[trace.events.length - 1]!.timeNs - trace.events[0]!.timeNs) / 1e6 : 0;
  return (
    `${trace.events.length} events over ${durationMs.toFixed(1)} ms: ${c.allocs} allocs, ${c.frees} frees, ${c.traceOoms} OOMs, ` +
    `${c.streamIds.length} stream(s); peak allocated ${formatBytes(c.peakAllocatedBytes)}` +
    (c.peakReservedBytes !== undefined ? `, peak reserved ${formatBytes(c.peakReservedBytes)} (as recorded)` : '')
  );
}

/** A line about the trace: what it holds and where it came from. */
export function describeTrace(file: string, trace: ReadTrace, c: CompiledTrace): string {
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
