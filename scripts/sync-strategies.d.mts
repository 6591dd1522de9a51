/** Types of sync-strategies.mjs, for the TypeScript that imports it (tests/). */

/** An option as the addon's strategies() lists it (the Node binding's options only). */
export interface NativeOptionInfo {
  key: string;
  kind: 'bytes' | 'count' | 'boolean' | 'choice' | 'number' | 'text';
  minimum?: number;
  choices?: string[];
  default?: unknown;
  required: boolean;
  help: string;
  doc?: string;
  placement?: boolean;
}

/** A strategy's descriptor as the addon's strategies() lists it. */
export interface NativeStrategyInfo {
  name: string;
  aliases?: string[];
  description: string;
  layer: string;
  wraps?: string;
  flags: Record<string, boolean>;
  options: NativeOptionInfo[];
}

/** A flag of the registry as the addon's strategyFlags() lists it (those JavaScript has). */
export interface NativeFlagInfo {
  key: string;
  doc: string;
}

export const syncStrategiesCommand: string;
export function nativeStrategies(root?: string): NativeStrategyInfo[];
export function nativeStrategyFlags(root?: string): NativeFlagInfo[];
export function generatedStrategies(
  root?: string,
  descriptors?: NativeStrategyInfo[],
): Array<{ dir: string; descriptor: NativeStrategyInfo }>;
export function expectedStrategyFiles(root?: string, descriptors?: NativeStrategyInfo[], flags?: NativeFlagInfo[]): Record<string, string>;
export function syncStrategies(
  root?: string,
  options?: { check?: boolean; descriptors?: NativeStrategyInfo[]; flags?: NativeFlagInfo[] },
): string[];
