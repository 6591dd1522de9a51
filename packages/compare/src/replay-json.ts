/**
 * `gpumem replay --json`: the trace's summary and every row's results, the recorded allocator's and
 * the recommendation; the timelines are left out (they go into the HTML report).
 * @module
 */
import { peakByTag, type CompiledTrace, type ReadTrace } from '@gpumem/trace';
import type { ReplayRun } from './replay-run.js';

/** The results of a replay of `file` as JSON text: the timelines left out (they go into the report). */
export function replayJson(
  file: string,
  trace: ReadTrace,
  compiled: CompiledTrace,
  { rows, baseline, advice }: ReplayRun,
  capacityBytes: number | undefined,
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
      ...(capacityBytes !== undefined && { capacityBytes }),
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
