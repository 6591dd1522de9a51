import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSize, sizeForms } from './sizes.js';

// The same table the native parser is tested against (native/tests/sizes_test.cpp).
const cases = JSON.parse(readFileSync(new URL('../../../native/tests/size_cases.json', import.meta.url), 'utf8')) as {
  accepted: [string, number][];
  rejected: string[];
  hints: [string, string][];
  noHint: string[];
};

describe('parseSize: one set of size forms, as in C++', () => {
  it.each(cases.accepted)('accepts %j as %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(cases.rejected.map((t) => [t]))('rejects %j', (text) => {
    expect(() => parseSize(text)).toThrow(RangeError);
  });

  it('names the value, the option and the accepted forms, in the native wording', () => {
    expect(() => parseSize('4KB', 'GPUMEM_POOL_MAX_RESERVED')).toThrow(
      "Expected a size (a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024; with a unit, a decimal fraction such as 16.5GiB, rounded down to whole bytes)) for GPUMEM_POOL_MAX_RESERVED but received '4KB'; did you mean '4KiB'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted",
    );
  });

  it.each(cases.hints)('refuses %j, naming %j in the message', (text, binary) => {
    expect(() => parseSize(text, 'limitBytes')).toThrow(
      new RangeError(
        `Expected a size (${sizeForms}) for limitBytes but received '${text}'; did you mean '${binary}'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted`,
      ),
    );
    expect(parseSize(binary)).toBeGreaterThan(0);
  });

  it.each(cases.noHint.map((t) => [t]))('refuses %j without suggesting a spelling', (text) => {
    expect(() => parseSize(text)).toThrow(RangeError);
    expect(() => parseSize(text)).not.toThrow(/did you mean/);
  });

  it('rounds a fraction down to whole bytes, exactly (no floating point on the way)', () => {
    expect(parseSize('0.1KiB')).toBe(102); // 102.4
    expect(parseSize('0.2999999999999999999KiB')).toBe(307); // 307.19..., where a double would give 0.3
    expect(parseSize('16.5GiB')).toBe(16.5 * 2 ** 30);
    expect(parseSize('0.5 GiB')).toBe(2 ** 29);
  });

  it('rejects a value that is not a string', () => {
    expect(() => parseSize(12 as unknown as string, 'limitBytes')).toThrow(/for limitBytes but received 12 of type number/);
  });
});
