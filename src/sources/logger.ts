/**
 * The logging surface the sources need. A structural subset of pino's `Logger`, so a
 * pino instance can be passed as is, while `src/sources` never imports pino (the
 * telemetry layer owns the logger factory). Tests pass a recording logger.
 */

/** A pino-style log method: a context object first, then a message. */
export type LogFn = (obj: Record<string, unknown>, msg?: string) => void;

/** What a source logs through. A pino `Logger` satisfies it. */
export interface SourceLogger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

const ignore: LogFn = () => {};

/** A logger that drops everything (the default when none is given). */
export const noopLogger: SourceLogger = Object.freeze({
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
});
