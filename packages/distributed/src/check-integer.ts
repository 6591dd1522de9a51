/**
 * The integer check of the communicators' options (host and NCCL); its messages read
 * `Expected an integer in [0, 3] for rank but received 4`.
 * @module
 */

/** Throws TypeError for a non-number, RangeError for a number that is not a safe integer in [min, max] (max may be Infinity). */
export function checkInteger(value: unknown, name: string, min: number, max: number): asserts value is number {
  const expected = max === Infinity ? `an integer >= ${min}` : `an integer in [${min}, ${max}]`;
  if (typeof value !== 'number')
    throw new TypeError(`Expected ${expected} for ${name} but received ${String(value)} of type ${typeof value}`);
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new RangeError(`Expected ${expected} for ${name} but received ${value}`);
}
