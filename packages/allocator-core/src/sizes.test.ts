import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSize } from './sizes.js';

// The same table the native parser is tested against (native/tests/sizes_test.cpp).
const cases = JSON.parse(readFileSync(new URL('../../../native/tests/size_cases.json', import.meta.url), 'utf8')) as {
  accepted: [string, number][];
  rejected: string[];
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
      "Expected a size (a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024)) for GPUMEM_POOL_MAX_RESERVED but received '4KB'",
    );
  });

  it('rejects a value that is not a string', () => {
    expect(() => parseSize(12 as unknown as string, 'limitBytes')).toThrow(/for limitBytes but received 12 of type number/);
  });
});
