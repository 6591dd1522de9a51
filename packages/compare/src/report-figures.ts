/**
 * The HTML report's figure of each run in the timeline grid: its chart's canvas and, under it, the
 * tables of its peak (by phase, by tier, by device), or a failed run's message and statistics.
 * @module
 */
import { formatBytes, formatMs } from '@gpumem/allocator-core';
import { hasHostTier } from './tiers.js';
import { deviceLabels } from './devices.js';
import { colorOf } from './report-colors.js';
import { statusCell } from './report-table.js';
import { DASH, escapeHtml, formatCount } from './report-text.js';
import type { CompareResult, CompareRun, DeviceRun, TimelineSeries } from './types.js';

function statsTable(run: CompareRun): string {
  const stats = run.stats;
  if (stats === null) return '<p class="note">No statistics were taken before the failure.</p>';
  const rows: [string, string][] = [
    ['allocated', formatBytes(stats.allocatedBytes)],
    ['peak allocated', formatBytes(stats.peakAllocatedBytes)],
    ['reserved', formatBytes(stats.reservedBytes)],
    ['peak reserved', formatBytes(stats.peakReservedBytes)],
    ['allocations / frees', `${formatCount(stats.allocCount)} / ${formatCount(stats.freeCount)}`],
    ['upstream allocations / frees', `${formatCount(stats.upstreamAllocCount)} / ${formatCount(stats.upstreamFreeCount)}`],
    ['OOMs', formatCount(stats.oomCount)],
  ];
  if (stats.largestFreeBlock !== undefined) rows.push(['largest free block', formatBytes(stats.largestFreeBlock)]);
  if (stats.segmentCount !== undefined) rows.push(['segments', formatCount(stats.segmentCount)]);
  if (hasHostTier(stats)) {
    rows.push(
      ['host allocated', formatBytes(stats.hostAllocatedBytes)],
      ['peak host allocated', formatBytes(stats.peakHostAllocatedBytes ?? stats.hostAllocatedBytes)],
      ['host reserved', formatBytes(stats.hostReservedBytes ?? 0)],
      ['peak host reserved', formatBytes(stats.peakHostReservedBytes ?? stats.hostReservedBytes ?? 0)],
      ['moved to host / to device', `${formatBytes(stats.bytesMovedToHost ?? 0)} / ${formatBytes(stats.bytesMovedToDevice ?? 0)}`],
    );
  }
  return `<table class="stats"><caption>Statistics at the failure</caption><tbody>${rows
    .map(([name, value]) => `<tr><th scope="row">${name}</th><td class="num">${value}</td></tr>`)
    .join('')}</tbody></table>`;
}

function failureHtml(run: CompareRun, result: CompareResult): string {
  const completed = result.replay
    ? 'the replay did not finish'
    : `${run.epochs.length} of ${result.workload.epochs} epoch${result.workload.epochs === 1 ? '' : 's'} completed`;
  return `<div class="failure"><p>${statusCell(run)} ${completed}, after ${formatMs(run.wallMs)}.</p>
<pre class="error-message">${escapeHtml(run.error ?? 'no message')}</pre>
${statsTable(run)}</div>`;
}

/** Where the memory goes at the peak of allocated bytes: one row per phase that allocated it. */
function breakdownTable(run: CompareRun, byWhat = 'the phase that allocated them'): string {
  const parts = run.peakBreakdown ?? [];
  if (parts.length === 0) return '';
  const total = parts.reduce((t, p) => t + p.bytes, 0);
  const rows = parts
    .map(
      (p) =>
        `<tr><th scope="row">${escapeHtml(p.tag)}</th><td class="num">${formatBytes(p.bytes)}</td><td class="num">${((100 * p.bytes) / total).toFixed(1)}%</td></tr>`,
    )
    .join('');
  return `<table class="stats breakdown"><caption>At the peak of allocated bytes (${formatBytes(total)}), by ${byWhat}</caption><tbody>${rows}</tbody></table>`;
}

/** A run with a host tier: its peaks and its bytes at the end split between device and host, and the bytes moved. */
function tierTable(run: CompareRun): string {
  const tiers = run.tiers;
  if (!tiers) return '';
  const row = (name: string, device: number, host: number) =>
    `<tr><th scope="row">${name}</th><td class="num">${formatBytes(device)}</td><td class="num">${formatBytes(host)}</td></tr>`;
  const rows = [
    row('peak allocated', tiers.peakAllocated.deviceBytes, tiers.peakAllocated.hostBytes),
    row('peak reserved', tiers.peakReserved.deviceBytes, tiers.peakReserved.hostBytes),
  ];
  const end = run.stats;
  if (hasHostTier(end)) {
    const host = Math.min(end.hostAllocatedBytes, end.allocatedBytes);
    const hostReserved = Math.min(end.hostReservedBytes ?? 0, end.reservedBytes);
    rows.push(
      row('allocated at the end', end.allocatedBytes - host, host),
      row('reserved at the end', end.reservedBytes - hostReserved, hostReserved),
    );
  }
  rows.push(
    `<tr><th scope="row">moved to host</th><td></td><td class="num">${formatBytes(tiers.bytesMovedToHost)}</td></tr>`,
    `<tr><th scope="row">moved to device</th><td class="num">${formatBytes(tiers.bytesMovedToDevice)}</td><td></td></tr>`,
  );
  return `<table class="stats tiers" title="the host part of a peak is the host tier's own peak, the device part the rest of the peak"><caption>Device and host tiers</caption><thead><tr><td></td><th scope="col" class="num">device</th><th scope="col" class="num">host</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function eventsNote(run: CompareRun): string {
  const dropped =
    run.eventsDropped > 0
      ? `, <strong>${formatCount(run.eventsDropped)} lost</strong> to the recorder's bound (the timeline is incomplete)`
      : '';
  return `<p class="note">${formatCount(run.eventsRecorded)} allocator events recorded${dropped}.</p>`;
}

/** A run over several devices: each device's peaks (and, for the gcn, the other ranks' rows it read), in its chart colour. */
function deviceTable(devices: readonly DeviceRun[], index: number): string {
  const names = deviceLabels(devices);
  const remote = devices.some((d) => d.remoteRows);
  const rows = devices
    .map((d, k) => {
      const read = d.remoteRows
        ? `${formatCount(d.remoteRows.forward)} / ${formatCount(d.remoteRows.backward)} of ${formatCount(d.remoteRows.remote)}`
        : DASH;
      return `<tr><th scope="row"><span class="swatch" style="background:${colorOf(index + k)}"></span>${escapeHtml(names[k]!)}</th><td class="num">${formatBytes(d.peakAllocatedBytes)}</td><td class="num">${formatBytes(d.peakReservedBytes)}</td>${remote ? `<td class="num">${read}</td>` : ''}</tr>`;
    })
    .join('');
  const head = `<thead><tr><td></td><th scope="col" class="num">peak allocated</th><th scope="col" class="num">peak reserved</th>${remote ? '<th scope="col" class="num">remote rows read (fwd / bwd)</th>' : ''}</tr></thead>`;
  return `<table class="stats devices"><caption>Each device (its allocator's own peaks; the lines are sampled after every step or epoch)</caption>${head}<tbody>${rows}</tbody></table>`;
}

/** True when a timeline holds the host part of its bytes (a strategy with a host tier). */
function hasHostTimeline(series: TimelineSeries): boolean {
  return series.hostAllocatedBytes !== undefined && series.hostReservedBytes !== undefined;
}

/** The figure of one run in the timeline grid: its chart, or why there is none. */
export function timelineFigure(run: CompareRun, index: number, result: CompareResult): string {
  const caption = `<figcaption><span class="swatch" style="background:${colorOf(index)}"></span>${escapeHtml(run.allocator)}</figcaption>`;
  if (run.status !== 'ok') return `<figure class="timeline failed" data-run="${index}">${caption}${failureHtml(run, result)}</figure>`;
  if (run.devices && run.devices.length > 0) {
    return `<figure class="timeline devices" data-run="${index}">${caption}
<div class="chart-box"><canvas id="timeline-${index}" role="img" aria-label="${escapeHtml(`Allocated and reserved bytes over time on each device, ${run.allocator}`)}"></canvas></div>
${deviceTable(run.devices, index)}${tierTable(run)}</figure>`;
  }
  if (run.timeline === null) {
    return `<figure class="timeline empty" data-run="${index}">${caption}<p class="note">No timeline: event recording was off for this run.</p>${tierTable(run)}</figure>`;
  }
  const tierChart = hasHostTimeline(run.timeline)
    ? `
<div class="chart-box tiers"><canvas id="timeline-${index}-tiers" role="img" aria-label="${escapeHtml(`Device and host bytes over time, ${run.allocator}`)}"></canvas></div>`
    : '';
  return `<figure class="timeline${tierChart ? ' tiered' : ''}" data-run="${index}">${caption}
<div class="chart-box"><canvas id="timeline-${index}" role="img" aria-label="${escapeHtml(`Allocated and reserved bytes over time, ${run.allocator}`)}"></canvas></div>${tierChart}
${eventsNote(run)}${breakdownTable(run, result.replay ? 'where they were allocated (the innermost user frame, for a snapshot recorded with stacks)' : undefined)}${tierTable(run)}</figure>`;
}
