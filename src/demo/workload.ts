/**
 * The demo's workload: a few long shared system prompts and many multi-turn conversations,
 * each turn's prompt extending the previous turn's prompt and reply. Generated from a seed
 * alone, so both routing policies get exactly the same requests on the same schedule
 * (replies are deterministic too: the simulator's output depends only on the prompt).
 *
 * Prompts are token ids laid out like the simulator's Llama-3-style chat template, each
 * segment tokenized on its own (as a gateway tokenizing per message would), and sent to
 * the worker as ids: what the router hashes is exactly what the worker computes.
 */

import type { SimTokenizer } from "../sim/tokenizer.js";
import { seededRng } from "../util/rng.js";
import type { WorkloadShape } from "./demo-options.js";

/** Content tokens are drawn below the simulator's special-token ids. */
const CONTENT_VOCAB = 100_000;

export interface Turn {
  /** The user message's content tokens. */
  readonly userTokens: readonly number[];
  readonly maxTokens: number;
  /** Pause after the previous reply before this turn is sent (0 for the first turn). */
  readonly thinkMs: number;
}

export interface Conversation {
  readonly id: number;
  /** Index into `Workload.systemPrompts`. */
  readonly systemPrompt: number;
  /** When the first turn is sent, ms from the phase start. */
  readonly startMs: number;
  readonly turns: readonly Turn[];
}

export interface Workload {
  /** Content tokens of each system prompt. */
  readonly systemPrompts: readonly (readonly number[])[];
  readonly conversations: readonly Conversation[];
  /** Total number of requests (turns). */
  readonly requests: number;
}

/** Generate the workload for `shape` and `seed` (pure). */
export function generateWorkload(shape: WorkloadShape, seed: number): Workload {
  const rng = seededRng(seed);
  const between = ([lo, hi]: readonly [number, number]) => lo + Math.floor(rng() * (hi - lo + 1));
  const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rng() * CONTENT_VOCAB));
  const systemPrompts = Array.from({ length: shape.systemPrompts }, () =>
    tokens(between(shape.systemTokens)),
  );
  const starts = Array.from({ length: shape.conversations }, () =>
    Math.floor(rng() * shape.arrivalWindowMs),
  ).sort((a, b) => a - b);
  let requests = 0;
  const conversations = starts.map((startMs, id): Conversation => {
    const systemPrompt = Math.floor(rng() * shape.systemPrompts);
    const turns = Array.from({ length: between(shape.turns) }, (_, t) => ({
      userTokens: tokens(between(shape.userTokens)),
      maxTokens: between(shape.replyTokens),
      thinkMs: t === 0 ? 0 : between(shape.thinkMs),
    }));
    requests += turns.length;
    return { id, systemPrompt, startMs, turns };
  });
  return { systemPrompts, conversations, requests };
}

/**
 * Builds prompts as the chat template lays them out:
 * `<bot><sh>system<eh>\n\n SYS <eot>` then per turn `<sh>user<eh>\n\n MSG <eot><sh>assistant<eh>\n\n`,
 * and the previous reply followed by `<eot>` before the next user message.
 */
export class PromptBuilder {
  readonly #begin: number[];
  readonly #eot: number[];
  readonly #user: number[];
  readonly #assistant: number[];

  constructor(tokenizer: SimTokenizer) {
    this.#begin = tokenizer.encode(
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n",
    );
    this.#eot = tokenizer.encode("<|eot_id|>");
    this.#user = tokenizer.encode("<|start_header_id|>user<|end_header_id|>\n\n");
    this.#assistant = tokenizer.encode("<|start_header_id|>assistant<|end_header_id|>\n\n");
  }

  /** The first turn's prompt: system prompt, then the user message. */
  first(system: readonly number[], user: readonly number[]): number[] {
    return [...this.#begin, ...system, ...this.#eot, ...this.#turn(user)];
  }

  /** A later turn: the previous prompt, its reply, then the new user message. */
  next(previous: readonly number[], reply: readonly number[], user: readonly number[]): number[] {
    return [...previous, ...reply, ...this.#eot, ...this.#turn(user)];
  }

  #turn(user: readonly number[]): number[] {
    return [...this.#user, ...user, ...this.#eot, ...this.#assistant];
  }
}
