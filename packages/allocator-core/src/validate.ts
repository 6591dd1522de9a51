/**
 * Argument checks, done in JavaScript before any native call, with messages of one form:
 * `Expected positive integer for bytes but received -1 of type number`.
 * @module
 */

/** The most characters of a string a message shows: a 100 KB value must not fill a terminal. */
const shownChars = 80;

/**
 * `value` as an error message shows it after "but received": a string quoted and clipped to 80
 * characters (with its length), a number with its type, arrays, objects and functions by kind.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > shownChars ? `${value.slice(0, shownChars)}…' (${value.length} characters)` : `${value}'`;
    return `'${shown} of type string`;
  }
  if (typeof value === 'bigint') return `${value}n of type bigint`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object') return `an object (${Object.prototype.toString.call(value)})`;
  return `${String(value)} of type ${typeof value}`;
}

/** Throws TypeError for a non-number, RangeError for a number out of range. */
function fail(expected: string, name: string, value: unknown): never {
  const message = `Expected ${expected} for ${name} but received ${describeValue(value)}`;
  if (typeof value !== 'number') throw new TypeError(message);
  throw new RangeError(message);
}

/** A byte count: an integer in [1, 2^53 - 1]. */
export function checkBytes(value: unknown, name = 'bytes'): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) fail('positive integer', name, value);
}

/** An integer in [0, 2^53 - 1]. */
export function checkNonNegative(value: unknown, name: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) fail('non-negative integer', name, value);
}

/** A pointer as handed out by an allocator: a positive safe integer. */
export function checkPointer(value: unknown, name = 'ptr'): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) fail('a pointer (positive integer)', name, value);
}

/** A boolean option. */
export function checkBoolean(value: unknown, name: string): asserts value is boolean {
  if (typeof value !== 'boolean') throw new TypeError(`Expected boolean for ${name} but received ${describeValue(value)}`);
}

/** One of a fixed set of strings. */
export function checkOneOf<T extends string>(value: unknown, allowed: readonly T[], name: string): asserts value is T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    const list = allowed.map((a) => `'${a}'`).join(', ');
    throw new TypeError(`Expected one of ${list} for ${name} but received ${describeValue(value)}`);
  }
}

/** Rejects option keys a strategy does not know, so typos do not pass silently. */
export function checkOptionKeys(options: object, allowed: readonly string[], strategy: string): void {
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`Unknown option '${key}' for the '${strategy}' allocator; expected one of: ${allowed.join(', ')}`);
    }
  }
}
