/** Types of published-packages.mjs, for the TypeScript that imports it (tests/). */
import type { WorkspacePackage } from './sync-workspaces.mjs';

export const repository: string;
export function platformPackages(root?: string): WorkspacePackage[];
export function publishedPackages(root?: string): WorkspacePackage[];
