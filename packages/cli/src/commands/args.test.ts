import { describe, expect, it } from 'vitest';
import { closestName, formatTable } from './args.js';

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

describe('formatTable', () => {
  it('right-aligns columns of figures and left-aligns the others', () => {
    const table = formatTable(
      ['name', 'kind', 'bytes'],
      [
        ['a', 'ok', '1.00 MiB'],
        ['bb', 'failed', '-'],
        ['c', 'ok', '12.50 GiB'],
      ],
    );
    expect(table.split('\n')).toEqual([
      'name  kind        bytes',
      '----  ------  ---------',
      'a     ok       1.00 MiB',
      'bb    failed          -',
      'c     ok      12.50 GiB',
    ]);
  });

  it('splits a table wider than the limit into blocks that repeat the first column', () => {
    const header = ['allocator', 'first column', 'second column', 'third column'];
    const table = formatTable(header, [['pool', 'x'.repeat(12), 'y'.repeat(13), 'z'.repeat(12)]], 45);
    const blocks = table.split('\n\n');
    expect(blocks).toHaveLength(2);
    expect(blocks[0]!.split('\n')[0]).toBe('allocator  first column  second column');
    expect(blocks[1]!.split('\n')[0]).toBe('allocator  third column');
    for (const line of table.split('\n')) expect(line.length).toBeLessThanOrEqual(45);
  });
});
