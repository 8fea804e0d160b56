/**
 * The demo's workload: a few long shared system prompts and many multi-turn conversations,
 * each turn's prompt extending the previous turn's prompt and reply. Generated from a seed
 * alone, so both routing policies get exactly the same requests on the same schedule
 * (replies are deterministic too: the simulator's output depends only on the prompt).
 *
 * Messages are text (`textOf`) sent as OpenAI chat requests: the gateway renders and
 * tokenizes them with the model's real tokenizer (Qwen3, bundled), the simulated workers
 * with the same files, so what the router hashes is what the worker computes.
 */

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
 * 256 English words that are each one token in Qwen3's vocabulary (with their leading
 * space), so a message of N content "tokens" is about N real tokens.
 */
const WORDS = [
  "other",
  "been",
  "were",
  "file",
  "would",
  "year",
  "some",
  "there",
  "said",
  "comm",
  "like",
  "also",
  "than",
  "static",
  "just",
  "result",
  "them",
  "into",
  "what",
  "list",
  "case",
  "first",
  "import",
  "char",
  "only",
  "print",
  "back",
  "need",
  "start",
  "user",
  "under",
  "then",
  "people",
  "should",
  "test",
  "make",
  "after",
  "right",
  "long",
  "array",
  "read",
  "form",
  "trans",
  "want",
  "comp",
  "number",
  "require",
  "size",
  "where",
  "while",
  "spec",
  "look",
  "could",
  "know",
  "hand",
  "most",
  "break",
  "every",
  "point",
  "error",
  "text",
  "show",
  "find",
  "current",
  "used",
  "play",
  "help",
  "these",
  "pass",
  "down",
  "even",
  "item",
  "through",
  "last",
  "event",
  "again",
  "high",
  "line",
  "does",
  "before",
  "because",
  "dist",
  "state",
  "cons",
  "here",
  "final",
  "very",
  "model",
  "call",
  "well",
  "object",
  "years",
  "default",
  "java",
  "view",
  "pres",
  "many",
  "being",
  "good",
  "using",
  "stud",
  "request",
  "child",
  "param",
  "echo",
  "person",
  "style",
  "method",
  "expect",
  "prot",
  "found",
  "post",
  "such",
  "think",
  "differ",
  "much",
  "http",
  "count",
  "inst",
  "gener",
  "check",
  "open",
  "next",
  "follow",
  "includ",
  "href",
  "bool",
  "game",
  "path",
  "each",
  "support",
  "sign",
  "those",
  "system",
  "best",
  "same",
  "create",
  "made",
  "mark",
  "group",
  "world",
  "process",
  "main",
  "color",
  "report",
  "take",
  "comple",
  "free",
  "action",
  "index",
  "real",
  "build",
  "message",
  "input",
  "between",
  "table",
  "head",
  "must",
  "order",
  "contin",
  "product",
  "double",
  "place",
  "oper",
  "week",
  "prop",
  "program",
  "struct",
  "code",
  "without",
  "still",
  "provid",
  "assert",
  "field",
  "cour",
  "team",
  "second",
  "going",
  "range",
  "fact",
  "android",
  "writ",
  "home",
  "left",
  "direct",
  "exper",
  "allow",
  "page",
  "around",
  "rece",
  "really",
  "image",
  "target",
  "both",
  "level",
  "config",
  "local",
  "content",
  "quest",
  "float",
  "develop",
  "poss",
  "extends",
  "fore",
  "great",
  "month",
  "happ",
  "super",
  "title",
  "context",
  "life",
  "incre",
  "catch",
  "coun",
  "change",
  "book",
  "gover",
  "version",
  "three",
  "base",
  "conf",
  "during",
  "console",
  "against",
  "power",
  "width",
  "label",
  "project",
  "element",
  "success",
  "date",
  "match",
  "node",
  "another",
  "care",
  "effect",
  "service",
  "since",
  "full",
  "turn",
  "body",
  "produ",
  "stand",
  "proble",
  "block",
  "keep",
  "throw",
  "things",
  "control",
  "come",
  "custom",
  "source",
  "await",
  "partic",
  "prov",
  "mill",
];

/**
 * Text for content "tokens": each id becomes one of `WORDS`, a full stop every 12 words,
 * so the messages are plain text the engine's real tokenizer encodes.
 */
export function textOf(tokens: readonly number[]): string {
  const words = tokens.map((t) => WORDS[t % WORDS.length]!);
  const out: string[] = [];
  for (let i = 0; i < words.length; i += 12) out.push(`${words.slice(i, i + 12).join(" ")}.`);
  return out.join(" ");
}
