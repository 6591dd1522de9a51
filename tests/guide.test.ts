/**
 * The guide is a test: docs/writing-a-strategy.md's "From an empty folder" steps, read from the
 * page itself (```sh guide-run blocks are run, ```<lang> guide-file=PATH blocks are written, with
 * `merge` into an existing JSON file), are done in a temporary folder outside the repository, in
 * order, in one shell. If the guide changes, this runs the new guide.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testTime } from './time-budget.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const guide = readFileSync(join(root, 'docs/writing-a-strategy.md'), 'utf8');

interface Step {
  kind: 'run' | 'file';
  path?: string;
  merge?: boolean;
  body: string;
}

/** The guide's steps, in page order. */
function guideSteps(markdown: string): Step[] {
  const steps: Step[] = [];
  const fence = /^```(\w+) (guide-run|guide-file=(\S+))( merge)?\n([\s\S]*?)^```$/gm;
  for (const m of markdown.matchAll(fence)) {
    if (m[2] === 'guide-run') steps.push({ kind: 'run', body: m[5]! });
    else steps.push({ kind: 'file', path: m[3]!, merge: m[4] !== undefined, body: m[5]! });
  }
  return steps;
}

/** One bash script doing every step: commands as written, files through quoted heredocs. */
function script(steps: Step[]): string {
  const lines = ['set -euo pipefail'];
  steps.forEach((step, i) => {
    lines.push(`echo "== guide step ${i + 1}: ${step.kind}${step.path ? ` ${step.path}` : ''}"`);
    if (step.kind === 'run') {
      lines.push(step.body);
    } else if (step.merge) {
      lines.push(`cat > .guide-merge.json <<'GUIDE_EOF'\n${step.body}GUIDE_EOF`);
      lines.push(
        `node -e 'const fs=require("fs");const [t,s]=process.argv.slice(1);fs.writeFileSync(t,JSON.stringify({...JSON.parse(fs.readFileSync(t,"utf8")),...JSON.parse(fs.readFileSync(s,"utf8"))},null,2))' ${step.path} .guide-merge.json && rm .guide-merge.json`,
      );
    } else {
      lines.push(`mkdir -p "$(dirname '${step.path}')"`, `cat > '${step.path}' <<'GUIDE_EOF'\n${step.body}GUIDE_EOF`);
    }
  });
  return `${lines.join('\n')}\n`;
}

const work = mkdtempSync(join(tmpdir(), 'gpumem-guide-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('docs/writing-a-strategy.md, from an empty folder', () => {
  const steps = guideSteps(guide);

  it('has the steps: a package, the strategy, its conformance test, a comparison, a C++ library', () => {
    expect(steps.filter((s) => s.kind === 'file').map((s) => s.path)).toEqual([
      'package.json',
      'tsconfig.json',
      'src/index.ts',
      'test/conformance.test.ts',
    ]);
    expect(steps.filter((s) => s.kind === 'run').length).toBeGreaterThanOrEqual(3);
  });

  it(
    'works as written: builds, passes the conformance suite, runs in gpumem compare by package name, and so does the C++ example in compare and replay',
    () => {
      const r = spawnSync('bash', ['-c', script(steps)], {
        cwd: work,
        encoding: 'utf8',
        timeout: testTime(600_000),
        env: {
          ...process.env,
          GPUMEM: root,
          // the packages the guide installs are in npm's cache after the repository's own install
          npm_config_prefer_offline: 'true',
          npm_config_audit: 'false',
          npm_config_fund: 'false',
          npm_config_update_notifier: 'false',
          CUDA_VISIBLE_DEVICES: '',
          NO_COLOR: '1',
          FORCE_COLOR: '0',
          GPUMEM_PLUGINS: '',
        },
      });
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes start with ESC, a control character
      const stdout = r.stdout.replace(/\u001b\[[0-9;]*m/g, '');
      const log = `${stdout}\n${r.stderr}`;
      expect(r.status, log.slice(-4000)).toBe(0);
      // vitest in the user's project: the whole suite passed, nothing skipped
      expect(stdout).toMatch(/Tests\s+\d{2,} passed \(\d+\)/);
      expect(stdout).not.toMatch(/\d+ failed/);
      // the comparison table has the user's strategy by the name it registered
      expect(stdout).toMatch(/^sizecache +ok /m);
      expect(stdout).toMatch(/^pool +ok /m);
      // the C++ library, built on its own, in compare and in replay
      // A native plug-in's row is named after its library (libgpumem_example_slab.so), not its spec.
      expect(stdout).toMatch(/^gpumem_example_slab +ok /m);
      expect(stdout).toMatch(/^gpumem_example_slab +native /m);
      // the steps' own limit, and a minute for the test to read what they printed
    },
    testTime(660_000),
  );
});
