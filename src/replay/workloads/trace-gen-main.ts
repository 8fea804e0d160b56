/**
 * `kvrouter trace gen KIND`: write a synthetic workload in the Mooncake JSONL format
 * (stdout or `--out FILE`). Flags map one to one onto `WorkloadParams`; every kind has its
 * own defaults (docs/replay.md, "Workloads").
 */

import { writeFileSync } from "node:fs";
import {
  defaultParams,
  generateWorkload,
  isWorkloadKind,
  toJsonl,
  WORKLOAD_KINDS,
  type WorkloadParams,
} from "./generators.js";
import { parseTraceArgs, runTraceCommand, TraceUsageError } from "./trace-args.js";
import { parseSpreadArgs, runSpread, SPREAD_USAGE } from "./trace-spread-main.js";

export const TRACE_USAGE = `usage: kvrouter trace gen KIND [options] [--out FILE]

Writes a synthetic request trace in the Mooncake JSONL format (timestamp ms, input_length,
output_length, hash_ids of 512-token blocks), deterministic for a seed.

KIND: ${WORKLOAD_KINDS.join(" | ")}

  --requests N            requests in the trace (default 2000)
  --rate R                mean requests per second (default: 2; hot-prefix 1)
  --seed S                seed (default 1)
  --prompts K             shared system prompts / agents / hot prompts
  --system-tokens T       mean system-prompt length (hot-prefix: exact)
  --user-tokens T         mean question / sibling-suffix length
  --output-tokens T       mean output length
  --zipf S                chat: Zipf exponent of system-prompt popularity (default 1.1)
  --turns N               chat: mean turns per session; agentic: mean steps per task
  --think-seconds X       chat: mean think time; agentic: mean time between steps
  --tool-tokens T         agentic: mean tool result appended per step (default 1200)
  --fanout-probability P  agentic: chance that a step bursts into siblings (default 0.2)
  --fanout-max N          agentic: most siblings per burst (default 6)
  --cold-fraction F       hot-prefix: share of requests with a unique prompt (default 0)
  --out FILE              write here instead of stdout

kvrouter trace spread FILE: spread a trace's quantised arrivals (--help for options).
`;

const FLAGS: Record<string, keyof WorkloadParams> = {
  requests: "requests",
  rate: "rate",
  seed: "seed",
  prompts: "prompts",
  "system-tokens": "systemTokens",
  "user-tokens": "userTokens",
  "output-tokens": "outputTokens",
  zipf: "zipf",
  turns: "turns",
  "think-seconds": "thinkSeconds",
  "tool-tokens": "toolTokens",
  "fanout-probability": "fanoutProbability",
  "fanout-max": "fanoutMax",
  "cold-fraction": "coldFraction",
};
const INTEGER = new Set(["requests", "seed", "prompts", "fanout-max"]);
const FRACTION = new Set(["fanout-probability", "cold-fraction"]);

/** Parse `gen KIND …`; null for --help. */
export function parseTraceGenArgs(
  argv: readonly string[],
): { kind: (typeof WORKLOAD_KINDS)[number]; params: WorkloadParams; out: string | null } | null {
  const parsed = parseTraceArgs(argv, [...Object.keys(FLAGS), "out"]);
  const v = parsed.values;
  if (v.help) return null;
  const [verb, kind, extra] = parsed.positionals;
  if (verb !== "gen") throw new TraceUsageError(`expected 'gen', got '${verb ?? ""}'`);
  if (kind === undefined || !isWorkloadKind(kind)) {
    throw new TraceUsageError(`KIND must be one of ${WORKLOAD_KINDS.join(", ")}`);
  }
  if (extra !== undefined) throw new TraceUsageError(`unexpected argument '${extra}'`);
  const params: Record<string, number> = { ...defaultParams(kind) };
  for (const [flag, key] of Object.entries(FLAGS)) {
    const raw = v[flag];
    if (typeof raw !== "string") continue;
    const x = Number(raw);
    const ok =
      raw.trim() !== "" &&
      Number.isFinite(x) &&
      (flag === "seed"
        ? Number.isSafeInteger(x)
        : INTEGER.has(flag)
          ? Number.isSafeInteger(x) && x > 0
          : FRACTION.has(flag)
            ? x >= 0 && x <= 1
            : x > 0);
    if (!ok) {
      const what =
        flag === "seed"
          ? "an integer"
          : INTEGER.has(flag)
            ? "a positive integer"
            : FRACTION.has(flag)
              ? "a number in [0, 1]"
              : "a number > 0";
      throw new TraceUsageError(`--${flag} must be ${what}, got '${raw}'`);
    }
    params[key] = x;
  }
  return {
    kind,
    params: params as unknown as WorkloadParams,
    out: typeof v.out === "string" ? v.out : null,
  };
}

/** Entry point; returns the exit code (0 ok, 1 bad trace, 2 bad usage). */
export async function main(argv: string[]): Promise<number> {
  if (argv[0] === "spread") {
    return runTraceCommand(
      () => parseSpreadArgs(argv),
      SPREAD_USAGE,
      (o) => runSpread(o, (s) => process.stderr.write(s)),
    );
  }
  return runTraceCommand(
    () => parseTraceGenArgs(argv),
    TRACE_USAGE,
    (o) => {
      const text = toJsonl(generateWorkload(o.kind, o.params));
      if (o.out === null) process.stdout.write(text);
      else writeFileSync(o.out, text);
      return 0;
    },
  );
}
