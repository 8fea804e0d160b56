/**
 * The logging surface the I/O layers (ingest, transport, engine) need. A structural subset
 * of pino's `Logger`, so a pino instance can be passed as is, while they never import pino (the
 * telemetry layer owns the logger factory). Tests pass a recording logger.
 */

/** A pino-style log method: a context object first, then a message. */
export type LogFn = (obj: Record<string, unknown>, msg?: string) => void;

/** What a source logs through. A pino `Logger` satisfies it. */
export interface LogSink {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
}

const ignore: LogFn = () => {};

/** A logger that drops everything (the default when none is given). */
export const noopLogger: LogSink = Object.freeze({
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
});
