/**
 * A decision `POST /v1/route` refuses after the router made it (`server.onAllStale:
 * reject`) must leave nothing behind: no in-flight record and no predict-on-route blocks
 * on the worker it would have chosen (predicted blocks count as GPU-held, so a leftover
 * prediction is a prefix the worker was never sent). Real HTTP on loopback.
 */

import { describe, expect, it } from "vitest";
import { type Json, listenJson, startsClosedAfterEach, tokens, workers } from "./http-harness.js";

const start = startsClosedAfterEach();
let now = 1_000_000;
const clock = { nowMs: () => now };

describe("POST /v1/route refused with onAllStale: reject", () => {
  it("takes back the blocks it predicted on the worker it would have chosen", async () => {
    const s = await start({ server: { onAllStale: "reject" }, workers: workers(2) }, clock);
    const http = await listenJson(s);
    now += 10_000; // both workers' load is stale
    const prompt = tokens(64);
    const refused = await fetch(`${http.base}/v1/route`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token_ids: prompt, request_id: "r1" }),
    });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as Json).error.code).toBe("no_fresh_worker");
    for (const id of ["w0", "w1"]) {
      const res = await fetch(`${http.base}/v1/workers/${id}/load`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ running: 0, waiting: 0, kv_usage: 0 }),
      });
      expect(res.status).toBeLessThan(300);
    }
    const next = await http.post("/v1/route", { token_ids: prompt, request_id: "r2" });
    expect(next.request_id).toBe("r2");
    for (const c of next.candidates as Json[]) {
      expect({ worker: c.worker, predicted: c.predicted_blocks }).toEqual({
        worker: c.worker,
        predicted: 0,
      });
      expect(c.overlap_blocks.gpu).toBe(0);
    }
    const metrics = await (await fetch(`${http.base}/metrics`)).text();
    expect(metrics).toContain("kvrouter_predicted_blocks_withdrawn_total 4");
  });
});
