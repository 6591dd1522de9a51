import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testTime } from '../../../tests/time-budget.js';

const project = fileURLToPath(new URL('../test-fixtures/typed-options/tsconfig.json', import.meta.url));

/**
 * The TypeScript compiler's command (the package's `bin`), where it is installed (a packed GPU host
 * ships without it). TypeScript 7's exports map leaves out bin/tsc, so it is found from package.json.
 */
function findTsc(): string | undefined {
  try {
    const manifest = createRequire(import.meta.url).resolve('typescript/package.json');
    const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin: { tsc: string } };
    return join(dirname(manifest), bin.tsc);
  } catch {
    return undefined;
  }
}
const tsc = findTsc();
const title = 'createAllocator is typed by strategy name';

describe.skipIf(tsc === undefined)(tsc === undefined ? `${title} [skipped: the TypeScript compiler is not installed here]` : title, () => {
  it('rejects a misspelt or ill-typed option of a built-in strategy at compile time, and takes any plug-in name', () => {
    // test-fixtures/typed-options/use.ts marks each expected error with @ts-expect-error: tsc fails on
    // an error that is not marked and on a mark with no error under it.
    const r = spawnSync(process.execPath, [tsc!, '-p', project], { encoding: 'utf8', timeout: testTime(120_000) });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
