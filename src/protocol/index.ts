export * from "./decode-error.js";
export * from "./engine-hash.js";
export * from "./event-encoder.js";
export * from "./events.js";
export * from "./vllm-codec.js";
export * from "./worker.js";
