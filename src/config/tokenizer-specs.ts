/**
 * `gateway.tokenizers`: which model directories the gateway tokenizes with locally. The
 * value is `MODEL=DIR` pairs separated by commas (`Qwen/Qwen3-8B=/models/qwen3,llama=/m/l`);
 * a bare `DIR` serves every model without its own pair. DIR is what vLLM's `--tokenizer`
 * (or the model path) names: it holds `tokenizer.json` and `tokenizer_config.json`. The
 * files themselves are read at start-up by the gateway, which fails naming the file.
 */

export interface TokenizerSpec {
  /** Served model name; null = every model without its own entry. */
  readonly model: string | null;
  readonly dir: string;
}

/** Parse the setting; a string is the problem (without the key, the caller adds it). */
export function parseTokenizerSpecs(value: string | null): readonly TokenizerSpec[] | string {
  if (value === null) return [];
  const out: TokenizerSpec[] = [];
  const seen = new Set<string | null>();
  for (const raw of value.split(",")) {
    const entry = raw.trim();
    if (entry === "") return `has an empty entry in ${JSON.stringify(value)}`;
    const eq = entry.lastIndexOf("=");
    const model = eq < 0 ? null : entry.slice(0, eq).trim();
    const dir = (eq < 0 ? entry : entry.slice(eq + 1)).trim();
    if (model === "" || dir === "") {
      return `entry ${JSON.stringify(entry)} must be MODEL=DIR or DIR`;
    }
    if (seen.has(model)) {
      return model === null
        ? "has more than one bare DIR (one default tokenizer at most)"
        : `names model ${JSON.stringify(model)} twice`;
    }
    seen.add(model);
    out.push({ model, dir });
  }
  return out;
}
