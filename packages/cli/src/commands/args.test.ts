import { describe, expect, it } from 'vitest';
import { closestName } from './args.js';

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
