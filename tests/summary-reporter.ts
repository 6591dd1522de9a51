/**
 * Prints, after a run, one line per skipped suite with its title (which says why it skipped, e.g.
 * `[skipped: no CUDA device: ...]`), so no skip is silent, then one plain closing line,
 * `vitest: N passed, N failed, N skipped`, so that tools reading the log find the counts without
 * knowing vitest's own layout.
 */
import type { Reporter } from 'vitest/reporters';

type Task = { type: string; name?: string; mode?: string; result?: { state?: string }; tasks?: Task[] };

function count(tasks: Task[], totals: { passed: number; failed: number; skipped: number }) {
  for (const t of tasks) {
    if (t.type === 'test') {
      const state = t.result?.state;
      if (state === 'pass') totals.passed++;
      else if (state === 'fail') totals.failed++;
      else totals.skipped++;
    } else if (t.tasks) {
      count(t.tasks, totals);
    }
  }
}

/** Suites that did not run (skipped, or every test in them skipped), outermost first, with their file. */
function skippedSuites(tasks: Task[], file: string, out: string[]): void {
  for (const t of tasks) {
    if (t.type !== 'suite') continue;
    const tests = countTests(t);
    if (tests.total > 0 && tests.skipped === tests.total) out.push(`${file}: ${t.name ?? ''}`);
    else if (t.tasks) skippedSuites(t.tasks, file, out);
  }
}

function countTests(t: Task): { total: number; skipped: number } {
  if (t.type === 'test') {
    const state = t.result?.state;
    return { total: 1, skipped: state === 'pass' || state === 'fail' ? 0 : 1 };
  }
  let total = 0;
  let skipped = 0;
  for (const c of t.tasks ?? []) {
    const n = countTests(c);
    total += n.total;
    skipped += n.skipped;
  }
  return { total, skipped };
}

export default class SummaryReporter implements Reporter {
  onFinished(files: Task[] = [], errors: unknown[] = []): void {
    const totals = { passed: 0, failed: 0, skipped: 0 };
    count(files, totals);
    for (const f of files) if (f.result?.state === 'fail' && !(f.tasks ?? []).length) totals.failed++; // failed to load
    totals.failed += errors.length;
    const skipped: string[] = [];
    for (const f of files) skippedSuites(f.tasks ?? [], (f as { name?: string }).name ?? '', skipped);
    // after the default reporter's summary, which prints from the same hook
    setImmediate(() => {
      if (skipped.length > 0) process.stdout.write(`skipped suites (${skipped.length}):\n${skipped.map((s) => `  ${s}`).join('\n')}\n`);
      process.stdout.write(`vitest: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`);
    });
  }
}
