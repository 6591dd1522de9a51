import { describe, expect, it } from 'vitest';
import { checkBytes, checkOneOf, checkOptionKeys, describeValue, formatBytes } from './index.js';

describe('argument checks', () => {
  it('say what was expected, for which argument, and what was received', () => {
    expect(() => checkBytes(-1)).toThrow('Expected positive integer for bytes but received -1 of type number');
    expect(() => checkBytes('8', 'size')).toThrow("Expected positive integer for size but received '8' of type string");
    expect(() => checkBytes(2 ** 53)).toThrow(RangeError);
    expect(() => checkBytes(null)).toThrow(TypeError);
    expect(() => checkOneOf('gpu', ['device', 'host'], 'to')).toThrow(
      "Expected one of 'device', 'host' for to but received 'gpu' of type string",
    );
    expect(() => checkOptionKeys({ x: 1 }, ['y'], 'demo')).toThrow("Unknown option 'x' for the 'demo' allocator; expected one of: y");
    expect(() => checkBytes(2 ** 53 - 1)).not.toThrow();
  });

  it('formats byte counts for people', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(2 * 2 ** 20)).toBe('2.00 MiB');
    expect(formatBytes(1.5 * 2 ** 30)).toBe('1.50 GiB');
  });
});

describe('describeValue', () => {
  it('clips a long string to 80 characters and gives its length; names arrays, functions and objects by kind', () => {
    const long = 'x'.repeat(100_000);
    expect(describeValue(long)).toBe(`'${'x'.repeat(80)}…' (100000 characters) of type string`);
    expect(describeValue('8GiB')).toBe("'8GiB' of type string");
    expect(describeValue(-1)).toBe('-1 of type number');
    expect(describeValue(2n)).toBe('2n of type bigint');
    expect(describeValue(null)).toBe('null');
    expect(describeValue([1])).toBe('an array');
    expect(describeValue(() => 'source text')).toBe('a function');
    expect(describeValue(new Map())).toBe('an object ([object Map])');
  });

  it('keeps a 100 KB value out of a check message', () => {
    expect(() => checkBytes('y'.repeat(100_000))).toThrow(
      /^Expected positive integer for bytes but received 'y{80}…' \(100000 characters\) of type string$/,
    );
  });
});
