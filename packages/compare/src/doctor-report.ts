/**
 * The HTML report of `gpumem doctor`: one self-contained page with the verdict, the bounds (the
 * live bytes, PyTorch's default, the best strategy, against the capacity), the per-strategy table,
 * what holds the memory at the peak, and what would reduce it. It shares the replay and compare
 * report's style sheet and escaping; it has no charts, so no script.
 * @module
 */
import { formatBytes } from '@gpumem/allocator-core';
import type { DoctorStrategy, DoctorVerdict, PeakShare } from '@gpumem/trace';
import { REPORT_STYLE } from './report-styles.js';
import { pageStart } from './report-page.js';
import { DASH, escapeHtml } from './report-text.js';

/** Where the verdict came from: the file, its form and origin, the device the replays ran on. */
export interface DoctorReportInfo {
  file: string;
  format: string;
  origin: string;
  /** How the capacity was chosen (`--capacity`, the snapshot's OOM entry, the device). */
  capacitySource: string;
  device: string;
  createdAt?: string;
}

const verdictTitle: Record<DoctorVerdict['kind'], string> = {
  fits: 'Fits',
  fragmentation: 'Fragmentation',
  real: 'Real: the live bytes exceed the capacity',
  'too-close': 'Too close to call: the capacity lies inside the band of the deciding need',
};

/** A styling of the verdict box by kind: green for fits, the error colours otherwise. */
const DOCTOR_STYLE = `
.verdict { border-radius: 6px; padding: 10px 14px; margin: 0 0 14px; border: 1px solid #b9d8c3; background: var(--best-bg); }
.verdict.fragmentation { border-color: #e6cf7a; background: #fff6d6; }
.verdict.real { border-color: #f1b5b5; background: var(--bad-bg); }
.verdict.too-close { border-color: #b7c4e6; background: #eef2fb; }
.verdict h2 { border: none; margin: 0 0 6px; padding: 0; }
.verdict ul { margin: 4px 0 0; padding-left: 20px; }
`;

const cellBytes = (bytes: number | undefined) => (bytes === undefined ? DASH : formatBytes(bytes));

function strategyRow(s: DoctorStrategy, capacityBytes: number): string {
  const fits =
    s.error !== undefined
      ? 'failed'
      : s.call === undefined
        ? DASH
        : s.call === 'too-close'
          ? 'too close to call'
          : s.call === 'fits'
            ? 'yes'
            : 'no';
  const bandCell = s.band === undefined ? DASH : `${formatBytes(s.band.lowBytes)} to ${formatBytes(s.band.highBytes)}`;
  const marginCell = s.needBytes === undefined ? DASH : formatBytes(capacityBytes - s.needBytes);
  const ranked = s.ranked ? 'yes' : `no: ${s.notRankedReason ?? ''}`;
  return `<tr${s.call === 'does-not-fit' || s.error !== undefined ? ' class="run-oom"' : ''}><th scope="row">${escapeHtml(s.label)}</th><td>${escapeHtml(s.memory)}</td><td>${escapeHtml(ranked)}</td><td>${escapeHtml(fits)}</td><td class="num">${escapeHtml(cellBytes(s.needBytes))}</td><td class="num">${escapeHtml(bandCell)}</td><td class="num">${escapeHtml(marginCell)}</td><td>${escapeHtml(s.error ?? '')}</td></tr>`;
}

function sharesTable(caption: string, shares: readonly PeakShare[], total: number): string {
  if (shares.length === 0) return '';
  const rows = shares
    .map(
      (s) =>
        `<tr><th>${escapeHtml(s.name)}</th><td class="num">${escapeHtml(formatBytes(s.bytes))}</td><td class="num">${total > 0 ? ((100 * s.bytes) / total).toFixed(1) : '0.0'}%</td></tr>`,
    )
    .join('');
  return `<table class="stats"><caption>${escapeHtml(caption)}</caption><tbody>${rows}</tbody></table>`;
}

/**
 * The verdict as one self-contained HTML page; every string from the verdict and the info is
 * escaped.
 */
export function renderDoctorReport(v: DoctorVerdict, info: DoctorReportInfo): string {
  const list = (items: readonly string[], cls = '') =>
    items.length === 0 ? '' : `<ul${cls ? ` class="${cls}"` : ''}>${items.map((l) => `<li>${escapeHtml(l)}</li>`).join('')}</ul>`;
  const called = (c: string | undefined) => (c === 'fits' ? 'fits' : c === 'too-close' ? 'too close to call' : 'does not fit');
  const inBand = (b: { lowBytes: number; highBytes: number } | undefined) =>
    b === undefined ? '' : `; on the device ${formatBytes(b.lowBytes)} to ${formatBytes(b.highBytes)}`;
  const d = v.decision;
  const bounds: [string, number | undefined, string][] = [
    ['capacity', v.capacityBytes, info.capacitySource],
    ['live bytes at the peak', v.liveBytes, 'no allocator needs less'],
    [
      'memory outside the allocator',
      v.uncertainty.outside.highBytes,
      `${formatBytes(v.uncertainty.outside.lowBytes)} to ${formatBytes(v.uncertainty.outside.highBytes)}: ${v.uncertainty.outside.source}`,
    ],
    [
      `PyTorch's default (modelled by ${v.pytorch.label})`,
      v.pytorch.needBytes,
      `${called(v.pytorch.call)}${inBand(v.pytorch.band)} (the model errs ±${(100 * v.uncertainty.pytorchModelError).toFixed(2)}%)`,
    ],
    ...(v.best
      ? [
          [`best ranked strategy: ${v.best.label}`, v.best.needBytes, `${called(v.best.call)}${inBand(v.best.band)}`] as [
            string,
            number,
            string,
          ],
        ]
      : []),
    [
      `the deciding need: ${d.label}`,
      d.band.needBytes,
      `band ${formatBytes(d.band.lowBytes)} to ${formatBytes(d.band.highBytes)}; the capacity is ${formatBytes(Math.abs(d.marginBytes))} ${d.marginBytes >= 0 ? 'above' : 'below'} its middle`,
    ],
    ...(v.pytorch.recordedPeakReservedBytes !== undefined
      ? [
          ['PyTorch reserved in the recording', v.pytorch.recordedPeakReservedBytes, 'with no limit: not its need'] as [
            string,
            number,
            string,
          ],
        ]
      : []),
  ];
  const boundRows = bounds
    .map(
      ([what, bytes, note]) =>
        `<tr><th scope="row">${escapeHtml(what)}</th><td class="num">${escapeHtml(cellBytes(bytes))}</td><td>${escapeHtml(note)}</td></tr>`,
    )
    .join('');
  const [headline, ...rest] = v.lines;
  const details = rest.filter((l) => !l.startsWith('- ') && l !== 'What would reduce the live bytes:');
  const reductions = v.reductions.map((r) => r.text);
  const ownBytes = v.liveBytes - v.heldBeforeTraceBytes;
  return `${pageStart('gpumem doctor', `gpumem doctor: ${info.file}`, REPORT_STYLE + DOCTOR_STYLE)}<header>
<h1>Is this OOM real? ${escapeHtml(info.file)}</h1>
<dl class="meta">
<dt>trace</dt><dd>${escapeHtml(info.format)}; ${escapeHtml(info.origin)}</dd>
<dt>capacity</dt><dd>${escapeHtml(formatBytes(v.capacityBytes))} (${escapeHtml(info.capacitySource)})</dd>
<dt>replayed on</dt><dd>${escapeHtml(info.device)}</dd>
${info.createdAt ? `<dt>date</dt><dd>${escapeHtml(info.createdAt)}</dd>` : ''}
</dl>
</header>
<main>
<section id="verdict" class="verdict ${v.kind}">
<h2>${escapeHtml(verdictTitle[v.kind])}</h2>
<p>${escapeHtml(headline ?? '')}</p>
${list(details)}
</section>
<section id="bounds">
<h2>Bounds</h2>
<div class="table-wrap"><table class="compare"><thead><tr><th>what</th><th class="num">bytes</th><th>note</th></tr></thead><tbody>${boundRows}</tbody></table></div>
</section>
<section id="strategies">
<h2>Strategies</h2>
<p class="note">Each strategy replayed at the capacity, and the capacity it needs (its minimum capacity, by bisection), with its band: the device memory the program needs under it, the memory outside the allocator and the model's error counted. Only strategies that keep their memory on the device are ranked.</p>
<div class="table-wrap"><table class="compare"><thead><tr><th>strategy</th><th>memory</th><th>ranked</th><th>fits at the capacity</th><th class="num">needs</th><th class="num">on the device (band)</th><th class="num">capacity left</th><th>error</th></tr></thead>
<tbody>${v.strategies.map((s) => strategyRow(s, v.capacityBytes)).join('')}</tbody></table></div>
</section>
${
  reductions.length > 0
    ? `<section id="reductions">
<h2>What would reduce the live bytes</h2>
${list(reductions)}
</section>`
    : ''
}
<section id="peak">
<h2>At the peak</h2>
<p class="note">The trace's own bytes live at its peak (${escapeHtml(formatBytes(ownBytes))}${
    v.heldBeforeTraceBytes > 0 ? `; ${escapeHtml(formatBytes(v.heldBeforeTraceBytes))} held from before the trace are not split` : ''
  }).</p>
<div class="grid">
${sharesTable('by tag (where it was allocated)', v.peak.byTag, ownBytes)}
${sharesTable('by stream', v.peak.byStream, ownBytes)}
${sharesTable('by allocation size', v.peak.bySizeClass, ownBytes)}
</div>
</section>
<section id="notes">
<h2>How these figures were made</h2>
${list(v.notes, 'notes')}
</section>
</main>
<footer>gpumem doctor</footer>
</body>
</html>
`;
}
