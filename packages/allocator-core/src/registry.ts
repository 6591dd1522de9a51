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
  /**
   * True when the strategy's malloc and free make no driver calls once warm and never synchronise,
   * so work that allocates can be captured into a CUDA graph (the trainer's `cudaGraph` mode).
   */
  capturable: boolean;
  /** True when the strategy keeps its memory on the host (comparisons on a GPU leave it out by default). */
  hostMemory: boolean;
}

/** What a strategy says of itself when it registers. */
export interface StrategyRegistration {
  /** One line: what memory it takes and how. */
  description: string;
  /** Needs a CUDA device (cannot run on the host alone). */
  requiresCuda: boolean;
  /** Makes a NativeAllocator that accepts the native layer options (default false). */
  nativeLayers?: boolean;
  /** Allocates without driver calls or synchronisation once warm: CUDA-graph capture works (default false). */
  capturable?: boolean;
  /** Keeps its memory on the host (default false). */
  hostMemory?: boolean;
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
  info: StrategyRegistration,
): void {
  if (typeof name !== 'string' || !namePattern.test(name)) {
    throw new TypeError(`Expected a name of lower-case letters, digits and '-' for name but received ${JSON.stringify(name)}`);
  }
  if (typeof factory !== 'function') throw new TypeError(`Expected a function for factory but received ${typeof factory}`);
  const checked = checkRegistration(info);
  if (entries.has(name)) throw new Error(`An allocator named '${name}' is already registered`);
  entries.set(name, { name, factory: factory as AllocatorFactory<never>, ...checked });
}

const flagKeys = ['nativeLayers', 'capturable', 'hostMemory'] as const;

function checkRegistration(info: unknown): Omit<StrategyInfo, 'name'> {
  if (info === null || typeof info !== 'object' || Array.isArray(info)) {
    throw new TypeError(
      `Expected an object { description, requiresCuda, nativeLayers?, capturable?, hostMemory? } for info but received ${info === null ? 'null' : typeof info}`,
    );
  }
  const i = info as Record<string, unknown>;
  if (typeof i.description !== 'string') {
    throw new TypeError(`Expected a string for info.description but received ${typeof i.description}`);
  }
  if (typeof i.requiresCuda !== 'boolean') throw new TypeError(`Expected a boolean for info.requiresCuda but received ${typeof i.requiresCuda}`);
  for (const key of flagKeys) {
    if (i[key] !== undefined && typeof i[key] !== 'boolean') throw new TypeError(`Expected a boolean for info.${key} but received ${typeof i[key]}`);
  }
  return {
    description: i.description,
    requiresCuda: i.requiresCuda,
    nativeLayers: i.nativeLayers === true,
    capturable: i.capturable === true,
    hostMemory: i.hostMemory === true,
  };
}

function isAllocator(value: unknown): value is Allocator {
  if (value === null || typeof value !== 'object') return false;
  const a = value as Record<string, unknown>;
  return ['malloc', 'free', 'prefetch', 'recordStream', 'write', 'read', 'stats', 'resetPeak', 'trim', 'dispose'].every((m) => typeof a[m] === 'function');
}

/** Creates an allocator of the registered strategy `name`. */
export function createAllocator<N extends keyof AllocatorOptionsMap>(name: N, options?: AllocatorOptionsMap[N]): Allocator;
export function createAllocator(name: string, options?: Record<string, unknown>): Allocator;
export function createAllocator(name: string, options: object = {}): Allocator {
  const entry = entryOf(name);
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Expected an options object for options but received ${typeof options}`);
  }
  const allocator: unknown = (entry.factory as AllocatorFactory<object>)(options);
  if (!isAllocator(allocator)) {
    throw new TypeError(`The factory registered for '${name}' returned ${allocator === null ? 'null' : typeof allocator}, not an Allocator (an object with malloc, free, stats, ...)`);
  }
  return allocator;
}

/** Every registered strategy, in registration order. */
export function listAllocators(): StrategyInfo[] {
  return [...entries.values()].map(infoOf);
}

function infoOf({ name, description, requiresCuda, nativeLayers, capturable, hostMemory }: Entry): StrategyInfo {
  return { name, description, requiresCuda, nativeLayers, capturable, hostMemory };
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
  return infoOf(entryOf(name));
}

/** True when `name` is registered. */
export function hasAllocator(name: string): boolean {
  return entries.has(name);
}
