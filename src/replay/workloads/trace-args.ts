/**
 * The command-line pieces `kvrouter trace gen` and `kvrouter trace spread` share: one usage
 * error, node's `parseArgs` with its errors turned into it, and the run that answers
 * `--help` and a bad command line with the subcommand's usage text.
 */

import { parseArgs } from "node:util";

/** A bad `kvrouter trace` command line; the message names the flag. */
export class TraceUsageError extends Error {
  override name = "TraceUsageError";
}

export interface TraceArgs {
  /** Each flag's string as given, and `help`. */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly positionals: readonly string[];
}

/** `argv` with the given string-valued flags and `--help`/`-h` (strict); `TraceUsageError`. */
export function parseTraceArgs(argv: readonly string[], flags: readonly string[]): TraceArgs {
  try {
    const parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        ...Object.fromEntries(flags.map((f) => [f, { type: "string" as const }])),
        help: { type: "boolean", short: "h" },
      },
    });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (err) {
    throw new TraceUsageError((err as Error).message);
  }
}

/**
 * Parses with `parse` (null: `--help`, answered with `usage` on stdout), answers a
 * `TraceUsageError` with the message and `usage` on stderr (exit code 2), else runs.
 */
export async function runTraceCommand<T>(
  parse: () => T | null,
  usage: string,
  run: (o: T) => number | Promise<number>,
): Promise<number> {
  let o: T | null;
  try {
    o = parse();
  } catch (err) {
    if (!(err instanceof TraceUsageError)) throw err;
    process.stderr.write(`kvrouter trace: ${err.message}\n\n${usage}`);
    return 2;
  }
  if (o === null) {
    process.stdout.write(usage);
    return 0;
  }
  return run(o);
}
