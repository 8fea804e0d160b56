/**
 * The replay's tail-report flags (`--tail-report --tail-factor X --tail-policy P
 * --tail-requests FILE`), parsed apart from the rest of `options.ts` (FILE checked for
 * writability here); the report they drive is `tail-report.ts`.
 */

import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { TailOptions } from "./tail-report.js";

export const TAIL_USAGE = `  --tail-report             after the table, for each --tail-policy: the goal line
                            (--tail-factor × the reference's p99; implies --reference),
                            how many requests the p99 allows above it, how many are
                            above, how many no router could bring under it (forced: own
                            prefill with the longest prefix any earlier request left,
                            after the earliest that request can be computed; overlap:
                            more would have to be in prefill at once than there are
                            workers), the p99 floor no router's p99 goes below (in the
                            replay's model: whole-prompt prefill, FIFO, one at a time
                            per worker), and why the others are above (docs/replay.md,
                            "Where the p99 tail comes from"); with --json, in each
                            run's "tail"
  --tail-factor X           the goal line as a multiple of the reference's p99 (default 2)
  --tail-policy P           a policy the tail report covers; repeatable (default kv, or
                            every policy run when kv is not)
  --tail-requests FILE      also write the requests above the line, one JSON object a
                            line (policy, trace index, cause, worker, tokens, times)
`;

export const TAIL_FLAGS = {
  "tail-report": { type: "boolean" },
  "tail-factor": { type: "string" },
  "tail-policy": { type: "string", multiple: true },
  "tail-requests": { type: "string" },
} as const;

/** Parses the flags against the policies run; an error message naming the flag, or the options (null: off). */
export function parseTailFlags(
  v: {
    readonly "tail-report"?: boolean;
    readonly "tail-factor"?: string;
    readonly "tail-policy"?: string[];
    readonly "tail-requests"?: string;
  },
  policies: readonly string[],
): TailOptions | null | string {
  if (v["tail-report"] !== true) {
    if (
      v["tail-factor"] !== undefined ||
      v["tail-policy"] !== undefined ||
      v["tail-requests"] !== undefined
    ) {
      return "--tail-factor, --tail-policy and --tail-requests need --tail-report";
    }
    return null;
  }
  const f = v["tail-factor"];
  const factor = f === undefined ? 2 : Number(f);
  if (f !== undefined && (f.trim() === "" || !Number.isFinite(factor) || factor <= 0)) {
    return `--tail-factor must be a number > 0, got '${f}'`;
  }
  const asked = v["tail-policy"] ?? [];
  for (const p of asked) {
    if (!policies.includes(p)) {
      return `--tail-policy: '${p}' is not among the policies run (${policies.join(", ")})`;
    }
  }
  const chosen =
    asked.length > 0 ? [...new Set(asked)] : policies.includes("kv") ? ["kv"] : [...policies];
  const file = v["tail-requests"] ?? null;
  if (file !== null) {
    const why = file.trim() === "" ? "no file name" : unwritable(file);
    if (why !== null) return `--tail-requests: cannot write '${file}': ${why}`;
  }
  return { factor, policies: chosen, requestsFile: file };
}

/**
 * Why `file` cannot be written, or null when it looks writable: checked before the run,
 * so a typo does not cost a whole replay (the write itself can still fail; the caller
 * reports that and keeps the rest of the output).
 */
export function unwritable(file: string): string | null {
  const path = resolve(file);
  try {
    if (existsSync(path)) {
      if (statSync(path).isDirectory()) return "it is a directory";
      accessSync(path, constants.W_OK);
      return null;
    }
    const dir = dirname(path);
    if (!existsSync(dir)) return `directory ${dir} does not exist`;
    if (!statSync(dir).isDirectory()) return `${dir} is not a directory`;
    accessSync(dir, constants.W_OK);
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
}
