/**
 * Loading model directories: errors name the file and key; the segment probe sends a
 * tokenizer whose pre-tokenizer looks across added tokens (Metaspace, prepend "first") to
 * whole-text encoding, and keeps one that does not (prepend "always") segmented.
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadModelTokenizer, TokenizeError } from "../src/tokenize/index.js";
import { tinyTokenizerJson } from "./tiny-tokenizer.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function modelDir(files: Record<string, string>): string {
  const d = mkdtempSync(join(tmpdir(), "kvr-tok-"));
  dirs.push(d);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return d;
}

/** The tiny tokenizer with one added token `<sep>`. */
function tinyTokenizer(prependScheme: "first" | "always"): string {
  return tinyTokenizerJson(prependScheme, {
    id: 6,
    content: "<sep>",
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
}

async function loadError(dir: string): Promise<TokenizeError> {
  try {
    await loadModelTokenizer(dir, { threads: 0 });
  } catch (err) {
    expect(err).toBeInstanceOf(TokenizeError);
    return err as TokenizeError;
  }
  throw new Error("expected a TokenizeError");
}

describe("loadModelTokenizer errors", () => {
  it("names a missing tokenizer.json", async () => {
    const e = await loadError(modelDir({ "tokenizer_config.json": "{}" }));
    expect(e.code).toBe("model_files");
    expect(e.message).toMatch(/tokenizer\.json: cannot read \(ENOENT\)/);
  });

  it("names a missing tokenizer_config.json", async () => {
    const e = await loadError(modelDir({ "tokenizer.json": tinyTokenizer("always") }));
    expect(e.message).toMatch(/tokenizer_config\.json: cannot read/);
  });

  it("names bad JSON and bad keys", async () => {
    const bad = await loadError(
      modelDir({ "tokenizer.json": "{not json", "tokenizer_config.json": "{}" }),
    );
    expect(bad.message).toMatch(/tokenizer\.json: not valid JSON/);
    const template = await loadError(
      modelDir({
        "tokenizer.json": tinyTokenizer("always"),
        "tokenizer_config.json": '{"chat_template": 3}',
      }),
    );
    expect(template.message).toMatch(/tokenizer_config\.json: key 'chat_template'/);
    const named = await loadError(
      modelDir({
        "tokenizer.json": tinyTokenizer("always"),
        "tokenizer_config.json": '{"chat_template": [{"name": "default"}]}',
      }),
    );
    expect(named.message).toMatch(/key 'chat_template\[0\]'/);
    const bos = await loadError(
      modelDir({
        "tokenizer.json": tinyTokenizer("always"),
        "tokenizer_config.json": '{"add_bos_token": "yes"}',
      }),
    );
    expect(bos.message).toMatch(/key 'add_bos_token' must be a boolean/);
  });
});

describe("segment probe", () => {
  const config = JSON.stringify({
    chat_template: [
      { name: "default", template: "{% for m in messages %}<sep>{{ m.content }}{% endfor %}" },
      {
        name: "tool_use",
        template: "TOOLS{% for m in messages %}<sep>{{ m.content }}{% endfor %}",
      },
    ],
  });

  it("falls back to whole-text encoding when segments are not independent", async () => {
    const t = await loadModelTokenizer(
      modelDir({ "tokenizer.json": tinyTokenizer("first"), "tokenizer_config.json": config }),
      { threads: 0 },
    );
    expect(t.mode).toBe("whole");
    expect(t.probe?.holds).toBe(false);
    // Whole: only the first section gets "▁" → "a<sep>a" is [▁a, <sep>, a].
    expect((await t.tokenizeCompletion("a<sep>a")).tokenIds).toEqual([4, 6, 2]);
    await t.close();
  });

  it("stays segmented when they are, with the same ids as whole", async () => {
    const dir = modelDir({
      "tokenizer.json": tinyTokenizer("always"),
      "tokenizer_config.json": config,
    });
    const t = await loadModelTokenizer(dir, { threads: 0 });
    const w = await loadModelTokenizer(dir, { threads: 0, mode: "whole" });
    expect(t.mode).toBe("segmented");
    for (const s of ["a<sep>a", "ab<sep> b<sep>", "<sep><sep>a"]) {
      expect((await t.tokenizeCompletion(s)).tokenIds).toEqual(
        (await w.tokenizeCompletion(s)).tokenIds,
      );
    }
    expect((await t.tokenizeCompletion("a<sep>a")).tokenIds).toEqual([4, 6, 4]);
    await t.close();
    await w.close();
  });

  it("picks the tool_use template when tools are given", async () => {
    const t = await loadModelTokenizer(
      modelDir({ "tokenizer.json": tinyTokenizer("always"), "tokenizer_config.json": config }),
      { threads: 0 },
    );
    const messages = [{ role: "user", content: "a" }];
    expect(t.renderChat({ messages })).toBe("<sep>a");
    expect(t.renderChat({ messages, tools: [{ type: "function", function: { name: "f" } }] })).toBe(
      "TOOLS<sep>a",
    );
    await expect(t.tokenizeChat({ messages: [] })).rejects.toMatchObject({ code: "bad_request" });
    await expect(
      t.tokenizeChat({ messages, chat_template_kwargs: { tokenize: true } }),
    ).rejects.toMatchObject({ code: "bad_request" });
    await t.close();
  });
});
