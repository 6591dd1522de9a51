/**
 * What every copy of @gpumem/allocator-core loaded in one process shares. A plug-in installed in a
 * folder of its own brings its own copy of the core; its strategies must still land in the
 * application's registry, its errors and the application's streams must pass each other's
 * `instanceof` checks, and the native addon must be loaded once. Each piece of shared state lives on
 * `globalThis` under a `Symbol.for('gpumem.NAME')` key together with the version of its shape: a copy
 * of the same version joins it, a copy of another version fails at import, naming both copies.
 * @module
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** One copy of the core: where it is installed and its package version. */
interface CoreCopy {
  readonly path: string;
  readonly version: string;
}

/** This copy: the folder holding its package.json, and the version there ('unknown' if unreadable). */
const thisCopy: CoreCopy = (() => {
  const manifest = new URL('../package.json', import.meta.url);
  let version = 'unknown';
  try {
    version = String((JSON.parse(readFileSync(manifest, 'utf8')) as { version?: unknown }).version ?? 'unknown');
  } catch {
    // a bundled or relocated copy: the path alone still tells the copies apart
  }
  return Object.freeze({ path: fileURLToPath(new URL('.', manifest)), version });
})();

interface Slot {
  readonly version: number;
  readonly owner: CoreCopy;
  readonly value: unknown;
}

function isSlot(value: unknown): value is Slot {
  if (value === null || typeof value !== 'object') return false;
  const s = value as Partial<Slot>;
  return typeof s.version === 'number' && typeof s.owner === 'object' && s.owner !== null && 'value' in s;
}

/**
 * Two copies of the core whose shared state has different shapes are loaded in one process
 * (`code` 'GPUMEM_INCOMPATIBLE_CORE').
 */
class IncompatibleCoreError extends Error {
  override readonly name = 'IncompatibleCoreError';
  readonly code = 'GPUMEM_INCOMPATIBLE_CORE';
  constructor(
    /** What the copies could not share, e.g. 'allocator-registry'. */
    readonly shared: string,
    /** The copy loaded first, and the version of its state ('unversioned' for a core older than versioning). */
    readonly loaded: CoreCopy & { stateVersion: number | 'unversioned' },
    /** The copy that failed to join it. */
    readonly joining: CoreCopy & { stateVersion: number },
  ) {
    super(
      `Two incompatible copies of @gpumem/allocator-core are loaded in this process: ` +
        `${loaded.version} at ${loaded.path} (${shared} version ${loaded.stateVersion}), loaded first, and ` +
        `${joining.version} at ${joining.path} (${shared} version ${joining.stateVersion}). ` +
        'They cannot share one registry. Install versions of the core that agree: a plug-in takes ' +
        '@gpumem/allocator-core as a peerDependency, so that it uses the copy of the application that loads it.',
    );
  }
}

/**
 * The process's state `name` in version `version`: made by `create` for the first copy of the core
 * that asks, the same object for every later copy of that version. Throws {@link IncompatibleCoreError}
 * when a copy of another version made it.
 */
export function processShared<T extends object>(name: string, version: number, create: () => T): T {
  const key = Symbol.for(`gpumem.${name}`);
  const scope = globalThis as unknown as Record<symbol, unknown>;
  const existing = scope[key];
  if (existing === undefined) {
    const slot: Slot = Object.freeze({ version, owner: thisCopy, value: create() });
    Object.defineProperty(globalThis, key, { value: slot, enumerable: false, writable: false, configurable: true });
    return slot.value as T;
  }
  if (!isSlot(existing)) {
    // A copy from before shared state was versioned kept the bare value under this key.
    throw new IncompatibleCoreError(
      name,
      { path: 'an unknown place', version: 'a version from before shared state was versioned', stateVersion: 'unversioned' },
      { ...thisCopy, stateVersion: version },
    );
  }
  if (existing.version !== version) {
    throw new IncompatibleCoreError(name, { ...existing.owner, stateVersion: existing.version }, { ...thisCopy, stateVersion: version });
  }
  return existing.value as T;
}

const classBrand = Symbol.for('gpumem.class');

/**
 * Makes `value instanceof cls` true for an instance of the same class from any copy of the core of
 * the same `version` (an error thrown by a plug-in's copy, a Stream made by the application's), as
 * well as for its own instances. The check is by a brand on the prototype, so subclasses of either
 * copy's class count too; `instanceof` a subclass stays the ordinary check.
 */
export function shareClass(cls: { readonly prototype: object }, name: string, version: number): void {
  const brand = `${name}@${version}`;
  Object.defineProperty(cls.prototype, classBrand, { value: brand, enumerable: false });
  const ordinary = Function.prototype[Symbol.hasInstance];
  Object.defineProperty(cls, Symbol.hasInstance, {
    value(this: unknown, value: unknown): boolean {
      if (ordinary.call(this, value)) return true;
      return this === cls && value !== null && typeof value === 'object' && (value as { [classBrand]?: unknown })[classBrand] === brand;
    },
  });
}
