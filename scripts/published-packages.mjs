/**
 * The npm packages a release publishes: every public workspace, and the packages that carry a
 * prebuilt addon for one platform each (native/npm/<platform>/, optional dependencies of
 * @gpumem/native that npm, pnpm and yarn pick by their os, cpu and libc fields). The platform
 * packages are not workspaces: a workspace is installed on every platform, and these must not be.
 * scripts/pack-install.mjs and scripts/release-check.mjs pack what this lists.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { workspacePackages } from './sync-workspaces.mjs';

/** The repository's root folder (with a trailing separator). */
export const repository = fileURLToPath(new URL('..', import.meta.url));

/** The platform packages under native/npm/: each one's folder (relative, with '/'), name and package.json. */
export function platformPackages(root = repository) {
  const parent = join(root, 'native', 'npm');
  if (!existsSync(parent)) return [];
  return readdirSync(parent, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(parent, entry.name, 'package.json')))
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const dir = `native/npm/${name}`;
      const manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
      return { dir, name: manifest.name, manifest };
    });
}

/** Every package a release publishes: the public workspaces, then the platform packages. */
export function publishedPackages(root = repository) {
  return [...workspacePackages(root).filter((w) => !w.manifest.private), ...platformPackages(root)];
}
