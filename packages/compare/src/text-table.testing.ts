/**
 * Tests' reader of the terminal tables (text-table.ts's formatTable, which the CLI prints): the header and
 * the rows' cells, cut at the columns the rule line marks, with the blocks of a table wrapped to fit
 * the terminal joined back into one row per name. Not built into the package (see tsconfig.json).
 */

/** A table as read: its header, its rows by their first cell, and the lines after it. */
export interface ReadTable {
  header: string[];
  rows: Map<string, string[]>;
  /** The lines after the table's last block. */
  after: string[];
}

const ruleLine = /^-+( {2}-+)*$/;

/** The [start, end) spans of the rule line's dashes. */
function spans(rule: string): [number, number][] {
  return [...rule.matchAll(/-+/g)].map((m) => [m.index!, m.index! + m[0].length]);
}

function cut(line: string, columns: [number, number][]): string[] {
  return columns.map(([start, end], i) => line.slice(start, i === columns.length - 1 ? undefined : end).trim());
}

/** Reads the first table in `text` (a rule line under a header line), all its blocks. */
export function readTable(text: string): ReadTable {
  const lines = text.split('\n');
  let k = lines.findIndex((l) => ruleLine.test(l));
  if (k < 1) throw new Error(`no table in:\n${text}`);
  const header: string[] = [];
  const rows = new Map<string, string[]>();
  for (let block = 0; ; block++) {
    const columns = spans(lines[k]!);
    const names = cut(lines[k - 1]!, columns);
    header.push(...(block === 0 ? names : names.slice(1)));
    k++;
    for (; k < lines.length && lines[k]!.trim() !== '' && !/^[*=] /.test(lines[k]!) && !lines[k]!.startsWith('  '); k++) {
      const cells = cut(lines[k]!, columns);
      const row = rows.get(cells[0]!);
      if (block === 0 || row === undefined) rows.set(cells[0]!, cells);
      else row.push(...cells.slice(1));
    }
    // another block: a blank line, a header, a rule
    if (lines[k] === '' && k + 2 < lines.length && ruleLine.test(lines[k + 2]!)) {
      k += 2;
      continue;
    }
    return { header, rows, after: lines.slice(k) };
  }
}
