/**
 * The encoding engine: `@huggingface/tokenizers` built from a model's files, plus the ids its
 * post-processor adds around a text when special tokens are requested (corrected by the
 * config's `add_bos_token`, as transformers does). Used on the main thread and in workers.
 */

import { Tokenizer } from "@huggingface/tokenizers";
import type { ModelFiles } from "./model-files.js";

export class HfEncoder {
  readonly #tok: Tokenizer;
  /** Ids the engine puts before / after a completion prompt (add_special_tokens=True). */
  readonly prefix: readonly number[];
  readonly suffix: readonly number[];

  constructor(files: ModelFiles) {
    this.#tok = new Tokenizer(files.tokenizerJson, files.tokenizerConfig);
    const probe = "a";
    const bare = this.encode(probe);
    const full = this.#tok.encode(probe, { add_special_tokens: true }).ids;
    const at = indexOfRun(full, bare);
    let prefix = at < 0 ? [] : full.slice(0, at);
    const suffix = at < 0 ? [] : full.slice(at + bare.length);
    const bos = files.bosToken === null ? undefined : this.#tok.token_to_id(files.bosToken);
    if (bos !== undefined && files.addBosToken === true && prefix[0] !== bos) {
      prefix = [bos, ...prefix];
    } else if (bos !== undefined && files.addBosToken === false && prefix[0] === bos) {
      prefix = prefix.slice(1);
    }
    this.prefix = prefix;
    this.suffix = suffix;
  }

  /** Ids of `text` without special tokens added (added tokens in the text still count). */
  encode(text: string): number[] {
    if (text === "") return [];
    return this.#tok.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[], skipSpecialTokens = false): string {
    if (ids.length === 0) return "";
    return this.#tok.decode([...ids], {
      skip_special_tokens: skipSpecialTokens,
      clean_up_tokenization_spaces: false,
    });
  }
}

function indexOfRun(hay: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
