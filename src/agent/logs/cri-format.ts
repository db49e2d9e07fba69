// The CRI log format: each record is one line "<RFC3339Nano> <stdout|stderr> <F|P>[:tags] <text>";
// a P (partial) record continues in the next record, and the F record ends the logical line.

export interface CriLogRecord {
  /** The timestamp exactly as written (RFC 3339 with nanoseconds). */
  time: string;
  stream: "stdout" | "stderr";
  /** True for a P record: the line continues in the next record. */
  partial: boolean;
  text: string;
}

const recordRe = /^(\S+) (stdout|stderr) ([FP])(?::\S*)?(?: (.*))?$/s;

/** Parses one record (without its trailing newline); undefined when it is not CRI format. */
export function parseCriLine(line: string): CriLogRecord | undefined {
  const m = recordRe.exec(line);
  if (!m) return undefined;
  const [, time = "", stream, tag, text = ""] = m;
  return { time, stream: stream === "stderr" ? "stderr" : "stdout", partial: tag === "P", text };
}

/** Turns CRI records into output lines, joining partial records. */
export class CriDecoder {
  private rest = "";
  private partial = "";
  private partialTime: string | undefined;
  private readonly utf8 = new TextDecoder();

  /** `since`: lines written before this time (ms) are left out, as `logs --since`. */
  constructor(
    private readonly timestamps: boolean,
    private readonly since?: number,
  ) {}

  /** Complete logical lines (each ending in "\n") found in the next bytes of the log. */
  push(bytes: Uint8Array): string[] {
    const records = (this.rest + this.utf8.decode(bytes, { stream: true })).split("\n");
    this.rest = records.pop() ?? "";
    const out: string[] = [];
    for (const raw of records) {
      const rec = parseCriLine(raw);
      if (rec === undefined) {
        out.push(`${raw}\n`);
        continue;
      }
      this.partialTime ??= rec.time;
      this.partial += rec.text;
      if (rec.partial) continue;
      if (!this.before(this.partialTime)) out.push(this.line(`${this.partial}\n`));
      this.partial = "";
      this.partialTime = undefined;
    }
    return out;
  }

  /** What is left at the end of the log: a partial line, printed without a newline. */
  flush(): string | undefined {
    const rec = this.rest === "" ? undefined : parseCriLine(this.rest);
    const text = this.partial + (rec?.text ?? this.rest);
    this.partialTime ??= rec?.time;
    return text === "" || this.before(this.partialTime) ? undefined : this.line(text);
  }

  private before(time: string | undefined): boolean {
    return this.since !== undefined && time !== undefined && Date.parse(time) < this.since;
  }

  private line(text: string): string {
    return this.timestamps && this.partialTime !== undefined ? `${this.partialTime} ${text}` : text;
  }
}
