/**
 * Output paths are checked before any work: links that lead to an input, files that are not
 * regular files, folders that are files, and kernel file systems are refused with the flag named.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from './args.js';
import { checkOutputFlags, writeOutput } from './output-paths.js';

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

  it('a plug-in file named by --plugin or GPUMEM_PLUGINS is an input', () => {
    const plugin = join(dir, 'plugin.js');
    writeFileSync(plugin, 'export {};\n');
    expect(refusal({ json: plugin, plugin }, ['json'])).toMatch(/is the plug-in .*plugin\.js: writing it would overwrite the input/);
    const saved = process.env.GPUMEM_PLUGINS;
    process.env.GPUMEM_PLUGINS = `@acme/not-a-file,${plugin}`;
    try {
      expect(refusal({ report: plugin }, ['report'])).toMatch(/is the plug-in/);
    } finally {
      if (saved === undefined) delete process.env.GPUMEM_PLUGINS;
      else process.env.GPUMEM_PLUGINS = saved;
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

  it('accepts new files, existing files, /dev/null for several outputs, and standard output', () => {
    mkdirSync(join(dir, 'out'));
    expect(refusal({ json: join(dir, 'out', 'a.json'), report: join(dir, 'out', 'a.html') }, ['report', 'json'])).toBeUndefined();
    expect(refusal({ json: input }, ['json'])).toBeUndefined();
    expect(refusal({ json: '/dev/null', report: '/dev/null' }, ['report', 'json'])).toBeUndefined();
    expect(refusal({ json: '-' }, ['json'])).toBeUndefined();
  });
});

const built = fileURLToPath(new URL('../../dist/commands/output-paths.js', import.meta.url));
const notBuilt = existsSync(built) ? '' : ' (skipped: packages/cli is not built: npm run build)';

describe('writing outputs', () => {
  it('writes new files, replaces old ones, and follows a symbolic link to the file it names', () => {
    const out = join(dir, 'written.json');
    writeOutput(out, '{"a":1}\n');
    writeOutput(out, '{"a":2}\n');
    expect(readFileSync(out, 'utf8')).toBe('{"a":2}\n');
    const link = join(dir, 'link.json');
    symlinkSync(out, link);
    writeOutput(link, '{"a":3}\n');
    expect(readFileSync(out, 'utf8')).toBe('{"a":3}\n');
    writeOutput('/dev/null', 'anything');
  });

  it.skipIf(notBuilt !== '')(
    `a write that fails part way (the file size limit, as a full disk) keeps the previous file whole${notBuilt}`,
    () => {
      const folder = join(dir, 'full');
      mkdirSync(folder);
      const out = join(folder, 'report.html');
      writeFileSync(out, 'previous report\n');
      // ulimit -f 64: at most 64 KiB a file; SIGXFSZ ignored, so the write fails with EFBIG instead of killing the process
      const script = `import(${JSON.stringify(pathToFileURL(built).href)}).then((m) => m.writeOutput(${JSON.stringify(out)}, "x".repeat(1 << 20)))`;
      const r = spawnSync('bash', ['-c', `trap '' XFSZ; ulimit -f 64; exec "${process.execPath}" -e '${script}'`], { encoding: 'utf8' });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/could not write .*report\.html \(EFBIG: .*\); its previous content is kept/);
      expect(readFileSync(out, 'utf8')).toBe('previous report\n');
      expect(readdirSync(folder)).toEqual(['report.html']);
    },
  );
});
