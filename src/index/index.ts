/** The prefix index: chained block keys and the radix tree over them. */

export {
  BLOCK_SEED,
  blockKeyCount,
  blockKeyHex,
  chainBlockKeys,
  computeBlockKeys,
  computeBlockKeysFrom,
  LORA_SEED,
  rootKey,
} from "./block-key.js";
export { murmur3X86x128 } from "./murmur3.js";
export { RadixTreeIndex, type RadixTreeOptions } from "./radix-tree.js";
export type * from "./types.js";
