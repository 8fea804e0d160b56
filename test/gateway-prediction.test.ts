/**
 * The prediction check end to end: a simulated worker whose real block size (32) is not
 * the one it was declared with (16) reports `cached_tokens` the router never predicts; the
 * per-worker "under" counter and the error histogram move and a warning naming what to
 * check is logged. The same workload on a correctly declared worker stays "match" and
 * silent. Streaming answers are checked through their final usage chunk.
 */

import { describe, expect, it } from "vitest";
import {
  metricValue,
  type RunningGateway,
  simEntry,
  startGateway,
  startSim,
  until,
} from "./gateway-harness.js";
import { closersAfterEach } from "./http-harness.js";

const PROMPT = Array.from({ length: 200 }, (_, i) => 900 + ((i * 104729) % 30000));

const cleanup = closersAfterEach();

async function run(simBlockSize: number): Promise<{ gw: RunningGateway; metrics: string }> {
  const s = await startSim(["--block-size", String(simBlockSize)]);
  cleanup.push(() => s.close());
  const gw = await startGateway({ workers: [simEntry("m", s, { blockSize: 16 })] });
  cleanup.push(() => gw.close());
  for (let i = 0; i < 12; i++) {
    // Non-streaming, streaming with usage asked, streaming without (the gateway asks).
    const mode = i % 3;
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "sim-model",
        prompt: PROMPT,
        max_tokens: 2,
        ...(mode === 1 ? { stream: true, stream_options: { include_usage: true } } : {}),
        ...(mode === 2 ? { stream: true } : {}),
      }),
    });
    expect(res.status).toBe(200);
    await res.text();
    if (i === 0) {
      // Let the first request's cache events reach the index (a correct router then knows).
      await until("events applied", async () => {
        const r = await fetch(`${gw.url}/v1/match`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ token_ids: PROMPT }),
        });
        const body = (await r.json()) as { workers: { overlap_blocks: { gpu: number } }[] };
        return simBlockSize !== 16 || body.workers[0]!.overlap_blocks.gpu > 0;
      });
    }
  }
  return { gw, metrics: await (await fetch(`${gw.url}/metrics`)).text() };
}

const warnings = (gw: RunningGateway) =>
  gw.service.logs.filter((l) => String(l.msg).startsWith("prediction check"));

describe("gateway: prediction check", () => {
  it("a worker with another block size: 'under' counts, the histogram and a warning", async () => {
    const { gw, metrics } = await run(32);
    const under = metricValue(metrics, "kvrouter_gateway_prediction_checks_total", {
      worker: "m#0",
      outcome: "under",
    });
    expect(under).toBeGreaterThanOrEqual(10);
    expect(metricValue(metrics, "kvrouter_gateway_prediction_error_tokens_count")).toBe(12);
    expect(
      metricValue(metrics, "kvrouter_gateway_prediction_warnings_total", { worker: "m#0" }),
    ).toBe(1);
    const logged = warnings(gw);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 40, worker: "m#0", component: "gateway" });
    expect(String(logged[0]!.hint)).toContain("index.blockSize");
  });

  it("a correctly declared worker: every check matches, no warning", async () => {
    const { gw, metrics } = await run(16);
    expect(
      metricValue(metrics, "kvrouter_gateway_prediction_checks_total", {
        worker: "m#0",
        outcome: "match",
      }),
    ).toBe(12);
    expect(
      metricValue(metrics, "kvrouter_gateway_prediction_warnings_total", { worker: "m#0" }),
    ).toBe(0);
    expect(warnings(gw)).toHaveLength(0);
  });
});
