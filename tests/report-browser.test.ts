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
import { renderHtmlReport } from '@gpumem/gnn';
import { sampleCompareResult } from '../packages/compare/src/fixture.js';

const chromiumPath = '/usr/bin/chromium';
const browserAvailable = existsSync(chromiumPath);
const noBrowserReason = `no Chromium at ${chromiumPath} (apt-get install chromium)`;
if (!browserAvailable && process.env.GPUMEM_REQUIRE_BROWSER === '1') {
  throw new Error(`GPUMEM_REQUIRE_BROWSER=1 but ${noBrowserReason}`);
}

const artifacts = fileURLToPath(new URL('../test-artifacts/', import.meta.url));
const launchArgs = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** What went wrong on a page: console errors, uncaught errors, and any request that left file://. */
interface PageProblems {
  consoleErrors: string[];
  pageErrors: string[];
  requests: string[];
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

    it('has one table row per run, in run order, with the failed run marked', async () => {
      const rows = await page.$$eval('table.compare tbody tr.run', (trs) =>
        trs.map((tr) => ({ allocator: tr.getAttribute('data-allocator'), status: tr.querySelector('.status')?.textContent, cells: tr.children.length })),
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

    it('draws each timeline: the library holds every point, and the canvas has the run\'s colour on it', async () => {
      const charts = await page.evaluate(() => {
        const report = (window as unknown as { gpumemReport: { charts: { kind: string; allocator: string | null; canvasId: string; chart: any }[] } }).gpumemReport;
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
        const hex = Number.parseInt(chart.datasets[1].color.slice(1), 16);
        const near = chart.colours.some((c: number) =>
          [16, 8, 0].every((shift) => Math.abs(((c >> shift) & 255) - ((hex >> shift) & 255)) <= 12),
        );
        expect(near, `${run.allocator}: a pixel of its line colour ${chart.datasets[1].color}`).toBe(true);
      });
      const epochs = charts.find((c) => c.kind === 'epochs')!;
      expect(epochs.width).toBeGreaterThan(600);
      expect(epochs.painted).toBeGreaterThan(1000);
      expect(epochs.datasets.map((d: { label: string }) => d.label)).toEqual(['cuda', 'pool', 'async', 'arena']);
    });

    it('draws one bar per completed epoch and allocator, taller for the slower run', async () => {
      const bars = await page.evaluate(() => {
        const report = (window as unknown as { gpumemReport: { charts: { kind: string; chart: any }[] } }).gpumemReport;
        const chart = report.charts.find((c) => c.kind === 'epochs')!.chart;
        return chart.data.datasets.map((_: unknown, i: number) =>
          chart.getDatasetMeta(i).data.map((bar: { y: number; base: number; width: number }, k: number) =>
            chart.data.datasets[i].data[k] === null ? 0 : Math.round(Math.abs(bar.base - bar.y)),
          ),
        ) as number[][];
      });
      expect(bars.map((heights) => heights.filter((h) => h > 0).length)).toEqual([3, 3, 3, 1]);
      // cuda's median epoch is almost three times pool's: so are its bars.
      expect(bars[0]![0]!).toBeGreaterThan(2 * bars[1]![0]!);
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
          const report = (window as unknown as { gpumemReport: { charts: { kind: string; chart: any }[] } }).gpumemReport;
          return report.charts.find((c) => c.kind === 'epochs')!.chart.data.datasets.map((d: { label: string }) => d.label);
        });
        expect(legend[2]).toBe(name);
      } finally {
        await opened.page.close();
      }
    });
  },
);
