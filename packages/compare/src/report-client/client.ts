/**
 * The HTML report's own script: reads the embedded {@link ReportData} and draws every chart with
 * Chart.js (inlined before it as a classic script, hence the global `Chart`). A script, not a
 * module (no top-level import or export): the server inlines the compiled file as it is.
 */

type ReportData = import('./report-data.js').ReportData;
type ReportDataElementId = import('./report-data.js').ReportDataElementId;
type TimelineChart = import('./report-data.js').TimelineChart;
type EpochBand = import('./report-data.js').EpochBand;
type ChartJs = import('chart.js').Chart;
type ChartDataset<T extends import('chart.js').ChartType> = import('chart.js').ChartDataset<T>;
type TooltipItem<T extends import('chart.js').ChartType> = import('chart.js').TooltipItem<T>;

declare const Chart: typeof import('chart.js').Chart;

/** What the page exposes for tests and for a reader's console: every chart drawn. */
interface ReportChart {
  kind: 'timeline' | 'tiers' | 'epochs' | 'spread' | 'loss';
  allocator: string | null;
  canvasId: string;
  chart: ChartJs;
  timeline?: TimelineChart;
}

// biome-ignore lint/correctness/noUnusedVariables: it merges into the DOM's Window (this file is a script, so the interface is global)
interface Window {
  gpumemReport: { charts: ReportChart[] };
}

(() => {
  const dataElementId: ReportDataElementId = 'gpumem-data';
  const data = JSON.parse(document.getElementById(dataElementId)!.textContent!) as ReportData;
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  // The options of the line charts (timelines, losses): points given as {x, y}; the tooltip takes the nearest point along x.
  const LINE_OPTIONS = {
    parsing: false,
    responsive: true,
    maintainAspectRatio: false,
    interaction: { mode: 'nearest', axis: 'x', intersect: false },
  } as const;
  // Bytes in binary units with 'digits' decimals; 'trim' drops trailing zeros (axis ticks).
  function formatBytes(bytes: number, digits: number, trim: boolean): string {
    let value = bytes;
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
      value /= 1024;
      unit++;
    }
    if (unit === 0) return `${Math.round(bytes)} B`;
    const text = value.toFixed(digits);
    return `${trim ? String(Number(text)) : text} ${UNITS[unit]}`;
  }
  function axisBytes(v: number | string): string {
    return formatBytes(Number(v), 2, true);
  }
  function formatSeconds(s: number): string {
    return s >= 1 ? `${String(Number(s.toFixed(2)))} s` : `${String(Number((s * 1000).toFixed(1)))} ms`;
  }
  function formatMs(ms: number): string {
    return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(ms >= 10 ? 1 : 2)} ms`;
  }
  function axisMs(v: number | string): string {
    const ms = Number(v);
    return ms >= 1000 ? `${String(Number((ms / 1000).toFixed(2)))} s` : `${String(Number(ms.toFixed(1)))} ms`;
  }

  // Shaded bands and a label for each epoch, on charts that pass options.plugins.epochBands.phases.
  const epochBands: import('chart.js').Plugin<'line', { phases?: EpochBand[] }> = {
    id: 'epochBands',
    beforeDatasetsDraw(chart, _args, options) {
      const phases = options?.phases ?? [];
      if (phases.length === 0) return;
      const x = chart.scales.x!;
      const area = chart.chartArea;
      const ctx = chart.ctx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(area.left, area.top, area.right - area.left, area.bottom - area.top);
      ctx.clip();
      ctx.font = '11px system-ui, sans-serif';
      ctx.textBaseline = 'top';
      phases.forEach((phase, i) => {
        const x0 = x.getPixelForValue(phase.start);
        const x1 = x.getPixelForValue(phase.end);
        ctx.fillStyle = i % 2 === 0 ? 'rgba(90, 110, 130, 0.10)' : 'rgba(90, 110, 130, 0.04)';
        ctx.fillRect(x0, area.top, Math.max(1, x1 - x0), area.bottom - area.top);
        ctx.strokeStyle = 'rgba(60, 70, 80, 0.55)';
        ctx.setLineDash([3, 3]);
        ctx.beginPath();
        ctx.moveTo(x0, area.top);
        ctx.lineTo(x0, area.bottom);
        ctx.stroke();
        ctx.setLineDash([]);
        if (x1 - x0 > 40) {
          ctx.fillStyle = 'rgba(40, 48, 56, 0.8)';
          ctx.fillText(phase.name, x0 + 4, area.top + 4);
        }
      });
      ctx.restore();
    },
  };
  Chart.register(epochBands);
  Chart.defaults.animation = false;
  Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  Chart.defaults.color = '#3a444f';

  function points(xs: readonly number[], ys: readonly number[]): { x: number; y: number }[] {
    const out = new Array<{ x: number; y: number }>(xs.length);
    for (let i = 0; i < xs.length; i++) out[i] = { x: xs[i]!, y: ys[i]! };
    return out;
  }

  function canvas(id: string): HTMLCanvasElement {
    return document.getElementById(id) as HTMLCanvasElement;
  }

  type LineDataset = ChartDataset<'line'>;

  // A stepped line of bytes over time: reserved dashed and shaded (unless 'shade' is false), allocated solid.
  function bytesLine(
    label: string,
    t: number[],
    bytes: number[],
    color: string,
    fill: string,
    reserved: boolean,
    shade?: boolean,
  ): LineDataset {
    return {
      label,
      data: points(t, bytes),
      borderColor: color,
      backgroundColor: reserved ? fill : color,
      borderWidth: 1.5,
      borderDash: reserved ? [6, 3] : [],
      fill: reserved && shade !== false ? 'origin' : false,
      stepped: true,
      pointRadius: 0,
      pointHitRadius: 4,
    };
  }

  /** A chart's own byte axis: its top and tick step. */
  interface ByteAxis {
    ownYMax: number;
    ownYStep: number;
  }

  // A chart of bytes over time on the timeline's clock, with its epochs shaded and its own byte axis.
  function bytesChart(
    canvasId: string,
    datasets: LineDataset[],
    tl: TimelineChart,
    axis: ByteAxis,
    yTitle: string,
    stacked: boolean,
  ): ChartJs {
    return new Chart(canvas(canvasId), {
      type: 'line',
      data: { datasets },
      options: {
        ...LINE_OPTIONS,
        scales: {
          x: {
            type: 'linear',
            min: 0,
            max: tl.xMax,
            title: { display: true, text: tl.xTitle },
            ticks: { callback: (v) => formatSeconds(Number(v)), maxTicksLimit: 10 },
          },
          y: {
            min: 0,
            max: axis.ownYMax,
            stacked,
            title: { display: true, text: yTitle },
            ticks: { stepSize: axis.ownYStep, callback: axisBytes },
          },
        },
        plugins: {
          legend: { position: 'top', align: 'end', labels: { boxWidth: 18 } },
          tooltip: {
            callbacks: {
              title: (items) => (items.length ? formatSeconds(items[0]!.parsed.x ?? 0) : ''),
              label: (item) => `${item.dataset.label}: ${formatBytes(item.parsed.y ?? 0, 2, false)}`,
            },
          },
          epochBands: { phases: tl.phases },
        },
      },
    });
  }

  const charts: ReportChart[] = [];
  for (const tl of data.timelines) {
    let datasets: LineDataset[];
    if (tl.devices) {
      // a run over several devices: each device's reserved (dashed) and allocated bytes, in its own colour
      datasets = [];
      for (const d of tl.devices) {
        datasets.push(
          bytesLine(`${d.name} reserved`, d.t, d.reserved, d.color, d.fill, true, false),
          bytesLine(`${d.name} allocated`, d.t, d.allocated, d.color, d.fill, false),
        );
      }
    } else {
      const reserved = bytesLine('reserved', tl.t, tl.reserved, tl.color, tl.fill, true);
      const allocated = bytesLine('allocated', tl.t, tl.allocated, tl.color, tl.fill, false);
      reserved.stack = 'reserved';
      allocated.stack = 'allocated';
      datasets = [reserved, allocated].concat(
        // the phases that allocated the bytes, stacked: what to shrink
        tl.tags.map(
          (tag, k): LineDataset => ({
            label: tag.name,
            data: points(tl.t, tag.bytes),
            borderColor: tag.color,
            backgroundColor: tag.color,
            borderWidth: 0,
            fill: k === 0 ? 'origin' : '-1',
            stepped: true,
            pointRadius: 0,
            pointHitRadius: 4,
            stack: 'phases',
          }),
        ),
      );
    }
    const chart = bytesChart(tl.canvasId, datasets, tl, tl, tl.devices ? 'bytes per device' : 'bytes', tl.tags.length > 0);
    charts.push({ kind: 'timeline', allocator: tl.allocator, canvasId: tl.canvasId, chart, timeline: tl });
    const tiers = tl.tiers;
    if (tiers) {
      // a strategy with a host tier: device (the run's colour) and host bytes, each on its own
      const tierChart = bytesChart(
        tiers.canvasId,
        [
          bytesLine('device reserved', tl.t, tiers.deviceReserved, tl.color, tl.fill, true),
          bytesLine('device allocated', tl.t, tiers.deviceAllocated, tl.color, tl.fill, false),
          bytesLine('host reserved', tl.t, tiers.hostReserved, tiers.hostColor, tiers.hostFill, true),
          bytesLine('host allocated', tl.t, tiers.hostAllocated, tiers.hostColor, tiers.hostFill, false),
        ],
        tl,
        tiers,
        'bytes by tier',
        false,
      );
      charts.push({ kind: 'tiers', allocator: tl.allocator, canvasId: tiers.canvasId, chart: tierChart, timeline: tl });
    }
  }

  // Each chart has its own byte scale by default; the toggle puts every chart on the shared one.
  const toggle = document.getElementById('shared-scale') as HTMLInputElement | null;
  function applyScale(): void {
    const shared = toggle?.checked;
    for (const c of charts) {
      if ((c.kind !== 'timeline' && c.kind !== 'tiers') || !c.timeline) continue;
      const own: ByteAxis = c.kind === 'tiers' ? c.timeline.tiers! : c.timeline;
      const y = c.chart.options.scales!.y as { max?: number; ticks: { stepSize?: number } };
      y.max = shared ? data.yMax : own.ownYMax;
      y.ticks.stepSize = shared ? data.yStep : own.ownYStep;
      c.chart.update();
    }
    document.body.setAttribute('data-byte-scale', shared ? 'shared' : 'own');
  }
  if (toggle) toggle.addEventListener('change', applyScale);
  applyScale();

  const ep = data.epochChart;
  if (ep) {
    const bars = ep.type === 'bar';
    const chart = new Chart<'bar' | 'line', (number | null)[]>(canvas(ep.canvasId), {
      type: ep.type,
      data: {
        labels: ep.labels,
        datasets: ep.datasets.map((d) => ({
          label: d.allocator,
          data: d.epochMs,
          backgroundColor: d.color,
          borderColor: d.color,
          borderWidth: bars ? 0 : 1.5,
          pointRadius: bars ? 0 : 1.5,
          spanGaps: false,
        })),
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: false } },
          y: { beginAtZero: true, grace: '5%', title: { display: true, text: 'epoch time' }, ticks: { callback: axisMs } },
        },
        plugins: {
          legend: { position: 'top' },
          tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${formatMs(item.parsed.y ?? Number.NaN)}` } },
        },
      },
    });
    charts.push({ kind: 'epochs', allocator: null, canvasId: ep.canvasId, chart: chart });
  }

  const sc = data.spreadChart;
  if (sc) {
    // floating bars: the thin one spans min–max, the wide one the quartiles; a point marks the median
    const spreadChart = new Chart<'bar' | 'line', (number | [number, number])[]>(canvas(sc.canvasId), {
      type: 'bar',
      data: {
        labels: sc.labels,
        datasets: [
          {
            type: 'bar',
            label: 'min–max',
            data: sc.range,
            backgroundColor: sc.colors.map((c) => `${c}55`),
            borderColor: sc.colors,
            borderWidth: 1,
            barPercentage: 0.25,
            grouped: false,
          },
          { type: 'bar', label: 'quartiles', data: sc.box, backgroundColor: sc.colors, barPercentage: 0.6, grouped: false },
          {
            type: 'line',
            label: 'median',
            data: sc.median,
            showLine: false,
            pointStyle: 'line',
            pointRadius: 14,
            pointBorderWidth: 3,
            borderColor: '#1d232b',
            backgroundColor: '#1d232b',
          },
        ],
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        indexAxis: 'x',
        scales: { y: { title: { display: true, text: 'epoch time (warm-up left out)' }, ticks: { callback: axisMs } } },
        plugins: {
          legend: { position: 'top' },
          tooltip: {
            callbacks: {
              label: (item: TooltipItem<'bar' | 'line'>) => {
                const v = item.raw as number | [number, number];
                return `${item.dataset.label}: ${Array.isArray(v) ? `${formatMs(v[0])} to ${formatMs(v[1])}` : formatMs(v)}`;
              },
            },
          },
        },
      },
    });
    charts.push({ kind: 'spread', allocator: null, canvasId: sc.canvasId, chart: spreadChart });
  }

  const lc = data.lossChart;
  if (lc) {
    const lossChart = new Chart(canvas(lc.canvasId), {
      type: 'line',
      data: {
        datasets: lc.datasets.map(
          (d): LineDataset => ({
            label: d.name,
            data: points(d.step, d.loss),
            borderColor: d.color,
            backgroundColor: d.color,
            borderWidth: 1.2,
            borderDash: d.dash ? [5, 3] : [],
            pointRadius: 0,
            pointHitRadius: 4,
          }),
        ),
      },
      options: {
        ...LINE_OPTIONS,
        scales: {
          x: { type: 'linear', min: 1, title: { display: true, text: 'training step' } },
          y: { title: { display: true, text: 'training loss' } },
        },
        plugins: { legend: { position: 'top' } },
      },
    });
    charts.push({ kind: 'loss', allocator: null, canvasId: lc.canvasId, chart: lossChart });
  }

  window.gpumemReport = { charts };
  document.body.setAttribute('data-charts-ready', String(charts.length));
})();
