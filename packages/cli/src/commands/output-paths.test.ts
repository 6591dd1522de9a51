/**
 * Output paths are checked before any work: links that lead to an input, files that are not
 * regular files, folders that are files, and kernel file systems are refused with the flag named.
 */
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from './args.js';
import { checkOutputFlags, pluginInputs } from './output-paths.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-outputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const input = join(dir, 'trace.csv');
writeFileSync(input, 'Thread,Time,Action,Pointer,Size,Stream\n');

/** The UsageError checkOutputFlags throws for these flags (or undefined when it accepts them). */
function refusal(flags: Record<string, unknown>, names: string[], inputs: [string, string][] = []): string | undefined {
  try {
    checkOutputFlags('replay', flags, names, inputs);
    return undefined;
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
}

describe('output paths', () => {
  it('a hard link or a symbolic link to the input is the input', () => {
    const hard = join(dir, 'hard.csv');
    const soft = join(dir, 'soft.csv');
    linkSync(input, hard);
    symlinkSync(input, soft);
    for (const path of [hard, soft]) {
      expect(refusal({ json: path }, ['json'], [['the trace FILE', input]])).toMatch(
        /'--json' .* is the trace FILE: writing it would overwrite the input/,
      );
    }
    // two outputs through two names of one file
    expect(refusal({ json: hard, report: input }, ['report', 'json'])).toMatch(/'--report' and '--json' both name/);
  });

  it('a loaded plug-in module (a folder counts by its main module) and a plug-in library are inputs', () => {
    const plugin = join(dir, 'plugin.js');
    writeFileSync(plugin, 'export {};\n');
    const inputs = pluginInputs([pathToFileURL(plugin).href, '@acme/not-a-file']);
    expect(refusal({ json: plugin }, ['json'], inputs)).toMatch(/is the plug-in .*plugin\.js: writing it would overwrite the input/);
    const library = join(dir, 'libslab.so');
    writeFileSync(library, '');
    const alias = join(dir, 'alias.json');
    linkSync(library, alias);
    const fromSpec = pluginInputs([], [`pool,plugin:library=${library}`]);
    expect(refusal({ report: alias }, ['report'], fromSpec)).toMatch(/is the plug-in library .*libslab\.so/);
    const saved = process.env.GPUMEM_PLUGIN_LIBRARY;
    process.env.GPUMEM_PLUGIN_LIBRARY = library;
    try {
      expect(refusal({ json: library }, ['json'], pluginInputs([]))).toMatch(/is the plug-in library/);
    } finally {
      if (saved === undefined) delete process.env.GPUMEM_PLUGIN_LIBRARY;
      else process.env.GPUMEM_PLUGIN_LIBRARY = saved;
    }
  });

  it('a parent that is a file, a dangling link, a FIFO and /proc are refused before any work', () => {
    const file = join(dir, 'plain.txt');
    writeFileSync(file, 'x');
    expect(refusal({ json: join(file, 'out.json') }, ['json'])).toMatch(/'--json' .*: .*plain\.txt is a file, not a folder/);
    expect(refusal({ json: join(file, 'deeper', 'out.json') }, ['json'])).toMatch(/a parent of .* is a file, not a folder/);
    const dangling = join(dir, 'dangling.json');
    symlinkSync(join(dir, 'missing', 'target.json'), dangling);
    expect(refusal({ report: dangling }, ['report'])).toMatch(/is a symbolic link to .*target\.json, which does not exist/);
    const fifo = join(dir, 'pipe');
    execFileSync('mkfifo', [fifo]);
    expect(refusal({ json: fifo }, ['json'])).toMatch(/is a named pipe \(FIFO\)/);
    expect(refusal({ json: '/proc/self/comm' }, ['json'])).toMatch(/is on a kernel file system/);
    expect(refusal({ json: '/sys/kernel/new.json' }, ['json'])).toMatch(/is on a kernel file system/);
  });

  it('a device other than the null device is refused', () => {
    expect(refusal({ json: '/dev/zero' }, ['json'])).toMatch(/'--json' \/dev\/zero: is a character device/);
  });

  it('accepts new files, existing files, /dev/null for several outputs, and standard output', () => {
    mkdirSync(join(dir, 'out'));
    expect(refusal({ json: join(dir, 'out', 'a.json'), report: join(dir, 'out', 'a.html') }, ['report', 'json'])).toBeUndefined();
    expect(refusal({ json: input }, ['json'])).toBeUndefined();
    expect(refusal({ json: '/dev/null', report: '/dev/null' }, ['report', 'json'])).toBeUndefined();
    expect(refusal({ json: '-' }, ['json'])).toBeUndefined();
  });
});
