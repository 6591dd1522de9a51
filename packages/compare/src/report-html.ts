/**
 * The HTML report of `gpumem compare` (`--report`) and `gpumem replay`: one self-contained file,
 * the comparison table, each allocator's memory over time and the epoch times side by side. The
 * charts are drawn by Chart.js, whose browser build is read from node_modules and inlined with the
 * page's own script (report-client/), so the file opens with no network. This module lays out the
 * page; the table, the header, the figures, the chart data and the styles have their own modules.
 * @module
 */
import { anyDevices } from './devices.js';
import { chartLibrarySource, clientScriptSource } from './report-assets.js';
import { chartData } from './report-chart-data.js';
import type { ReportDataElementId } from './report-client/report-data.js';
import { timelineFigure } from './report-figures.js';
import { headerHtml, notesHtml, recommendationHtml } from './report-header.js';
import { pageStart } from './report-page.js';
import { REPORT_STYLE } from './report-styles.js';
import { tableHtml } from './report-table.js';
import { escapeHtml } from './report-text.js';
import type { CompareResult } from './types.js';

export { MAX_REPORT_TIMELINE_POINTS } from './report-chart-data.js';

/** The id of the element that holds the page's data: the client script reads it by this id. */
const dataElementId: ReportDataElementId = 'gpumem-data';

/** JSON that is safe inside a `<script>` element: no `<` (so no `</script>` or `<!--`), no line separators. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/**
 * The comparison as one self-contained HTML page: a header (workload, device, date, what "best"
 * means), the table with each column's best value marked, each successful run's allocated and
 * reserved bytes over time with its epochs shaded, the epoch times side by side, and each failed
 * run's message and statistics at the failure. Every script and style is inlined (Chart.js
 * included), so the page needs no network; every string from the result is escaped.
 */
export function renderHtmlReport(result: CompareResult): string {
  const data = chartData(result);
  const figures = result.runs.map((run, index) => timelineFigure(run, index, result)).join('\n');
  const tool = result.replay ? 'gpumem replay' : 'gpumem compare';
  const epochSection = data.epochChart
    ? `<div class="chart-box wide"><canvas id="${data.epochChart.canvasId}" role="img" aria-label="Epoch time per allocator"></canvas></div>`
    : '<p class="note">No run completed an epoch.</p>';
  return `${pageStart(tool, `${tool}: ${result.workload.title}`, REPORT_STYLE)}${headerHtml(result)}
<main>
<section id="comparison">
<h2>Comparison</h2>
${recommendationHtml(result)}<div class="table-wrap">${tableHtml(result)}</div>
${notesHtml(result)}</section>
<section id="timelines">
<h2>Memory over time</h2>
<p class="note">Allocated bytes (solid) and reserved bytes (dashed, shaded) of each run, ${
    result.replay ? "on the trace's clock" : 'on its own clock'
  }
and its own byte scale.${result.replay ? '' : ' Shaded bands are epochs.'}${
    data.timelines.some((t) => t.tiers)
      ? ' A strategy with a host tier has a second chart splitting its bytes into device (its colour) and host (teal), each tier on its own line; its host part is sampled after each training step.'
      : ''
  }${
    anyDevices(result.runs)
      ? " A run over several devices has a pair of lines per device, sampled from the device's allocator after every training step (mlp) or epoch (gcn) on one clock for all its ranks; its epochs span the first rank's start to the last rank's end."
      : ''
  }
<label class="scale-toggle"><input type="checkbox" id="shared-scale"> same byte scale on every chart</label></p>
<div class="grid">
${figures}
</div>
</section>
${
  result.replay
    ? ''
    : `<section id="epochs">
<h2>Epoch time</h2>
${epochSection}${
  data.spreadChart
    ? `
<p class="note">The spread of each run's measured epochs (the first of each process left out): the thin bar spans the
fastest to the slowest, the wide bar the middle half, the line is the median. A best is marked in the table only
where these do not overlap.</p>
<div class="chart-box"><canvas id="${data.spreadChart.canvasId}" role="img" aria-label="Spread of the epoch times per allocator"></canvas></div>`
    : ''
}
</section>${
        data.lossChart
          ? `
<section id="losses">
<h2>Training loss per step</h2>
<p class="note">Every run's loss at each training step, over all its epochs (the first run of each allocator; curves that coincide are the same losses)${(result.baselines ?? []).length > 0 ? '; baselines (other frameworks, dashed) on the same steps' : ''}.</p>
<div class="chart-box wide"><canvas id="${data.lossChart.canvasId}" role="img" aria-label="Training loss per step"></canvas></div>
</section>`
          : ''
      }`
}
</main>
<footer>${tool}, result format version ${escapeHtml(String(result.version))}; charts drawn with Chart.js (MIT).</footer>
<script type="application/json" id="${dataElementId}">${scriptJson(data)}</script>
<script>${chartLibrarySource()}</script>
<script>${clientScriptSource()}</script>
</body>
</html>
`;
}
