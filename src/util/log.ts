/**
 * Structured logging: one line per record, `time level msg key=value ...` on stderr, or JSON
 * lines when format is "json". Loggers are created and passed in; there is no global logger.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** A logger that adds `fields` to every record. */
  with(fields: Record<string, unknown>): Logger;
}

export interface LoggerOptions {
  level?: LogLevel;
  format?: "text" | "json";
  write?: (line: string) => void;
  now?: () => number;
}

function formatValue(v: unknown): string {
  if (v instanceof Error) return JSON.stringify(v.message);
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s !== undefined && /^[\w./:@-]+$/.test(s) ? s : JSON.stringify(s ?? String(v));
}

export function createLogger(opts: LoggerOptions = {}, base: Record<string, unknown> = {}): Logger {
  const min = order[opts.level ?? "info"];
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = opts.now ?? Date.now;
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (order[level] < min) return;
    const all = { ...base, ...fields };
    const time = new Date(now()).toISOString();
    if (opts.format === "json") {
      const plain = Object.fromEntries(
        Object.entries(all).map(([k, v]) => [k, v instanceof Error ? v.message : v]),
      );
      write(JSON.stringify({ time, level, msg, ...plain }));
      return;
    }
    const kv = Object.entries(all)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${formatValue(v)}`)
      .join(" ");
    write(`${time} ${level.toUpperCase().padEnd(5)} ${msg}${kv ? ` ${kv}` : ""}`);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    with: (fields) => createLogger(opts, { ...base, ...fields }),
  };
}

/** A logger that drops everything (tests). */
export const nullLogger: Logger = createLogger({ write: () => {} });
