/**
 * What the output writer's tests share (packages/allocator-core/src/output-file.test.ts and the CLI's
 * outputs-cli.test.ts): whether they run as root (device nodes, mounts), a small tmpfs for a real full
 * disk, and the writer's temporary files left in a folder.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll } from 'vitest';

export const isRoot = process.getuid?.() === 0;
/** Appended to the name of a test that makes a device node, so that its skip says why. */
export const notRoot = isRoot ? '' : ' (skipped: making a device node needs root)';

/** Whether `command` ran and exited with 0 (its output dropped). */
function succeeds(command: string, args: string[]): boolean {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A tmpfs of `size` (e.g. '16k') mounted at PARENT/tmpfs where mounting is allowed (root outside a
 * restricted container), unmounted after the file's tests: `folder`, whether it is `mounted`, and
 * `skipNote` for the name of a test that needs it (empty where mounted).
 */
export function smallTmpfs(parent: string, size: string): { folder: string; mounted: boolean; skipNote: string } {
  const folder = join(parent, 'tmpfs');
  mkdirSync(folder);
  const mounted = isRoot && succeeds('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', folder]);
  afterAll(() => {
    if (mounted) succeeds('umount', [folder]);
  });
  const skipNote = mounted ? '' : ' (skipped: cannot mount a small tmpfs here: needs root and mount rights)';
  return { folder, mounted, skipNote };
}

/** The names in `folder` that are temporary files of the writer. */
export function leftovers(folder: string): string[] {
  return readdirSync(folder).filter((name) => name.endsWith('.tmp'));
}
