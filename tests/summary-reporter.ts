/**
 * Prints one plain closing line after a run, `vitest: N passed, N failed, N skipped`, so that
 * tools reading the log find the counts without knowing vitest's own layout.
 */
import type { Reporter } from 'vitest/reporters';

type Task = { type: string; mode?: string; result?: { state?: string }; tasks?: Task[] };

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

export default class SummaryReporter implements Reporter {
  onFinished(files: Task[] = [], errors: unknown[] = []): void {
    const totals = { passed: 0, failed: 0, skipped: 0 };
    count(files, totals);
    for (const f of files) if (f.result?.state === 'fail' && !(f.tasks ?? []).length) totals.failed++; // failed to load
    totals.failed += errors.length;
    // after the default reporter's summary, which prints from the same hook
    setImmediate(() => process.stdout.write(`vitest: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`));
  }
}
