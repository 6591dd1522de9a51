/**
 * The HTML report's header (the workload or the trace, the device, the date, what "best" means),
 * and the recommendation and notes around the table.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import { DASH, escapeHtml, formatCount, formatDate } from './report-text.js';
import { minMeasuredEpochs } from './spread.js';
import type { CompareResult } from './types.js';

const bestMeaning =
  'fastest median epoch, highest throughput, lowest peak allocated and peak reserved bytes, lowest overhead, ' +
  'fewest upstream (driver) calls, allocations and frees together, fewest OOMs, lowest final loss and highest accuracy';

/** The header of a report of `gpumem replay`: the trace instead of a model. */
function replayHeaderHtml(result: CompareResult, replay: NonNullable<CompareResult['replay']>): string {
  const capacity =
    replay.capacityBytes !== undefined
      ? `<dt>Capacity</dt><dd>replayed as if the device had ${escapeHtml(formatBytes(replay.capacityBytes))}</dd>`
      : '';
  return `<header>
<h1>gpumem replay: ${escapeHtml(result.workload.title)}</h1>
<dl class="meta">
<dt>Device</dt><dd>${escapeHtml(result.device)}</dd>
<dt>Date</dt><dd><time datetime="${escapeHtml(result.createdAt)}">${escapeHtml(formatDate(result.createdAt))}</time></dd>
<dt>Trace</dt><dd><code>${escapeHtml(replay.trace)}</code> (${escapeHtml(replay.format)}; ${escapeHtml(replay.origin)})</dd>
<dt>Holds</dt><dd>${escapeHtml(replay.summary)}</dd>
${capacity}
<dt>Allocators</dt><dd>${result.runs.map((run) => escapeHtml(run.allocator)).join(', ') || DASH}</dd>
</dl>
<p class="best-note"><span class="best-mark">*</span> marks the recommendation's picks: the least memory (minimum capacity
where it was searched, else peak reserved) among the strategies that keep their memory on the device, the fewest
driver calls and the fastest calls (mean per call) among those that use it. Strategies over host memory, the
recorded allocator and runs that failed are not ranked.</p>
</header>`;
}

/** The recommendation (above the table) and the notes (under it), where the result has them. */
export function recommendationHtml(result: CompareResult): string {
  const lines = result.recommendation ?? [];
  return lines.length === 0
    ? ''
    : `<div class="recommendation"><strong>Recommendation</strong><ul>${lines.map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul></div>`;
}

/** The result's notes, under the table: first why the times are not ranked, where they are not. */
export function notesHtml(result: CompareResult): string {
  const notes = [
    ...(result.timesNotRanked ? [`Median epoch and ${result.throughputUnit}: no best marked: ${result.timesNotRanked.reason}.`] : []),
    ...(result.notes ?? []),
  ];
  return notes.length === 0 ? '' : `<ul class="notes">${notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>`;
}

/** The page's header: a compare's workload and options, or a replay's trace. */
export function headerHtml(result: CompareResult): string {
  if (result.replay) return replayHeaderHtml(result, result.replay);
  const { workload } = result;
  const options = Object.entries(workload.options)
    .map(
      ([key, value]) =>
        `<code>${escapeHtml(key)}=${escapeHtml(typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value)))}</code>`,
    )
    .join(' ');
  return `<header>
<h1>gpumem compare: ${escapeHtml(workload.title)}</h1>
<dl class="meta">
<dt>Device</dt><dd>${escapeHtml(result.device)}</dd>
<dt>Date</dt><dd><time datetime="${escapeHtml(result.createdAt)}">${escapeHtml(formatDate(result.createdAt))}</time></dd>
<dt>Model</dt><dd>${escapeHtml(workload.model)} on ${escapeHtml(workload.dataset)}, ${formatCount(workload.epochs)} epoch${workload.epochs === 1 ? '' : 's'} per allocator</dd>
<dt>Allocators</dt><dd>${result.runs.map((run) => escapeHtml(run.allocator)).join(', ') || DASH}</dd>
${options ? `<dt>Options</dt><dd>${options}</dd>` : ''}
</dl>
<p class="best-note"><span class="best-mark">*</span> marks the best value of each column among the runs that finished:
${bestMeaning}. Ties are all marked; runs that failed are not ranked. Epoch times leave out each run's first
(warm-up) epoch; a time is marked best only when every row has at least ${minMeasuredEpochs} measured epochs and its
spread does not overlap another run's, and
<span class="tied-mark">=</span> marks the runs tied within the spread.</p>
</header>`;
}
