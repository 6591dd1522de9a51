/**
 * Helpers for strategies that can take their memory from the GPU or from the host (pool,
 * expandable, ...): where the memory goes, and the options that were actually given.
 * @module
 */
import { cudaDevice, hasCudaDevice, hostDevice, type Device } from './device.js';
import { checkNonNegative, checkOneOf } from './validate.js';

/** Where a strategy takes its memory: a CUDA device, the host, or 'auto' (the GPU if there is one). */
export type MemoryPlacement = 'cuda' | 'host' | 'auto';

const placements: readonly MemoryPlacement[] = ['cuda', 'host', 'auto'];

/**
 * Resolves the `upstream` and `device` options: 'auto' (the default) is 'cuda' where there is a
 * device and 'host' elsewhere. Throws naming the option when either is malformed.
 */
export function resolvePlacement(upstream: unknown, device: unknown): { upstream: 'cuda' | 'host'; device: Device; index: number } {
  const requested = upstream ?? 'auto';
  checkOneOf(requested, placements, 'upstream');
  const resolved = requested === 'auto' ? (hasCudaDevice() ? 'cuda' : 'host') : (requested as 'cuda' | 'host');
  const index = device ?? 0;
  checkNonNegative(index, 'device');
  return { upstream: resolved, device: resolved === 'cuda' ? cudaDevice(index as number) : hostDevice, index: index as number };
}

/**
 * The entries of `options` named in `keys` that are not undefined (what a native spec passes on).
 * `keys` is a list, or option entries whose names are the keys (the part of a definition that goes
 * to the native strategy as it is, so that the names are not listed a second time).
 */
export function definedOptions<T extends object, K extends keyof T>(
  options: T,
  keys: readonly K[] | Readonly<Record<K, unknown>>,
): Partial<Pick<T, K>> {
  const names = (Array.isArray(keys) ? keys : Object.keys(keys)) as readonly K[];
  const out: Partial<Pick<T, K>> = {};
  for (const key of names) if (options[key] !== undefined) out[key] = options[key];
  return out;
}
