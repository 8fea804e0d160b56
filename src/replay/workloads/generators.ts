/**
 * `kvrouter trace gen`'s workloads: synthetic request traces in the Mooncake JSONL format
 * for users without a trace of their own. Each generator is a pure function of its
 * parameters and seed (docs/replay.md documents every parameter and default):
 *
 * - `shared-prefix`: a few long system prompts, each request one of them (uniformly) plus
 *   its own question; Poisson arrivals.
 * - `chat`: multi-turn sessions. Sessions arrive as a Poisson process; each picks a system
 *   prompt by Zipf popularity and runs a geometric number of turns; every turn's prompt is
 *   the whole history (system prompt, earlier questions and answers) plus a new question,
 *   after a think time.
 * - `agentic`: tool loops. Tasks arrive as a Poisson process; each starts from its agent's
 *   long system + tool prompt and loops: a short model output (a tool call) and a long
 *   tool result are appended at every step, a few seconds apart; some steps fan out into
 *   a burst of sibling requests that share the context and differ in a short suffix.
 * - `hot-prefix`: N hot long system prompts take all (or most) of the traffic, each
 *   request one of them plus a short suffix; Poisson arrivals.
 */

import { type Rng, seededRng } from "../../util/rng.js";
import {
  Context,
  exponential,
  geometric,
  IdSource,
  length,
  poissonClock,
  type TraceLine,
  zipfSampler,
} from "./gen-util.js";

export const WORKLOAD_KINDS = ["shared-prefix", "chat", "agentic", "hot-prefix"] as const;
export type WorkloadKind = (typeof WORKLOAD_KINDS)[number];

export function isWorkloadKind(s: string): s is WorkloadKind {
  return (WORKLOAD_KINDS as readonly string[]).includes(s);
}

/** Every generator's parameters; each kind reads the ones its doc names. */
export interface WorkloadParams {
  /** Requests in the trace. */
  readonly requests: number;
  /** Mean request rate, requests per second. */
  readonly rate: number;
  readonly seed: number;
  /** Distinct shared system prompts (shared-prefix, chat), agents (agentic), hot prompts (hot-prefix). */
  readonly prompts: number;
  /** Mean system-prompt length in tokens. */
  readonly systemTokens: number;
  /** Mean length of a request's own part (question, sibling suffix), tokens. */
  readonly userTokens: number;
  /** Mean output length, tokens. */
  readonly outputTokens: number;
  /** chat: Zipf exponent of system-prompt popularity. */
  readonly zipf: number;
  /** chat: mean turns per session; agentic: mean steps per task. */
  readonly turns: number;
  /** chat: mean think time between turns; agentic: mean time between steps; seconds. */
  readonly thinkSeconds: number;
  /** agentic: mean tool-result length appended per step, tokens. */
  readonly toolTokens: number;
  /** agentic: probability that a step fans out into siblings. */
  readonly fanoutProbability: number;
  /** agentic: most siblings in one burst (at least 2). */
  readonly fanoutMax: number;
  /** hot-prefix: fraction of requests with a cold (unique) prompt instead. */
  readonly coldFraction: number;
}

/** Defaults per kind (docs/replay.md, "Workloads"). */
export function defaultParams(kind: WorkloadKind): WorkloadParams {
  const common = {
    requests: 2_000,
    seed: 1,
    zipf: 1.1,
    turns: 5,
    thinkSeconds: 20,
    toolTokens: 1_200,
    fanoutProbability: 0.2,
    fanoutMax: 6,
    coldFraction: 0,
  };
  switch (kind) {
    case "shared-prefix":
      return {
        ...common,
        rate: 2,
        prompts: 16,
        systemTokens: 6_000,
        userTokens: 400,
        outputTokens: 200,
      };
    case "chat":
      return {
        ...common,
        rate: 2,
        prompts: 32,
        systemTokens: 2_000,
        userTokens: 250,
        outputTokens: 300,
      };
    case "agentic":
      return {
        ...common,
        rate: 2,
        prompts: 4,
        systemTokens: 8_000,
        userTokens: 200,
        outputTokens: 60,
        turns: 8,
        thinkSeconds: 3,
        toolTokens: 800,
      };
    case "hot-prefix":
      return {
        ...common,
        rate: 1,
        prompts: 2,
        systemTokens: 8_192,
        userTokens: 256,
        outputTokens: 200,
      };
  }
}

/** A system prompt of about `mean` tokens (±50 %), whole, as a shared context. */
function systemPrompt(ids: IdSource, rng: Rng, mean: number): Context {
  return new Context(ids).append(Math.max(1, Math.round(mean * (0.5 + rng()))));
}

function sharedPrefix(p: WorkloadParams, rng: Rng, fixedLength: boolean): TraceLine[] {
  const ids = new IdSource();
  const prompts = Array.from({ length: p.prompts }, () =>
    fixedLength ? new Context(ids).append(p.systemTokens) : systemPrompt(ids, rng, p.systemTokens),
  );
  const clock = poissonClock(rng, p.rate);
  const out: TraceLine[] = [];
  for (let i = 0; i < p.requests; i++) {
    const t = clock();
    const cold = p.coldFraction > 0 && rng() < p.coldFraction;
    const ctx = cold
      ? new Context(ids).append(p.systemTokens)
      : prompts[Math.floor(rng() * prompts.length)]!.clone();
    ctx.append(length(rng, p.userTokens));
    out.push(ctx.prompt(t, length(rng, p.outputTokens)));
  }
  return out;
}

function chat(p: WorkloadParams, rng: Rng): TraceLine[] {
  const ids = new IdSource();
  const prompts = Array.from({ length: p.prompts }, () => systemPrompt(ids, rng, p.systemTokens));
  const pick = zipfSampler(rng, p.prompts, p.zipf);
  const sessions = poissonClock(rng, p.rate / Math.max(1, p.turns));
  const out: TraceLine[] = [];
  // Generate half as many again and keep the earliest `requests`: sessions started after
  // the cut would only add requests after it, so the kept window has every arrival.
  while (out.length < 1.5 * p.requests) {
    let t = sessions();
    const ctx = prompts[pick()]!.clone();
    const turns = geometric(rng, p.turns);
    for (let k = 0; k < turns; k++) {
      ctx.append(length(rng, p.userTokens));
      const output = length(rng, p.outputTokens);
      out.push(ctx.prompt(t, output));
      ctx.append(output);
      t += exponential(rng, 1000 * p.thinkSeconds);
    }
  }
  return out;
}

function agentic(p: WorkloadParams, rng: Rng): TraceLine[] {
  const ids = new IdSource();
  const agents = Array.from({ length: p.prompts }, () => systemPrompt(ids, rng, p.systemTokens));
  const siblingsMean = (2 + Math.max(2, p.fanoutMax)) / 2;
  const perTask = p.turns * (1 + p.fanoutProbability * siblingsMean);
  const tasks = poissonClock(rng, p.rate / Math.max(1, perTask));
  const out: TraceLine[] = [];
  while (out.length < 1.5 * p.requests) {
    let t = tasks();
    const ctx = agents[Math.floor(rng() * agents.length)]!.clone();
    ctx.append(length(rng, p.userTokens)); // the task itself
    const steps = geometric(rng, p.turns);
    for (let s = 0; s < steps; s++) {
      const output = length(rng, p.outputTokens);
      out.push(ctx.prompt(t, output));
      if (rng() < p.fanoutProbability) {
        const k = 2 + Math.floor(rng() * (Math.max(2, p.fanoutMax) - 1));
        for (let j = 0; j < k; j++) {
          const sib = ctx.clone().append(length(rng, p.userTokens));
          out.push(sib.prompt(t + 1 + j, length(rng, p.outputTokens)));
        }
      }
      ctx.append(output).append(length(rng, p.toolTokens));
      t += exponential(rng, 1000 * p.thinkSeconds);
    }
  }
  return out;
}

/** Generate a workload; lines sorted by timestamp (stable), first arrival at 0. */
export function generateWorkload(kind: WorkloadKind, params: WorkloadParams): TraceLine[] {
  const rng = seededRng(params.seed);
  let lines: TraceLine[];
  switch (kind) {
    case "shared-prefix":
      lines = sharedPrefix(params, rng, false);
      break;
    case "hot-prefix":
      lines = sharedPrefix(params, rng, true);
      break;
    case "chat":
      lines = chat(params, rng);
      break;
    case "agentic":
      lines = agentic(params, rng);
      break;
  }
  lines.sort((a, b) => a.timestamp - b.timestamp);
  lines = lines.slice(0, params.requests);
  const t0 = lines[0]?.timestamp ?? 0;
  return lines.map((l) => ({ ...l, timestamp: l.timestamp - t0 }));
}

/** The trace as JSONL text (one object per line, Mooncake field order). */
export function toJsonl(lines: readonly TraceLine[]): string {
  return lines.map((l) => JSON.stringify(l)).join("\n") + (lines.length > 0 ? "\n" : "");
}
