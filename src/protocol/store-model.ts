/**
 * The chain a shared store's blocks of one model are keyed in (Mooncake `model_name`).
 *
 * Block keys are chained hashes of token ids, so two models with one tokenizer give the
 * same keys for the same prompt, although their KV is not interchangeable. A store's
 * block stored for `model` is rooted at `modelChain(model, null)` instead of the base
 * root; a request of `model` looks the store up under `modelChain(model, chain)` (`chain`
 * its own `chainName`: adapter and cache salt), so it finds the store's blocks of its
 * own model only. Engines' blocks are never keyed so: an engine's cache holds one
 * model's KV, the one its configured `model` names. The NUL keeps the name apart from any
 * adapter name and from a salted chain (docs/block-keys.md).
 */
export function modelChain(model: string, chain: string | null): string {
  return `${chain ?? ""}\u0000model:${model}`;
}
