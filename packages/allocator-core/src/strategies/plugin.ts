/**
 * 'plugin': a strategy written in C or C++ and built as a shared library against gpumem's plug-in
 * ABI (native/include/gpumem/plugin.h). Its older name, 'native', is a deprecated alias for one
 * release. The addon loads the library and puts it at the bottom of the
 * same native chain as the built-in strategies, so `limitBytes`, `faultInjection`,
 * `trackingCapacity`, the native benchmark and replay loops all work on it, and gpumem keeps the
 * statistics itself.
 * @module
 */
import { resolve } from 'node:path';
import { cudaDevice, hasCudaDevice, hostDevice, type Device } from '../device.js';
import { type ChainSpec, loadNative } from '../native.js';
import { NativeAllocator, nativeLayerOptions } from '../native-allocator.js';
import { defineOptions, option, type OptionsOf } from '../options.js';
import { checkNonNegative, describeValue } from '../validate.js';

/** A plug-in library's own options, as an object: each becomes `key=value`. */
export type PluginOptionValues = Record<string, string | number | boolean>;

/** @deprecated The old name of {@link PluginOptionValues}; removed in the next release. */
export type NativePluginOptionValues = PluginOptionValues;

/** The library's option string: as given, or built from an object; throws naming the bad entry. */
export function pluginOptionString(options: unknown): string {
  if (options === undefined) return '';
  if (typeof options === 'string') {
    if (options.includes('\0')) throw new TypeError('Expected a string without NUL characters for options');
    return options;
  }
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(
      `Expected a string 'key=value;key=value' or an object of strings, numbers and booleans for options but received ${describeValue(options)}`,
    );
  }
  const pairs: string[] = [];
  for (const [key, value] of Object.entries(options)) {
    if (!/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(key)) {
      throw new TypeError(`Expected option names of letters, digits, '_', '.' and '-' in options but received '${key}'`);
    }
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw new RangeError(`Expected a finite number for options.${key} but received ${String(value)}`);
    } else if (typeof value === 'string') {
      if (/[;\0]/.test(value)) throw new TypeError(`Expected a string without ';' for options.${key} but received ${describeValue(value)}`);
    } else if (typeof value !== 'boolean') {
      throw new TypeError(`Expected a string, number or boolean for options.${key} but received ${describeValue(value)}`);
    }
    pairs.push(`${key}=${String(value)}`);
  }
  return pairs.join(';');
}

/** The library's path, absolute; throws TypeError for anything but a non-empty string. */
export function pluginLibraryPath(library: unknown): string {
  if (typeof library !== 'string' || library.length === 0 || library.includes('\0')) {
    throw new TypeError(
      `Expected a non-empty string (the path of a gpumem plug-in library) for library but received ${describeValue(library)}`,
    );
  }
  return resolve(library);
}

function pluginDevice(device: unknown): Device {
  if (device === undefined) return hasCudaDevice() ? cudaDevice(0) : hostDevice;
  if (device === 'host') return hostDevice;
  if (typeof device === 'string')
    throw new TypeError(`Expected 'host' or a CUDA device ordinal for device but received ${describeValue(device)}`);
  checkNonNegative(device, 'device');
  return cudaDevice(device);
}

const pluginOptions = defineOptions('plugin', {
  /** The plug-in library's path; a relative path is taken from the current directory. */
  library: option.custom(pluginLibraryPath, { required: true }),
  /**
   * The library's own options: a string `key=value;key=value` passed as is, or an object whose
   * entries are joined into one (`{ slab_bytes: 1048576 }` -> `slab_bytes=1048576`).
   */
  options: option.convert<string | PluginOptionValues, string>(pluginOptionString),
  /** Where the memory lives: 'host' or a CUDA device ordinal. Default: CUDA device 0 when there is one, else 'host'. */
  device: option.convert<'host' | number, Device>(pluginDevice),
  ...nativeLayerOptions,
});

/** The 'plugin' strategy's options (from its options definition). */
export interface PluginAllocatorOptions extends OptionsOf<typeof pluginOptions> {}

/** @deprecated The old name of {@link PluginAllocatorOptions}; removed in the next release. */
export type NativeAllocatorOptions = PluginAllocatorOptions;

/**
 * Checks 'plugin' options as its constructor does, making nothing: TypeScript's checks, then the
 * native core's of the library and its options (checkSpec), the library not loaded.
 */
export function checkPluginOptions(options: object): void {
  const { library, options: libraryOptions, device } = pluginOptions.parse(options);
  loadNative().checkSpec({
    strategy: 'plugin',
    device: (device ?? hostDevice).index,
    options: { library, options: libraryOptions ?? '' },
  } as ChainSpec);
}

/** A plug-in library's strategy behind the Allocator interface (`createAllocator('plugin', { library })`). */
export class PluginAllocator extends NativeAllocator {
  /** The library's absolute path. */
  readonly library: string;

  constructor(options: PluginAllocatorOptions) {
    if (options === undefined || options === null || typeof options !== 'object') {
      throw new TypeError(
        `Expected an options object { library, options?, device? } for the 'plugin' allocator but received ${describeValue(options)}`,
      );
    }
    const parsed = pluginOptions.parse(options);
    const { library } = parsed;
    const libraryOptions = parsed.options ?? '';
    const device = parsed.device ?? pluginDevice(undefined);
    super('plugin', device, { strategy: 'plugin', device: device.index, options: { library, options: libraryOptions } }, options);
    this.library = library;
  }
}

// `@alias` tells knip that the second name of one class is meant; in a comment of its own, which
// TypeDoc (which knows no such tag) does not read.
/** @alias */
/** @deprecated The old name of {@link PluginAllocator}; removed in the next release. */
export const NativePluginAllocator = PluginAllocator;
/** @deprecated The old name of {@link PluginAllocator}; removed in the next release. */
export type NativePluginAllocator = PluginAllocator;
