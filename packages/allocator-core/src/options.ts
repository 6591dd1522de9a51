/**
 * Strategy options declared once. A strategy writes one definition, key by key (how the value is
 * checked, its default, its TSDoc), and gets from it both its options type
 * (`OptionsOf<typeof definition>`, which carries each entry's TSDoc) and the runtime check
 * (`definition.parse(options)`: unknown keys and bad values are the typed errors of ./validate.ts).
 * ```ts
 * const arenaOptions = defineOptions('arena', {
 *   chunkBytes: option.bytes({ default: 64 * 2 ** 20 }),
 *   upstream: option.oneOf(['cuda', 'host'], { default: 'cuda' }),
 * });
 * // { chunkBytes?: number; upstream?: 'cuda' | 'host' }; an interface, so typedoc lists the options
 * export interface ArenaOptions extends OptionsOf<typeof arenaOptions> {}
 * const { chunkBytes, upstream } = arenaOptions.parse(options); // checked, defaults filled in
 * ```
 * @module
 */
import { checkBoolean, checkBytes, checkNonNegative, checkOneOf, checkOptionKeys } from './validate.js';

/**
 * One option: how a given value is checked, and what is used when none is given. `T` is what a
 * caller may pass, `P` what the check makes of it (the same unless the check normalises it).
 */
export interface OptionSpec<T, P = T> {
  /**
   * Returns the value, checked (possibly normalised); throws a TypeError or RangeError naming the
   * option (`name`) otherwise. Called for every value that is not undefined, and for undefined too
   * when the option is `required`.
   */
  readonly parse: (value: unknown, name: string) => P;
  /** The value `parse` of the definition gives an option that is not given. */
  readonly default?: P;
  /** Carries `T` to the options type; never set. */
  readonly accepts?: (value: T) => void;
  /** The option must be given (the type makes it a required property). */
  readonly required?: true;
}

/** What an option may say besides its check. */
export interface OptionExtras<T> {
  default?: T;
  required?: true;
}

/** A definition's entries: option name to its spec. */
// biome-ignore lint/suspicious/noExplicitAny: any entry, whatever it accepts and gives
export type OptionEntries = Record<string, OptionSpec<any, unknown>>;

/** The options type that entries describe: every key optional unless `required` (each key in one of the two halves). */
export type OptionValues<E> = {
  -readonly [K in keyof E as E[K] extends { required: true } ? never : K]?: E[K] extends { accepts?: (value: infer T) => void } ? T : never;
} & {
  -readonly [K in keyof E as E[K] extends { required: true } ? K : never]-?: E[K] extends { accepts?: (value: infer T) => void }
    ? T
    : never;
};

/** The options type a definition describes (its entries' {@link OptionValues}). */
export type OptionsOf<D> = D extends OptionsDefinition<infer E> ? OptionValues<E> : never;

/** The options after `parse`: checked, with defaults in place of what was not given. */
export type ParsedOptions<E> = {
  [K in keyof E]: E[K] extends { parse: (value: unknown, name: string) => infer P }
    ? E[K] extends { default: unknown } | { required: true }
      ? P
      : P | undefined
    : never;
};

/** A strategy's options, declared once; see the module's documentation. */
export interface OptionsDefinition<E extends OptionEntries> {
  /** The strategy the options belong to (named in the unknown-key error). */
  readonly strategy: string;
  /** The entries, in the order they are checked. */
  readonly keys: E;
  /**
   * Checks `options`: a TypeError for a key the definition does not have (`Unknown option 'x' for the
   * 'pool' allocator; expected one of: ...`), then each entry's check in order. Returns every entry,
   * defaults in place of what was not given.
   */
  parse(options: object): ParsedOptions<E>;
}

/** Declares a strategy's options: `entries` in the order they are checked. */
export function defineOptions<const E extends OptionEntries>(strategy: string, entries: E): OptionsDefinition<E> {
  const names = Object.keys(entries);
  return {
    strategy,
    keys: entries,
    parse(options: object): ParsedOptions<E> {
      checkOptionKeys(options, names, strategy);
      const given = options as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const name of names) {
        const spec = entries[name]!;
        const value = given[name];
        out[name] = value === undefined && spec.required !== true ? spec.default : spec.parse(value, name);
      }
      return out as ParsedOptions<E>;
    },
  };
}

function spec<T, P, X extends OptionExtras<P>>(parse: (value: unknown, name: string) => P, extras?: X): OptionSpec<T, P> & X {
  return { parse, ...(extras as X) };
}

/** A kind whose check is one of ./validate.ts's: the value, once checked, is passed on as given. */
function checkedBy<T, X extends OptionExtras<T>>(check: (value: unknown, name: string) => asserts value is T, extras?: X) {
  return spec<T, T, X>((value, name) => {
    check(value, name);
    return value;
  }, extras);
}

function oneOf<T extends string>(allowed: readonly T[], extras?: OptionExtras<T>): OptionSpec<T> {
  return checkedBy<T, OptionExtras<T>>((value, name): asserts value is T => checkOneOf(value, allowed, name), extras);
}

/** The kinds of option value, each with its check (the messages of ./validate.ts). */
export const option = {
  /** A byte count or other positive integer: an integer in [1, 2^53 - 1]. */
  bytes<X extends OptionExtras<number>>(extras?: X) {
    return checkedBy<number, X>(checkBytes, extras);
  },
  /** An integer in [0, 2^53 - 1] (a device ordinal, a threshold that may be 0). */
  nonNegative<X extends OptionExtras<number>>(extras?: X) {
    return checkedBy<number, X>(checkNonNegative, extras);
  },
  /** true or false. */
  boolean<X extends OptionExtras<boolean>>(extras?: X) {
    return checkedBy<boolean, X>(checkBoolean, extras);
  },
  /** A finite number. */
  number<X extends OptionExtras<number>>(extras?: X) {
    return spec<number, number, X>((value, name) => {
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        const message = `Expected finite number for ${name} but received ${String(value)} of type ${typeof value}`;
        throw typeof value === 'number' ? new RangeError(message) : new TypeError(message);
      }
      return value;
    }, extras);
  },
  /** Any string. */
  text<X extends OptionExtras<string>>(extras?: X) {
    return spec<string, string, X>((value, name) => {
      if (typeof value !== 'string')
        throw new TypeError(`Expected string for ${name} but received ${String(value)} of type ${typeof value}`);
      return value;
    }, extras);
  },
  /** One of a fixed set of strings. */
  oneOf: oneOf as {
    <const T extends string>(allowed: readonly T[], extras: { default: NoInfer<T> }): OptionSpec<T> & { default: T };
    <const T extends string>(allowed: readonly T[]): OptionSpec<T>;
  },
  /** Any other kind: `parse` checks the value; callers pass what it returns. */
  custom<P, X extends OptionExtras<P>>(parse: (value: unknown, name: string) => P, extras?: X) {
    return spec<Exclude<P, undefined>, P, X>(parse, extras);
  },
  /**
   * A native strategy's option (its generated `options.generated.ts`): typed here, with its default,
   * and passed through as given: the native core checks it, once, when the allocator is made (a
   * TypeError or RangeError naming the option, in the wording of the checks above).
   */
  native: ((extras?: OptionExtras<unknown>) => spec<unknown, unknown, OptionExtras<unknown>>((value) => value, extras)) as {
    <T>(extras: { default: NoInfer<T> }): OptionSpec<T> & { default: T };
    <T>(extras: { required: true }): OptionSpec<T> & { required: true };
    <T>(): OptionSpec<T>;
  },
  /** A value that `parse` turns into another form: callers pass a `T`, the strategy gets a `P`. */
  convert<T, P>(parse: (value: unknown, name: string) => P) {
    return spec<T, P, OptionExtras<P>>(parse);
  },
};
