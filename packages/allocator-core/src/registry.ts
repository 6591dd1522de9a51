/**
 * The registry: strategies register a factory under a name; users create allocators by name.
 * Small on purpose, and it rejects duplicates. It lives on globalThis so that a plug-in and the
 * application share one registry even if the core module were loaded twice.
 * @module
 */
import type { Allocator } from './types.js';

/**
 * Options per registered strategy name. Plug-ins add theirs by declaration merging:
 * ```ts
 * declare module '@gpumem/allocator-core' {
 *   interface AllocatorOptionsMap { arena: ArenaOptions }
 * }
 * ```
 */
// eslint-disable-next-line @typescript-eslint/no-empty-interface
export interface AllocatorOptionsMap {}

/** Makes an allocator from its options. */
export type AllocatorFactory<O = Record<string, unknown>> = (options: O) => Allocator;

/** What the registry knows of a strategy. */
export interface StrategyInfo {
  name: string;
  description: string;
  /** True when the strategy needs a CUDA device (it cannot run on the host alone). */
  requiresCuda: boolean;
  /**
   * True when the factory makes a NativeAllocator and accepts the native layer options
   * (`limitBytes`, `trackingCapacity`, ...; see NativeLayerOptions).
   */
  nativeLayers: boolean;
}

interface Entry extends StrategyInfo {
  factory: AllocatorFactory<never>;
}

const registryKey = Symbol.for('gpumem.allocator-registry');
const globalScope = globalThis as typeof globalThis & { [registryKey]?: Map<string, Entry> };
const entries: Map<string, Entry> = (globalScope[registryKey] ??= new Map());

const namePattern = /^[a-z][a-z0-9-]*$/;

/** Registers a strategy. Throws when `name` is taken or malformed. */
export function registerAllocator<N extends string>(
  name: N,
  factory: AllocatorFactory<N extends keyof AllocatorOptionsMap ? AllocatorOptionsMap[N] : Record<string, unknown>>,
  info: { description: string; requiresCuda: boolean; nativeLayers?: boolean },
): void {
  if (typeof name !== 'string' || !namePattern.test(name)) {
    throw new TypeError(`Expected a name of lower-case letters, digits and '-' for name but received ${JSON.stringify(name)}`);
  }
  if (typeof factory !== 'function') throw new TypeError(`Expected a function for factory but received ${typeof factory}`);
  if (entries.has(name)) throw new Error(`An allocator named '${name}' is already registered`);
  entries.set(name, {
    name,
    factory: factory as AllocatorFactory<never>,
    description: info.description,
    requiresCuda: info.requiresCuda,
    nativeLayers: info.nativeLayers === true,
  });
}

/** Creates an allocator of the registered strategy `name`. */
export function createAllocator<N extends keyof AllocatorOptionsMap>(name: N, options?: AllocatorOptionsMap[N]): Allocator;
export function createAllocator(name: string, options?: Record<string, unknown>): Allocator;
export function createAllocator(name: string, options: object = {}): Allocator {
  const entry = entryOf(name);
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Expected an options object for options but received ${typeof options}`);
  }
  return (entry.factory as AllocatorFactory<object>)(options);
}

/** Every registered strategy, in registration order. */
export function listAllocators(): StrategyInfo[] {
  return [...entries.values()].map(({ name, description, requiresCuda, nativeLayers }) => ({ name, description, requiresCuda, nativeLayers }));
}

function entryOf(name: string): Entry {
  const entry = entries.get(name);
  if (!entry) {
    const known = [...entries.keys()].join(', ') || 'none';
    throw new RangeError(`Expected a registered allocator name for name but received '${String(name)}' (registered: ${known})`);
  }
  return entry;
}

/** What the registry knows of the strategy `name`; throws RangeError when it is not registered. */
export function strategyInfo(name: string): StrategyInfo {
  const { description, requiresCuda, nativeLayers } = entryOf(name);
  return { name, description, requiresCuda, nativeLayers };
}

/** True when `name` is registered. */
export function hasAllocator(name: string): boolean {
  return entries.has(name);
}
