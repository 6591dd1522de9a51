/**
 * The HTML report of `gpumem compare`, opened in headless Chromium: the charts are drawn (canvas
 * pixels and Chart.js's own elements), the table has a row per run, nothing is fetched from the
 * network and the page logs no error. Writes test-artifacts/report.png.
 *
 * Needs Debian's /usr/bin/chromium (no browser is downloaded). Without it the suite skips and says
 * so; with GPUMEM_REQUIRE_BROWSER=1 (CI) a missing browser fails the run instead.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { rankRuns, readBaseline, renderHtmlReport } from '@gpumem/compare';
import { sampleCompareResult } from '../packages/compare/src/fixture.js';
import { sampleDevicesCompareResult } from '../packages/compare/src/fixture-devices.js';

const baselineFixture = fileURLToPath(new URL('../packages/compare/src/fixtures/torch-eager.jsonl', import.meta.url));
const chromiumPath = '/usr/bin/chromium';
const browserAvailable = existsSync(chromiumPath);
const noBrowserReason = `no Chromium at ${chromiumPath} (apt-get install chromium)`;
if (!browserAvailable && process.env.GPUMEM_REQUIRE_BROWSER === '1') {
  throw new Error(`GPUMEM_REQUIRE_BROWSER=1 but ${noBrowserReason}`);
}

const artifacts = fileURLToPath(new URL('../test-artifacts/', import.meta.url));
const launchArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** What went wrong on a page: console errors, uncaught errors, and any request that left file://. */
interface PageProblems {
  consoleErrors: string[];
  pageErrors: string[];
  requests: string[];
}

/**
 * The part of a Chart.js chart these tests read in the page (the report's own Chart.js). A
 * dataset's values depend on the chart: numbers, {x, y} points, [min, max] pairs or null.
 */
interface PageChart {
  data: { labels?: unknown[]; datasets: { label: string; borderColor: string; data: unknown[] }[] };
  options: { scales: { y: { stacked?: boolean } } };
  scales: { y: { max: number } };
  chartArea: { bottom: number };
  legend?: { legendItems?: { text: string }[] };
  /** The drawn elements of dataset `index`: points (x, y) or bars (from base to y). */
  getDatasetMeta(index: number): { data: { x: number; y: number; base: number }[] };
  isDatasetVisible(index: number): boolean;
}

/** The page's window: the report's script leaves its charts there. */
interface ReportWindow {
  gpumemReport: { charts: { kind: string; allocator: string | null; canvasId: string; chart: PageChart }[] };
}

/** Opens `html` from a file in a fresh page with the network cut off, and waits for the charts. */
async function openReport(browser: Browser, html: string, name: string): Promise<{ page: Page; problems: PageProblems }> {
  mkdirSync(artifacts, { recursive: true });
  const file = `${artifacts}${name}.html`;
  writeFileSync(file, html);
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems: PageProblems = { consoleErrors: [], pageErrors: [], requests: [] };
  page.on('console', (message) => {
    if (message.type() === 'error') problems.consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => problems.pageErrors.push(error.message));
  await page.route('**/*', async (route) => {
    const url = route.request().url();
    if (url.startsWith('file:')) return route.continue();
    problems.requests.push(url);
    return route.abort();
  });
  await page.goto(pathToFileURL(file).href);
  await page.waitForSelector('body[data-charts-ready]', { timeout: 20_000 });
  return { page, problems };
}

describe.skipIf(!browserAvailable)(
  browserAvailable ? 'the HTML report in headless Chromium' : `the HTML report in headless Chromium [skipped: ${noBrowserReason}]`,
  () => {
    const result = sampleCompareResult();
    let browser: Browser;
    let page: Page;
    let problems: PageProblems;

    beforeAll(async () => {
      browser = await chromium.launch({ executablePath: chromiumPath, args: launchArgs });
      ({ page, problems } = await openReport(browser, renderHtmlReport(result), 'report'));
    });

    afterAll(async () => {
      await browser?.close();
    });

    it('loads with no console error, no page error and no network request', () => {
      expect(problems).toEqual({ consoleErrors: [], pageErrors: [], requests: [] });
    });

    it('fits its table in a 1,400 px window, or scrolls it inside its wrapper, never the page, with every column reachable', async () => {
      // the widest table: a host tier's split peaks, the moved-bytes column and a baseline row
      const wide = sampleCompareResult({ tiered: true });
      wide.baselines = [readBaseline(baselineFixture)];
      const widePage = (await openReport(browser, renderHtmlReport(wide), 'report-wide')).page;
      for (const p of [page, widePage]) {
        const box = await p.$eval('.table-wrap', (wrap) => {
          const table = wrap.querySelector('table.compare')!;
          const last = table.querySelector('thead th:last-child')!;
          return {
            overflowX: getComputedStyle(wrap).overflowX,
            wrapWidth: wrap.clientWidth,
            tableWidth: table.scrollWidth,
            pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
            lastHeading: last.textContent,
            lastRight: last.getBoundingClientRect().right - wrap.getBoundingClientRect().left + wrap.scrollLeft,
          };
        });
        expect(box.pageOverflow).toBeLessThanOrEqual(0);
        expect(box.lastHeading).toMatch(/^Accuracy/);
        // the accuracy column lies within what the wrapper shows or scrolls to
        if (box.tableWidth > box.wrapWidth) expect(box.overflowX).toBe('auto');
        else expect(box.lastRight).toBeLessThanOrEqual(box.wrapWidth + 1);
      }
      // the plain comparison's table fits outright
      const plain = await page.$eval('.table-wrap', (wrap) => wrap.scrollWidth - wrap.clientWidth);
      expect(plain).toBeLessThanOrEqual(0);
      await widePage.close();
    });

    it('has one table row per run, in run order, with the failed run marked', async () => {
      const rows = await page.$$eval('table.compare tbody tr.run', (trs) =>
        trs.map((tr) => ({
          allocator: tr.getAttribute('data-allocator'),
          status: tr.querySelector('.status')?.textContent,
          cells: tr.children.length,
        })),
      );
      expect(rows).toEqual([
        { allocator: 'cuda', status: 'OK', cells: 11 },
        { allocator: 'pool', status: 'OK', cells: 11 },
        { allocator: 'async', status: 'OK', cells: 11 },
        { allocator: 'arena', status: 'OOM', cells: 11 },
      ]);
      const best = await page.$$eval('td.best', (tds) => tds.length);
      expect(best).toBe(Object.values(result.best).reduce((n, allocators) => n + allocators.length, 0));
      const failure = await page.textContent('figure.timeline.failed');
      expect(failure).toContain(result.runs[3]!.error);
      expect(failure).toContain('Statistics at the failure');
      expect(await page.$$('figure.timeline.failed canvas')).toHaveLength(0);
    });

    it("draws each timeline: the library holds every point, and the canvas has the run's colour on it", async () => {
      const charts = await page.evaluate(() => {
        const report = (window as unknown as ReportWindow).gpumemReport;
        return report.charts.map(({ kind, allocator, canvasId, chart }) => {
          const canvas = document.getElementById(canvasId) as HTMLCanvasElement;
          const { data } = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height);
          let painted = 0;
          const colours = new Set<number>();
          for (let i = 0; i < data.length; i += 4) {
            if (data[i + 3]! > 0) {
              painted++;
              colours.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
            }
          }
          return {
            kind,
            allocator,
            width: canvas.width,
            height: canvas.height,
            painted,
            colours: [...colours],
            datasets: chart.data.datasets.map((d: { label: string; borderColor: string; data: unknown[] }, i: number) => ({
              label: d.label,
              color: d.borderColor,
              points: d.data.length,
              drawn: chart.getDatasetMeta(i).data.length,
              visible: chart.isDatasetVisible(i),
            })),
          };
        });
      });
      const timelines = charts.filter((c) => c.kind === 'timeline');
      expect(timelines.map((c) => c.allocator)).toEqual(['cuda', 'pool', 'async']);
      timelines.forEach((chart, i) => {
        const run = result.runs[i]!;
        expect(chart.width).toBeGreaterThan(300);
        expect(chart.height).toBeGreaterThan(150);
        // More than the axes: the filled reserved area covers a good part of the plot.
        expect(chart.painted / (chart.width * chart.height)).toBeGreaterThan(0.1);
        expect(chart.datasets.map((d: { label: string }) => d.label)).toEqual(['reserved', 'allocated']);
        for (const d of chart.datasets) {
          expect(d).toMatchObject({ points: run.timeline!.tMs.length, drawn: run.timeline!.tMs.length, visible: true });
        }
        const hex = Number.parseInt(chart.datasets[1]!.color.slice(1), 16);
        const near = chart.colours.some((c: number) =>
          [16, 8, 0].every((shift) => Math.abs(((c >> shift) & 255) - ((hex >> shift) & 255)) <= 12),
        );
        expect(near, `${run.allocator}: a pixel of its line colour ${chart.datasets[1]!.color}`).toBe(true);
      });
      const epochs = charts.find((c) => c.kind === 'epochs')!;
      expect(epochs.width).toBeGreaterThan(600);
      expect(epochs.painted).toBeGreaterThan(1000);
      expect(epochs.datasets.map((d: { label: string }) => d.label)).toEqual(['cuda', 'pool', 'async', 'arena']);
    });

    it('gives each memory chart its own byte scale, and puts them on one when asked', async () => {
      // A run that reserves 8x more must not flatten the others: scale its timeline up.
      const big = sampleCompareResult();
      const cuda = big.runs[0]!.timeline!;
      cuda.reservedBytes = cuda.reservedBytes.map((b) => b * 8);
      cuda.allocatedBytes = cuda.allocatedBytes.map((b) => b * 8);
      const bigPage = (await openReport(browser, renderHtmlReport(big), 'report-scales')).page;
      const scales = () =>
        bigPage.evaluate(() => {
          const report = (window as unknown as ReportWindow).gpumemReport;
          return report.charts.filter((c) => c.kind === 'timeline').map((c) => c.chart.scales.y.max as number);
        });
      expect(await bigPage.getAttribute('body', 'data-byte-scale')).toBe('own');
      const own = await scales();
      expect(own[0]).toBeGreaterThan(4 * own[1]!); // pool and async keep a scale of their own
      await bigPage.click('#shared-scale');
      expect(await bigPage.getAttribute('body', 'data-byte-scale')).toBe('shared');
      const shared = await scales();
      expect(new Set(shared).size).toBe(1);
      expect(shared[0]).toBe(own[0]);
      await bigPage.click('#shared-scale');
      expect(await scales()).toEqual(own);
      await bigPage.close();
    });

    it('shows each median epoch with its spread, and marks runs tied within the spread', async () => {
      const spreads = await page.$$eval('td[data-column="medianEpochMs"] small.spread', (cells) => cells.map((c) => c.textContent));
      expect(spreads).toHaveLength(3);
      const close = sampleCompareResult();
      const pool = close.runs.find((r) => r.allocator === 'pool')!;
      const async_ = close.runs.find((r) => r.allocator === 'async')!;
      async_.epochSpread = { ...async_.epochSpread!, min: pool.epochSpread!.max - 1 };
      Object.assign(close, rankRuns(close.runs));
      const tiedPage = (await openReport(browser, renderHtmlReport(close), 'report-tied')).page;
      const tied = await tiedPage.$$eval('td.tied[data-column="medianEpochMs"]', (cells) =>
        cells.map((c) => (c.closest('tr') as HTMLElement).dataset.allocator),
      );
      expect(tied).toEqual(['pool', 'async']);
      expect(await tiedPage.$$('td.best[data-column="medianEpochMs"]')).toHaveLength(0);
      expect(await tiedPage.$$eval('td.tied[data-column="medianEpochMs"] .tied-mark', (m) => m.length)).toBe(2);
      await tiedPage.close();
    });

    it('stacks allocated bytes by the phase that allocated them, and tables the split at the peak', async () => {
      const tagged = sampleCompareResult();
      const timeline = tagged.runs[1]!.timeline!; // pool
      const setup = timeline.allocatedBytes.map((b) => Math.min(b, 64 * 2 ** 20));
      timeline.tags = ['before', 'setup', 'forward'];
      timeline.byTag = [timeline.allocatedBytes.map(() => 0), setup, timeline.allocatedBytes.map((b, i) => b - setup[i]!)];
      const peak = Math.max(...timeline.allocatedBytes);
      tagged.runs[1]!.peakBreakdown = [
        { tag: 'forward', bytes: peak - 64 * 2 ** 20 },
        { tag: 'setup', bytes: 64 * 2 ** 20 },
      ];
      const taggedPage = (await openReport(browser, renderHtmlReport(tagged), 'report-tags')).page;
      const labels = await taggedPage.evaluate(() => {
        const report = (window as unknown as ReportWindow).gpumemReport;
        const pool = report.charts.find((c) => c.kind === 'timeline' && c.allocator === 'pool')!;
        return {
          labels: pool.chart.data.datasets.map((d: { label: string }) => d.label),
          drawn: pool.chart.data.datasets.map((_: unknown, i: number) => pool.chart.getDatasetMeta(i).data.length),
          stacked: pool.chart.options.scales.y.stacked,
        };
      });
      expect(labels.labels).toEqual(['reserved', 'allocated', 'setup', 'forward']); // 'before' is empty: left out
      expect(labels.drawn.every((n: number) => n === timeline.tMs.length)).toBe(true);
      expect(labels.stacked).toBe(true);
      const rows = await taggedPage.$$eval('figure[data-run="1"] table.breakdown tbody tr', (trs) => trs.map((tr) => tr.textContent));
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/^forward/);
      await taggedPage.close();
    });

    it("overlays every run's and every baseline's training loss per step, and shows the baseline as a row", async () => {
      const withBaseline = sampleCompareResult();
      withBaseline.baselines = [readBaseline(baselineFixture)];
      const baselinePage = (await openReport(browser, renderHtmlReport(withBaseline), 'report-baseline')).page;
      const loss = await baselinePage.evaluate(() => {
        const report = (window as unknown as ReportWindow).gpumemReport;
        const chart = report.charts.find((c) => c.kind === 'loss')!.chart;
        return chart.data.datasets.map((d: { label: string; data: unknown[] }, i: number) => ({
          label: d.label,
          points: d.data.length,
          drawn: chart.getDatasetMeta(i).data.length,
        }));
      });
      const expected = withBaseline.runs
        .map((r) => ({ label: r.allocator, points: r.epochs.reduce((n, e) => n + e.losses.length, 0) }))
        .filter((r) => r.points > 1)
        .concat([{ label: 'torch-eager', points: 120 }]);
      expect(loss.map((d: { label: string; points: number }) => ({ label: d.label, points: d.points }))).toEqual(expected);
      for (const d of loss) expect(d.drawn).toBe(d.points);
      const baselineRow = await baselinePage.$eval('tr.baseline', (tr) => [...tr.children].map((c) => c.textContent));
      expect(baselineRow[0]).toBe('torch-eager');
      expect(baselineRow[1]).toBe('baseline');
      expect(baselineRow[2]).toMatch(/1\.48 s/);
      await baselinePage.close();
    });

    it("draws the spread of each run's measured epochs: a min–max bar, a quartile box and the median", async () => {
      const spread = await page.evaluate(() => {
        const report = (window as unknown as ReportWindow).gpumemReport;
        const chart = report.charts.find((c) => c.kind === 'spread')!.chart;
        return {
          labels: chart.data.labels,
          datasets: chart.data.datasets.map((d: { label: string; data: unknown[] }, i: number) => ({
            label: d.label,
            data: d.data,
            drawn: chart.getDatasetMeta(i).data.length,
          })),
        };
      });
      const ok = result.runs.filter((r) => r.status === 'ok');
      expect(spread.labels).toEqual(ok.map((r) => r.allocator));
      expect(spread.datasets.map((d: { label: string }) => d.label)).toEqual(['min–max', 'quartiles', 'median']);
      for (const d of spread.datasets) expect(d.drawn).toBe(ok.length);
      ok.forEach((r, i) => {
        const [lo, hi] = spread.datasets[0]!.data[i] as [number, number];
        expect(lo).toBeCloseTo(r.epochSpread!.min, 2);
        expect(hi).toBeCloseTo(r.epochSpread!.max, 2);
        expect(spread.datasets[2]!.data[i]).toBeCloseTo(r.medianEpochMs!, 2);
      });
    });

    it('draws one bar per completed epoch and allocator, taller for the slower run', async () => {
      const bars = await page.evaluate(() => {
        const report = (window as unknown as ReportWindow).gpumemReport;
        const chart = report.charts.find((c) => c.kind === 'epochs')!.chart;
        return chart.data.datasets.map((_: unknown, i: number) =>
          chart
            .getDatasetMeta(i)
            .data.map((bar, k) => (chart.data.datasets[i]!.data[k] === null ? 0 : Math.round(Math.abs(bar.base - bar.y)))),
        ) as number[][];
      });
      expect(bars.map((heights) => heights.filter((h) => h > 0).length)).toEqual([6, 6, 6, 1]);
      // cuda's median epoch is almost three times pool's: so are its bars.
      expect(bars[0]![0]!).toBeGreaterThan(2 * bars[1]![0]!);
    });

    it('draws the device and host tiers of a run with a host tier on a chart of their own, with a legend, and none for the others', async () => {
      const tiered = sampleCompareResult({ tiered: true });
      const opened = await openReport(browser, renderHtmlReport(tiered), 'report-tiered');
      const tieredPage = opened.page;
      try {
        expect(opened.problems).toEqual({ consoleErrors: [], pageErrors: [], requests: [] });
        const charts = await tieredPage.evaluate(() => {
          const report = (window as unknown as ReportWindow).gpumemReport;
          return report.charts
            .filter((c) => c.kind === 'timeline' || c.kind === 'tiers')
            .map(({ kind, allocator, canvasId, chart }) => {
              const canvas = document.getElementById(canvasId) as HTMLCanvasElement;
              const { data } = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height);
              const colours = new Set<number>();
              for (let i = 0; i < data.length; i += 4)
                if (data[i + 3]! > 0) colours.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
              return {
                kind,
                allocator,
                colours: [...colours],
                legend: (chart.legend?.legendItems ?? []).map((item: { text: string }) => item.text),
                yMax: chart.scales.y.max as number,
                datasets: chart.data.datasets.map((d: { label: string; borderColor: string; data: unknown[] }, i: number) => {
                  const meta = chart.getDatasetMeta(i);
                  return {
                    label: d.label,
                    color: d.borderColor,
                    points: d.data.length,
                    drawn: meta.data.length,
                    visible: chart.isDatasetVisible(i),
                    // pixels above the x axis: the series has height on the chart
                    raised: meta.data.filter((p: { y: number }) => p.y < chart.chartArea.bottom - 2).length,
                    top: Math.max(...(d.data as { y: number }[]).map((p) => p.y)),
                  };
                }),
              };
            });
        });
        expect(charts.filter((c) => c.kind === 'timeline').map((c) => c.allocator)).toEqual(['cuda', 'pool', 'async', 'tiered']);
        const tierCharts = charts.filter((c) => c.kind === 'tiers');
        expect(tierCharts.map((c) => c.allocator)).toEqual(['tiered']);
        for (const c of charts.filter((c) => c.kind === 'timeline'))
          expect(c.datasets.map((d: { label: string }) => d.label)).toEqual(['reserved', 'allocated']);
        const chart = tierCharts[0]!;
        const run = tiered.runs[4]!;
        const labels = ['device reserved', 'device allocated', 'host reserved', 'host allocated'];
        expect(chart.datasets.map((d: { label: string }) => d.label)).toEqual(labels);
        expect(chart.legend).toEqual(labels);
        for (const d of chart.datasets) {
          expect(d).toMatchObject({ points: run.timeline!.tMs.length, drawn: run.timeline!.tMs.length, visible: true });
          expect(d.raised, `${d.label} is drawn above the axis`).toBeGreaterThan(100);
        }
        const byLabel = Object.fromEntries(chart.datasets.map((d) => [d.label, d]));
        const hostAllocated = byLabel['host allocated']!;
        const deviceAllocated = byLabel['device allocated']!;
        expect(hostAllocated.top).toBe(run.tiers!.peakAllocated.hostBytes);
        expect(deviceAllocated.top).toBe(128 * 2 ** 20);
        // the host series in their own colour, the device ones in the run's, both on the canvas
        const near = (hex: string) => {
          const rgb = Number.parseInt(hex.slice(1), 16);
          return chart.colours.some((c: number) =>
            [16, 8, 0].every((shift) => Math.abs(((c >> shift) & 255) - ((rgb >> shift) & 255)) <= 12),
          );
        };
        expect(hostAllocated.color).not.toBe(deviceAllocated.color);
        expect(near(hostAllocated.color), `a pixel of the host colour ${hostAllocated.color}`).toBe(true);
        expect(near(deviceAllocated.color), `a pixel of the device colour ${deviceAllocated.color}`).toBe(true);
        // the same byte scale on every chart includes the tier chart
        await tieredPage.click('#shared-scale');
        const shared = await tieredPage.evaluate(() => {
          const report = (window as unknown as ReportWindow).gpumemReport;
          return report.charts.filter((c) => c.kind === 'timeline' || c.kind === 'tiers').map((c) => c.chart.scales.y.max as number);
        });
        expect(new Set(shared).size).toBe(1);
        // the table: the split under the tiered run's peaks only, and a column of the bytes moved
        const splits = await tieredPage.$$eval('table.compare tbody tr.run', (trs) =>
          trs.map((tr) => ({
            allocator: tr.getAttribute('data-allocator'),
            cells: tr.children.length,
            tiers: [...tr.querySelectorAll('small.tiers')].map((s) => s.textContent),
          })),
        );
        expect(splits.map((r) => [r.allocator, r.cells, r.tiers.length])).toEqual([
          ['cuda', 12, 0],
          ['pool', 12, 0],
          ['async', 12, 0],
          ['arena', 12, 0],
          ['tiered', 12, 2],
        ]);
        for (const text of splits[4]!.tiers) expect(text).toMatch(/^[\d.]+ MiB device \+ [\d.]+ MiB host$/);
        const tierRows = await tieredPage.$$eval('figure[data-run="4"] table.stats.tiers tbody tr', (trs) =>
          trs.map((tr) => tr.querySelector('th')?.textContent),
        );
        expect(tierRows).toEqual([
          'peak allocated',
          'peak reserved',
          'allocated at the end',
          'reserved at the end',
          'moved to host',
          'moved to device',
        ]);
        expect(await tieredPage.$$('figure[data-run="0"] table.stats.tiers, figure[data-run="0"] canvas[id$="-tiers"]')).toHaveLength(0);
        await tieredPage.click('#shared-scale');
        const png = await tieredPage.screenshot({ path: `${artifacts}report-tiered.png`, fullPage: true });
        expect(png.length).toBeGreaterThan(50_000);
      } finally {
        await tieredPage.close();
      }
    });

    it('draws a run over several devices as a pair of lines per device, each device in its own colour, on one chart', async () => {
      const devices = sampleDevicesCompareResult();
      const opened = await openReport(browser, renderHtmlReport(devices), 'report-devices');
      try {
        expect(opened.problems).toEqual({ consoleErrors: [], pageErrors: [], requests: [] });
        const charts = await opened.page.evaluate(() => {
          const report = (window as unknown as ReportWindow).gpumemReport;
          return report.charts
            .filter((c) => c.kind === 'timeline')
            .map(({ allocator, chart }) => ({
              allocator,
              legend: (chart.legend?.legendItems ?? []).map((item: { text: string }) => item.text),
              datasets: chart.data.datasets.map((d: { label: string; borderColor: string; data: unknown[] }, i: number) => {
                const meta = chart.getDatasetMeta(i);
                return {
                  label: d.label,
                  color: d.borderColor,
                  points: d.data.length,
                  drawn: meta.data.length,
                  raised: meta.data.filter((p: { y: number }) => p.y < chart.chartArea.bottom - 2).length,
                };
              }),
            }));
        });
        expect(charts.map((c) => c.allocator)).toEqual(['pool', 'async']);
        const pool = charts[0]!;
        const labels = ['cuda:0 reserved', 'cuda:0 allocated', 'cuda:1 reserved', 'cuda:1 allocated'];
        expect(pool.datasets.map((d: { label: string }) => d.label)).toEqual(labels);
        expect(pool.legend).toEqual(labels);
        pool.datasets.forEach((d: { points: number; drawn: number; raised: number }, i: number) => {
          const points = devices.runs[0]!.devices![Math.floor(i / 2)]!.timeline.tMs.length;
          expect(d).toMatchObject({ points, drawn: points, raised: points });
        });
        expect(new Set(pool.datasets.map((d: { color: string }) => d.color)).size).toBe(2);
        expect(charts[1]!.datasets.map((d: { label: string }) => d.label)).toEqual(['reserved', 'allocated']);
        expect(await opened.page.$$('figure[data-run="0"] table.stats.devices tbody tr')).toHaveLength(2);
        const png = await opened.page.screenshot({ path: `${artifacts}report-devices.png`, fullPage: true });
        expect(png.length).toBeGreaterThan(50_000);
      } finally {
        await opened.page.close();
      }
    });

    it('draws no tier chart and no tier figures for a comparison without a host tier', async () => {
      const kinds = await page.evaluate(() => (window as unknown as ReportWindow).gpumemReport.charts.map((c) => c.kind));
      expect(kinds).not.toContain('tiers');
      expect(await page.$$('small.tiers, table.stats.tiers, canvas[id$="-tiers"]')).toHaveLength(0);
    });

    it('writes a screenshot of the whole page', async () => {
      const path = `${artifacts}report.png`;
      const png = await page.screenshot({ path, fullPage: true });
      expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
      expect(png.length).toBeGreaterThan(50_000);
      expect(existsSync(path)).toBe(true);
    });

    it('shows a hostile allocator name and message as text and runs none of it', async () => {
      const hostile = sampleCompareResult();
      const name = '<img src=x onerror="window.__injected=1">';
      hostile.runs[2]!.allocator = name;
      hostile.runs[3]!.error = '</script><script>window.__injected=2</script>';
      const opened = await openReport(browser, renderHtmlReport(hostile), 'report-hostile');
      try {
        expect(opened.problems).toEqual({ consoleErrors: [], pageErrors: [], requests: [] });
        expect(await opened.page.evaluate(() => (window as unknown as { __injected?: number }).__injected)).toBeUndefined();
        expect(await opened.page.$$('img')).toHaveLength(0);
        const firstCells = await opened.page.$$eval('table.compare tbody tr.run > th', (ths) => ths.map((th) => th.textContent));
        expect(firstCells[2]).toBe(name);
        expect(await opened.page.textContent('figure.timeline.failed pre.error-message')).toBe(hostile.runs[3]!.error);
        const legend = await opened.page.evaluate(() => {
          const report = (window as unknown as ReportWindow).gpumemReport;
          return report.charts.find((c) => c.kind === 'epochs')!.chart.data.datasets.map((d: { label: string }) => d.label);
        });
        expect(legend[2]).toBe(name);
      } finally {
        await opened.page.close();
      }
    });
  },
);
