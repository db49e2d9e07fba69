// Go's text/tabwriter alignment, which kubectl's tables and describe output go through: cells
// end with "\t"; a column is as wide as its widest cell plus padding within each block of
// consecutive lines that have that column; the last cell of a line is not padded.

export interface TabwriterOptions {
  minWidth: number;
  padding: number;
}

/** kubectl get: printers.GetNewTabWriter (minwidth 6, padding 3). */
export const TABLE: TabwriterOptions = { minWidth: 6, padding: 3 };
/** kubectl describe: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0). */
export const DESCRIBE: TabwriterOptions = { minWidth: 0, padding: 2 };

/** Aligns `text` (lines of tab-terminated cells) as Go's tabwriter does. */
export function alignTabs(text: string, opts: TabwriterOptions): string {
  const trailingNewline = text.endsWith("\n");
  const lines = (trailingNewline ? text.slice(0, -1) : text).split("\n").map((l) => l.split("\t"));
  const out: string[] = [];
  const widths: number[] = [];

  const writeLines = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const cells = lines[i] ?? [];
      out.push(
        cells
          .map((c, j) => {
            const w = widths[j];
            return w === undefined || j === cells.length - 1 ? c : c.padEnd(w);
          })
          .join(""),
      );
    }
  };

  // Go's Writer.format: recursive over columns, one block of lines per column.
  const format = (line0: number, line1: number) => {
    const column = widths.length;
    let start = line0;
    for (let i = line0; i < line1; i++) {
      if (column >= (lines[i]?.length ?? 0) - 1) continue;
      writeLines(start, i);
      start = i;
      let width = opts.minWidth;
      for (; i < line1; i++) {
        const cells = lines[i] ?? [];
        if (column >= cells.length - 1) break;
        width = Math.max(width, (cells[column] ?? "").length + opts.padding);
      }
      widths.push(width);
      format(start, i);
      widths.pop();
      start = i;
      i--;
    }
    writeLines(start, line1);
  };

  format(0, lines.length);
  return out.join("\n") + (trailingNewline ? "\n" : "");
}
