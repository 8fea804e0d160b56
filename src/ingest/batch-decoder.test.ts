import { encode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { createStreamDecoder } from "./batch-decoder.js";

// An array-form BlockStored with 7 fields: vLLM's 7th is `lora_name`, SGLang's `cache_salt`.
const payload = encode([
  1789095808.5,
  [["BlockStored", [7], null, [1, 2], 2, null, "GPU", "salt-or-lora"]],
  0,
]);

describe("createStreamDecoder", () => {
  it("reads the 7th BlockStored field as vLLM's lora_name on a vllm stream", () => {
    const r = createStreamDecoder("vllm").decode(payload);
    expect(r.ok && r.batch.events[0]).toMatchObject({ type: "stored", loraName: "salt-or-lora" });
  });

  it("reads it as SGLang's cache_salt (not a LoRA) on an sglang stream", () => {
    const r = createStreamDecoder("sglang").decode(payload);
    expect(r.ok && r.batch.events[0]).toMatchObject({ type: "stored", loraName: null });
  });
});
