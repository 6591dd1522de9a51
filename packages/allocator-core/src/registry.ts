/**
 * The registry: strategies register a factory under a name; users create allocators by name.
 * Small on purpose, and it rejects duplicates. There is one per process, whatever copies of the core
 * are loaded (see process-shared.ts): a plug-in installed with its own copy of the core registers
 * into the application's registry, and the core's own strategies are registered once.
 * @module
 */
import { type StrategyFlags, strategyFlagKeys } from './flags.generated.js';
import { processShared } from './process-shared.js';
import type { Allocator, SleepingAllocator } from './types.js';

/**
 * Options per registered strategy name. Plug-ins add theirs by declaration merging:
 * ```ts
 * declare module '@gpumem/allocator-core' {
 *   interface AllocatorOptionsMap { arena: ArenaOptions }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: strategy packages add their options to it by declaration merging, which a type alias cannot take
export interface AllocatorOptionsMap {}

/**
 * The registry flags per strategy name, as types: a strategy package adds its own (from its
 * descriptor's `flags`, declared `as const`) by declaration merging, so that createAllocator's
 * return type has what the flags promise:
 * ```ts
 * declare module '@gpumem/allocator-core' {
 *   interface AllocatorFlagsMap { expandable: typeof expandableDescriptor.flags }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: strategy packages add their flags to it by declaration merging, which a type alias cannot take
export interface AllocatorFlagsMap {}

/**
 * The allocator createAllocator(N) returns: a {@link SleepingAllocator} (sleep, wake, tagStats and
 * trimBackup present) where N's flags say `sleep: true`, else an {@link Allocator}.
 */
export type AllocatorFor<N extends string> = N extends keyof AllocatorFlagsMap
  ? AllocatorFlagsMap[N] extends { readonly sleep: true }
    ? SleepingAllocator
    : Allocator
  : Allocator;

/** Makes an allocator from its options. */
export type AllocatorFactory<O = Record<string, unknown>> = (options: O) => Allocator;

/** What the registry knows of a strategy: its name, description and flags (./flags.generated.ts). */
export interface StrategyInfo extends StrategyFlags {
  name: string;
  description: string;
  /**
   * True when the factory makes a NativeAllocator and accepts the native layer options
   * (`limitBytes`, `trackingCapacity`, ...; see NativeLayerOptions).
   */
  nativeLayers: boolean;
  /**
   * The options that make the strategy run on its host twin: the same logic over host memory (for a
   * strategy with a placement option, its 'host' choice). A verdict that must not depend on the
   * machine (`gpumem doctor`) replays the twin, on a GPU as without one. Absent when it has none.
   */
  hostTwinOptions?: Readonly<Record<string, unknown>>;
  /**
   * The allocator whose rules the strategy reproduces, in words ("PyTorch's allocator"): tables
   * name its rows `caching (PyTorch's allocator)`. Absent for a strategy of its own design.
   */
  models?: string;
}

/** What a strategy says of itself when it registers: each flag but requiresCuda defaults to false. */
export interface StrategyRegistration extends Partial<Omit<StrategyFlags, 'requiresCuda'>> {
  /** One line: what memory it takes and how. */
  description: string;
  /** Needs a CUDA device (cannot run on the host alone). */
  requiresCuda: boolean;
  /** Makes a NativeAllocator that accepts the native layer options (default false). */
  nativeLayers?: boolean;
  /** The options that run it on its host twin, the same logic over host memory (default: none). */
  hostTwinOptions?: Readonly<Record<string, unknown>>;
  /** The allocator whose rules it reproduces, in words (default: none). */
  models?: string;
  /**
   * Checks options as the factory would, making nothing and touching no device (a native strategy:
   * the native core's check, the only one of its options' values): a TypeError or RangeError for
   * what the factory would refuse. Default: none, and the options are checked when it is made.
   */
  checkOptions?: (options: object) => void;
}

interface Entry extends StrategyInfo {
  factory: AllocatorFactory<never>;
  checkOptions?: (options: object) => void;
  /** Registered by a copy of the core itself (register.ts), not by a plug-in. */
  builtIn: boolean;
}

/**
 * The createAllocator calls in progress (a factory may create its upstream by name) and, while
 * {@link createAllocatorWrappingLeaves} runs, the wrapper for the leaves. Shared with the registry,
 * so the calls a plug-in's copy of the core makes are seen too.
 */
interface CreationState {
  frames: { madeChild: boolean }[];
  leafWrapper: ((allocator: Allocator, name: string) => Allocator) | undefined;
  wrappedLeaves: number;
}

/**
 * The shape of the shared registry. A change to `Entry` or `CreationState` that an older copy of
 * the core could not read raises it: copies of another version then refuse to load, naming both.
 */
const registryVersion = 1;
const { entries, creation } = processShared('allocator-registry', registryVersion, () => ({
  entries: new Map<string, Entry>(),
  creation: { frames: [], leafWrapper: undefined, wrappedLeaves: 0 } as CreationState,
}));

/**
 * Older names of registered strategies, each kept for one release: the alias, the strategy's name,
 * and whether creating by the alias has said so yet (once per process, whatever copies of the core).
 */
const aliases = processShared('allocator-aliases', 1, () => new Map<string, { name: string; warned: boolean }>());

const namePattern = /^[a-z][a-z0-9-]*$/;

/** The factory a strategy named `N` registers: it takes that strategy's options where they are declared. */
export type FactoryFor<N extends string> = AllocatorFactory<
  N extends keyof AllocatorOptionsMap ? AllocatorOptionsMap[N] : Record<string, unknown>
>;

/** Registers a strategy. Throws when `name` is taken or malformed. */
export function registerAllocator<N extends string>(name: N, factory: FactoryFor<N>, info: StrategyRegistration): void {
  addEntry(name, factory, info, false);
}

/**
 * Registers one of the core's own strategies (register.ts). When another copy of the core loaded in
 * this process (a plug-in's) has registered it already, this is a no-op: it is the same strategy.
 */
export function registerBuiltInAllocator<N extends string>(name: N, factory: FactoryFor<N>, info: StrategyRegistration): void {
  if (entries.get(name)?.builtIn === true) return;
  addEntry(name, factory, info, true);
}

function addEntry(name: string, factory: unknown, info: StrategyRegistration, builtIn: boolean): void {
  if (typeof name !== 'string' || !namePattern.test(name)) {
    throw new TypeError(`Expected a name of lower-case letters, digits and '-' for name but received ${JSON.stringify(name)}`);
  }
  if (typeof factory !== 'function') throw new TypeError(`Expected a function for factory but received ${typeof factory}`);
  const checked = checkRegistration(info);
  const alias = aliases.get(name);
  if (alias) throw new Error(`'${name}' is the deprecated name of the registered allocator '${alias.name}'`);
  const existing = entries.get(name);
  if (existing) {
    const whose = existing.builtIn ? " (one of @gpumem/allocator-core's own strategies)" : '';
    throw new Error(`An allocator named '${name}' is already registered${whose}`);
  }
  entries.set(name, { name, factory: factory as AllocatorFactory<never>, ...checked, builtIn });
}

/**
 * Registers `alias`, an older name of the registered strategy `name`, deprecated: createAllocator,
 * strategyInfo and hasAllocator take it for `name` (createAllocator says once per process, as a
 * DeprecationWarning on stderr, that the name is deprecated and what to use); listAllocators leaves
 * it out. The same alias again is a no-op (another copy of the core); throws when `alias` is taken.
 */
export function registerDeprecatedAlias(alias: string, name: string): void {
  if (typeof alias !== 'string' || !namePattern.test(alias)) {
    throw new TypeError(`Expected a name of lower-case letters, digits and '-' for alias but received ${JSON.stringify(alias)}`);
  }
  entryOf(name);
  const existing = aliases.get(alias);
  if (existing?.name === name) return;
  if (existing || entries.has(alias)) throw new Error(`An allocator named '${alias}' is already registered`);
  aliases.set(alias, { name, warned: false });
}

/** The registered name `name` stands for: itself, or the strategy an alias names. */
function canonicalName(name: string): string {
  return aliases.get(name)?.name ?? name;
}

/** The flags a registration may give, each false unless it does. */
const flagKeys = ['nativeLayers', ...strategyFlagKeys.filter((k) => k !== 'requiresCuda')] as const;
type OptionalFlag = (typeof flagKeys)[number];

function checkRegistration(info: unknown): Omit<Entry, 'name' | 'factory' | 'builtIn'> {
  if (info === null || typeof info !== 'object' || Array.isArray(info)) {
    throw new TypeError(
      `Expected an object { description, requiresCuda, ${flagKeys.map((k) => `${k}?`).join(', ')}, hostTwinOptions?, models? } for info but received ${info === null ? 'null' : typeof info}`,
    );
  }
  const i = info as Record<string, unknown>;
  if (typeof i.description !== 'string') {
    throw new TypeError(`Expected a string for info.description but received ${typeof i.description}`);
  }
  if (typeof i.requiresCuda !== 'boolean')
    throw new TypeError(`Expected a boolean for info.requiresCuda but received ${typeof i.requiresCuda}`);
  for (const key of flagKeys) {
    if (i[key] !== undefined && typeof i[key] !== 'boolean')
      throw new TypeError(`Expected a boolean for info.${key} but received ${typeof i[key]}`);
  }
  const twin = i.hostTwinOptions;
  if (twin !== undefined && (twin === null || typeof twin !== 'object' || Array.isArray(twin)))
    throw new TypeError(`Expected an object of options for info.hostTwinOptions but received ${twin === null ? 'null' : typeof twin}`);
  if (i.checkOptions !== undefined && typeof i.checkOptions !== 'function')
    throw new TypeError(`Expected a function for info.checkOptions but received ${typeof i.checkOptions}`);
  if (i.models !== undefined && (typeof i.models !== 'string' || i.models.length === 0))
    throw new TypeError(
      `Expected a non-empty string for info.models but received ${typeof i.models === 'string' ? "''" : typeof i.models}`,
    );
  return {
    description: i.description,
    requiresCuda: i.requiresCuda,
    ...(Object.fromEntries(flagKeys.map((k) => [k, i[k] === true])) as Record<OptionalFlag, boolean>),
    ...(twin !== undefined && { hostTwinOptions: Object.freeze({ ...(twin as Record<string, unknown>) }) }),
    ...(typeof i.models === 'string' && { models: i.models }),
    ...(typeof i.checkOptions === 'function' && { checkOptions: i.checkOptions as (options: object) => void }),
  };
}

function isAllocator(value: unknown): value is Allocator {
  if (value === null || typeof value !== 'object') return false;
  const a = value as Record<string, unknown>;
  return ['malloc', 'free', 'prefetch', 'recordStream', 'write', 'read', 'stats', 'resetPeak', 'trim', 'dispose'].every(
    (m) => typeof a[m] === 'function',
  );
}

/** Creates an allocator of the registered strategy `name`. */
export function createAllocator<N extends keyof AllocatorOptionsMap>(name: N, options?: AllocatorOptionsMap[N]): AllocatorFor<N>;
/** A plug-in's strategy (any name the built-ins' options map does not know): options are not checked at compile time. */
export function createAllocator<N extends string>(
  name: N & (N extends keyof AllocatorOptionsMap ? never : unknown),
  options?: Record<string, unknown>,
): Allocator;
export function createAllocator(requested: string, options: object = {}): Allocator {
  const name = canonicalName(requested);
  const entry = entryOf(name);
  const older = aliases.get(requested);
  if (older !== undefined && !older.warned) {
    older.warned = true;
    process.emitWarning(`The allocator name '${requested}' is deprecated and will be removed in the next release; use '${name}'`, {
      type: 'DeprecationWarning',
      code: 'GPUMEM_ALLOCATOR_ALIAS',
    });
  }
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Expected an options object for options but received ${typeof options}`);
  }
  const parent = creation.frames.at(-1);
  if (parent) parent.madeChild = true;
  const frame = { madeChild: false };
  creation.frames.push(frame);
  let allocator: unknown;
  try {
    allocator = (entry.factory as AllocatorFactory<object>)(options);
  } finally {
    creation.frames.pop();
  }
  if (!isAllocator(allocator)) {
    throw new TypeError(
      `The factory registered for '${name}' returned ${allocator === null ? 'null' : typeof allocator}, not an Allocator (an object with malloc, free, stats, ...)`,
    );
  }
  const wrap = creation.leafWrapper;
  if (wrap === undefined || parent === undefined || frame.madeChild) return allocator;
  // A leaf under a strategy being created by createAllocatorWrappingLeaves.
  try {
    const wrapped = wrap(allocator, name);
    creation.wrappedLeaves++;
    return wrapped;
  } catch (e) {
    allocator.dispose();
    throw e;
  }
}

/**
 * Creates the strategy `name` and passes every leaf allocator it creates through the registry
 * while it is being constructed (an allocator made inside a factory that makes none itself) through
 * `wrap`: how a layer goes *under* a strategy written in TypeScript, whose upstream is its own (e.g.
 * a byte limit that simulates a smaller device). `wrappedLeaves` is 0 when the strategy made no
 * allocator through the registry (a native strategy, or one that gets memory another way).
 */
export function createAllocatorWrappingLeaves(
  name: string,
  options: Record<string, unknown>,
  wrap: (leaf: Allocator, leafName: string) => Allocator,
): { allocator: Allocator; wrappedLeaves: number } {
  if (typeof wrap !== 'function') throw new TypeError(`Expected a function for wrap but received ${typeof wrap}`);
  if (creation.leafWrapper !== undefined || creation.frames.length > 0) {
    throw new Error('createAllocatorWrappingLeaves cannot be called while another allocator is being created');
  }
  creation.leafWrapper = wrap;
  creation.wrappedLeaves = 0;
  try {
    const allocator = createAllocator(name, options);
    return { allocator, wrappedLeaves: creation.wrappedLeaves };
  } finally {
    creation.leafWrapper = undefined;
    creation.wrappedLeaves = 0;
  }
}

/** Every registered strategy, in registration order (by its name: deprecated aliases are left out). */
export function listAllocators(): StrategyInfo[] {
  return [...entries.values()].map(infoOf);
}

function infoOf({ factory: _factory, builtIn: _builtIn, checkOptions: _check, ...info }: Entry): StrategyInfo {
  return info;
}

/**
 * Checks `options` of the registered strategy `name` without making an allocator (its
 * registration's `checkOptions`): throws its TypeError or RangeError for options it refuses.
 * Returns false where the strategy has no such check (its options are checked when it is made).
 */
export function checkAllocatorOptions(name: string, options: object): boolean {
  const entry = entryOf(name);
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Expected an options object for options but received ${typeof options}`);
  }
  if (entry.checkOptions === undefined) return false;
  entry.checkOptions(options);
  return true;
}

function entryOf(name: string): Entry {
  const entry = entries.get(canonicalName(name));
  if (!entry) {
    const known = [...entries.keys()].join(', ') || 'none';
    throw new RangeError(`Expected a registered allocator name for name but received '${String(name)}' (registered: ${known})`);
  }
  return entry;
}

/**
 * What the registry knows of the strategy `name` (or a deprecated alias of it: the strategy's info,
 * under its name); throws RangeError when it is not registered.
 */
export function strategyInfo(name: string): StrategyInfo {
  return infoOf(entryOf(name));
}

/**
 * How tables name a strategy: its name, and the allocator it reproduces where it says
 * (`caching (PyTorch's allocator)`).
 */
export function strategyLabel(info: Pick<StrategyInfo, 'name' | 'models'>): string {
  return info.models === undefined ? info.name : `${info.name} (${info.models})`;
}

/** True when `name` is registered (a deprecated alias counts). */
export function hasAllocator(name: string): boolean {
  return entries.has(canonicalName(name));
}
