/** Types of sync-workspaces.mjs, for the TypeScript that imports it (vitest.config.ts, tests/). */

/** A workspace: its folder (relative to the repository, with '/'), package name and package.json. */
export interface WorkspacePackage {
  dir: string;
  name: string;
  manifest: {
    name: string;
    exports?: Record<string, string | { types?: string; default?: string }>;
    gpumem?: { strategy?: boolean };
    [key: string]: unknown;
  };
}

export function workspacePackages(root?: string): WorkspacePackage[];
export function strategyPackages(root?: string): WorkspacePackage[];
export function syncWorkspaces(root?: string, options?: { check?: boolean }): string[];
