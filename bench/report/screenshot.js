#!/usr/bin/env node
// Renders a `gpumem compare --report` file in headless Chromium and saves a full-page PNG.
//
//   node bench/report/screenshot.js report.html docs/report.png [--width 1400]
//
// Uses Debian's Chromium (/usr/bin/chromium, or CHROMIUM=path) through playwright-core; the report
// is self-contained, so no network is needed.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const args = process.argv.slice(2);
const widthAt = args.indexOf('--width');
const width = widthAt >= 0 ? Number(args.splice(widthAt, 2)[1]) : 1400;
const [input, output] = args;
if (!input || !output || !Number.isSafeInteger(width) || width < 320) {
  console.error('Usage: node bench/report/screenshot.js REPORT.html OUT.png [--width PX]');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.error(`no Chromium at ${executablePath} (apt-get install chromium, or set CHROMIUM)`);
  process.exit(1);
}
const browser = await chromium.launch({
  executablePath,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
try {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(pathToFileURL(resolve(input)).href, { waitUntil: 'load' });
  await page.waitForTimeout(500); // charts draw on load; let the last animation frame land
  await page.screenshot({ path: output, fullPage: true });
  if (errors.length) {
    console.error(`the page reported errors:\n${errors.join('\n')}`);
    process.exit(1);
  }
  console.log(`wrote ${output}`);
} finally {
  await browser.close();
}
