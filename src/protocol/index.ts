export * from "./engine-hash.js";
export * from "./events.js";
export * from "./worker.js";
