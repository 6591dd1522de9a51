/**
 * The scripts the HTML report inlines, read from files once per process: Chart.js's browser build
 * from node_modules, and the page's own script as `tsc -b` compiled it from report-client/.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the compiled page script may lie, in order: beside this module in dist/, and the package's
 * dist/ seen from src/ (tests run the TypeScript sources, after the build).
 */
const clientScriptCandidates = [
  new URL('./report-client/client.js', import.meta.url),
  new URL('../dist/report-client/client.js', import.meta.url),
];

/** A script's text ready to sit inside a `<script>` element: no source-map comment, no `</script`. */
function inlineScript(source: string): string {
  return source.replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n').replace(/<\/(script)/gi, '<\\/$1');
}

let chartLibrary: string | undefined;

/** Chart.js's minified browser (UMD) build, ready to inline. */
export function chartLibrarySource(): string {
  if (chartLibrary === undefined) {
    // The package's exports map hides dist/; its main entry lies next to the UMD build.
    const entry = createRequire(import.meta.url).resolve('chart.js');
    chartLibrary = inlineScript(readFileSync(join(dirname(entry), 'chart.umd.min.js'), 'utf8'));
  }
  return chartLibrary;
}

let clientScript: string | undefined;

/** The page's own script (report-client/client.ts, compiled), ready to inline. */
export function clientScriptSource(): string {
  if (clientScript === undefined) {
    const file = clientScriptCandidates.map((url) => fileURLToPath(url)).find((path) => existsSync(path));
    if (file === undefined) {
      throw new Error(
        `The HTML report's script is not built: none of ${clientScriptCandidates.map((url) => fileURLToPath(url)).join(', ')} exists. ` +
          'Build the packages first (npm run build, or npx tsc -b tsconfig.json).',
      );
    }
    clientScript = inlineScript(readFileSync(file, 'utf8'));
  }
  return clientScript;
}
