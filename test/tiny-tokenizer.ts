/**
 * A tiny BPE `tokenizer.json` with a Metaspace pre-tokenizer (vocabulary `▁ a b ▁a ▁b`)
 * and one added token, for tests that need a model other than the bundled Qwen3.
 */
export function tinyTokenizerJson(
  prependScheme: "first" | "always",
  addedToken: Readonly<Record<string, unknown>>,
): string {
  return JSON.stringify({
    version: "1.0",
    added_tokens: [addedToken],
    normalizer: null,
    pre_tokenizer: {
      type: "Metaspace",
      replacement: "▁",
      prepend_scheme: prependScheme,
      split: true,
    },
    post_processor: null,
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: prependScheme, split: true },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "<unk>",
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab: { "<unk>": 0, "▁": 1, a: 2, b: 3, "▁a": 4, "▁b": 5 },
      merges: ["▁ a", "▁ b"],
    },
  });
}
