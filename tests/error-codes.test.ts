/**
 * Every error class a package exports carries a `code`, as Node's own errors do: code that handles
 * an error checks `e.code`, which survives a second copy of a package (where `instanceof` does not)
 * and serialisation across threads and processes.
 */
import { describe, expect, it } from 'vitest';
import { publishedPackages } from '../scripts/published-packages.mjs';

/** The public workspaces whose main entry is JavaScript (the platform packages hold an addon). */
const entries = publishedPackages()
  .filter((p) => typeof p.manifest.exports === 'object' && p.manifest.exports !== null && '.' in p.manifest.exports)
  .map((p) => p.name);

describe('error codes', () => {
  it('every exported error class of every package sets a code', async () => {
    const seen: string[] = [];
    for (const name of entries) {
      const module = (await import(name)) as Record<string, unknown>;
      for (const [exported, value] of Object.entries(module)) {
        if (typeof value !== 'function' || !(value.prototype instanceof Error)) continue;
        const ErrorClass = value as new (...args: unknown[]) => Error & { code?: unknown };
        // Placeholders for the constructor's parameters: the code is a field, whatever the arguments.
        const error = new ErrorClass(...Array.from({ length: Math.max(ErrorClass.length, 1) }, () => 'x'));
        expect(typeof error.code === 'string' && error.code.length > 0, `${name}: ${exported} has no code`).toBe(true);
        seen.push(exported);
      }
    }
    expect(seen).toEqual(
      expect.arrayContaining(['NativeLoadError', 'OutOfMemoryError', 'UsageError', 'TraceFormatError', 'RendezvousError', 'DatasetError']),
    );
  });
});
