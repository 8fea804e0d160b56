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

/**
 * Largest load weight and temperature accepted (config and per-request overrides). Each
 * cost term is a weight times a count below ~10⁷ (blocks, requests), so with weights up
 * to 10⁶ every cost stays far inside the finite doubles (`1e308` overflowed to Infinity).
 */
export const MAX_WEIGHT = 1e6;
const STALE_POLICIES: readonly StalePolicy[] = ["exclude", "penalise"];

/** A bad value as shown in messages: strings quoted, so an empty one is visible. */
function show(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

function check(key: string, value: unknown, ok: (v: number) => boolean, what: string): number {
  if (typeof value !== "number" || Number.isNaN(value) || !ok(value)) {
    throw new SchedulerConfigError(key, `${key} must be ${what}, got ${show(value)}`);
  }
  return value;
}

/** Calls `f`, collecting a `SchedulerConfigError` into `errors` (then returns `fallback`). */
function collect<T>(errors: SchedulerConfigError[], fallback: T, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (!(err instanceof SchedulerConfigError)) throw err;
    errors.push(err);
    return fallback;
  }
}

function weights(
  base: CostWeights,
  input: Partial<CostWeights> | undefined,
  prefix: string,
  errors?: SchedulerConfigError[],
): CostWeights {
  const out: Record<string, number> = { ...base };
  for (const k of WEIGHT_KEYS) {
    const v = input?.[k];
    if (v === undefined) continue;
    const one = () =>
      TIER_KEYS.has(k)
        ? check(`${prefix}${k}`, v, (x) => x >= 0 && x <= 1, "a number in 0..1")
        : check(
            `${prefix}${k}`,
            v,
            (x) => x >= 0 && x <= MAX_WEIGHT,
            `a number in 0..${MAX_WEIGHT}`,
          );
    out[k] = errors === undefined ? one() : collect(errors, base[k], one);
  }
  return Object.freeze(out as unknown as CostWeights);
}

/** Result of checking a whole scheduler input: the config, or every problem found. */
export type SchedulerConfigCheck =
  | { readonly ok: true; readonly config: SchedulerConfig }
  | { readonly ok: false; readonly errors: readonly SchedulerConfigError[] };

/**
 * Defaults + `input`, validated and frozen, reporting **every** bad key. A key that is
 * absent (undefined) takes the default; `null` is a bad value like any other (callers
 * that give null a meaning, such as "off", translate it first).
 */
export function checkSchedulerConfig(
  input: SchedulerConfigInput = {},
  base: SchedulerConfig = DEFAULT_SCHEDULER_CONFIG,
): SchedulerConfigCheck {
  const errors: SchedulerConfigError[] = [];
  const given = <K extends keyof SchedulerConfigInput>(k: K) =>
    input[k] === undefined ? base[k as keyof SchedulerConfig] : input[k];
  const stalePolicy = given("stalePolicy") as StalePolicy;
  if (!STALE_POLICIES.includes(stalePolicy)) {
    errors.push(
      new SchedulerConfigError(
        "stalePolicy",
        `stalePolicy must be one of ${STALE_POLICIES.join(", ")}, got ${show(stalePolicy)}`,
      ),
    );
  }
  const num = (
    k: "temperature" | "outlierStdK" | "kvHardCap" | "stalePenalty",
    ok: (x: number) => boolean,
    what: string,
  ) => collect(errors, base[k], () => check(k, given(k), ok, what));
  const config: SchedulerConfig = Object.freeze({
    weights: weights(base.weights, input.weights, "weights.", errors),
    temperature: num(
      "temperature",
      (x) => x >= 0 && x <= MAX_WEIGHT,
      `a number in 0..${MAX_WEIGHT}`,
    ),
    outlierStdK: num("outlierStdK", (x) => x >= 0, "a number ≥ 0 (Infinity = off)"),
    kvHardCap: num("kvHardCap", (x) => x > 0, "a number > 0 (Infinity = off)"),
    stalePolicy,
    stalePenalty: num("stalePenalty", (x) => Number.isFinite(x) && x >= 0, "a finite number ≥ 0"),
  });
  return errors.length === 0 ? { ok: true, config } : { ok: false, errors };
}

/** Defaults + `input`, validated and frozen. Throws the first `SchedulerConfigError`. */
export function resolveSchedulerConfig(
  input: SchedulerConfigInput = {},
  base: SchedulerConfig = DEFAULT_SCHEDULER_CONFIG,
): SchedulerConfig {
  const r = checkSchedulerConfig(input, base);
  if (!r.ok) throw r.errors[0]!;
  return r.config;
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
            (x) => x >= 0 && x <= MAX_WEIGHT,
            `a number in 0..${MAX_WEIGHT}`,
          ),
  });
}
