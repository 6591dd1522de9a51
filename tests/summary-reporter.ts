/**
 * Prints, after a run, one line per skipped suite with its title (which says why it skipped, e.g.
 * `[skipped: no CUDA device: ...]`), so no skip is silent, then one plain closing line,
 * `vitest: N passed, N failed, N skipped`, so that tools reading the log find the counts without
 * knowing vitest's own layout.
 */
import type { Reporter, SerializedError, TestModule, TestSuite } from 'vitest/node';

/** The tests of a module or suite, however deep, by what became of them. */
function countTests(entity: TestModule | TestSuite): { passed: number; failed: number; skipped: number } {
  const totals = { passed: 0, failed: 0, skipped: 0 };
  for (const test of entity.children.allTests()) {
    const state = test.result().state;
    if (state === 'passed') totals.passed++;
    else if (state === 'failed') totals.failed++;
    else totals.skipped++;
  }
  return totals;
}

/** Suites that did not run (skipped, or every test in them skipped), outermost first, with their file. */
function skippedSuites(parent: TestModule | TestSuite, file: string, out: string[]): void {
  for (const suite of parent.children.suites()) {
    const tests = countTests(suite);
    const total = tests.passed + tests.failed + tests.skipped;
    if (total > 0 && tests.skipped === total) out.push(`${file}: ${suite.name}`);
    else skippedSuites(suite, file, out);
  }
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError>): void {
    const totals = { passed: 0, failed: 0, skipped: 0 };
    const skipped: string[] = [];
    for (const module of modules) {
      const tests = countTests(module);
      totals.passed += tests.passed;
      totals.failed += tests.failed;
      totals.skipped += tests.skipped;
      if (module.state() === 'failed' && module.children.size === 0) totals.failed++; // failed to load
      skippedSuites(module, module.relativeModuleId, skipped);
    }
    totals.failed += unhandledErrors.length;
    // after the default reporter's summary, which prints from the same hook
    setImmediate(() => {
      if (skipped.length > 0) process.stdout.write(`skipped suites (${skipped.length}):\n${skipped.map((s) => `  ${s}`).join('\n')}\n`);
      process.stdout.write(`vitest: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped\n`);
    });
  }
}
