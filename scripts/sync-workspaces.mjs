/**
 * The root files that list the workspaces, made from the workspaces themselves (the root
 * package.json's `workspaces`): tsconfig.json's project references, one per workspace with a
 * tsconfig.json. `node scripts/sync-workspaces.mjs` rewrites them; `--check` writes nothing and
 * exits 1 naming each file that is out of date (tests/workspaces.test.ts runs it).
 *
 * Also the one reader of the workspaces for the other consumers: vitest.config.ts (its aliases from
 * each package's `exports`) and tests/allocators.ts (every package whose package.json says
 * `"gpumem": { "strategy": true }`). typedoc.json needs nothing: its `packages` entry point
 * strategy documents `packages/*` as it finds them.
 */
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repository = fileURLToPath(new URL('..', import.meta.url));

function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/**
 * The workspaces in the order the root package.json lists them (a `dir/*` pattern: its
 * sub-folders holding a package.json, by name): each one's folder (relative, with '/'), package
 * name and package.json.
 */
export function workspacePackages(root = repository) {
  const patterns = readJson(join(root, 'package.json')).workspaces ?? [];
  const dirs = patterns.flatMap((pattern) => {
    if (!pattern.endsWith('/*')) return [pattern];
    const parent = pattern.slice(0, -2);
    return readdirSync(join(root, parent), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => `${parent}/${entry.name}`)
      .sort();
  });
  return dirs
    .filter((dir) => existsSync(join(root, dir, 'package.json')))
    .map((dir) => {
      const manifest = readJson(join(root, dir, 'package.json'));
      return { dir, name: manifest.name, manifest };
    });
}

/** The workspaces that are strategy packages (`"gpumem": { "strategy": true }`). */
export function strategyPackages(root = repository) {
  return workspacePackages(root).filter((w) => w.manifest.gpumem?.strategy === true);
}

/** Each file this script keeps, as it should read. */
function expectedFiles(root) {
  const references = workspacePackages(root)
    .filter((w) => existsSync(join(root, w.dir, 'tsconfig.json')))
    .map((w) => ({ path: w.dir }));
  return { 'tsconfig.json': `${JSON.stringify({ files: [], references }, null, 2)}\n` };
}

/** The files that differ from what the workspaces make (written unless `check`). */
export function syncWorkspaces(root = repository, { check = false } = {}) {
  const stale = [];
  for (const [file, text] of Object.entries(expectedFiles(root))) {
    const path = join(root, file);
    if (existsSync(path) && readFileSync(path, 'utf8') === text) continue;
    stale.push(file);
    if (!check) writeFileSync(path, text);
  }
  return stale;
}

// Run as a command (not imported): the script's own path, links resolved, is the one Node was given.
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) {
  const check = process.argv.includes('--check');
  const stale = syncWorkspaces(repository, { check });
  if (check && stale.length > 0) {
    console.error(`Out of date with the workspaces: ${stale.join(', ')} (run node scripts/sync-workspaces.mjs)`);
    process.exit(1);
  }
  console.log(stale.length === 0 ? 'Up to date with the workspaces' : `Rewrote ${stale.join(', ')}`);
}
