import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const project = fileURLToPath(new URL('../test-fixtures/typed-options/tsconfig.json', import.meta.url));

/** The TypeScript compiler, where it is installed (a packed GPU host ships without it). */
function findTsc(): string | undefined {
  try {
    return createRequire(import.meta.url).resolve('typescript/bin/tsc');
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
    const r = spawnSync(process.execPath, [tsc!, '-p', project], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
