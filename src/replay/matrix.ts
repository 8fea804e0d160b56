/**
 * `kvrouter replay matrix`: every policy × workload × load × cache size in one command.
 * Workloads are the shipped conversation slice and the four generated kinds
 * (`matrix-workloads.ts`); loads are round-robin prefill utilisations (default 50 %, 80 %,
 * 95 %); caches are unlimited and 2 M tokens per worker by default (`--caches`). Prints
 * one markdown table per workload and cache size (hit rate, mean and p99 TTFT per policy
 * and load, and the blocks the caches evicted), a summary of kv against the best peer in
 * each cell, optionally an SVG and a JSON line.
 */

import { type CompareJob, type CompareOptions, runJob } from "./compare.js";
import {
  buildWorkload,
  isMatrixWorkload,
  MATRIX_WORKLOADS,
  type MatrixWorkload,
  scaleToLoad,
} from "./matrix-workloads.js";
import type { RunSummary } from "./metrics.js";
import { PEER_POLICY_NAMES, type PolicyName } from "./policies.js";
import type { TailData } from "./tail-data.js";
import { defaultParams, type WorkloadParams } from "./workloads/generators.js";

/** One cell of the matrix for one policy. */
export interface MatrixJob {
  readonly workload: MatrixWorkload;
  /** Target round-robin prefill utilisation, 0..1. */
  readonly load: number;
  /** A policy, or `reference`: one worker with the fleet's capacity and throughput. */
  readonly policy: CompareJob;
  /** KV cache per worker in tokens for this job; null = unlimited (overrides `options`). */
  readonly cacheTokens: number | null;
  readonly requests: number;
  readonly trace: string;
  /** Generator parameters replacing the defaults (`--gen KEY=VALUE`). */
  readonly gen: Partial<WorkloadParams>;
  readonly options: CompareOptions;
}

export interface MatrixResult {
  readonly workload: MatrixWorkload;
  readonly load: number;
  readonly policy: CompareJob;
  /** KV cache per worker in tokens; null = unlimited. */
  readonly cacheTokens: number | null;
  /** Arrival-time scale factor that produced the load. */
  readonly factor: number;
  readonly summary: RunSummary;
  /** Blocks the workers' caches evicted (0: the cache size did not bind). */
  readonly evictions: number;
  readonly wallMs: number;
  /** Per-request tail figures (`--tail-report`, the policy among those reported). */
  readonly tailData?: TailData;
}

export const DEFAULT_MATRIX_LOADS = [0.5, 0.8, 0.95] as const;
/** Cache sizes per worker in tokens (null = unlimited): the issue's two fleets. */
export const DEFAULT_MATRIX_CACHES: readonly (number | null)[] = [null, 2_000_000];
export const DEFAULT_MATRIX_POLICIES: readonly PolicyName[] = [
  "kv",
  "round_robin",
  ...PEER_POLICY_NAMES,
];

/** Run one job in this thread. */
export function runMatrixJob(j: MatrixJob): MatrixResult {
  const base = buildWorkload(j.workload, {
    requests: j.requests,
    seed: j.options.seed,
    trace: j.trace,
    gen: j.gen,
  });
  const { requests, factor } = scaleToLoad(
    base,
    j.load,
    j.options.workers,
    j.options.blockSize,
    j.options.timing,
  );
  const run = runJob(requests, j.policy, {
    ...j.options,
    capacityBlocks: j.cacheTokens === null ? null : Math.floor(j.cacheTokens / j.options.blockSize),
    policies: j.policy === "reference" ? [] : [j.policy],
    reference: j.policy === "reference",
  });
  return {
    workload: j.workload,
    load: j.load,
    policy: j.policy,
    cacheTokens: j.cacheTokens,
    factor,
    summary: run.summary,
    evictions: run.evictions,
    wallMs: run.wallMs,
    ...(run.tailData === undefined ? {} : { tailData: run.tailData }),
  };
}

/** Pull the matrix's own flags out of argv; the rest are replay flags. */
export function splitMatrixArgs(argv: readonly string[]): {
  workloads: MatrixWorkload[];
  loads: number[];
  requests: number;
  /** Cache sizes per worker in tokens (null = unlimited); null = none given. */
  caches: (number | null)[] | null;
  gen: Partial<WorkloadParams>;
  rest: string[];
} {
  const gen: Record<string, number> = {};
  const known = Object.keys(defaultParams("chat"));
  let workloads: MatrixWorkload[] = [...MATRIX_WORKLOADS];
  let loads: number[] = [...DEFAULT_MATRIX_LOADS];
  let requests = 2_000;
  let caches: (number | null)[] | null = null;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new MatrixUsageError(`${a} needs a value`);
      return v;
    };
    if (a === "--workloads") {
      const list = value().split(",");
      for (const w of list) {
        if (!isMatrixWorkload(w)) {
          throw new MatrixUsageError(
            `--workloads: '${w}' is not one of ${MATRIX_WORKLOADS.join(", ")}`,
          );
        }
      }
      workloads = list as MatrixWorkload[];
    } else if (a === "--loads") {
      loads = value()
        .split(",")
        .map((s) => {
          const x = Number(s);
          if (s.trim() === "" || !(x > 0 && x < 1.5)) {
            throw new MatrixUsageError(`--loads: '${s}' is not a utilisation in (0, 1.5)`);
          }
          return x;
        });
    } else if (a === "--requests") {
      const v = value();
      requests = Number(v);
      if (!Number.isSafeInteger(requests) || requests < 2) {
        throw new MatrixUsageError(`--requests must be an integer ≥ 2, got '${v}'`);
      }
    } else if (a === "--caches") {
      caches = value()
        .split(",")
        .map((c) => {
          if (c.trim() === "unlimited") return null;
          const x = Number(c);
          if (c.trim() === "" || !Number.isSafeInteger(x) || x <= 0) {
            throw new MatrixUsageError(
              `--caches: '${c}' is neither 'unlimited' nor a positive number of tokens`,
            );
          }
          return x;
        });
    } else if (a === "--gen") {
      const v = value();
      const m = /^([a-zA-Z]+)=(.+)$/.exec(v);
      const x = m === null ? Number.NaN : Number(m[2]);
      if (m === null || !known.includes(m[1]!) || !Number.isFinite(x) || x < 0) {
        throw new MatrixUsageError(
          `--gen must be KEY=VALUE with KEY one of ${known.join(", ")}, got '${v}'`,
        );
      }
      gen[m[1]!] = x;
    } else rest.push(a);
  }
  return { workloads, loads, requests, caches, gen: gen as Partial<WorkloadParams>, rest };
}

export class MatrixUsageError extends Error {
  override name = "MatrixUsageError";
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const sec = (ms: number) => (ms / 1000).toFixed(2);

/** "unlimited caches" / "2,000,000-token caches". */
export function cacheLabel(tokens: number | null): string {
  return tokens === null ? "unlimited caches" : `${tokens.toLocaleString("en-US")}-token caches`;
}

/**
 * The results as markdown: one table per workload and cache size (with the blocks each
 * policy's caches evicted, so a reader sees whether the size bound), then kv against the
 * best peer in each cell.
 */
export function formatMatrix(results: readonly MatrixResult[]): string {
  const workloads = [...new Set(results.map((r) => r.workload))];
  const loads = [...new Set(results.map((r) => r.load))].sort((a, b) => a - b);
  const caches = [...new Set(results.map((r) => r.cacheTokens))];
  const policies = [...new Set(results.map((r) => r.policy))];
  const get = (w: string, c: number | null, l: number, p: string) =>
    results.find((r) => r.workload === w && r.cacheTokens === c && r.load === l && r.policy === p);
  const out: string[] = [];
  for (const w of workloads) {
    for (const c of caches) {
      const rrUtil = loads.map((l) => {
        const rr = get(w, c, l, "round_robin");
        return rr === undefined
          ? ""
          : ` (round-robin measured ${pct(rr.summary.prefillUtilisation)})`;
      });
      out.push(`### ${w}, ${cacheLabel(c)}`, "");
      out.push(
        `| policy | ${loads.map((l, i) => `${Math.round(100 * l)} %${rrUtil[i]}: hit | mean | p99`).join(" | ")} | evicted blocks (${loads.map((l) => `${Math.round(100 * l)} %`).join(", ")}) |`,
      );
      out.push(`|---|${loads.map(() => "---|---|---").join("|")}|---|`);
      for (const p of policies) {
        const runs = loads.map((l) => get(w, c, l, p));
        const cells = runs.map((r) => {
          if (r === undefined) return " | | ";
          const s = r.summary;
          // Rejected requests (prompts larger than a worker's cache) are left out of the
          // figures: said in the cell, so such a cell is not read as comparable.
          const rej = s.rejected > 0 ? ` (${s.rejected} rejected)` : "";
          return `${pct(s.hitRate)}${rej} | ${sec(s.ttftMs.mean)} | ${sec(s.ttftMs.p99)}`;
        });
        const ev = runs.map((r) => (r === undefined ? "" : String(r.evictions))).join(", ");
        out.push(`| ${p} | ${cells.join(" | ")} | ${ev} |`);
      }
      out.push("");
    }
  }
  const peers = policies.filter((p) => (PEER_POLICY_NAMES as readonly string[]).includes(p));
  if (policies.includes("kv") && peers.length > 0) {
    out.push(
      "### kv against the best peer in each cell (ratio < 1: kv better)",
      "",
      "n/c: the cell's runs rejected different requests (prompts larger than one worker's cache; left out of their figures), so they are not compared.",
      "",
    );
    const withRef = policies.includes("reference");
    out.push(
      `| workload | caches | load | best peer (mean) | kv / best mean | best peer (p99) | kv / best p99 |${withRef ? " kv hit / reference hit |" : ""}`,
    );
    out.push(`|---|---|---|---|---|---|---|${withRef ? "---|" : ""}`);
    for (const w of workloads) {
      for (const c of caches) {
        for (const l of loads) {
          const kv = get(w, c, l, "kv");
          const ps = peers.map((p) => get(w, c, l, p)).filter((r) => r !== undefined);
          if (kv === undefined || ps.length === 0) continue;
          const bestMean = ps.reduce((a, b) =>
            b.summary.ttftMs.mean < a.summary.ttftMs.mean ? b : a,
          );
          const bestP99 = ps.reduce((a, b) =>
            b.summary.ttftMs.p99 < a.summary.ttftMs.p99 ? b : a,
          );
          const m = kv.summary.ttftMs.mean / bestMean.summary.ttftMs.mean;
          const q = kv.summary.ttftMs.p99 / bestP99.summary.ttftMs.p99;
          const size = c === null ? "unlimited" : c.toLocaleString("en-US");
          const ref = get(w, c, l, "reference");
          const h = ref === undefined ? null : kv.summary.hitRate / ref.summary.hitRate;
          // Runs that rejected different requests measured different sets: not compared.
          const rejected = [kv, ...ps, ...(ref === undefined ? [] : [ref])].some(
            (r) => r.summary.rejected !== kv.summary.rejected,
          );
          const hit = !withRef
            ? ""
            : h === null
              ? " |"
              : rejected
                ? " n/c |"
                : ` ${h.toFixed(2)}${h < 0.95 ? " ✗" : ""} |`;
          const ratio = (x: number) => (rejected ? "n/c" : `${x.toFixed(2)}${x > 1 ? " ✗" : ""}`);
          out.push(
            `| ${w} | ${size} | ${Math.round(100 * l)} % | ${bestMean.policy} | ${ratio(m)} | ${bestP99.policy} | ${ratio(q)} |${hit}`,
          );
        }
      }
    }
    out.push("");
  }
  return `${out.join("\n")}\n`;
}
