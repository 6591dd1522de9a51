/**
 * Fixed-width tables for the terminal: a header, a rule under it, one line per row, figures
 * right-aligned; a table wider than the terminal is split into blocks that repeat its first column.
 * The comparison's and the replay's tables are drawn with it.
 * @module
 */

/** Terminal width a table keeps within; a wider one is split into blocks that repeat its first column. */
const tableWidth = 120;

/** A cell that holds a figure: a number, a size, a time, a share, a count pair (`12 / 3`), or '-' for none. */
function isNumericCell(cell: string): boolean {
  return cell === '-' || /^[<>]?\s?[-+]?[0-9][0-9.,]*/.test(cell);
}

/**
 * A fixed-width table with a header rule. Columns of figures (every cell a number, a size or '-')
 * are right-aligned, the others left-aligned. A table wider than `maxWidth` is split into blocks of
 * columns, each repeating the first (the row's name), one under the other.
 */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], maxWidth = tableWidth): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const right = header.map(
    (_, i) => i > 0 && rows.some((r) => (r[i] ?? '') !== '' && r[i] !== '-') && rows.every((r) => isNumericCell(r[i] ?? '-')),
  );
  const pad = (c: string, i: number) => (right[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!));
  const blocks: number[][] = [];
  let block: number[] = [0];
  let used = widths[0]!;
  for (let i = 1; i < header.length; i++) {
    if (block.length > 1 && used + 2 + widths[i]! > maxWidth) {
      blocks.push(block);
      block = [0];
      used = widths[0]!;
    }
    block.push(i);
    used += 2 + widths[i]!;
  }
  blocks.push(block);
  const render = (columns: number[]) => {
    const line = (cells: readonly string[]) =>
      columns
        .map((i) => pad(cells[i] ?? '', i))
        .join('  ')
        .trimEnd();
    return [line(header), columns.map((i) => '-'.repeat(widths[i]!)).join('  '), ...rows.map(line)].join('\n');
  };
  return blocks.map(render).join('\n\n');
}
