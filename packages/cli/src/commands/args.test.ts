import { describe, expect, it } from 'vitest';
import { closestName, parseFlags, UsageError } from './args.js';

describe('closestName', () => {
  it('finds a slip (a letter off, two swapped, a prefix) and nothing for an unrelated word', () => {
    const flags = ['allocators', 'repeat', 'report', 'json', 'nodes', 'model'];
    expect(closestName('alocators', flags)).toBe('allocators');
    expect(closestName('nodez', flags)).toBe('nodes');
    expect(closestName('rpeort', flags)).toBe('report');
    expect(closestName('mod', flags)).toBe('model');
    expect(closestName('frobnicate', flags)).toBeUndefined();
    expect(closestName('pol', ['cuda', 'host', 'pool', 'async'])).toBe('pool');
  });
});

describe('numeric flags', () => {
  const specs = { epochs: { type: 'int', help: 'epochs', min: 1 }, lr: { type: 'number', help: 'rate' } } as const;
  const parse = (flag: string, value: string) => parseFlags([`--${flag}`, value], specs, 'train')[flag];

  it('take decimal digits, underscores between them, a fraction and an exponent', () => {
    expect(parse('epochs', '16')).toBe(16);
    expect(parse('epochs', '1_000')).toBe(1000);
    expect(parse('epochs', '2e6')).toBe(2e6);
    expect(parse('lr', '0.01')).toBe(0.01);
    expect(parse('lr', '.5')).toBe(0.5);
    expect(parse('lr', '-1.5e-3')).toBe(-1.5e-3);
  });

  it('refuse hexadecimal, octal and binary forms, spaces, and stray underscores', () => {
    for (const raw of ['0x10', '0o17', '0b101', ' 8', '8 ', '1 000', '', '_1', '1_', '1__0', 'Infinity', '1e', '.']) {
      expect(() => parse('epochs', raw), raw).toThrow(UsageError);
      expect(() => parse('epochs', raw), raw).toThrow(/'--epochs' must be an integer/);
    }
    expect(() => parse('lr', '0x1')).toThrow(/'--lr' must be a number \(received '0x1'\)/);
    expect(() => parse('epochs', '1.5')).toThrow(/must be an integer/);
  });
});
