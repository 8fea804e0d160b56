/**
 * Building a scheduler config from partial input (file, env, HTTP overrides): defaults
 * filled in, every value checked with a message naming the key, the result frozen.
 */

import { DEFAULT_SCHEDULER_CONFIG } from "./defaults.js";
import type { CostWeights, SchedulerConfig, SchedulerOverrides, StalePolicy } from "./types.js";

/** A bad scheduler setting; `key` is its dotted path, e.g. `weights.host`. */
export class SchedulerConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
    this.name = "SchedulerConfigError";
  }
}

export type SchedulerConfigInput = Partial<Omit<SchedulerConfig, "weights">> & {
  readonly weights?: Partial<CostWeights>;
};

const WEIGHT_KEYS: readonly (keyof CostWeights)[] = [
  "prefill",
  "pending",
  "decode",
  "queue",
  "host",
  "disk",
  "store",
];
const TIER_KEYS: ReadonlySet<keyof CostWeights> = new Set(["host", "disk", "store"]);
const STALE_POLICIES: readonly StalePolicy[] = ["exclude", "penalise"];

function check(key: string, value: unknown, ok: (v: number) => boolean, what: string): number {
  if (typeof value !== "number" || Number.isNaN(value) || !ok(value)) {
    throw new SchedulerConfigError(key, `${key} must be ${what}, got ${String(value)}`);
  }
  return value;
}

function weights(
  base: CostWeights,
  input: Partial<CostWeights> | undefined,
  prefix: string,
): CostWeights {
  const out: Record<string, number> = { ...base };
  for (const k of WEIGHT_KEYS) {
    const v = input?.[k];
    if (v === undefined) continue;
    out[k] = TIER_KEYS.has(k)
      ? check(`${prefix}${k}`, v, (x) => x >= 0 && x <= 1, "a number in 0..1")
      : check(`${prefix}${k}`, v, (x) => Number.isFinite(x) && x >= 0, "a finite number ≥ 0");
  }
  return Object.freeze(out as unknown as CostWeights);
}

/** Defaults + `input`, validated and frozen. Throws `SchedulerConfigError`. */
export function resolveSchedulerConfig(
  input: SchedulerConfigInput = {},
  base: SchedulerConfig = DEFAULT_SCHEDULER_CONFIG,
): SchedulerConfig {
  const stalePolicy = input.stalePolicy ?? base.stalePolicy;
  if (!STALE_POLICIES.includes(stalePolicy)) {
    throw new SchedulerConfigError(
      "stalePolicy",
      `stalePolicy must be one of ${STALE_POLICIES.join(", ")}, got ${String(stalePolicy)}`,
    );
  }
  return Object.freeze({
    weights: weights(base.weights, input.weights, "weights."),
    temperature: check(
      "temperature",
      input.temperature ?? base.temperature,
      (x) => Number.isFinite(x) && x >= 0,
      "a finite number ≥ 0",
    ),
    outlierStdK: check(
      "outlierStdK",
      input.outlierStdK ?? base.outlierStdK,
      (x) => x >= 0,
      "a number ≥ 0 (Infinity = off)",
    ),
    kvHardCap: check(
      "kvHardCap",
      input.kvHardCap ?? base.kvHardCap,
      (x) => x > 0,
      "a number > 0 (Infinity = off)",
    ),
    stalePolicy,
    stalePenalty: check(
      "stalePenalty",
      input.stalePenalty ?? base.stalePenalty,
      (x) => Number.isFinite(x) && x >= 0,
      "a finite number ≥ 0",
    ),
  });
}

/**
 * The config for one request: `overrides` on top of `config`. Returns `config` itself
 * when there is nothing to override (the common, allocation-free case). Throws
 * `SchedulerConfigError` naming the override (`overrides.<key>`).
 */
export function withOverrides(
  config: SchedulerConfig,
  overrides: SchedulerOverrides | undefined,
): SchedulerConfig {
  if (overrides === undefined) return config;
  let any = false;
  for (const k in overrides) {
    if ((overrides as Record<string, unknown>)[k] !== undefined) any = true;
    if (k !== "temperature" && !WEIGHT_KEYS.includes(k as keyof CostWeights)) {
      throw new SchedulerConfigError(
        `overrides.${k}`,
        `overrides.${k} is not a scheduler weight or temperature`,
      );
    }
  }
  if (!any) return config;
  const { temperature, ...w } = overrides;
  return Object.freeze({
    ...config,
    weights: weights(config.weights, w, "overrides."),
    temperature:
      temperature === undefined
        ? config.temperature
        : check(
            "overrides.temperature",
            temperature,
            (x) => Number.isFinite(x) && x >= 0,
            "a finite number ≥ 0",
          ),
  });
}
