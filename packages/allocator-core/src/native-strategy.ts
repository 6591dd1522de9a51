/**
 * A native strategy's TypeScript face, made from its descriptor. The native core declares each
 * strategy once (native/include/gpumem/strategy_registry.hpp): its description, its capability
 * flags and its options. `scripts/sync-strategies.mjs` writes each strategy package's
 * `options.generated.ts` from it (a {@link NativeStrategyDescriptor}), and this module turns that into
 * the options definition, the registry entry and the allocator's constructor:
 *
 * ```ts
 * const poolStrategy = defineNativeStrategy(poolDescriptor); // from ./options.generated.js
 * export interface PoolAllocatorOptions extends OptionsOf<typeof poolStrategy.options> {}
 * export class PoolAllocator extends NativeStrategyAllocator<typeof poolStrategy> {
 *   readonly upstream = this.resolvedUpstream; // 'auto' resolved
 *   constructor(options: PoolAllocatorOptions = {}) {
 *     super(poolStrategy, options);
 *   }
 * }
 * registerAllocator(poolStrategy.name, (o) => new PoolAllocator(o), poolStrategy.registration);
 * ```
 *
 * Every strategy's options are, in this order: its placement option (`upstream`, where the
 * descriptor has one), `device`, `peerAccess` (with the `peerAccess` flag), the descriptor's other
 * options, the package's own (`extra`: what only TypeScript does, such as uvm's logger), and
 * {@link nativeLayerOptions}. The constructor checks the keys and the options TypeScript owns
 * (device, peerAccess, the extras, the native layers), resolves the placement ('auto': the device's
 * choice where a GPU is present, else 'host') and passes the descriptor's options that were given
 * (or have a default) through as they are: the native core checks them, once, when it builds the
 * chain (its TypeError or RangeError names the option).
 * @module
 */
import { cudaDevice, hasCudaDevice, hostDevice, type Device } from './device.js';
import type { StrategyFlags } from './flags.generated.js';
import { type ChainSpec, loadNative } from './native.js';
import { NativeAllocator, nativeLayerOptions, type NativeLayerOptions } from './native-allocator.js';
import { defineOptions, option, type OptionEntries, type OptionsDefinition, type OptionValues, type ParsedOptions } from './options.js';
import { checkPeerAccess, peerAccessOption, peerAccessSpec } from './peer-access.js';
import { definedOptions } from './placement.js';
import type { StrategyRegistration } from './registry.js';

/**
 * A strategy's capability flags as its generated descriptor lists them: those it has (true); every
 * flag it does not list is false (the registry's, ./flags.generated.ts).
 */
export type NativeStrategyFlags = { readonly [K in keyof StrategyFlags]?: true };

/**
 * A native strategy as its descriptor declares it (what `options.generated.ts` holds): `options`
 * are its options for the Node binding; `placement`, where it has one, is the option that says
 * where the memory is and the choices the native side takes ('host', and the device's).
 */
export interface NativeStrategyDescriptor {
  readonly name: string;
  readonly description: string;
  readonly flags: NativeStrategyFlags;
  readonly placement?: { readonly key: string; readonly choices: readonly string[] };
  readonly options: OptionEntries;
}

/** The `device` option every native strategy takes. */
export const deviceOption = {
  /** CUDA device ordinal (default 0); with a placement option, the device of its device choice. */
  device: option.nonNegative({ default: 0 }),
};

/** The `peerAccess` option of the native strategies whose descriptor has the peerAccess flag. */
export const peerAccessEntry = {
  /**
   * CUDA devices (ordinals) that may read and write this allocator's memory besides `device`. Each
   * must be another device with a P2P path to `device` (`peerTopology()`); memory on the host takes
   * none. Default: none.
   */
  peerAccess: peerAccessOption,
};

/** The entries a descriptor's strategy takes: device, peerAccess (with the flag), its own, the extras, the native layers. */
export type NativeStrategyEntries<D extends NativeStrategyDescriptor, X extends OptionEntries> = D['options'] &
  typeof deviceOption &
  (D['flags'] extends { peerAccess: true } ? typeof peerAccessEntry : unknown) &
  X &
  typeof nativeLayerOptions;

/** The placement choice a strategy resolves to ('auto' never): its descriptor's choices. */
export type ResolvedPlacement<D extends NativeStrategyDescriptor> = D['placement'] extends { choices: readonly (infer C)[] }
  ? Exclude<C, 'auto'>
  : undefined;

/** A native strategy's TypeScript face (see the module's documentation). */
export interface NativeStrategy<E extends OptionEntries = OptionEntries, U = unknown> {
  /** The registered name (the descriptor's). */
  readonly name: string;
  /** The options: the type (`OptionsOf<typeof strategy.options>`) and the runtime check. */
  readonly options: OptionsDefinition<E>;
  /** What registerAllocator is told: the descriptor's description and flags, with `nativeLayers`. */
  readonly registration: StrategyRegistration;
  /** Carries the resolved placement's type; never set. */
  readonly resolves?: U;
  /** @internal The descriptor the strategy was made from, and its options' keys the native side takes. */
  readonly descriptor: NativeStrategyDescriptor;
}

/** A strategy's face from its generated descriptor, plus `extra` entries only TypeScript takes. */
export function defineNativeStrategy<const D extends NativeStrategyDescriptor, const X extends OptionEntries = Record<never, never>>(
  descriptor: D,
  extra?: X,
): NativeStrategy<NativeStrategyEntries<D, X>, ResolvedPlacement<D>> {
  const { placement } = descriptor;
  const placementKey = placement?.key;
  const entries = {
    ...(placementKey !== undefined && { [placementKey]: descriptor.options[placementKey] }),
    ...deviceOption,
    ...(descriptor.flags.peerAccess && peerAccessEntry),
    ...descriptor.options,
    ...extra,
    ...nativeLayerOptions,
  } as unknown as NativeStrategyEntries<D, X>;
  const { requiresCuda = false, ...flags } = descriptor.flags;
  // a placement with a 'host' choice is the strategy's host twin
  const hostTwin = placement?.choices.includes('host') && { hostTwinOptions: { [placement.key]: 'host' } };
  const definition = defineOptions(descriptor.name, entries);
  const checkOptions = (options: object) => {
    checkedOptions(descriptor, definition, options);
  };
  return {
    name: descriptor.name,
    options: definition,
    registration: { description: descriptor.description, requiresCuda, nativeLayers: true, ...flags, ...hostTwin, checkOptions },
    descriptor,
  };
}

/**
 * The options checked, nothing made and no device touched: TypeScript's own (the keys, device,
 * peerAccess's form, the extras, the native layers), then the descriptor's by the native core
 * (checkSpec: the one check of their values; 'auto' it resolves as {@link prepare} does).
 */
function checkedOptions(descriptor: NativeStrategyDescriptor, definition: OptionsDefinition<OptionEntries>, options: object) {
  const parsed = definition.parse(options) as Record<string, unknown>;
  const own: Record<string, unknown> = definedOptions(parsed, Object.keys(descriptor.options));
  loadNative().checkSpec({ strategy: descriptor.name, device: parsed.device as number, options: own } as ChainSpec);
  return { parsed, own };
}

/** What a strategy's constructor sends to NativeAllocator, from the options given. */
function prepare(strategy: NativeStrategy, options: object) {
  const { descriptor } = strategy;
  // checked before the device is looked for: a bad option is reported as such where there is none
  const { parsed, own } = checkedOptions(descriptor, strategy.options, options);
  const index = parsed.device as number;
  let upstream: string | undefined;
  if (descriptor.placement !== undefined) {
    const { key, choices } = descriptor.placement;
    const onDevice = choices.find((c) => c !== 'host' && c !== 'auto') ?? 'host';
    const requested = parsed[key];
    upstream = requested === 'auto' ? (hasCudaDevice() ? onDevice : 'host') : (requested as string);
    own[key] = upstream;
  }
  let device: Device;
  if (upstream !== undefined) {
    device = upstream === 'host' ? hostDevice : cudaDevice(index);
  } else {
    device = descriptor.flags.hostMemory && !descriptor.flags.requiresCuda ? hostDevice : cudaDevice(index);
  }
  const peers = descriptor.flags.peerAccess ? checkPeerAccess(parsed.peerAccess, device) : [];
  const spec = { strategy: descriptor.name, device: index, ...peerAccessSpec(peers), options: own } as ChainSpec;
  return { parsed, device, upstream, spec };
}

/** The option entries of a {@link NativeStrategy}. */
export type EntriesOf<S> = S extends NativeStrategy<infer E, unknown> ? E : never;
/** Where a {@link NativeStrategy}'s memory is once 'auto' is resolved (its placement choices less 'auto'). */
export type PlacementOf<S> = S extends NativeStrategy<OptionEntries, infer U> ? U : never;

/**
 * The allocator of a native strategy: its constructor does what every one does (see the module's
 * documentation); a subclass adds only what is its own.
 */
// biome-ignore lint/suspicious/noExplicitAny: any strategy, whatever its entries
export abstract class NativeStrategyAllocator<S extends NativeStrategy<any, unknown>> extends NativeAllocator {
  /** The options as parsed: checked, defaults in place. */
  protected readonly parsed: ParsedOptions<EntriesOf<S>>;
  /** The placement option's choice in force ('auto' resolved); undefined for a strategy without one. */
  protected readonly resolvedUpstream: PlacementOf<S>;

  protected constructor(strategy: S, options: OptionValues<EntriesOf<S>>) {
    const made = prepare(strategy as unknown as NativeStrategy, options);
    super(strategy.name, made.device, made.spec, made.parsed as NativeLayerOptions);
    this.parsed = made.parsed as ParsedOptions<EntriesOf<S>>;
    this.resolvedUpstream = made.upstream as PlacementOf<S>;
  }
}
