import { describe, expect, it } from 'vitest';
import { formatTable } from './text-table.js';
import { readTable } from './text-table.testing.js';

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

  it('reads back as it was written, the blocks of a wrapped table joined into one row per name', () => {
    const header = ['allocator', 'first column', 'second column', 'third column'];
    const rows = [
      ['pool', 'x'.repeat(12), '1.00 MiB', 'z'.repeat(12)],
      ['async:releaseThreshold=0', '-', '12.50 GiB', 'zz'],
    ];
    // notes under a table are indented (or start with a mark), as the commands print them
    const text = `${formatTable(header, rows, 45)}\n  note under the table`;
    const read = readTable(text);
    expect(read.header).toEqual(header);
    expect([...read.rows.values()]).toEqual(rows);
    expect(read.after).toEqual(['  note under the table']);
  });
});
