/**
 * Reads a model directory the way the engine's tokenizer sees it: `tokenizer.json` (the HF
 * fast tokenizer) and `tokenizer_config.json` (chat template, BOS/EOS, `add_bos_token`,
 * special tokens). A missing file, bad JSON or a bad key is a `TokenizeError` with code
 * `model_files` whose message names the file and the key.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TokenizeError } from "./types.js";

/** One entry of `tokenizer.json`'s `added_tokens`. */
export interface AddedTokenSpec {
  readonly id: number;
  readonly content: string;
  readonly special: boolean;
  readonly lstrip: boolean;
  readonly rstrip: boolean;
  readonly normalized: boolean;
  readonly singleWord: boolean;
}

export interface ModelFiles {
  readonly dir: string;
  /** `tokenizer.json`, parsed. */
  readonly tokenizerJson: Record<string, unknown>;
  /** `tokenizer_config.json`, parsed. */
  readonly tokenizerConfig: Record<string, unknown>;
  /** Chat templates by name; a single string template is named "default". Empty: none. */
  readonly chatTemplates: ReadonlyMap<string, string>;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** `add_bos_token` / `add_eos_token` when the config states them, else null. */
  readonly addBosToken: boolean | null;
  readonly addEosToken: boolean | null;
  /** What HF passes to chat templates: bos_token, eos_token, …, additional_special_tokens. */
  readonly specialTokensMap: Readonly<Record<string, string | readonly string[]>>;
  readonly addedTokens: readonly AddedTokenSpec[];
}

export const TOKENIZER_FILE = "tokenizer.json";
export const CONFIG_FILE = "tokenizer_config.json";

function fail(file: string, what: string, cause?: unknown): TokenizeError {
  return new TokenizeError("model_files", `${file}: ${what}`, { cause });
}

function readJsonObject(path: string, file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw fail(path, `cannot read (${(err as NodeJS.ErrnoException).code ?? "error"})`, err);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw fail(path, `not valid JSON (${(err as Error).message})`, err);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw fail(path, `${file} must hold a JSON object`);
  }
  return v as Record<string, unknown>;
}

/** A special token in the config: a string, an AddedToken object `{content}`, or null. */
function tokenText(file: string, key: string, v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === "string") return v;
  if (typeof v === "object" && typeof (v as { content?: unknown }).content === "string") {
    return (v as { content: string }).content;
  }
  throw fail(file, `key '${key}' must be a string, {"content": string} or null`);
}

function optionalBool(file: string, key: string, v: unknown): boolean | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "boolean") throw fail(file, `key '${key}' must be a boolean`);
  return v;
}

function chatTemplatesOf(file: string, v: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (v === undefined || v === null) return out;
  if (typeof v === "string") {
    out.set("default", v);
    return out;
  }
  if (Array.isArray(v)) {
    v.forEach((t, i) => {
      const e = t as { name?: unknown; template?: unknown } | null;
      if (typeof e?.name !== "string" || typeof e.template !== "string") {
        throw fail(file, `key 'chat_template[${i}]' must be {"name": string, "template": string}`);
      }
      out.set(e.name, e.template);
    });
    return out;
  }
  throw fail(file, "key 'chat_template' must be a string or a list of {name, template}");
}

function addedTokensOf(file: string, v: unknown): AddedTokenSpec[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw fail(file, "key 'added_tokens' must be a list");
  return v.map((t, i) => {
    const e = t as Record<string, unknown> | null;
    if (typeof e?.id !== "number" || typeof e.content !== "string") {
      throw fail(file, `key 'added_tokens[${i}]' must have a numeric 'id' and a string 'content'`);
    }
    return {
      id: e.id,
      content: e.content,
      special: e.special === true,
      lstrip: e.lstrip === true,
      rstrip: e.rstrip === true,
      normalized: e.normalized === true,
      singleWord: e.single_word === true,
    };
  });
}

const SPECIAL_KEYS = [
  "bos_token",
  "eos_token",
  "unk_token",
  "sep_token",
  "pad_token",
  "cls_token",
  "mask_token",
] as const;

/** Read and check `dir/tokenizer.json` + `dir/tokenizer_config.json`. */
export function loadModelFiles(dir: string): ModelFiles {
  const tjPath = join(dir, TOKENIZER_FILE);
  const tcPath = join(dir, CONFIG_FILE);
  const tokenizerJson = readJsonObject(tjPath, TOKENIZER_FILE);
  const tokenizerConfig = readJsonObject(tcPath, CONFIG_FILE);
  const model = tokenizerJson.model as { type?: unknown; vocab?: unknown } | undefined;
  if (typeof model !== "object" || model === null || typeof model.vocab !== "object") {
    throw fail(tjPath, "key 'model' must be an object with a 'vocab'");
  }
  const specialTokensMap: Record<string, string | readonly string[]> = {};
  for (const key of SPECIAL_KEYS) {
    const t = tokenText(tcPath, key, tokenizerConfig[key]);
    if (t !== null) specialTokensMap[key] = t;
  }
  const extra = tokenizerConfig.additional_special_tokens;
  if (extra !== undefined && extra !== null) {
    if (!Array.isArray(extra)) throw fail(tcPath, "key 'additional_special_tokens' must be a list");
    specialTokensMap.additional_special_tokens = extra.map(
      (t, i) => tokenText(tcPath, `additional_special_tokens[${i}]`, t) ?? "",
    );
  }
  return {
    dir,
    tokenizerJson,
    tokenizerConfig,
    chatTemplates: chatTemplatesOf(tcPath, tokenizerConfig.chat_template),
    bosToken: tokenText(tcPath, "bos_token", tokenizerConfig.bos_token),
    eosToken: tokenText(tcPath, "eos_token", tokenizerConfig.eos_token),
    addBosToken: optionalBool(tcPath, "add_bos_token", tokenizerConfig.add_bos_token),
    addEosToken: optionalBool(tcPath, "add_eos_token", tokenizerConfig.add_eos_token),
    specialTokensMap,
    addedTokens: addedTokensOf(tjPath, tokenizerJson.added_tokens),
  };
}

/**
 * The template HF's `get_chat_template` picks: the only one, or "tool_use" when tools are
 * given and it exists, else "default". Null when the model has none.
 */
export function pickChatTemplate(
  templates: ReadonlyMap<string, string>,
  hasTools: boolean,
): string | null {
  if (templates.size === 0) return null;
  if (hasTools && templates.has("tool_use")) return templates.get("tool_use")!;
  if (templates.has("default")) return templates.get("default")!;
  if (templates.size === 1) return [...templates.values()][0]!;
  throw new TokenizeError(
    "bad_request",
    `the model has chat templates ${[...templates.keys()].join(", ")} and none is named 'default'`,
  );
}
