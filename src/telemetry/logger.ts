/**
 * The pino logger factory. One JSON logger per process (or per test, writing to a
 * stream the test reads back); every component gets a child with its own bindings.
 */

import { type DestinationStream, type Logger, pino } from "pino";
import type { LogLevel } from "../config/types.js";

export type { Logger };

export interface LoggerOptions {
  readonly level: LogLevel;
  /** Where JSON lines go; default stdout. */
  readonly destination?: DestinationStream;
  /** Extra fields on every record (e.g. `{ service: "kvrouter" }`). */
  readonly base?: Record<string, unknown>;
}

/** A pino logger writing one JSON object per line; `msg` carries the text. */
export function createLogger(options: LoggerOptions): Logger {
  const config = {
    level: options.level,
    base: { service: "kvrouter", ...options.base },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return options.destination === undefined ? pino(config) : pino(config, options.destination);
}
