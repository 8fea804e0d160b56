import { describe, expect, it } from "vitest";
import { DemoUsageError, FULL_WORKLOAD, parseDemoArgs, QUICK_WORKLOAD } from "./demo-options.js";

describe("parseDemoArgs", () => {
  it("defaults to 4 workers and the full workload", () => {
    const o = parseDemoArgs([]);
    expect(o).toMatchObject({ workers: 4, seed: 1, json: false, quick: false });
    expect(o !== "help" && o.workload).toEqual(FULL_WORKLOAD);
  });

  it("reads every flag, in both --flag v and --flag=v forms", () => {
    const o = parseDemoArgs([
      "--workers",
      "3",
      "--conversations=5",
      "--seed",
      "9",
      "--json",
      "--quick",
    ]);
    expect(o).toMatchObject({ workers: 3, seed: 9, json: true, quick: true });
    expect(o !== "help" && o.workload).toEqual({ ...QUICK_WORKLOAD, conversations: 5 });
    expect(parseDemoArgs(["-h"])).toBe("help");
  });

  it("rejects bad values and unknown flags, naming them", () => {
    expect(() => parseDemoArgs(["--workers", "0"])).toThrow(/--workers must be an integer/);
    expect(() => parseDemoArgs(["--seed", "x"])).toThrow(/--seed .* got 'x'/);
    expect(() => parseDemoArgs(["--conversations"])).toThrow(/needs a value/);
    expect(() => parseDemoArgs(["--fast"])).toThrow(DemoUsageError);
  });
});
