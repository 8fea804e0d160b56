/**
 * The tokenization corpus (test/fixtures/tokenize/corpus.json) and the engine's golden ids
 * for it (golden.json, written by make_golden.py with HF transformers + tokenizers).
 */

import { readFileSync } from "node:fs";
import type { ChatRequestLike } from "../src/tokenize/index.js";

export type CorpusCase =
  | { readonly name: string; readonly kind: "completion"; readonly prompt: string }
  | { readonly name: string; readonly kind: "chat"; readonly request: ChatRequestLike };

export interface GoldenCase {
  readonly name: string;
  readonly ids: readonly number[];
  readonly text?: string;
}

const dir = new URL("./fixtures/tokenize/", import.meta.url);

export const CORPUS: readonly CorpusCase[] = JSON.parse(
  readFileSync(new URL("corpus.json", dir), "utf8"),
);
export const GOLDEN: ReadonlyMap<string, GoldenCase> = new Map(
  (JSON.parse(readFileSync(new URL("golden.json", dir), "utf8")).cases as GoldenCase[]).map((c) => [
    c.name,
    c,
  ]),
);
