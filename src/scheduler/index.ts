/** The scheduler: cost function, exclusions, selection, defaults. Pure. */

export * from "./config.js";
export * from "./cost.js";
export * from "./defaults.js";
export * from "./exclusion.js";
export * from "./schedule.js";
export * from "./select.js";
export type * from "./types.js";
