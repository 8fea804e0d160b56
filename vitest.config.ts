import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration tests bind real sockets on loopback; two workers match the 2-core machines.
    pool: "forks",
    maxWorkers: 2,
    // In CI also write the results as JSON, from which .ci/run prints a plain summary line.
    reporters: process.env.CI ? ["default", "json"] : ["default"],
    outputFile: { json: ".vitest-results.json" },
  },
});
